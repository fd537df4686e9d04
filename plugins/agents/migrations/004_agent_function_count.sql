-- What the scrape and the agent list read without parsing every agent's functions (a JSON list
-- of up to 1,000 ids each): the count of each agent's functions, and a revision of the fleet's
-- functions that every change of them (register, a heartbeat with other functions, delete) moves,
-- under which an instance keeps the distinct count it computed. Function ids hold no comma, so
-- the count of a stored list is its commas plus one.
ALTER TABLE agents ADD COLUMN function_count INTEGER NOT NULL DEFAULT 0;
UPDATE agents SET function_count = CASE WHEN functions = '[]' THEN 0 ELSE LENGTH(functions) - LENGTH(REPLACE(functions, ',', '')) + 1 END;
CREATE TABLE agents_revision (id INTEGER PRIMARY KEY, rev BIGINT NOT NULL);
INSERT INTO agents_revision (id, rev) VALUES (1, 0);

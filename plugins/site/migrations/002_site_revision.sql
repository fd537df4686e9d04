-- Bumped with every write of the settings or the routing: each instance keeps one copy of them
-- per revision for the notifications it routes, and drops it when the revision moves.
CREATE TABLE site_revision (
  id INTEGER PRIMARY KEY,
  rev BIGINT NOT NULL
);

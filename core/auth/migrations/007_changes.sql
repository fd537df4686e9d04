-- Change notices between instances on MySQL (core/db/mysql.ts), which has no LISTEN/NOTIFY: a
-- notice is a row here, and every instance polls for rows newer than the last it read (<= 100 ms).
-- Rows older than a minute are pruned. SQLite and PostgreSQL leave the table empty.
CREATE TABLE liveops_changes (
  id INTEGER PRIMARY KEY,
  channel TEXT NOT NULL,
  payload TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX liveops_changes_channel ON liveops_changes (channel, id);

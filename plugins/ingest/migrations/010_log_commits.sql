-- The event log's rows counted by commit (wave 3, sixteenth session): each commit that stores
-- events adds one row, its seq and how many events it stored, in the same transaction. A
-- consumer's lag is then the events of the commits after its cursor's (a sum over a few rows)
-- and those of its own commit after it, where counting the rows themselves read every one (on
-- PostgreSQL each checked for visibility in the heap: 270 ms of a backend for 90,000 rows, at
-- every status read). Rows before the first commit counted here are counted as before (store/log.ts
-- `pending`); the rows before every consumer's cursor are deleted now and then (`trim`).
CREATE TABLE ingest_log_commits (
  seq BIGINT NOT NULL PRIMARY KEY,
  events BIGINT NOT NULL
) WITHOUT ROWID;

-- New user-day rows, in arrival order, before they join ingest_user_day (SQLite's writer only).
-- A user's first DAU event of a day lands at a random key of that day in ingest_user_day, and
-- SQLite writes every page a transaction changes to the WAL whole: at the batch benchmark's rate
-- that was ~105 random 4 KB pages per commit, half of all WAL bytes. Appended here they share
-- the table's last pages; every few thousand rows one transaction moves them over in key order,
-- touching each page of the day once, and counts the ones that were new into ingest_daily.dau.
-- Reads of DAU add the rows still here that ingest_user_day does not hold.
-- PostgreSQL inserts user-days directly (its commits wait on round trips, not page writes); the
-- table stays empty there.
CREATE TABLE ingest_user_day_log (
  id INTEGER PRIMARY KEY,
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  user_id TEXT NOT NULL
);

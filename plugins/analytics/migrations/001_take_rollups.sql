-- The rollups ingest kept until issue 16 become the analytics plugin's: the tables are renamed,
-- rows and keys kept. Ingest's migrations 001-003 created them on every install, new or old, so
-- the renames always find them. On SQLite they stay WITHOUT ROWID tables (ingest 002).
ALTER TABLE ingest_user_day RENAME TO analytics_user_day;
ALTER TABLE ingest_user_day_log RENAME TO analytics_user_day_log;
ALTER TABLE ingest_first_seen RENAME TO analytics_first_seen;
ALTER TABLE ingest_daily RENAME TO analytics_daily;
ALTER TABLE ingest_online RENAME TO analytics_online;
ALTER TABLE ingest_invocation_hour RENAME TO analytics_invocation_hour;
ALTER TABLE ingest_invocation_hist RENAME TO analytics_invocation_hist;

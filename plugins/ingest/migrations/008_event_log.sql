-- The event log (issue 35): consumers (core's `ctx.events`: analytics, experiment exposures) read
-- ingest_events in commit order by (seq, id). `seq` numbers the committing transaction: on
-- PostgreSQL its id (`pg_current_xact_id()`, the column's default there, read only below the
-- oldest transaction in flight); elsewhere a counter every commit increments under the store's
-- write lock (`ingest_log_head`), so a larger seq always commits later. The index grows at its
-- right edge only. Rows stored before this migration keep seq 0: their results were counted by
-- the rollups of the commit that stored them, and consumers start after them (a rebuild reads
-- them too).
ALTER TABLE ingest_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
-- A payment event's status (NULL for other events): the log holds each order and status once,
-- and consumers count money from these rows.
ALTER TABLE ingest_events ADD COLUMN payment_status TEXT;
CREATE INDEX ingest_events_log ON ingest_events (seq, id);
CREATE TABLE ingest_log_head (
  id INTEGER PRIMARY KEY,
  seq BIGINT NOT NULL
);
INSERT INTO ingest_log_head (id, seq) VALUES (1, 0);

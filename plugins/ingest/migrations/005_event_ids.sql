-- Event deduplication (issue 17 point 4): the client's event_id of each stored event, kept for
-- the dedup window (7 days by receive time, `dedup_window_days`). The key decides: an event
-- whose (game, environment, event_id) is here already is a retry and is not stored again, across
-- batches, restarts and instances sharing a store. One B-tree (WITHOUT ROWID on SQLite): a
-- rowid table beside a unique index wrote each id twice, and this table is on every event's
-- path; the window's purge scans it by receive time instead, once per purge interval.
CREATE TABLE ingest_event_ids (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  event_id TEXT NOT NULL,
  received_at BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, event_id)
) WITHOUT ROWID;

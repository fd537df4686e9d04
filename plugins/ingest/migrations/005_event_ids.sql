-- Event deduplication (issue 17 point 4): the client's event_id of each stored event, kept for
-- the dedup window (7 days by receive time, `dedup_window_days`). The key decides: an event
-- whose (game, environment, event_id) is here already is a retry and is not stored again, across
-- batches, restarts and instances sharing a store. `id` is the event's own row id (receive time
-- x 1024 + n), so rows arrive at the table's end and the window's purge deletes a range of it.
CREATE TABLE ingest_event_ids (
  id INTEGER PRIMARY KEY,
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  event_id TEXT NOT NULL
);
CREATE UNIQUE INDEX ingest_event_ids_key ON ingest_event_ids (game_id, env, event_id);

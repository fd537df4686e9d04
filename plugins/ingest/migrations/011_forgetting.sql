-- Deletions of an environment (env) or a whole game (env '') whose rows are still being deleted
-- (forgetting.ts): the rows go in slices in the background, so the event loop is never held for a
-- whole table, and a stop between two slices leaves this row for the sweep at the next start.
CREATE TABLE ingest_forgetting (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  deleted_at BIGINT NOT NULL,
  PRIMARY KEY (game_id, env)
);
-- One-time clean-ups still to run, each needing the configured settings (store/far-dated.ts): the
-- `ingest.forget` job runs each once, then deletes its row. far_dated: raw rows outside the event
-- time window of their receipt, stored before ingestion refused them, and the results they made.
CREATE TABLE ingest_sweeps (
  name TEXT NOT NULL PRIMARY KEY
);
INSERT INTO ingest_sweeps (name) VALUES ('far_dated');

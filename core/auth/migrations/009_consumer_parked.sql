-- Rows a consumer set aside (core/event-log-park.ts): a row its code failed on every time, read
-- alone, with an error that was not the store's. The cursor moved past it in the transaction that
-- wrote it here, so one such row no longer stops the consumer for every game. A rebuild delivers
-- it again and deletes it here; the log keeps the raw event.
CREATE TABLE liveops_consumer_parked (
  consumer TEXT NOT NULL,
  seq BIGINT NOT NULL,
  pos BIGINT NOT NULL,
  event_id TEXT,
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  event TEXT NOT NULL,
  ts BIGINT NOT NULL,
  error TEXT NOT NULL,
  parked_at BIGINT NOT NULL,
  PRIMARY KEY (consumer, seq, pos)
);

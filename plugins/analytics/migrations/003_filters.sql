-- Sampling filters per game and environment (GET/PUT /api/v1/analytics/filters), applied by
-- ingestion: the share of users kept in parts per million, and event names not stored.
CREATE TABLE analytics_filters (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  sampling_ppm BIGINT NOT NULL,
  drop_events TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (game_id, env)
);

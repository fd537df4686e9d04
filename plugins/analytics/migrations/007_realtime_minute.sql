-- Per minute of event time, the events and the successful payment revenue of each game and
-- environment (realtime-rollup.ts): the realtime stream's events per minute and its curve series
-- read a few rows instead of scanning raw events. Online users per minute are analytics_online.
CREATE TABLE analytics_minute (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  minute BIGINT NOT NULL,
  events BIGINT NOT NULL,
  revenue_cents BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, minute)
) WITHOUT ROWID;

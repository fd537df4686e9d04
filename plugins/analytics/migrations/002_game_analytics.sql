-- Days in the game's time zone (issue 17): each first sight keeps the local date it counts on,
-- kept as that date's UTC midnight in ms. Rows from before were counted on UTC days.
ALTER TABLE analytics_first_seen ADD COLUMN first_day BIGINT;
UPDATE analytics_first_seen SET first_day = (first_ts / 86400000) * 86400000;
-- Cohorts (retention, D1) are read by first day.
CREATE INDEX analytics_first_seen_day ON analytics_first_seen (game_id, env, first_day);

-- Per local day, a HyperLogLog sketch of its active users (login, session_start): distinct users
-- over any span of days (MAU, a period's actives) merge 30 small rows instead of counting
-- millions of user-days. Like the online minutes, a newer version replaces an older one.
CREATE TABLE analytics_day_sketch (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  active BIGINT NOT NULL,
  sketch TEXT NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, day)
);

-- Counters of the game analytics per local day: revenue by kind and platform, paying users, ad
-- requests and impressions by network, sessions, social actions (game-rollup.ts lists them).
CREATE TABLE analytics_game_day (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  metric TEXT NOT NULL,
  dim TEXT NOT NULL,
  n BIGINT NOT NULL,
  total BIGINT NOT NULL,
  first_ts BIGINT NOT NULL,
  last_ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, day, metric, dim)
) WITHOUT ROWID;

-- The same per UTC hour, for what is asked by date-time: performance samples and crashes.
CREATE TABLE analytics_game_hour (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  hour BIGINT NOT NULL,
  metric TEXT NOT NULL,
  dim TEXT NOT NULL,
  n BIGINT NOT NULL,
  total BIGINT NOT NULL,
  first_ts BIGINT NOT NULL,
  last_ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, hour, metric, dim)
) WITHOUT ROWID;

-- Users who paid on a local day: paying users per day count each once.
CREATE TABLE analytics_payer_day (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  user_id TEXT NOT NULL,
  PRIMARY KEY (game_id, env, day, user_id)
) WITHOUT ROWID;

-- Users who did something social (friend_add, guild_join, invite), from when.
CREATE TABLE analytics_social_user (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  user_id TEXT NOT NULL,
  first_ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, user_id)
) WITHOUT ROWID;

-- Each user's platform, as their latest session_start named it.
CREATE TABLE analytics_user_platform (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  user_id TEXT NOT NULL,
  platform TEXT NOT NULL,
  PRIMARY KEY (game_id, env, user_id)
) WITHOUT ROWID;

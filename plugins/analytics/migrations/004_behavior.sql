-- Behavior, levels and product rollups (issue 17, behavior-rollup.ts), kept at ingest.

-- Counters per local day: kind (event, feature, feature.<dimension>, level.start,
-- level.complete, level.fail, level.duration, product, product.refund), name (the event,
-- feature, `feature \u0001 value`, `episode \u0001 level`, product id), n and total (a sum:
-- durations in ms, cents), first and last client time seen.
CREATE TABLE analytics_behavior_day (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  n BIGINT NOT NULL,
  total BIGINT NOT NULL,
  first_ts BIGINT NOT NULL,
  last_ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, day, kind, name)
) WITHOUT ROWID;

-- Distinct users per local day and counter key (kinds event, feature, feature.<dimension>,
-- level): HyperLogLog sketches that merge over any span of days. A newer version replaces an
-- older one, as the online minutes do.
CREATE TABLE analytics_behavior_sketch (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  users BIGINT NOT NULL,
  sketch TEXT NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, day, kind, name)
);

-- Where the raw events of a client hour are stored: raw ids are receive time x 1024 and have no
-- other index, so per client hour and 10-minute receive window the smallest and largest id of
-- the events that arrived then. A raw read of a time range walks only these id ranges.
CREATE TABLE analytics_event_span (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  hour BIGINT NOT NULL,
  received BIGINT NOT NULL,
  first_id BIGINT NOT NULL,
  last_id BIGINT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, hour, received)
) WITHOUT ROWID;

-- Death points of level_fail events that carry x and y (thousandths), per map, in client time.
CREATE TABLE analytics_death (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  map TEXT NOT NULL,
  ts BIGINT NOT NULL,
  id BIGINT NOT NULL,
  x BIGINT NOT NULL,
  y BIGINT NOT NULL,
  level TEXT NOT NULL,
  user_id TEXT,
  PRIMARY KEY (game_id, env, map, ts, id)
) WITHOUT ROWID;

-- Each payment order and status once (as ingest stores it), with what its event said of it:
-- product, kind, platform; in client time, so a range is a walk of the key.
CREATE TABLE analytics_transaction (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  ts BIGINT NOT NULL,
  order_id TEXT NOT NULL,
  status TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency TEXT,
  user_id TEXT,
  product_id TEXT,
  kind TEXT NOT NULL,
  platform TEXT,
  PRIMARY KEY (game_id, env, ts, order_id, status)
) WITHOUT ROWID;

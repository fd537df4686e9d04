-- Raw events. The id is time-ordered (receive time in ms x 1024 + a counter), the SQLite rowid
-- itself (BIGINT on PostgreSQL), and there is no secondary index, so an insert only appends (performance note 1);
-- retention deletes walk the id range. Hot fields are columns.
CREATE TABLE ingest_events (
  id INTEGER PRIMARY KEY,
  received_at BIGINT NOT NULL,
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  event TEXT NOT NULL,
  ts BIGINT NOT NULL,
  user_id TEXT,
  session_id TEXT,
  amount_cents BIGINT,
  currency TEXT,
  duration_ms BIGINT,
  network TEXT,
  level TEXT,
  props TEXT NOT NULL
);

-- One row per order and status: a repeated (order_id, status) is stored once.
CREATE TABLE ingest_payments (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  order_id TEXT NOT NULL,
  status TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  currency TEXT,
  user_id TEXT,
  ts BIGINT NOT NULL,
  received_at BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, order_id, status)
);

CREATE TABLE ingest_invocations (
  id INTEGER PRIMARY KEY,
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  ts BIGINT NOT NULL,
  received_at BIGINT NOT NULL,
  function_id TEXT NOT NULL,
  actor TEXT,
  outcome TEXT NOT NULL,
  duration_ms BIGINT,
  trace_id TEXT
);
CREATE INDEX ingest_invocations_ts ON ingest_invocations (game_id, env, ts);

-- Rollups kept at write time (performance note 3).
CREATE TABLE ingest_user_day (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  user_id TEXT NOT NULL,
  PRIMARY KEY (game_id, env, day, user_id)
);
CREATE TABLE ingest_first_seen (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  user_id TEXT NOT NULL,
  first_ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, user_id)
);
CREATE TABLE ingest_daily (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  day BIGINT NOT NULL,
  dau BIGINT NOT NULL DEFAULT 0,
  new_users BIGINT NOT NULL DEFAULT 0,
  revenue_cents BIGINT NOT NULL DEFAULT 0,
  refunds_cents BIGINT NOT NULL DEFAULT 0,
  failed BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (game_id, env, day)
);
CREATE TABLE ingest_online (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  minute BIGINT NOT NULL,
  online BIGINT NOT NULL,
  sketch TEXT NOT NULL,
  -- Bumped on every write; an older snapshot never replaces a newer one.
  version BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, minute)
);
CREATE TABLE ingest_invocation_hour (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  hour BIGINT NOT NULL,
  function_id TEXT NOT NULL,
  total BIGINT NOT NULL,
  failed BIGINT NOT NULL,
  duration_sum BIGINT NOT NULL,
  duration_n BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, hour, function_id)
);
-- Log-scale duration histogram (bucket = round(ln(1 + ms) / ln 1.05)): p95 within about 5%.
CREATE TABLE ingest_invocation_hist (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  hour BIGINT NOT NULL,
  bucket BIGINT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, hour, bucket)
);

-- Experiment analysis: each user's first exposure, and for exposed users the last time they
-- sent each event, so conversions never scan raw events.
CREATE TABLE ingest_exposures (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  experiment_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  variant TEXT NOT NULL,
  ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, experiment_id, user_id)
);
CREATE TABLE ingest_user_events (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  user_id TEXT NOT NULL,
  event TEXT NOT NULL,
  last_ts BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, user_id, event)
);

-- Each money-counting consumer's record of the successful payments it has seen (audit 19 M1): a
-- refund counts against revenue only when a success of its game, environment and order came
-- before it in the event log, and for at most that success's amount; any other refund is kept
-- (raw, and as a behavior transaction) but not counted. analytics_order is the analytics
-- consumer's, analytics_behavior_order the behavior consumer's: each writes its own in the
-- transaction that moves its cursor, and a rebuild (from scratch, or from a date: rows of
-- successes at or after the cut go, `ts`) gives the same counts, since `log_id` orders a success
-- and its refund as the log does.
CREATE TABLE analytics_order (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  order_id TEXT NOT NULL,
  ts BIGINT NOT NULL,
  log_id BIGINT NOT NULL,
  amount_cents BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, order_id)
) WITHOUT ROWID;
CREATE TABLE analytics_behavior_order (
  game_id TEXT NOT NULL,
  env TEXT NOT NULL,
  order_id TEXT NOT NULL,
  ts BIGINT NOT NULL,
  log_id BIGINT NOT NULL,
  amount_cents BIGINT NOT NULL,
  PRIMARY KEY (game_id, env, order_id)
) WITHOUT ROWID;

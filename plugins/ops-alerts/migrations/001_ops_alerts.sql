-- Ops alert rules on the svc_ metrics, and when each rule last fired per series (shared by instances).
CREATE TABLE ops_alert_rules (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  metric TEXT NOT NULL,
  labels TEXT NOT NULL,
  operator TEXT NOT NULL,
  threshold DOUBLE PRECISION NOT NULL,
  for_count BIGINT NOT NULL,
  cooldown_s BIGINT NOT NULL,
  level TEXT NOT NULL,
  enabled INTEGER NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE ops_alert_fired (
  rule_id TEXT NOT NULL,
  series TEXT NOT NULL,
  last_fired_at BIGINT NOT NULL,
  last_value DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (rule_id, series)
);

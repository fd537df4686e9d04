CREATE TABLE notify_notifications (
  id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  level TEXT NOT NULL,
  title TEXT NOT NULL,
  template TEXT,
  idempotency_key TEXT,
  channels TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

-- A delivery is one send of one notification to one channel; it is also the delivery log record.
-- status stays 'pending' until the final outcome; lease_until/claimed_by mark an in-flight claim.
CREATE TABLE notify_deliveries (
  id TEXT PRIMARY KEY,
  notification_id TEXT NOT NULL,
  channel TEXT NOT NULL,
  provider_type TEXT NOT NULL,
  type TEXT NOT NULL,
  level TEXT NOT NULL,
  status TEXT NOT NULL,
  targets TEXT NOT NULL,
  recipients TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  raw TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_at BIGINT NOT NULL,
  claimed_by TEXT,
  lease_until BIGINT,
  last_error TEXT,
  created_at BIGINT NOT NULL,
  finished_at BIGINT,
  latency_ms BIGINT
);
CREATE INDEX notify_deliveries_queue ON notify_deliveries (status, channel, next_at);
CREATE INDEX notify_deliveries_created ON notify_deliveries (created_at);
CREATE INDEX notify_deliveries_notification ON notify_deliveries (notification_id);

CREATE TABLE notify_attempts (
  id TEXT PRIMARY KEY,
  delivery_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  worker TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  duration_ms BIGINT NOT NULL,
  ok INTEGER NOT NULL,
  retryable INTEGER NOT NULL,
  error TEXT
);
CREATE INDEX notify_attempts_delivery ON notify_attempts (delivery_id, attempt);

-- Runtime changes to channels (PUT /config, enable/disable); a NULL column means "as the YAML says".
CREATE TABLE notify_channels (
  name TEXT PRIMARY KEY,
  type TEXT,
  config TEXT,
  enabled INTEGER,
  updated_at BIGINT NOT NULL
);

CREATE TABLE notify_templates (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  level TEXT NOT NULL,
  fields TEXT NOT NULL,
  sample_params TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE notify_app_tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  scopes TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_by TEXT,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);

CREATE TABLE certificates (
  id TEXT PRIMARY KEY,
  domain TEXT NOT NULL,
  port INTEGER NOT NULL,
  address TEXT,
  source TEXT NOT NULL,
  pem TEXT,
  has_private_key INTEGER NOT NULL DEFAULT 0,
  threshold_days INTEGER NOT NULL,
  enabled INTEGER NOT NULL DEFAULT 1,
  status TEXT NOT NULL,
  subject TEXT,
  issuer TEXT,
  common_name TEXT,
  sans TEXT NOT NULL DEFAULT '[]',
  serial_number TEXT,
  fingerprint256 TEXT,
  algorithm TEXT,
  chain_length INTEGER NOT NULL DEFAULT 0,
  valid_from BIGINT,
  valid_to BIGINT,
  last_checked BIGINT,
  error TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  UNIQUE (domain, port)
);
CREATE INDEX certificates_status ON certificates (status, valid_to);

CREATE TABLE certificate_alerts (
  id TEXT PRIMARY KEY,
  domain TEXT NOT NULL,
  threshold_days INTEGER NOT NULL,
  active INTEGER NOT NULL,
  last_triggered_at BIGINT,
  last_event TEXT,
  last_valid_to BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX certificate_alerts_domain ON certificate_alerts (domain);

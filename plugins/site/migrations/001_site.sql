-- Site settings overrides (notification.* keys), the ops notification routing and in-app messages (spec 3).
CREATE TABLE site_settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  updated_by TEXT
);
CREATE TABLE site_routing (
  id TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE TABLE site_messages (
  id TEXT PRIMARY KEY,
  at BIGINT NOT NULL,
  event TEXT NOT NULL,
  level TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  data TEXT,
  read_at BIGINT
);
CREATE INDEX site_messages_at ON site_messages (at);

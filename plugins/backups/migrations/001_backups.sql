CREATE TABLE backups (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  driver TEXT NOT NULL,
  trigger TEXT NOT NULL,
  status TEXT NOT NULL,
  location TEXT,
  size BIGINT,
  checksum TEXT,
  error TEXT,
  created_at BIGINT NOT NULL,
  started_at BIGINT,
  completed_at BIGINT
);
CREATE INDEX backups_created ON backups (created_at);

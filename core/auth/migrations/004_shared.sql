-- Short-lived state every instance shares when no Redis is configured: claims that may succeed
-- once (an ingestion nonce) and windowed counters (login attempts). Expired rows are purged.
CREATE TABLE liveops_shared (
  key TEXT PRIMARY KEY,
  value BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX liveops_shared_expiry ON liveops_shared (expires_at);

-- Spec 2 idempotency, shared by every instance and kept across restarts: the accepted answer of
-- each idempotency_key, written in the transaction that stores its notification and deliveries.
-- The newest `idempotency_entries` (about 1000) are kept, first in first out.
CREATE TABLE notify_idempotency (
  key TEXT PRIMARY KEY,
  result TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX notify_idempotency_created ON notify_idempotency (created_at);

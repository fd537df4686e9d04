-- The replay window of signed ingestion on a single instance (SQLite without Redis): each
-- accepted request's nonce is written in the same transaction as its events, and the unexpired
-- ones are loaded back at start, so a replay after a restart is refused too.
CREATE TABLE ingest_nonces (
  nonce TEXT PRIMARY KEY,
  expires_at BIGINT NOT NULL
);
CREATE INDEX ingest_nonces_expiry ON ingest_nonces (expires_at);

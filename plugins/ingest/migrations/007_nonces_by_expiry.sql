-- The replay window's nonces keyed by when they expire (performance). The event loop refuses a
-- repeated nonce from memory before it is stored, so this table needs no index on the nonce: it
-- is read back whole at start and purged by expiry. Keyed by the nonce, each commit wrote one
-- page at a random place per request; keyed by expiry, its nonces land together at the end of the
-- table. One-event requests wrote a page per nonce (docs/performance.md, session 17).
CREATE TABLE ingest_nonces_next (
  expires_at BIGINT NOT NULL,
  nonce TEXT NOT NULL,
  PRIMARY KEY (expires_at, nonce)
) WITHOUT ROWID;
INSERT INTO ingest_nonces_next (expires_at, nonce) SELECT expires_at, nonce FROM ingest_nonces ORDER BY 1, 2;
DROP TABLE ingest_nonces;
ALTER TABLE ingest_nonces_next RENAME TO ingest_nonces;

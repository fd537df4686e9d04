-- One row the database health check rewrites after a request met a store fault (a full disk, a
-- read-only file): /readyz stays 503 until a write of a megabyte succeeds again (and is cleared).
CREATE TABLE liveops_probe (
  id INTEGER PRIMARY KEY,
  at BIGINT NOT NULL,
  payload TEXT
);

-- The audit log: who did what, when and from where (spec 3 audit, issue #19 point 7).
CREATE TABLE audit_log (
  id TEXT PRIMARY KEY,
  at BIGINT NOT NULL,
  actor_kind TEXT NOT NULL,
  actor_id TEXT,
  actor_name TEXT,
  action TEXT NOT NULL,
  target TEXT,
  ip TEXT,
  ok INTEGER NOT NULL DEFAULT 1,
  details TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_action ON audit_log (action, at);

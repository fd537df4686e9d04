-- Application tokens of spec 2 section 5 (scopes config, trigger, query), owned by core so every
-- API family can use them. Installs that had them under the notify plugin move their rows here
-- in notify's migration 002.
CREATE TABLE auth_app_tokens (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  scopes TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_by TEXT,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);

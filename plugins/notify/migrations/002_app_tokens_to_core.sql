-- Application tokens moved to core (auth_app_tokens, core migration 002): keep every token.
INSERT INTO auth_app_tokens (id, name, scopes, token_hash, prefix, created_by, created_at, revoked_at)
  SELECT id, name, scopes, token_hash, prefix, created_by, created_at, revoked_at FROM notify_app_tokens;
DROP TABLE notify_app_tokens;

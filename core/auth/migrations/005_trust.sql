-- Issue 34: a change of trust ends a user's tokens at once. A password change, a role change and
-- disabling bump token_gen; access tokens carry the generation they were issued under and are
-- refused once it is behind.
ALTER TABLE users ADD COLUMN token_gen INTEGER NOT NULL DEFAULT 0;
-- Server keys (spec 2's X-API-Key, scoped like application tokens) share the table of application
-- tokens; kind tells them apart ('app', 'server').
ALTER TABLE auth_app_tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'app';
-- Every instance reads what was revoked lately (core/auth/sessions.ts), and a user's sessions are
-- ended together.
CREATE INDEX refresh_tokens_revoked ON refresh_tokens (revoked_at);
CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id);

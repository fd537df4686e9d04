-- Audit 19 H1: a refresh token being rotated survived a sign-out or a password change. A refresh
-- token now keeps the token generation of its user when it was issued, and a refresh refuses one
-- issued before the user's current generation (a password or role change, a disable since).
-- Tokens issued before this column existed take their user's current generation.
ALTER TABLE refresh_tokens ADD COLUMN token_gen INTEGER NOT NULL DEFAULT 0;
UPDATE refresh_tokens SET token_gen = COALESCE((SELECT token_gen FROM users WHERE users.id = refresh_tokens.user_id), 0);
-- A live token of a login with a revoked token is one that a sign-out, a password change or a
-- detected reuse (each revokes the whole login) missed while it was being rotated: revoked too.
UPDATE refresh_tokens SET revoked_at = created_at WHERE revoked_at IS NULL AND family_id IN (SELECT family_id FROM (SELECT DISTINCT family_id FROM refresh_tokens WHERE revoked_at IS NOT NULL) AS revoked);
-- A refresh asks whether its login was revoked; the periodic purge deletes by expiry.
CREATE INDEX refresh_tokens_family_revoked ON refresh_tokens (family_id, revoked_at);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at);

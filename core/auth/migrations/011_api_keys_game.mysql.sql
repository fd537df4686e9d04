-- MySQL's twin of 011_api_keys_game.sql: a store made before this migration has the two columns
-- as LONGTEXT, which no index takes; VARCHAR(191) is what a new store makes of them.
ALTER TABLE api_keys MODIFY game_id VARCHAR(191) NULL, MODIFY environment VARCHAR(191) NULL;
CREATE INDEX IF NOT EXISTS api_keys_game ON api_keys (game_id, environment)

CREATE TABLE experiments (
  id TEXT PRIMARY KEY,
  game_id TEXT NOT NULL,
  environment TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  salt TEXT NOT NULL,
  config TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  published_at BIGINT,
  UNIQUE (game_id, environment, name)
);
CREATE INDEX experiments_scope ON experiments (game_id, environment, status);
CREATE INDEX experiments_created ON experiments (created_at);

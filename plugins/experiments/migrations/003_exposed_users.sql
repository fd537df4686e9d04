-- The exposures consumer no longer holds every exposed user in memory: it looks the users of a
-- batch it does not remember up by environment and user.
CREATE INDEX experiments_exposures_user ON experiments_exposures (game_id, env, user_id);

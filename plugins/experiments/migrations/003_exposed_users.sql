-- The exposures consumer looks up whether a batch's users were exposed in an environment whose
-- exposed users are too many to keep in memory (experiments.exposed_users_in_memory): by user,
-- which the primary key (experiment before user) cannot serve.
CREATE INDEX experiments_exposures_user ON experiments_exposures (game_id, env, user_id);

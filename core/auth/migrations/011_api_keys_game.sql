-- A game's keys (its environments' lists, the per-game cap, revocations with the game) read by
-- index: the filter had been a scan of every key, once per environment.
CREATE INDEX api_keys_game ON api_keys (game_id, environment);

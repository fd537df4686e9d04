-- A random value per registration that the agent key's MAC covers (plugins/agents/auth.ts): a key
-- names one registration, so deleting the agent (or registering its id under another game) ends
-- it. Rows registered before keep NULL and their id-only keys until they register again.
ALTER TABLE agents ADD COLUMN key_nonce TEXT;

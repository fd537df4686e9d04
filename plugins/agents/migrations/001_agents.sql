-- Agents: the processes beside game servers that register functions and heartbeat (spec 3).
CREATE TABLE agents (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  game_id TEXT,
  env TEXT,
  region TEXT,
  zone TEXT,
  functions TEXT NOT NULL DEFAULT '[]',
  qps DOUBLE PRECISION NOT NULL DEFAULT 0,
  qps_1m DOUBLE PRECISION NOT NULL DEFAULT 0,
  registered_at BIGINT NOT NULL,
  last_heartbeat_at BIGINT NOT NULL
);
CREATE INDEX agents_heartbeat ON agents (last_heartbeat_at);

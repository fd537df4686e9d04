-- Registration details and the job counters agents report (svc_agent_jobs_executed_total).
ALTER TABLE agents ADD COLUMN version TEXT;
ALTER TABLE agents ADD COLUMN jobs_executed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN jobs_failed BIGINT NOT NULL DEFAULT 0;
CREATE INDEX agents_labels ON agents (game_id, env);

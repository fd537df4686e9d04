-- The model registry. `version` is the newest version (1 on create); `deployed_version` serves,
-- `canary_version` (with `canary_percent`) takes a share of the traffic during a canary deploy.
CREATE TABLE ml_models (
  id TEXT PRIMARY KEY,
  game_id TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  algorithm TEXT NOT NULL,
  framework TEXT NOT NULL,
  description TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  version BIGINT NOT NULL,
  trained_version BIGINT,
  deployed_version BIGINT,
  canary_version BIGINT,
  canary_percent BIGINT,
  serving_endpoint TEXT,
  canary_deployment BIGINT,
  deployed_at BIGINT,
  ab_test TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  UNIQUE (game_id, name)
);
CREATE INDEX ml_models_scope ON ml_models (game_id, type, status);
CREATE INDEX ml_models_created ON ml_models (created_at);

-- Trained versions with their artifact (the fitted model as JSON), so a restart or a second
-- instance serves exactly what was deployed.
CREATE TABLE ml_model_versions (
  model_id TEXT NOT NULL,
  version BIGINT NOT NULL,
  job_id TEXT NOT NULL,
  algorithm TEXT NOT NULL,
  artifact TEXT NOT NULL,
  metrics TEXT NOT NULL,
  hyperparameters TEXT NOT NULL,
  dataset_config TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (model_id, version)
);

CREATE TABLE ml_training_jobs (
  id TEXT PRIMARY KEY,
  model_id TEXT NOT NULL,
  status TEXT NOT NULL,
  progress DOUBLE PRECISION NOT NULL,
  stage TEXT NOT NULL,
  dataset_config TEXT NOT NULL,
  hyperparameters TEXT NOT NULL,
  metrics TEXT,
  error TEXT,
  version BIGINT,
  rows_used BIGINT,
  rows_skipped BIGINT,
  previous_status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  started_at BIGINT,
  finished_at BIGINT,
  heartbeat_at BIGINT NOT NULL
);
CREATE INDEX ml_training_jobs_model ON ml_training_jobs (model_id, created_at);

-- Uploaded CSV training sets.
CREATE TABLE ml_datasets (
  id TEXT PRIMARY KEY,
  model_id TEXT NOT NULL,
  name TEXT NOT NULL,
  columns TEXT NOT NULL,
  rows_count BIGINT NOT NULL,
  size_bytes BIGINT NOT NULL,
  content TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX ml_datasets_model ON ml_datasets (model_id, created_at);

-- Served predictions, kept for feedback and drift checks. `model_id` is the model whose
-- endpoint was called; `served_by` the model that answered (the baseline in an A/B test).
CREATE TABLE ml_predictions (
  id TEXT PRIMARY KEY,
  model_id TEXT NOT NULL,
  served_by TEXT NOT NULL,
  version BIGINT NOT NULL,
  arm TEXT NOT NULL,
  entity_id TEXT,
  prediction TEXT NOT NULL,
  probability DOUBLE PRECISION NOT NULL,
  features TEXT NOT NULL,
  latency_us BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  actual TEXT,
  correct BIGINT,
  feedback_at BIGINT
);
CREATE INDEX ml_predictions_model ON ml_predictions (model_id, created_at);

-- Rollups kept as predictions and feedback are written, so the stats never scan predictions.
CREATE TABLE ml_daily (
  model_id TEXT NOT NULL,
  day BIGINT NOT NULL,
  arm TEXT NOT NULL,
  served_by TEXT NOT NULL,
  version BIGINT NOT NULL,
  predictions BIGINT NOT NULL,
  feedback BIGINT NOT NULL,
  correct BIGINT NOT NULL,
  PRIMARY KEY (model_id, day, arm, served_by, version)
);
-- Log-scale latency histogram (bucket = round(ln(1 + us) / ln 1.05)): percentiles within 5%.
CREATE TABLE ml_latency (
  model_id TEXT NOT NULL,
  day BIGINT NOT NULL,
  bucket BIGINT NOT NULL,
  n BIGINT NOT NULL,
  PRIMARY KEY (model_id, day, bucket)
);

CREATE TABLE ml_drift_alerts (
  id TEXT PRIMARY KEY,
  model_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL,
  details TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX ml_drift_alerts_model ON ml_drift_alerts (model_id, created_at);

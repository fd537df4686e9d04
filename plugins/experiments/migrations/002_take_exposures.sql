-- The exposure rollup ingest kept until issue 16 becomes the experiments plugin's: renamed, rows
-- and keys kept. Ingest's migration 001 created both tables on every install, new or old.
ALTER TABLE ingest_exposures RENAME TO experiments_exposures;
ALTER TABLE ingest_user_events RENAME TO experiments_user_events;

-- The instance that made a backup keeps its file (unless the backup directory is shared) and is
-- the only one that settles it; rows made before this column settle as before.
ALTER TABLE backups ADD COLUMN instance_id TEXT;

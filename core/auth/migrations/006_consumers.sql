-- The event log's consumers (core/event-log.ts): how far each named consumer got, and which
-- instance runs it now. The cursor is a log position (seq, pos): seq numbers the committing
-- transaction (PostgreSQL: its xid; SQLite: the writer's commit counter), pos orders rows within
-- it. A consumer's results are written in the transaction that moves its cursor.
CREATE TABLE liveops_consumers (
  name TEXT PRIMARY KEY,
  seq BIGINT NOT NULL DEFAULT 0,
  pos BIGINT NOT NULL DEFAULT 0,
  delivered BIGINT NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL DEFAULT 0,
  lease_owner TEXT,
  lease_until BIGINT,
  last_error TEXT,
  -- A rebuild from a date: until the cursor passes (until_seq, until_pos), only rows with
  -- ts >= rebuild_from are delivered (the older ones were counted and kept).
  rebuild_from BIGINT,
  until_seq BIGINT,
  until_pos BIGINT
);

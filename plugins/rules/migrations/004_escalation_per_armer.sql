-- One escalation per (alert id, armer) rather than per alert id: a trigger token that armed an
-- alert id first had held it for every credential, so another team's notification under the same
-- id armed nothing of its own and could not cancel what it had (plugins/rules/alerts.ts `arm`,
-- `cancel`). `id` is the row's key; a row kept from before takes its alert id as its id (unique,
-- the old key). Rows armed before armers were kept keep `armed_by` NULL: at most one per alert id,
-- anyone's, as before.
CREATE TABLE rules_escalations_next (
  id TEXT PRIMARY KEY,
  alert_id TEXT NOT NULL,
  armed_by TEXT,
  rule_id TEXT NOT NULL,
  due_at BIGINT NOT NULL,
  targets TEXT NOT NULL,
  title TEXT NOT NULL,
  level TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  finished_at BIGINT,
  UNIQUE (alert_id, armed_by)
);
INSERT INTO rules_escalations_next
  (id, alert_id, armed_by, rule_id, due_at, targets, title, level, status, created_at, finished_at)
  SELECT alert_id, alert_id, armed_by, rule_id, due_at, targets, title, level, status, created_at, finished_at
  FROM rules_escalations;
DROP TABLE rules_escalations;
-- On the new table before its rename, so MySQL's translation makes `status` a key column there.
CREATE INDEX rules_escalations_due ON rules_escalations_next (status, due_at);
ALTER TABLE rules_escalations_next RENAME TO rules_escalations;

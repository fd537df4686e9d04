-- Rules: the whole saved body as JSON; seq keeps write order among equal priorities.
CREATE TABLE rules_rules (
  id TEXT PRIMARY KEY,
  seq BIGINT NOT NULL,
  body TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE rules_groups (
  id TEXT PRIMARY KEY,
  description TEXT NOT NULL,
  members TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

-- Bumped in the transaction of every write, so other instances on the same store notice and reload.
CREATE TABLE rules_revisions (
  kind TEXT PRIMARY KEY,
  rev BIGINT NOT NULL
);

-- First acknowledgement wins: the primary key makes a second insert a no-op.
CREATE TABLE rules_acks (
  alert_id TEXT PRIMARY KEY,
  acked_by TEXT NOT NULL,
  source TEXT NOT NULL,
  acked_at BIGINT NOT NULL
);

-- One escalation per alert; status pending until it fires or an acknowledgement cancels it.
CREATE TABLE rules_escalations (
  alert_id TEXT PRIMARY KEY,
  rule_id TEXT NOT NULL,
  due_at BIGINT NOT NULL,
  targets TEXT NOT NULL,
  title TEXT NOT NULL,
  level TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  finished_at BIGINT
);
CREATE INDEX rules_escalations_due ON rules_escalations (status, due_at);

CREATE TABLE rules_incidents (
  id TEXT PRIMARY KEY,
  rule_id TEXT NOT NULL,
  alert_id TEXT NOT NULL,
  title TEXT NOT NULL,
  level TEXT NOT NULL,
  opened_at BIGINT NOT NULL,
  acked_at BIGINT,
  resolved_at BIGINT,
  events INTEGER NOT NULL,
  channels TEXT NOT NULL
);
CREATE INDEX rules_incidents_alert ON rules_incidents (alert_id, resolved_at);
CREATE INDEX rules_incidents_opened ON rules_incidents (opened_at);

CREATE TABLE rules_incident_events (
  id TEXT PRIMARY KEY,
  incident_id TEXT NOT NULL,
  at BIGINT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX rules_incident_events_incident ON rules_incident_events (incident_id, at);

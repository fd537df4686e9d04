-- Who armed each escalation: the credential of the notification whose delivery armed it (`<principal
-- kind>:<id>`, `anonymous` while auth is off, `platform` for the platform's own events). Where no
-- open incident decides (the incident ledger off, or none open), only that credential's `resolved`
-- notification cancels the escalation and ends the alert's acknowledgement (plugins/rules/alerts.ts
-- `cancel`). Escalations armed before keep NULL and are cancelled as they were, by any caller.
ALTER TABLE rules_escalations ADD COLUMN armed_by TEXT;

-- Who opened each incident: the credential of the notification that opened it (`<principal
-- kind>:<id>`, `anonymous` while auth is off, `platform` for the platform's own events). Only that
-- credential's notifications resolve it (plugins/rules/incidents.ts `resolve`). Incidents opened
-- before keep NULL and resolve as they did, for any caller.
ALTER TABLE rules_incidents ADD COLUMN opened_by TEXT;

-- A series is keyed by its text up to 160 characters, past it by its digest (MySQL keys are
-- VARCHAR(191): a longer series failed every evaluation there); its text is kept beside it.
ALTER TABLE ops_alert_fired ADD COLUMN label TEXT;

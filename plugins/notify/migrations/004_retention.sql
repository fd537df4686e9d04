-- retention_days deletes notifications by age, daily: found by an index, not a scan of them all.
CREATE INDEX notify_notifications_created ON notify_notifications (created_at);

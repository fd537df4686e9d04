-- Events and calls whose time is past JavaScript's last date (8.64e15 ms): no consumer can count
-- them (each step failed on such a row and retried it forever, holding back every game's
-- analytics), and ingestion now refuses any time past 9999-12-31 (signed/validate.ts, TS_MAX).
-- Such rows never reached a rollup: the step that met one rolled back.
DELETE FROM ingest_events WHERE ts > 8640000000000000;
DELETE FROM ingest_invocations WHERE ts > 8640000000000000;

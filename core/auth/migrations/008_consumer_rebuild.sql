-- A rebuild asked of a consumer (`liveops rebuild`, the admin route): -1 for the whole log, else
-- the epoch ms of event time from which its results are recomputed. Whichever instance holds the
-- consumer's lease performs it at its next step, in the transaction that resets the results and
-- rewinds the cursor, so a rebuild asked from anywhere (a CLI beside a running server) is safe.
ALTER TABLE liveops_consumers ADD COLUMN rebuild_request BIGINT;

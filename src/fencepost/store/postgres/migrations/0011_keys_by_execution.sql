-- fencepost PostgreSQL schema, version 11: idempotency keys found by execution id.
--
-- Prune drops a whole day of history at once (store/postgres/history.py), and the
-- day's idempotency keys must go with it. Without this index it found them by
-- reading every execution of the detached day in id order, keys or none: a day of
-- 1,428,572 executions is 228 MB of heap, read from disk when the day is cold
-- (bench/history_scale.py). With it, the keys are an index range over the day's
-- ids: the work is proportional to the day's keys, none for a day without any.
--
-- Run as it is, this reads every key once while submits wait (execution_keys is
-- written by every submit statement). `fencepost db migrate` builds the index
-- CONCURRENTLY beforehand (store/postgres/conversion.py), and then this finds it.

DO $migration$
BEGIN
    -- A CONCURRENTLY build that was interrupted leaves an invalid index: build it again.
    IF EXISTS (
        SELECT 1 FROM pg_index
        WHERE indexrelid = to_regclass('execution_keys_execution') AND NOT indisvalid
    ) THEN
        DROP INDEX execution_keys_execution;
    END IF;
END
$migration$;

CREATE INDEX IF NOT EXISTS execution_keys_execution ON execution_keys (execution_id);

-- fencepost PostgreSQL schema, version 16: the audit's failures by time.
--
-- Store.stats counts its window's error classes (fencepost.domain.reports.Stats.errors);
-- timed_out and handler_failed are the window's TIMED_OUT and FAILED transitions,
-- read through this index as transitions_lease_events serves the lease events
-- (version 5). Partial: only a failure's or a timeout's write pays for it, never a
-- claim's or a completion's, and it holds as many entries as there were failures.
--
-- Built with a plain CREATE INDEX on every day's partition (migrations run in one
-- transaction, where CONCURRENTLY is not allowed): writes to the audit wait while
-- it is built, which reads each partition once. On a big installation, create it
-- by hand first (CREATE INDEX ... ON ONLY transitions, then CONCURRENTLY on each
-- partition and ATTACH PARTITION), under this name; IF NOT EXISTS then skips it.
CREATE INDEX IF NOT EXISTS transitions_failure_events
    ON transitions (at)
    WHERE event IN ('FAILED', 'TIMED_OUT');

-- Each partition's index is named after its partition, as the store names the
-- indexes of the days it makes (transitions_p20260101_failure_events).
DO $$
DECLARE
    child record;
BEGIN
    FOR child IN
        SELECT c.relname AS name, t.relname AS tab
        FROM pg_inherits AS i
        JOIN pg_class AS c ON c.oid = i.inhrelid
        JOIN pg_index AS x ON x.indexrelid = c.oid
        JOIN pg_class AS t ON t.oid = x.indrelid
        WHERE i.inhparent = 'transitions_failure_events'::regclass
    LOOP
        IF child.name <> child.tab || '_failure_events' THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', child.name,
                           child.tab || '_failure_events');
        END IF;
    END LOOP;
END
$$;

-- fencepost PostgreSQL schema, version 17: the console finds executions by every
-- filter (Store.query, Store.count_by_state) without reading the whole table.
--
-- Built with a plain CREATE INDEX on every day's partition (migrations run in one
-- transaction, where CONCURRENTLY is not allowed): writes to executions wait while
-- they are built, each reading each partition once. On a big installation, create
-- them by hand first (CREATE INDEX ... ON ONLY, then CONCURRENTLY on each partition
-- and ATTACH PARTITION) under these names (executions_finished: under another name,
-- then drop the old one and rename).
--
-- executions_finished (version 5: updated_at alone) gains id: finished executions
-- by finish time, then id, so a page of them and the history's charts (which read
-- it by this name) walk one index in order. A finished row's updated_at is when it
-- finished: nothing writes a SUCCEEDED, FAILED, CANCELLED or SKIPPED row again but a
-- replay, which makes it SCHEDULED (and so leaves the index). Partial: only the
-- write that finishes an execution adds an entry.
-- The state, job and queue it includes let a page or a count by finish time, job and
-- queue read this index alone (an index-only scan), not a million rows of the table.
DROP INDEX IF EXISTS executions_finished;
CREATE INDEX executions_finished
    ON executions (updated_at, id) INCLUDE (state, job, queue)
    WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED');

-- executions_state: every execution by state, then id: a page of one state walks it
-- in order, whatever the plan (a generic plan of "state = $1" included: it cannot
-- know how many executions the state holds, and an ordered index read stopped by the
-- LIMIT costs the same for any). executions_state_counts: by state, queue and job,
-- so that counting by state (with or without a job or queue) is an index-only scan
-- where the visibility map allows; no id, so equal keys are stored once with a list
-- of their rows (deduplication) and it stays small enough to read in a fraction of a
-- scan of the table. Neither is partial: an update that cannot be HOT (a state
-- change, a lease renewal) adds an entry to each, the cost of the console's pages and
-- counts (measured in bench/console_find.py and bench/store_throughput.py). Both
-- compare the state COLLATE "POSIX" (the same order and equality as "C", under
-- another name): only statements written so (the console's) read them. Compared as
-- every other statement compares it, the state would tempt the planner away from the
-- partial indexes the hot paths were written for: a claim's takeovers (state =
-- 'RUNNING' AND lease_until <= now) read executions_state_counts instead of
-- executions_leased, three times slower.
CREATE INDEX executions_state ON executions (state COLLATE "POSIX", id);
CREATE INDEX executions_state_counts ON executions (state COLLATE "POSIX", queue, job);

-- executions_limit_key: one limit key's executions in id order. Partial: executions
-- without a key have no entry.
CREATE INDEX executions_limit_key ON executions (limit_key, id) WHERE limit_key IS NOT NULL;

-- execution_data_errors: the executions that ever failed, by id, for the error
-- filter: it reads only their payload rows. Partial: only the payload rows holding
-- an error have an entry.
CREATE INDEX execution_data_errors ON execution_data (execution_id) WHERE error IS NOT NULL;

-- Each partition's index is named after its partition and its parent's suffix, as
-- the store names the indexes of the days it makes (executions_p20260101_finished).
DO $$
DECLARE
    child record;
BEGIN
    FOR child IN
        SELECT c.relname AS name, t.relname || substr(p.relname, length(pt.relname) + 1) AS wanted
        FROM pg_inherits AS i
        JOIN pg_class AS c ON c.oid = i.inhrelid
        JOIN pg_class AS p ON p.oid = i.inhparent
        JOIN pg_index AS x ON x.indexrelid = c.oid
        JOIN pg_class AS t ON t.oid = x.indrelid
        JOIN pg_index AS px ON px.indexrelid = p.oid
        JOIN pg_class AS pt ON pt.oid = px.indrelid
        WHERE p.relname IN ('executions_finished', 'executions_state', 'executions_state_counts',
                            'executions_limit_key', 'execution_data_errors')
          AND p.relnamespace = current_schema()::regnamespace
    LOOP
        IF child.name <> child.wanted THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', child.name, child.wanted);
        END IF;
    END LOOP;
END
$$;

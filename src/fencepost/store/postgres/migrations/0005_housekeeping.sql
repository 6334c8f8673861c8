-- fencepost PostgreSQL schema, version 5: what prune and stats read.
--
-- Built with a plain CREATE INDEX (migrations run in one transaction, where
-- CONCURRENTLY is not allowed): writes to executions and transitions wait while
-- a large existing table is indexed. On a big installation, create both indexes
-- CONCURRENTLY by hand under these names first; the IF NOT EXISTS then skips them.

-- Finished executions by when they last changed: what prune deletes, oldest
-- first, without reading unfinished work or scanning the table. The state list
-- is fencepost.domain.states.TERMINAL_STATES.
CREATE INDEX IF NOT EXISTS executions_finished
    ON executions (updated_at)
    WHERE state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED');

-- The audit records stats counts over its window (claims, expired leases, stale
-- refusals), by time. Partial: SUBMITTED, COMPLETED and the other events, most
-- of the trail, are not indexed and cost nothing more to write. Neither index
-- changed claim+complete throughput measurably (bench/store_throughput.py);
-- SQLite, where they did, has only the first.
CREATE INDEX IF NOT EXISTS transitions_lease_events
    ON transitions (at)
    WHERE event IN ('CLAIMED', 'LEASE_EXPIRED', 'STALE_REFUSED');

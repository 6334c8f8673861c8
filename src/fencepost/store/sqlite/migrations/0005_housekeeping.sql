-- fencepost SQLite schema, version 5: what prune reads.

-- Finished executions by when they last changed: what prune deletes, oldest
-- first, without reading unfinished work or scanning the table. The state list
-- is fencepost.domain.states.TERMINAL_STATES; a query uses this index only when
-- its WHERE clause repeats the list exactly as written here.
--
-- Unlike PostgreSQL, SQLite gets no index of the audit trail by time for stats:
-- measured with bench/store_throughput.py, each of the two indexes cost about 11%
-- of claim+complete throughput here (one writer, every index maintained inline),
-- and stats is an operator's occasional read of a table that prune keeps small.
CREATE INDEX executions_finished
    ON executions (updated_at)
    WHERE state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED');

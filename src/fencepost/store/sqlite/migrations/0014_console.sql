-- fencepost SQLite schema, version 14: the console finds executions by every filter
-- (Store.query, Store.count_by_state) without reading the whole table.
--
-- executions_finished: finished executions by finish time. A finished row's
-- updated_at is when it finished: nothing writes a SUCCEEDED, FAILED, CANCELLED or
-- SKIPPED row again but a replay, which makes it SCHEDULED (and so leaves the
-- index). Partial: a claim, a heartbeat or a retry never touches it; only the
-- write that finishes an execution adds an entry. The finished_after/before
-- filters, prune and the history's charts read it (the charts by this name). With
-- the state, job and queue after the id, a count or a page by finish time, job and
-- queue reads this index alone: a day of a million finished executions is one scan of
-- it, not a million probes of the table.
CREATE INDEX IF NOT EXISTS executions_finished
    ON executions (updated_at, id, state, job, queue)
    WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED');

-- executions_state: every execution by state, then id (a page of one state walks it
-- in order), with queue and job, so that counting by state (with or without a job or
-- queue) reads this index alone, never the table. Not partial: every write that
-- changes a state moves one entry, the cost of the console's counts and per-state
-- pages (see bench/console_find.py). Its state is compared COLLATE NOCASE (the same
-- as BINARY for the upper-case state names): only the statements written so (the
-- console's) read it. SQLite plans here without statistics, and an index led by the
-- state would tempt the claims (state IN ('RETRY_WAIT', 'SCHEDULED')) away from
-- executions_claimable, the reaper from executions_leased, and so on.
CREATE INDEX IF NOT EXISTS executions_state
    ON executions (state COLLATE NOCASE, id, queue, job);

-- executions_limit_key: one limit key's executions in id order. Partial: executions
-- without a key have no entry, and a key never changes, so only a keyed submit (and
-- prune) writes to it.
CREATE INDEX IF NOT EXISTS executions_limit_key
    ON executions (limit_key, id)
    WHERE limit_key IS NOT NULL;

-- execution_data_errors: the executions that ever failed, by id, for the error
-- filter: it reads only their payload rows. Partial: only recording a failure's error
-- writes to it.
CREATE INDEX IF NOT EXISTS execution_data_errors
    ON execution_data (execution_id)
    WHERE error IS NOT NULL;

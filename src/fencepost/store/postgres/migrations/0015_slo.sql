-- fencepost PostgreSQL schema, version 15: the facts the service-level report counts,
-- and the daily rollups that outlive prune (see fencepost.domain.slo).
--
-- Every execution keeps, on its row, what its verdicts are decided from; each write
-- sets them in the statement that changes the execution (queries.sql):
--   planned_at         its planned time: the due_at it was inserted with, never moved
--                      (retries, takeovers, replays and reschedules move due_at);
--   first_claimed_at   its first claim;
--   first_finished_at  when it first became SUCCEEDED or FAILED;
--   held               the time limits and paused queues held it back (the throttles
--                      recorded for it, summed);
--   slo_marks          fencepost.domain.slo.Mark bits, OR-ed in, never cleared.
--
-- Adding the columns is a change of the catalogue only: a constant DEFAULT is stored
-- there, not written into the rows (PostgreSQL 11 and later), on the partitioned
-- table and every partition. Filling the rows already stored is not: the UPDATE
-- below writes a new version of every execution (as much as the table again until
-- vacuum reclaims the old ones), reading the audit of claims, expiries, refusals,
-- timeouts, failures and replays and the throttle records once each, hashed, and
-- holds the rows it updated until the migration commits. planned_at has a default
-- only while the rows are filled: from then on every insert names it.
ALTER TABLE executions
    ADD COLUMN planned_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN first_claimed_at timestamptz,
    ADD COLUMN first_finished_at timestamptz,
    ADD COLUMN held interval NOT NULL DEFAULT '0',
    ADD COLUMN slo_marks integer NOT NULL DEFAULT 0;

-- The facts of the executions stored before this version, as well as what is kept
-- tells them: the planned time is the slot of a schedule's occurrence (its stored
-- text, fencepost.domain.schedules.slot_text), else due_at (a retried execution's
-- due_at has moved: its first due time is not kept); the first claim is the first
-- CLAIMED transition; the first finish the last change of a SUCCEEDED or FAILED row
-- (a replayed dead letter that finished again: its last finish); the marks come
-- from the audit (a backfill cannot be told: who asked for it is not kept); the
-- held time from the throttle records prune has not deleted.
WITH audit AS (
    SELECT t.execution_id,
           min(t.at) FILTER (WHERE t.event = 'CLAIMED') AS claimed,
           bit_or(CASE
               WHEN t.event = 'LEASE_EXPIRED' THEN 1
               WHEN t.event = 'CLAIMED' AND t.from_state = 'RUNNING' THEN 1
               WHEN t.event = 'STALE_REFUSED' AND t.reason = 'stale heartbeat refused' THEN 1
               WHEN t.event = 'STALE_REFUSED' THEN 2
               WHEN t.event = 'TIMED_OUT' THEN 4
               WHEN t.event = 'FAILED' THEN 8
               WHEN t.event = 'REPLAYED' THEN 32
               ELSE 0
           END) AS marks
    FROM transitions AS t
    WHERE t.event IN ('CLAIMED', 'LEASE_EXPIRED', 'STALE_REFUSED', 'TIMED_OUT', 'FAILED',
                      'REPLAYED')
    GROUP BY t.execution_id
),
throttled AS (
    SELECT execution_id, sum(held) AS held FROM throttles GROUP BY execution_id
)
UPDATE executions AS e
SET planned_at = CASE
        WHEN e.slot ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$' THEN e.slot::timestamptz
        ELSE e.due_at
    END,
    first_claimed_at = a.claimed,
    first_finished_at = CASE WHEN e.state IN ('FAILED', 'SUCCEEDED') THEN e.updated_at END,
    held = coalesce(th.held, interval '0'),
    slo_marks = coalesce(a.marks, 0)
FROM executions AS x
LEFT JOIN audit AS a ON a.execution_id = x.id
LEFT JOIN throttled AS th ON th.execution_id = x.id
WHERE e.id = x.id;

ALTER TABLE executions ALTER COLUMN planned_at DROP DEFAULT;

-- What prune deletes still counts: before it deletes a batch of executions or drops a
-- day of history, in the same transaction, it adds their verdicts at the default
-- objectives to these counts, by the UTC day of their planned time (days since
-- 1970-01-01, fencepost.domain.slo.day_number), job, objective ('claim', 'finish')
-- and verdict. Undecided executions and those not counted are not rolled up.
CREATE TABLE slo_rollups (
    day       integer NOT NULL,
    job       text    NOT NULL,
    objective text    NOT NULL,
    verdict   text    NOT NULL,
    count     bigint  NOT NULL,
    PRIMARY KEY (day, job, objective, verdict)
);

-- execution_rows gains the planned time, last (the row mapper's column order).
CREATE OR REPLACE VIEW execution_rows AS
    SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt,
           e.max_attempts, e.epoch, e.lease_owner, e.lease_until, e.timeout,
           e.idempotency_key, e.schedule_id, e.slot, e.bucket, e.bucket_key,
           e.created_at, e.updated_at, d.inputs, d.result, d.error, d.progress, e.queue,
           e.limit_key, e.planned_at
    FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

-- fencepost SQLite schema, version 13: the facts the service-level report counts
-- (fencepost.domain.slo), and the daily rollups that outlive prune.
--
-- Each execution keeps, on its own row, what its verdicts are decided from; every
-- write path sets them in the transaction that changes the execution:
--   planned_at         the due_at it was inserted with; never changed afterwards
--                      (retries, takeovers and replays move due_at, not this);
--   first_claimed_at   its first claim (NULL until then);
--   first_finished_at  when it first became SUCCEEDED or FAILED (NULL until then);
--   held_us            the time limits and paused queues held it back, summed over
--                      its throttle records;
--   slo_marks          fencepost.domain.slo.Mark bits, OR-ed in, never cleared.
-- SQLite adds a NOT NULL column only with a default: planned_at's 0 is never used
-- (every insert sets it, and the rows already stored are filled below).
ALTER TABLE executions ADD COLUMN planned_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN first_claimed_at INTEGER;
ALTER TABLE executions ADD COLUMN first_finished_at INTEGER;
ALTER TABLE executions ADD COLUMN held_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN slo_marks INTEGER NOT NULL DEFAULT 0;

-- The rows already stored, as well as what they kept allows. The planned time of a
-- schedule's occurrence is its slot (a retry moved its due_at; the slot's text is
-- fencepost.domain.schedules.slot_text: seconds, and six fraction digits when it has
-- any). A submit's is its due_at, which a retry may have moved: nothing kept the one
-- it was submitted with. A finish is the updated_at of a SUCCEEDED or FAILED row.
UPDATE executions
SET planned_at = CASE
        WHEN slot IS NULL THEN due_at
        ELSE CAST(strftime('%s', substr(slot, 1, 19)) AS INTEGER) * 1000000
             + CASE WHEN length(slot) = 27 THEN CAST(substr(slot, 21, 6) AS INTEGER) ELSE 0 END
    END,
    first_finished_at = CASE WHEN state IN ('FAILED', 'SUCCEEDED') THEN updated_at END;

-- The first claim: the CLAIMED transition of the lowest seq (SQLite gives a bare
-- column the value of the row min() picked).
UPDATE executions
SET first_claimed_at = c.at
FROM (
    SELECT execution_id, min(seq), at FROM transitions WHERE event = 'CLAIMED'
    GROUP BY execution_id
) AS c
WHERE executions.id = c.execution_id;

-- The marks, from the audit trail: a lease lost (LEASE_EXPIRED, a claim that took
-- an expired lease over, a refused heartbeat) 1, any other refused call 2, TIMED_OUT
-- 4, FAILED 8, REPLAYED 32. (Nothing kept whether a caller created a row for the
-- past: no row is marked a backfill.)
UPDATE executions
SET slo_marks = m.marks
FROM (
    SELECT execution_id,
           max(CASE WHEN event = 'LEASE_EXPIRED'
                      OR (event = 'CLAIMED' AND from_state = 'RUNNING')
                      OR (event = 'STALE_REFUSED' AND reason = 'stale heartbeat refused')
                    THEN 1 ELSE 0 END)
           | max(CASE WHEN event = 'STALE_REFUSED' AND reason IS NOT 'stale heartbeat refused'
                      THEN 2 ELSE 0 END)
           | max(CASE WHEN event = 'TIMED_OUT' THEN 4 ELSE 0 END)
           | max(CASE WHEN event = 'FAILED' THEN 8 ELSE 0 END)
           | max(CASE WHEN event = 'REPLAYED' THEN 32 ELSE 0 END) AS marks
    FROM transitions
    WHERE event IN ('CLAIMED', 'FAILED', 'LEASE_EXPIRED', 'REPLAYED', 'STALE_REFUSED',
                    'TIMED_OUT')
    GROUP BY execution_id
) AS m
WHERE executions.id = m.execution_id AND m.marks <> 0;

-- The time held back, from the throttle records prune has not deleted yet.
UPDATE executions
SET held_us = h.held_us
FROM (SELECT execution_id, sum(held_us) AS held_us FROM throttles GROUP BY execution_id) AS h
WHERE executions.id = h.execution_id;

-- The verdicts of the executions prune deleted, per UTC day of their planned time
-- (days since 1970-01-01), job, objective ('claim' or 'finish') and verdict, at the
-- default objectives: written by prune in the transaction that deletes the rows, so
-- a report over days already pruned counts them still.
CREATE TABLE slo_rollups (
    day       INTEGER NOT NULL,
    job       TEXT    NOT NULL,
    objective TEXT    NOT NULL,
    verdict   TEXT    NOT NULL,
    count     INTEGER NOT NULL,
    PRIMARY KEY (day, job, objective, verdict)
) WITHOUT ROWID;

-- execution_rows gains the planned time, last (the row mapper's column order).
DROP VIEW execution_rows;
CREATE VIEW execution_rows AS
SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt, e.max_attempts,
       e.epoch, e.lease_owner, e.lease_until, e.timeout_us, e.idempotency_key, e.schedule_id,
       e.slot, e.bucket, e.bucket_key, e.created_at, e.updated_at,
       d.inputs, d.result, d.error, d.progress, e.queue, e.limit_key, e.planned_at
FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

-- SQL both dialects run exactly as written, read before each dialect's own
-- queries.sql (see fencepost.store.sql.load_queries): its blocks are blocks of both,
-- its fragments may be included by either. Only text without parameters stands
-- here, since the dialects bind them differently (%(name)s and :name).

-- name: bucket_counts_unfinished
-- bucket_counts for the default states: reads only the partial index
-- executions_active_bucket, whose WHERE clause this one repeats.
SELECT bucket, count(*) FROM executions
WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')
GROUP BY bucket
ORDER BY bucket

-- name: caller_savepoint
-- A submit inside a caller's transaction (Store.submit(connection=...)) runs in a
-- savepoint of it, rolled back on any error so the caller's transaction stays usable.
SAVEPOINT fencepost_submit

-- name: caller_release_savepoint
RELEASE SAVEPOINT fencepost_submit

-- name: caller_rollback_to_savepoint
ROLLBACK TO SAVEPOINT fencepost_submit

-- fragment: slo_verdicts
-- Each execution's verdict on both objectives (fencepost.domain.slo.claim_verdict and
-- finish_verdict, spelled in SQL): NULL while undecided, 'met', a miss's error class,
-- or an exclusion ('backfill', 'replay', 'throttled'). The dialect's query defines
-- before it the CTEs p(now, claim_within, finish_within) and facts(id, job, state,
-- planned_at, first_claimed_at, first_finished_at, held, marks) of the counted
-- executions (not SKIPPED, not CANCELLED before a claim); times and durations in the
-- dialect's own types (SQLite: microseconds; PostgreSQL: timestamptz and interval).
-- The bit values are fencepost.domain.slo.Mark's.
verdicts AS (
    SELECT f.*,
        CASE
            WHEN f.first_claimed_at IS NULL AND p.now - f.planned_at <= p.claim_within
                THEN NULL
            WHEN (f.marks & 16) <> 0 THEN 'backfill'
            WHEN (f.marks & 32) <> 0 THEN 'replay'
            WHEN coalesce(f.first_claimed_at, p.now) - f.planned_at <= p.claim_within
                THEN 'met'
            WHEN coalesce(f.first_claimed_at, p.now) - f.planned_at - f.held <= p.claim_within
                THEN 'throttled'
            ELSE 'late_claim'
        END AS claim_verdict,
        CASE
            WHEN f.first_finished_at IS NULL AND p.now - f.planned_at <= p.finish_within
                THEN NULL
            WHEN (f.marks & 16) <> 0 THEN 'backfill'
            WHEN (f.marks & 32) <> 0 THEN 'replay'
            WHEN coalesce(f.first_finished_at, p.now) - f.planned_at <= p.finish_within
                THEN 'met'
            WHEN coalesce(f.first_finished_at, p.now) - f.planned_at - f.held
                    <= p.finish_within
                THEN 'throttled'
            WHEN (f.marks & 1) <> 0 THEN 'renewal_failed'
            WHEN (f.marks & 2) <> 0 THEN 'stale_completion_refused'
            WHEN (f.marks & 4) <> 0 THEN 'timed_out'
            WHEN (f.marks & 8) <> 0 THEN 'handler_failed'
            WHEN coalesce(f.first_claimed_at, p.now) - f.planned_at - f.held > p.claim_within
                THEN 'late_claim'
            ELSE 'ran_long'
        END AS finish_verdict
    FROM facts AS f CROSS JOIN p
)

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


-- fragment: history_columns
-- The counters of a minute row of the history charts, in the order of
-- fencepost.domain.history.COLUMNS (late_i: bucket i of the claim lateness histogram).
    succeeded, dead, retried, timed_out, cancelled, skipped, claims, late_0, late_1,
    late_2, late_3, late_4, late_5, late_6, late_7, late_8, late_9, late_10, late_11,
    late_12, late_13, late_14, late_15, late_16, late_17, throttled_us, claim_counted,
    claim_missed, finish_counted, finish_missed

-- fragment: history_sums
-- Those counters summed over the minute rows a query groups, in the same order.
    sum(succeeded), sum(dead), sum(retried), sum(timed_out), sum(cancelled),
    sum(skipped), sum(claims), sum(late_0), sum(late_1), sum(late_2), sum(late_3),
    sum(late_4), sum(late_5), sum(late_6), sum(late_7), sum(late_8), sum(late_9),
    sum(late_10), sum(late_11), sum(late_12), sum(late_13), sum(late_14), sum(late_15),
    sum(late_16), sum(late_17), sum(throttled_us), sum(claim_counted),
    sum(claim_missed), sum(finish_counted), sum(finish_missed)

-- fragment: history_add_counters
-- An upsert's SET list: each counter of the row (alias m) plus the increment.
    succeeded = m.succeeded + excluded.succeeded, dead = m.dead + excluded.dead,
    retried = m.retried + excluded.retried, timed_out = m.timed_out + excluded.timed_out,
    cancelled = m.cancelled + excluded.cancelled, skipped = m.skipped + excluded.skipped,
    claims = m.claims + excluded.claims, late_0 = m.late_0 + excluded.late_0,
    late_1 = m.late_1 + excluded.late_1, late_2 = m.late_2 + excluded.late_2,
    late_3 = m.late_3 + excluded.late_3, late_4 = m.late_4 + excluded.late_4,
    late_5 = m.late_5 + excluded.late_5, late_6 = m.late_6 + excluded.late_6,
    late_7 = m.late_7 + excluded.late_7, late_8 = m.late_8 + excluded.late_8,
    late_9 = m.late_9 + excluded.late_9, late_10 = m.late_10 + excluded.late_10,
    late_11 = m.late_11 + excluded.late_11, late_12 = m.late_12 + excluded.late_12,
    late_13 = m.late_13 + excluded.late_13, late_14 = m.late_14 + excluded.late_14,
    late_15 = m.late_15 + excluded.late_15, late_16 = m.late_16 + excluded.late_16,
    late_17 = m.late_17 + excluded.late_17,
    throttled_us = m.throttled_us + excluded.throttled_us,
    claim_counted = m.claim_counted + excluded.claim_counted,
    claim_missed = m.claim_missed + excluded.claim_missed,
    finish_counted = m.finish_counted + excluded.finish_counted,
    finish_missed = m.finish_missed + excluded.finish_missed

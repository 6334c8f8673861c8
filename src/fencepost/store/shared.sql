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

-- fragment: slo_due
-- The start of slo: each execution with its first claim and, once SUCCEEDED or
-- FAILED, its finish. The dialect's slo goes on with the WHERE clause of the window.
WITH due AS MATERIALIZED (
    SELECT e.id, e.job, e.state, e.due_at,
           CASE WHEN e.state IN ('FAILED', 'SUCCEEDED') THEN e.updated_at END AS finished_at,
           (SELECT t.at FROM transitions AS t
            WHERE t.execution_id = e.id AND t.event = 'CLAIMED'
            ORDER BY t.seq LIMIT 1) AS claimed_at
    FROM executions AS e

-- fragment: slo_answer
-- The end of slo: the counts on every row, with one worst offender each.
SELECT c.claim_met, c.claim_total, c.finish_met, c.finish_total,
       w.id, w.job, w.due_at, w.claimed_at, w.lateness, w.state
FROM counts AS c LEFT JOIN worst AS w ON true
ORDER BY w.lateness DESC, w.due_at, w.id

-- name: caller_savepoint
-- A submit inside a caller's transaction (Store.submit(connection=...)) runs in a
-- savepoint of it, rolled back on any error so the caller's transaction stays usable.
SAVEPOINT fencepost_submit

-- name: caller_release_savepoint
RELEASE SAVEPOINT fencepost_submit

-- name: caller_rollback_to_savepoint
ROLLBACK TO SAVEPOINT fencepost_submit

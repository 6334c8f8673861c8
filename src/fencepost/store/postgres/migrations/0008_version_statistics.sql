-- fencepost PostgreSQL schema, version 8: statistics for the claim's version filter.
--
-- A worker claims only the job versions it serves: claim_filters compares
-- job || ':' || job_version with the worker's pairs. PostgreSQL keeps no
-- statistics of that expression, so once every row carries a version (every
-- submit of a catalogued job pins one) it guessed the filter kept a fraction of a
-- percent of the waiting rows, and planned the claim as a scan of every due row
-- and a sort, instead of a walk of executions_claimable that stops at the limit:
-- 30% slower at 10,000 due rows, and worse as the backlog grows. With these
-- statistics (taken by ANALYZE, which autovacuum runs) the estimate is the
-- expression's own and the walk is chosen. (PostgreSQL 14 or later.)
CREATE STATISTICS IF NOT EXISTS executions_version_key
    ON ((job || ':' || job_version)) FROM executions;
ANALYZE executions;

-- fencepost SQLite schema, version 2: the node registry, and per-bucket counts.

-- Every live scheduler or worker process, with the buckets it declared
-- (a JSON array, or NULL for "any bucket") and when its registration lapses.
CREATE TABLE nodes (
    id            TEXT    NOT NULL PRIMARY KEY,  -- host:pid by default
    kind          TEXT    NOT NULL,
    buckets       TEXT,
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
) WITHOUT ROWID;

-- RUNNING executions per bucket, for claims capped with max_per_bucket.
CREATE INDEX executions_running_bucket
    ON executions (bucket)
    WHERE state = 'RUNNING';

-- Unfinished executions per bucket, for finding orphans.
CREATE INDEX executions_active_bucket
    ON executions (bucket, updated_at)
    WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED');

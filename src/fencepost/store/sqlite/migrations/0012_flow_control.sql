-- fencepost SQLite schema, version 12: flow control (limits, paused queues, throttling).
--
-- limit_key: the key a per-key limit counts an execution (or a schedule's executions)
-- under; NULL shares the scope's keyless allowance.
ALTER TABLE executions ADD COLUMN limit_key TEXT;
ALTER TABLE schedules ADD COLUMN limit_key TEXT;

-- One row per scope ('job:NAME' or 'queue:NAME'): its rate (rate_count starts per
-- rate_period seconds, a bucket of burst), its concurrency, whether each limit_key
-- gets its own allowance, and whether the queue is paused. source is 'code' (declared
-- with a job, written when a worker publishes it) or 'operator' (set at run time;
-- a publication never replaces it). Claims read every row in their transaction.
CREATE TABLE flow_limits (
    scope        TEXT    NOT NULL PRIMARY KEY,
    rate_count   REAL,
    rate_period  REAL,
    burst        INTEGER,
    concurrency  INTEGER,
    per_key      INTEGER NOT NULL DEFAULT 0,
    paused       INTEGER NOT NULL DEFAULT 0,
    source       TEXT    NOT NULL,
    updated_by   TEXT,
    updated_at   INTEGER NOT NULL                -- microseconds
);

-- The token bucket of a scope (key '') or of one key of a per-key scope: tokens at
-- "at" (refilling from there), ready_at when it next holds a whole token, and
-- denied_at when it last held a start back (claims of executions due before then
-- are recorded as throttled). Only keys that started or were held back lately have
-- a row; a claim reads the empty ones through flow_buckets_ready, never every key.
CREATE TABLE flow_buckets (
    scope     TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    tokens    REAL    NOT NULL,
    at        INTEGER NOT NULL,
    ready_at  INTEGER NOT NULL,
    denied_at INTEGER,
    PRIMARY KEY (scope, key)
);
CREATE INDEX flow_buckets_ready ON flow_buckets (scope, ready_at);

-- Claims of executions that waited on a limit or a paused queue: which scope, how long.
CREATE TABLE throttles (
    execution_id TEXT    NOT NULL,
    scope        TEXT    NOT NULL,
    held_us      INTEGER NOT NULL,
    at           INTEGER NOT NULL
);
CREATE INDEX throttles_at ON throttles (at);

-- Every throttled claim ever recorded, per scope: counters that only grow (the
-- fencepost_throttled_total metric), kept when prune deletes old throttle records.
CREATE TABLE throttle_totals (
    scope   TEXT    NOT NULL PRIMARY KEY,
    count   INTEGER NOT NULL,
    held_us INTEGER NOT NULL
);

-- Who changed which limit or queue, and when (the operator's audit trail).
CREATE TABLE flow_changes (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    action TEXT    NOT NULL,
    scope  TEXT    NOT NULL,
    detail TEXT    NOT NULL
);

-- execution_rows gains the limit key, last (the row mapper's column order).
DROP VIEW execution_rows;
CREATE VIEW execution_rows AS
SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt, e.max_attempts,
       e.epoch, e.lease_owner, e.lease_until, e.timeout_us, e.idempotency_key, e.schedule_id,
       e.slot, e.bucket, e.bucket_key, e.created_at, e.updated_at,
       d.inputs, d.result, d.error, d.progress, e.queue, e.limit_key
FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

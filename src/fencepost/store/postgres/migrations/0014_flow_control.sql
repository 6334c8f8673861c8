-- fencepost PostgreSQL schema, version 14: flow control (limits, paused queues, throttling).
--
-- limit_key: the key a per-key limit counts an execution (or a schedule's executions)
-- under; NULL shares the scope's keyless allowance.
ALTER TABLE executions ADD COLUMN limit_key text;
ALTER TABLE schedules ADD COLUMN limit_key text;

-- One row per scope ('job:NAME' or 'queue:NAME'): its rate (rate_count starts per
-- rate_period seconds, a bucket of burst), its concurrency, whether each limit_key
-- gets its own allowance, and whether the queue is paused. source is 'code' (declared
-- with a job, written when a worker publishes it) or 'operator' (set at run time; a
-- publication never replaces it). A limited claim locks every row (FOR UPDATE, in
-- scope order) for its transaction: limited claims take their turns, so no two
-- spend the same token or the same place.
CREATE TABLE flow_limits (
    scope        text        NOT NULL PRIMARY KEY,
    rate_count   double precision,
    rate_period  double precision,
    burst        integer,
    concurrency  integer,
    per_key      boolean     NOT NULL DEFAULT false,
    paused       boolean     NOT NULL DEFAULT false,
    source       text        NOT NULL,
    updated_by   text,
    updated_at   timestamptz NOT NULL
);

-- The token bucket of a scope (key '') or of one key of a per-key scope: tokens at
-- "at" (refilling from there), ready_at when it next holds a whole token, and
-- denied_at when it last held a start back (claims of executions due before then
-- are recorded as throttled). Only keys that started or were held back lately have
-- a row; a claim reads the empty ones through flow_buckets_ready, never every key.
CREATE TABLE flow_buckets (
    scope     text             NOT NULL,
    key       text             NOT NULL,
    tokens    double precision NOT NULL,
    at        timestamptz      NOT NULL,
    ready_at  timestamptz      NOT NULL,
    denied_at timestamptz,
    PRIMARY KEY (scope, key)
);
CREATE INDEX flow_buckets_ready ON flow_buckets (scope, ready_at);

-- Claims of executions that waited on a limit or a paused queue: which scope, how long.
CREATE TABLE throttles (
    execution_id uuid        NOT NULL,
    scope        text        NOT NULL,
    held         interval    NOT NULL,
    at           timestamptz NOT NULL
);
CREATE INDEX throttles_at ON throttles (at);

-- Every throttled claim ever recorded, per scope: counters that only grow (the
-- fencepost_throttled_total metric), kept when prune deletes old throttle records.
CREATE TABLE throttle_totals (
    scope text     NOT NULL PRIMARY KEY,
    count bigint   NOT NULL,
    held  interval NOT NULL
);

-- Who changed which limit or queue, and when (the operator's audit trail).
CREATE TABLE flow_changes (
    seq    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text        NOT NULL,
    action text        NOT NULL,
    scope  text        NOT NULL,
    detail text        NOT NULL
);

-- execution_rows gains the limit key, last (the row mapper's column order).
CREATE OR REPLACE VIEW execution_rows AS
    SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt,
           e.max_attempts, e.epoch, e.lease_owner, e.lease_until, e.timeout,
           e.idempotency_key, e.schedule_id, e.slot, e.bucket, e.bucket_key,
           e.created_at, e.updated_at, d.inputs, d.result, d.error, d.progress, e.queue,
           e.limit_key
    FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

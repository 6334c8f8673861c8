-- index: commands_execution
CREATE INDEX commands_execution ON commands (execution_id, requested_at, id);

-- index: deletions_at
CREATE INDEX deletions_at ON deletions (at);

-- index: execution_data_errors
CREATE INDEX execution_data_errors
    ON execution_data (execution_id)
    WHERE error IS NOT NULL;

-- index: executions_active_bucket
CREATE INDEX executions_active_bucket
    ON executions (bucket, updated_at)
    WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED');

-- index: executions_claimable
CREATE INDEX executions_claimable
    ON executions (queue, priority DESC, due_at, id)
    WHERE state IN ('RETRY_WAIT', 'SCHEDULED');

-- index: executions_failed
CREATE INDEX executions_failed
    ON executions (id)
    WHERE state = 'FAILED';

-- index: executions_finished
CREATE INDEX executions_finished
    ON executions (updated_at, id, state, job, queue)
    WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED');

-- index: executions_idempotency_key
CREATE UNIQUE INDEX executions_idempotency_key
    ON executions (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- index: executions_leased
CREATE INDEX executions_leased
    ON executions (lease_until)
    WHERE state = 'RUNNING';

-- index: executions_limit_key
CREATE INDEX executions_limit_key
    ON executions (limit_key, id)
    WHERE limit_key IS NOT NULL;

-- index: executions_running_bucket
CREATE INDEX executions_running_bucket
    ON executions (bucket)
    WHERE state = 'RUNNING';

-- index: executions_schedule
CREATE INDEX executions_schedule
    ON executions (schedule_id, slot)
    WHERE schedule_id IS NOT NULL;

-- index: executions_schedule_state
CREATE INDEX executions_schedule_state
    ON executions (schedule_id, state, id)
    WHERE schedule_id IS NOT NULL;

-- index: executions_state
CREATE INDEX executions_state
    ON executions (state COLLATE NOCASE, id, queue, job);

-- index: executions_unpublished
CREATE INDEX executions_unpublished ON executions (job) WHERE unset_defaults IS NOT NULL;

-- index: flow_buckets_ready
CREATE INDEX flow_buckets_ready ON flow_buckets (scope, ready_at);

-- index: history_minutes_job
CREATE INDEX history_minutes_job ON history_minutes (job, span_minutes, minute);

-- index: history_minutes_queue
CREATE INDEX history_minutes_queue ON history_minutes (queue, span_minutes, minute);

-- index: schedules_due
CREATE INDEX schedules_due ON schedules (next_due, id);

-- index: throttles_at
CREATE INDEX throttles_at ON throttles (at);

-- index: throttles_execution
CREATE INDEX throttles_execution ON throttles (execution_id);

-- index: transitions_execution
CREATE INDEX transitions_execution ON transitions (execution_id, seq);

-- table: commands
CREATE TABLE commands (
    id           TEXT    NOT NULL PRIMARY KEY,  -- UUIDv7, time-ordered
    execution_id TEXT    NOT NULL REFERENCES executions (id),
    kind         TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    requested_by TEXT    NOT NULL,
    requested_at INTEGER NOT NULL,
    owner        TEXT,
    claim_until  INTEGER,
    epoch        INTEGER,
    done_at      INTEGER
) WITHOUT ROWID;

-- table: deletions
CREATE TABLE deletions (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT    NOT NULL,
    job          TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    at           INTEGER NOT NULL    -- microseconds
);

-- table: execution_data
CREATE TABLE execution_data (
    execution_id TEXT NOT NULL PRIMARY KEY,
    inputs       TEXT NOT NULL,
    result       TEXT,
    error        TEXT,
    progress     TEXT
) WITHOUT ROWID;

-- table: executions
CREATE TABLE executions (
    id              TEXT    NOT NULL PRIMARY KEY,  -- UUIDv7, time-ordered
    job             TEXT    NOT NULL,
    job_version     INTEGER,
    state           TEXT    NOT NULL,
    due_at          INTEGER NOT NULL,
    priority        INTEGER NOT NULL DEFAULT 0,
    attempt         INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    epoch           INTEGER NOT NULL DEFAULT 0,    -- fencing token, +1 per claim
    lease_owner     TEXT,
    lease_until     INTEGER,
    timeout_us      INTEGER,
    idempotency_key TEXT,
    request_hash    TEXT,
    schedule_id     TEXT,
    slot            TEXT,
    bucket          INTEGER NOT NULL,
    bucket_key      TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
, queue TEXT NOT NULL DEFAULT 'default', trace_context TEXT, unset_defaults TEXT, limit_key TEXT, planned_at INTEGER NOT NULL DEFAULT 0, first_claimed_at INTEGER, first_finished_at INTEGER, held_us INTEGER NOT NULL DEFAULT 0, slo_marks INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;

-- table: fencepost_settings
CREATE TABLE fencepost_settings (
    id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),  -- one row
    num_buckets INTEGER NOT NULL CHECK (num_buckets BETWEEN 1 AND 65536),
    changed_at  INTEGER NOT NULL                               -- microseconds
);

-- table: flow_buckets
CREATE TABLE flow_buckets (
    scope     TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    tokens    REAL    NOT NULL,
    at        INTEGER NOT NULL,
    ready_at  INTEGER NOT NULL,
    denied_at INTEGER,
    PRIMARY KEY (scope, key)
);

-- table: flow_changes
CREATE TABLE flow_changes (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    action TEXT    NOT NULL,
    scope  TEXT    NOT NULL,
    detail TEXT    NOT NULL
);

-- table: flow_limits
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

-- table: history_minutes
CREATE TABLE history_minutes (
    span_minutes   INTEGER NOT NULL,  -- what the row covers: 1, 15 or 60 minutes
    minute         INTEGER NOT NULL,  -- its first minute, since 1970-01-01 UTC
    job            TEXT    NOT NULL,
    queue          TEXT    NOT NULL,
    succeeded      INTEGER NOT NULL DEFAULT 0,
    dead           INTEGER NOT NULL DEFAULT 0,
    retried        INTEGER NOT NULL DEFAULT 0,
    timed_out      INTEGER NOT NULL DEFAULT 0,
    cancelled      INTEGER NOT NULL DEFAULT 0,
    skipped        INTEGER NOT NULL DEFAULT 0,
    claims         INTEGER NOT NULL DEFAULT 0,
    late_0         INTEGER NOT NULL DEFAULT 0,
    late_1         INTEGER NOT NULL DEFAULT 0,
    late_2         INTEGER NOT NULL DEFAULT 0,
    late_3         INTEGER NOT NULL DEFAULT 0,
    late_4         INTEGER NOT NULL DEFAULT 0,
    late_5         INTEGER NOT NULL DEFAULT 0,
    late_6         INTEGER NOT NULL DEFAULT 0,
    late_7         INTEGER NOT NULL DEFAULT 0,
    late_8         INTEGER NOT NULL DEFAULT 0,
    late_9         INTEGER NOT NULL DEFAULT 0,
    late_10        INTEGER NOT NULL DEFAULT 0,
    late_11        INTEGER NOT NULL DEFAULT 0,
    late_12        INTEGER NOT NULL DEFAULT 0,
    late_13        INTEGER NOT NULL DEFAULT 0,
    late_14        INTEGER NOT NULL DEFAULT 0,
    late_15        INTEGER NOT NULL DEFAULT 0,
    late_16        INTEGER NOT NULL DEFAULT 0,
    late_17        INTEGER NOT NULL DEFAULT 0,
    throttled_us   INTEGER NOT NULL DEFAULT 0,
    claim_counted  INTEGER NOT NULL DEFAULT 0,
    claim_missed   INTEGER NOT NULL DEFAULT 0,
    finish_counted INTEGER NOT NULL DEFAULT 0,
    finish_missed  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (span_minutes, minute, job, queue)
) WITHOUT ROWID;

-- table: history_watermark
CREATE TABLE history_watermark (
    id           INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    finished_at  INTEGER,  -- microseconds
    finished_id  TEXT,
    throttled_at INTEGER   -- microseconds
);

-- table: job_catalogue
CREATE TABLE job_catalogue (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    digest        TEXT    NOT NULL,
    definition    TEXT    NOT NULL,
    published_at  INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;

-- table: nodes
CREATE TABLE nodes (
    id            TEXT    NOT NULL PRIMARY KEY,  -- host:pid by default
    kind          TEXT    NOT NULL,
    buckets       TEXT,
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
, jobs TEXT NOT NULL DEFAULT '[]') WITHOUT ROWID;

-- table: schedules
CREATE TABLE schedules (
    id               TEXT    NOT NULL PRIMARY KEY,  -- given by the user, or a UUIDv7
    job              TEXT    NOT NULL,
    job_version      INTEGER,
    inputs           TEXT    NOT NULL,
    cron             TEXT,
    every_us         INTEGER,
    timezone         TEXT    NOT NULL,
    dst_gap          TEXT    NOT NULL,
    dst_fold         TEXT    NOT NULL,
    misfire          TEXT    NOT NULL,
    misfire_grace_us INTEGER NOT NULL,
    max_catch_up     INTEGER NOT NULL,
    overlap          TEXT    NOT NULL,
    start_at         INTEGER,
    end_at           INTEGER,
    max_attempts     INTEGER NOT NULL,
    priority         INTEGER NOT NULL,
    paused           INTEGER NOT NULL,
    watermark        INTEGER NOT NULL,
    next_due         INTEGER NOT NULL,
    materializer     TEXT,
    lease_until      INTEGER,
    request_hash     TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL, queue TEXT NOT NULL DEFAULT 'default', unset_defaults TEXT, limit_key TEXT,
    CHECK ((cron IS NULL) <> (every_us IS NULL))
) WITHOUT ROWID;

-- table: slo_rollups
CREATE TABLE slo_rollups (
    day       INTEGER NOT NULL,
    job       TEXT    NOT NULL,
    objective TEXT    NOT NULL,
    verdict   TEXT    NOT NULL,
    count     INTEGER NOT NULL,
    PRIMARY KEY (day, job, objective, verdict)
) WITHOUT ROWID;

-- table: throttle_totals
CREATE TABLE throttle_totals (
    scope   TEXT    NOT NULL PRIMARY KEY,
    count   INTEGER NOT NULL,
    held_us INTEGER NOT NULL
);

-- table: throttles
CREATE TABLE throttles (
    execution_id TEXT    NOT NULL,
    scope        TEXT    NOT NULL,
    held_us      INTEGER NOT NULL,
    at           INTEGER NOT NULL
);

-- table: transitions
CREATE TABLE transitions (
    seq          INTEGER PRIMARY KEY,
    execution_id TEXT    NOT NULL,
    event        TEXT    NOT NULL,
    from_state   TEXT,
    to_state     TEXT    NOT NULL,
    epoch        INTEGER NOT NULL,
    actor        TEXT,
    reason       TEXT,
    at           INTEGER NOT NULL
);

-- view: execution_rows
CREATE VIEW execution_rows AS
SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt, e.max_attempts,
       e.epoch, e.lease_owner, e.lease_until, e.timeout_us, e.idempotency_key, e.schedule_id,
       e.slot, e.bucket, e.bucket_key, e.created_at, e.updated_at,
       d.inputs, d.result, d.error, d.progress, e.queue, e.limit_key, e.planned_at
FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

-- fencepost PostgreSQL schema, version 1.
-- All times are TIMESTAMPTZ. Payloads are JSONB. States are the names of
-- fencepost.State.

-- The hot table: small scalar rows that claims, heartbeats and completions
-- rewrite. A low fillfactor leaves room on each page, and autovacuum runs
-- early (1% dead rows, not 20%) because every execution is updated several
-- times in its life.
CREATE TABLE executions (
    id              UUID        NOT NULL PRIMARY KEY,  -- UUIDv7, time-ordered
    job             TEXT        NOT NULL,
    job_version     INTEGER,
    state           TEXT        NOT NULL,
    due_at          TIMESTAMPTZ NOT NULL,
    priority        INTEGER     NOT NULL DEFAULT 0,
    attempt         INTEGER     NOT NULL DEFAULT 0,
    max_attempts    INTEGER     NOT NULL,
    epoch           BIGINT      NOT NULL DEFAULT 0,    -- fencing token, +1 per claim
    lease_owner     TEXT,
    lease_until     TIMESTAMPTZ,
    timeout         INTERVAL,
    idempotency_key TEXT,
    request_hash    TEXT,
    schedule_id     TEXT,
    slot            TEXT,
    bucket          INTEGER     NOT NULL,
    bucket_key      TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    CONSTRAINT executions_state_known CHECK (
        state IN ('SCHEDULED', 'RUNNING', 'RETRY_WAIT', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
    )
) WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1
);

-- What a claim reads: only waiting rows, in claim order. Finished rows are not
-- in it, so history does not slow claims. The state list must match
-- fencepost.domain.machine.sources(Event.CLAIMED) less RUNNING.
CREATE INDEX executions_claimable
    ON executions (priority DESC, due_at, id)
    WHERE state IN ('RETRY_WAIT', 'SCHEDULED');

-- Expired leases, for takeovers and the reaper.
CREATE INDEX executions_leased
    ON executions (lease_until)
    WHERE state = 'RUNNING';

CREATE UNIQUE INDEX executions_idempotency_key
    ON executions (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE INDEX executions_schedule
    ON executions (schedule_id, slot)
    WHERE schedule_id IS NOT NULL;

CREATE INDEX executions_failed
    ON executions (id)
    WHERE state = 'FAILED';

-- The cold side of an execution: written at submit (inputs) and at the end.
CREATE TABLE execution_data (
    execution_id UUID  NOT NULL PRIMARY KEY,
    inputs       JSONB NOT NULL,
    result       JSONB,
    error        TEXT,
    progress     JSONB
);

-- The append-only audit trail.
CREATE TABLE transitions (
    seq          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id UUID        NOT NULL,
    event        TEXT        NOT NULL,
    from_state   TEXT,
    to_state     TEXT        NOT NULL,
    epoch        BIGINT      NOT NULL,
    actor        TEXT,
    reason       TEXT,
    at           TIMESTAMPTZ NOT NULL
);

CREATE INDEX transitions_execution ON transitions (execution_id, seq);

-- One execution, hot and cold halves joined, in the column order the row
-- mapper (fencepost.store.postgres.rows) reads.
CREATE VIEW execution_rows AS
SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt, e.max_attempts,
       e.epoch, e.lease_owner, e.lease_until, e.timeout, e.idempotency_key, e.schedule_id,
       e.slot, e.bucket, e.bucket_key, e.created_at, e.updated_at,
       d.inputs, d.result, d.error, d.progress
FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

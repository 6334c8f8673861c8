-- fencepost PostgreSQL schema, version 4: schedules.

-- One row per schedule: its definition (inputs inline as JSONB: the row is read
-- by materializers, never by claims), the materialization watermark, and the
-- short lease a materializer holds while it plans (materializer, lease_until).
-- Policies are fencepost.domain.policies values. request_hash fingerprints the
-- add_schedule arguments, for idempotent re-adds. Ids are compared byte-wise
-- (COLLATE "C") so that listing pages in the same order on every backend and
-- under any database collation.
CREATE TABLE schedules (
    id            TEXT COLLATE "C" NOT NULL PRIMARY KEY,  -- given by the user, or a UUIDv7
    job           TEXT        NOT NULL,
    job_version   INTEGER,
    inputs        JSONB       NOT NULL,
    cron          TEXT,
    every         INTERVAL,
    timezone      TEXT        NOT NULL,
    dst_gap       TEXT        NOT NULL,
    dst_fold      TEXT        NOT NULL,
    misfire       TEXT        NOT NULL,
    misfire_grace INTERVAL    NOT NULL,
    max_catch_up  INTEGER     NOT NULL,
    overlap       TEXT        NOT NULL,
    start_at      TIMESTAMPTZ,
    end_at        TIMESTAMPTZ,
    max_attempts  INTEGER     NOT NULL,
    priority      INTEGER     NOT NULL,
    paused        BOOLEAN     NOT NULL,
    watermark     TIMESTAMPTZ NOT NULL,
    next_due      TIMESTAMPTZ NOT NULL,
    materializer  TEXT,
    lease_until   TIMESTAMPTZ,
    request_hash  TEXT        NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    CONSTRAINT schedules_one_rule CHECK ((cron IS NULL) <> (every IS NULL))
);

-- What acquire_schedules reads: due schedules, oldest next_due first. Schedules
-- wait most of their life with next_due in the future, outside the range read.
CREATE INDEX schedules_due ON schedules (next_due, id);

-- A schedule's executions by state, in id order: what query(schedule=, state=)
-- reads, what delete_schedule cancels and what overlap policies look up.
CREATE INDEX executions_schedule_state
    ON executions (schedule_id, state, id)
    WHERE schedule_id IS NOT NULL;

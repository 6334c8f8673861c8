-- fencepost SQLite schema, version 4: schedules.

-- One row per schedule: its definition (inputs inline as JSON text: the row is
-- read by materializers, never by claims), the materialization watermark, and
-- the short lease a materializer holds while it plans (materializer, lease_until).
-- Durations are INTEGER microseconds; policies are fencepost.domain.policies values.
-- request_hash fingerprints the add_schedule arguments, for idempotent re-adds.
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
    updated_at       INTEGER NOT NULL,
    CHECK ((cron IS NULL) <> (every_us IS NULL))
) WITHOUT ROWID;

-- What acquire_schedules reads: due schedules, oldest next_due first. Schedules
-- wait most of their life with next_due in the future, outside the range read.
CREATE INDEX schedules_due ON schedules (next_due, id);

-- A schedule's executions by state, in id order: what query(schedule=, state=)
-- reads, what delete_schedule cancels and what overlap policies look up.
CREATE INDEX executions_schedule_state
    ON executions (schedule_id, state, id)
    WHERE schedule_id IS NOT NULL;

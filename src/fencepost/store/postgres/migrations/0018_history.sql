-- fencepost PostgreSQL schema, version 18: the history charts (fencepost.domain.history).
--
-- history_minutes: rows of additive counters per (span, minute, job, queue), rolled up
-- from finished executions and throttle records (Store.roll_up_history) and kept
-- after prune deletes the executions (for fencepost.domain.history.RETENTION). Each
-- minute's counts are added into three rows: its own (span_minutes 1), its quarter
-- hour's (15) and its hour's (60), so that a chart reads one row per step and key
-- (hour: minutes; day: quarters; week: hours) rather than summing minutes: summing
-- a week of minute rows is the cost of reading them all (bench/history.py). A
-- roll-up adds into a row (upsert): outcomes in the minute of the finish, lateness
-- in the minute of the first claim. The counters' order is
-- fencepost.domain.history.COLUMNS; late_i counts the first claims whose lateness is
-- in bucket i (LATENESS_BOUNDS); throttled_us is in microseconds. job and queue lead
-- their own indexes: a chart of one of them reads its rows only.
-- Small and not partitioned: prune deletes its old minutes.
CREATE TABLE history_minutes (
    span_minutes   integer NOT NULL,  -- what the row covers: 1, 15 or 60 minutes
    minute         integer NOT NULL,  -- its first minute, since 1970-01-01 UTC
    job            text    NOT NULL,
    queue          text    NOT NULL,
    succeeded      integer NOT NULL DEFAULT 0,
    dead           integer NOT NULL DEFAULT 0,
    retried        integer NOT NULL DEFAULT 0,
    timed_out      integer NOT NULL DEFAULT 0,
    cancelled      integer NOT NULL DEFAULT 0,
    skipped        integer NOT NULL DEFAULT 0,
    claims         integer NOT NULL DEFAULT 0,
    late_0         integer NOT NULL DEFAULT 0,
    late_1         integer NOT NULL DEFAULT 0,
    late_2         integer NOT NULL DEFAULT 0,
    late_3         integer NOT NULL DEFAULT 0,
    late_4         integer NOT NULL DEFAULT 0,
    late_5         integer NOT NULL DEFAULT 0,
    late_6         integer NOT NULL DEFAULT 0,
    late_7         integer NOT NULL DEFAULT 0,
    late_8         integer NOT NULL DEFAULT 0,
    late_9         integer NOT NULL DEFAULT 0,
    late_10        integer NOT NULL DEFAULT 0,
    late_11        integer NOT NULL DEFAULT 0,
    late_12        integer NOT NULL DEFAULT 0,
    late_13        integer NOT NULL DEFAULT 0,
    late_14        integer NOT NULL DEFAULT 0,
    late_15        integer NOT NULL DEFAULT 0,
    late_16        integer NOT NULL DEFAULT 0,
    late_17        integer NOT NULL DEFAULT 0,
    throttled_us   bigint  NOT NULL DEFAULT 0,
    claim_counted  integer NOT NULL DEFAULT 0,
    claim_missed   integer NOT NULL DEFAULT 0,
    finish_counted integer NOT NULL DEFAULT 0,
    finish_missed  integer NOT NULL DEFAULT 0,
    PRIMARY KEY (span_minutes, minute, job, queue)
);
CREATE INDEX history_minutes_job ON history_minutes (job, span_minutes, minute);
CREATE INDEX history_minutes_queue ON history_minutes (queue, span_minutes, minute);

-- history_watermark: how far the roll-up has read (one row, NULLs until the first
-- roll-up): finished executions up to (finished_at, finished_id) in the order of
-- executions_finished, throttle records before throttled_at. A roll-up locks the
-- row (FOR UPDATE) and moves it in the transaction that adds to history_minutes.
CREATE TABLE history_watermark (
    id           integer NOT NULL PRIMARY KEY CHECK (id = 1),
    finished_at  timestamptz,
    finished_id  uuid,
    throttled_at timestamptz
);
INSERT INTO history_watermark (id) VALUES (1);

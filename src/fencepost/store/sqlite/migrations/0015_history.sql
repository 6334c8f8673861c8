-- fencepost SQLite schema, version 15: the history charts (fencepost.domain.history).
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
CREATE INDEX history_minutes_job ON history_minutes (job, span_minutes, minute);
CREATE INDEX history_minutes_queue ON history_minutes (queue, span_minutes, minute);

-- history_watermark: how far the roll-up has read (one row, NULLs until the first
-- roll-up): finished executions up to (finished_at, finished_id) in the order of
-- executions_finished, throttle records before throttled_at. A roll-up reads and
-- moves it in the transaction that adds to history_minutes.
CREATE TABLE history_watermark (
    id           INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    finished_at  INTEGER,  -- microseconds
    finished_id  TEXT,
    throttled_at INTEGER   -- microseconds
);
INSERT INTO history_watermark (id) VALUES (1);

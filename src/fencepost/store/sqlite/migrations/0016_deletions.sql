-- fencepost SQLite schema, version 16: the record a deleted execution leaves.
--
-- Store.delete removes a finished execution with every row of it, its audit trail
-- included; what stays is one row here: which execution (its job, queue and finished
-- state), who deleted it and when. Numbered in the order of deletion (the cursor of
-- Store.deletions); prune deletes the records at or before its cutoff, as it does
-- the audit of the executions it deletes.
CREATE TABLE deletions (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT    NOT NULL,
    job          TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    at           INTEGER NOT NULL    -- microseconds
);
CREATE INDEX deletions_at ON deletions (at);

-- A deleted execution's throttle records go with it: found by its id, not by a scan
-- of every record kept (prune keeps them for its retention, a day or more of claims).
CREATE INDEX throttles_execution ON throttles (execution_id);

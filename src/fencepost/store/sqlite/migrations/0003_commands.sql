-- fencepost SQLite schema, version 3: commands to running executions.

-- Control requests (cancel, pause, resume) for the worker that holds an execution.
-- kind is a fencepost.CommandKind value, state a fencepost.CommandState name.
-- A worker claims open commands under a short claim (owner, claim_until) and
-- completes them with its execution lease; epoch records the lease it reached.
-- The foreign key documents the link; like the rest of the schema it is not
-- enforced (foreign_keys = OFF): request() reads the execution in the same
-- transaction that inserts the command.
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

-- Commands by execution, in request order. What claim_commands reads for the
-- executions a worker holds (PENDING and CLAIMED ones among them: an execution
-- has a handful of commands, so the open ones need no partial index of their
-- own), what listing reads, and what deleting an execution looks up.
CREATE INDEX commands_execution ON commands (execution_id, requested_at, id);

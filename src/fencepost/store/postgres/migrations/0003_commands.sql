-- fencepost PostgreSQL schema, version 3: commands to running executions.

-- Control requests (cancel, pause, resume) for the worker that holds an execution.
-- kind is a fencepost.CommandKind value, state a fencepost.CommandState name.
-- A worker claims open commands under a short claim (owner, claim_until) and
-- completes them with its execution lease; epoch records the lease it reached.
-- Pruning an execution takes its commands with it.
CREATE TABLE commands (
    id           UUID        NOT NULL PRIMARY KEY,  -- UUIDv7, time-ordered
    execution_id UUID        NOT NULL REFERENCES executions (id) ON DELETE CASCADE,
    kind         TEXT        NOT NULL,
    state        TEXT        NOT NULL,
    requested_by TEXT        NOT NULL,
    requested_at TIMESTAMPTZ NOT NULL,
    owner        TEXT,
    claim_until  TIMESTAMPTZ,
    epoch        BIGINT,
    done_at      TIMESTAMPTZ,
    CONSTRAINT commands_kind_known CHECK (kind IN ('cancel', 'pause', 'resume')),
    CONSTRAINT commands_state_known CHECK (state IN ('PENDING', 'CLAIMED', 'DONE'))
);

-- Commands by execution, in request order. What claim_commands reads for the
-- executions a worker holds (PENDING and CLAIMED ones among them: an execution
-- has a handful of commands, so the open ones need no partial index of their
-- own), what listing reads, and what deleting an execution looks up.
CREATE INDEX commands_execution ON commands (execution_id, requested_at, id);

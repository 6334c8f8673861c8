-- fencepost PostgreSQL schema, version 7: named queues.
--
-- Every execution and schedule belongs to one queue ('default' unless the
-- submitter names one); a schedule's executions take its queue. Workers may
-- claim from some queues only, each with its own concurrency. Adding a column
-- with a constant default rewrites no rows (PostgreSQL 11 and later).
ALTER TABLE executions ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';

-- What a claim restricted to queues reads: one queue's claimable rows in claim
-- order (one index walk per queue, in one statement). A claim without queues
-- keeps reading executions_claimable. Built without CONCURRENTLY (migrations run
-- in one transaction); on a big installation create it CONCURRENTLY by hand
-- under this name first, and IF NOT EXISTS skips it.
CREATE INDEX IF NOT EXISTS executions_queue_claimable
    ON executions (queue, priority DESC, due_at, id)
    WHERE state IN ('RETRY_WAIT', 'SCHEDULED');

-- execution_rows gains the queue, last (the row mapper's column order; CREATE OR
-- REPLACE VIEW may only add columns at the end).
CREATE OR REPLACE VIEW execution_rows AS
SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt, e.max_attempts,
       e.epoch, e.lease_owner, e.lease_until, e.timeout, e.idempotency_key, e.schedule_id,
       e.slot, e.bucket, e.bucket_key, e.created_at, e.updated_at,
       d.inputs, d.result, d.error, d.progress, e.queue
FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

-- fencepost SQLite schema, version 7: named queues.
--
-- Every execution and schedule belongs to one queue ('default' unless the
-- submitter names one); a schedule's executions take its queue. Workers may
-- claim from some queues only, each with its own concurrency.
ALTER TABLE executions ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE schedules ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';

-- What a claim restricted to queues reads: one queue's claimable rows in claim
-- order (the claim runs one indexed query per queue, merged by the store). A
-- claim without queues keeps reading executions_claimable.
CREATE INDEX executions_queue_claimable
    ON executions (queue, priority DESC, due_at, id)
    WHERE state IN ('RETRY_WAIT', 'SCHEDULED');

-- execution_rows gains the queue, last (the row mapper's column order).
DROP VIEW execution_rows;
CREATE VIEW execution_rows AS
SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt, e.max_attempts,
       e.epoch, e.lease_owner, e.lease_until, e.timeout_us, e.idempotency_key, e.schedule_id,
       e.slot, e.bucket, e.bucket_key, e.created_at, e.updated_at,
       d.inputs, d.result, d.error, d.progress, e.queue
FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

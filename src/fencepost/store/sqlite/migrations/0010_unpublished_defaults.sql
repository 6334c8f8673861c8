-- fencepost SQLite schema, version 10: work submitted before its job was published.
--
-- A submit naming a job the catalogue does not hold yet is accepted with the store's
-- defaults, and unset_defaults lists what its submitter left out (a comma-separated
-- subset of max_attempts, timeout, priority, queue). When a worker publishes the job,
-- those fields take the job's published defaults and the column is cleared
-- (fencepost.store.catalogue). A schedule added before its job was published keeps
-- the same list (of max_attempts, priority, queue: a schedule has no timeout). NULL
-- everywhere else: the partial index holds only the executions waiting for a job.
ALTER TABLE executions ADD COLUMN unset_defaults TEXT;
ALTER TABLE schedules ADD COLUMN unset_defaults TEXT;

CREATE INDEX executions_unpublished ON executions (job) WHERE unset_defaults IS NOT NULL;

-- Every statement the SQLite backend runs. Parameters are named (:name).
-- Times are INTEGER microseconds since the epoch; see migrations/0001_initial.sql.

-- name: pragmas
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = OFF;
PRAGMA temp_store = MEMORY;
PRAGMA cache_size = -65536;

-- name: begin_immediate
BEGIN IMMEDIATE

-- name: commit
COMMIT

-- name: rollback
ROLLBACK

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS fencepost_migrations (
    version    INTEGER NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)

-- name: applied_migrations
SELECT version FROM fencepost_migrations ORDER BY version

-- name: record_migration
INSERT INTO fencepost_migrations (version, name, applied_at) VALUES (:version, :name, :at)

-- name: get_execution
SELECT * FROM execution_rows AS e
WHERE e.id = :id

-- name: query_executions
SELECT * FROM execution_rows AS e
WHERE e.id > coalesce(:after, '')
  AND (:states IS NULL OR e.state IN (SELECT value FROM json_each(:states)))
  AND (:job IS NULL OR e.job = :job)
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  AND (:bucket IS NULL OR e.bucket = :bucket)
  AND (:due_after IS NULL OR e.due_at >= :due_after)
  AND (:due_before IS NULL OR e.due_at < :due_before)
ORDER BY e.id
LIMIT :limit

-- name: find_idempotency_keys
SELECT idempotency_key, id, request_hash
FROM executions
WHERE idempotency_key IN (SELECT value FROM json_each(:keys))

-- name: insert_execution
INSERT INTO executions (
    id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
    timeout_us, idempotency_key, request_hash, bucket, bucket_key, created_at, updated_at
) VALUES (
    :id, :job, :job_version, 'SCHEDULED', :due_at, :priority, 0, :max_attempts, 0,
    :timeout_us, :idempotency_key, :request_hash, :bucket, :bucket_key, :now, :now
)

-- name: insert_execution_data
INSERT INTO execution_data (execution_id, inputs) VALUES (:id, :inputs)

-- name: insert_transition
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
VALUES (:execution_id, :event, :from_state, :to_state, :epoch, :actor, :reason, :at)

-- name: insert_stale_refusal
-- The refused caller's epoch and owner, next to the row's current state.
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
SELECT id, 'STALE_REFUSED', state, state, :epoch, :actor, :reason, :at
FROM executions WHERE id = :execution_id

-- name: select_transitions
SELECT seq, execution_id, event, from_state, to_state, epoch, actor, reason, at
FROM transitions WHERE execution_id = :id ORDER BY seq

-- name: execution_exists
SELECT 1 FROM executions WHERE id = :id

-- name: claim_candidates
-- Waiting rows that are due, then expired leases with attempts left (takeovers);
-- each branch reads its own partial index. Claim order: priority, due_at, id.
SELECT c.id, c.state, c.epoch, c.attempt, c.max_attempts, c.lease_owner, c.job,
       c.job_version, c.timeout_us, c.schedule_id, c.slot, d.inputs
FROM (
    SELECT * FROM (
        SELECT id, state, epoch, attempt, max_attempts, lease_owner, job, job_version,
               timeout_us, schedule_id, slot, priority, due_at
        FROM executions
        WHERE state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= :now
          AND (:jobs IS NULL OR job IN (SELECT value FROM json_each(:jobs)))
          AND (:buckets IS NULL OR bucket IN (SELECT value FROM json_each(:buckets)))
        ORDER BY priority DESC, due_at, id
        LIMIT :limit
    )
    UNION ALL
    SELECT * FROM (
        SELECT id, state, epoch, attempt, max_attempts, lease_owner, job, job_version,
               timeout_us, schedule_id, slot, priority, due_at
        FROM executions
        WHERE state = 'RUNNING' AND lease_until <= :now AND attempt < max_attempts
          AND (:jobs IS NULL OR job IN (SELECT value FROM json_each(:jobs)))
          AND (:buckets IS NULL OR bucket IN (SELECT value FROM json_each(:buckets)))
        ORDER BY lease_until
        LIMIT :limit
    )
    ORDER BY priority DESC, due_at, id
    LIMIT :limit
) AS c
JOIN execution_data AS d ON d.execution_id = c.id
ORDER BY c.priority DESC, c.due_at, c.id

-- name: claim_update
-- Runs in the same BEGIN IMMEDIATE transaction as claim_candidates, which
-- holds the database's write lock: no other claim can interleave.
UPDATE executions
SET state = 'RUNNING', epoch = epoch + 1, attempt = attempt + 1,
    lease_owner = :owner, lease_until = :until, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))

-- name: complete_fenced
-- The fence is the WHERE clause: same owner, same epoch, lease still live.
-- :leases is a JSON array of [id, owner, epoch] with distinct ids (the store
-- splits a batch into rounds), so RETURNING id names exactly the accepted.
UPDATE executions
SET state = 'SUCCEEDED', lease_owner = NULL, lease_until = NULL, updated_at = :now
FROM (
    SELECT json_extract(value, '$[0]') AS id,
           json_extract(value, '$[1]') AS owner,
           json_extract(value, '$[2]') AS epoch
    FROM json_each(:leases)
) AS l
WHERE executions.id = l.id
  AND executions.state = 'RUNNING'
  AND executions.lease_owner = l.owner
  AND executions.epoch = l.epoch
  AND executions.lease_until > :now
RETURNING executions.id

-- name: heartbeat_fenced
-- A heartbeat only ever extends: a lease handed out must not end earlier than promised.
UPDATE executions
SET lease_until = max(lease_until, :until), updated_at = :now
FROM (
    SELECT json_extract(value, '$[0]') AS id,
           json_extract(value, '$[1]') AS owner,
           json_extract(value, '$[2]') AS epoch
    FROM json_each(:leases)
) AS l
WHERE executions.id = l.id
  AND executions.state = 'RUNNING'
  AND executions.lease_owner = l.owner
  AND executions.epoch = l.epoch
  AND executions.lease_until > :now
RETURNING executions.id, executions.lease_until

-- name: set_result
UPDATE execution_data SET result = :result WHERE execution_id = :id

-- name: set_error
UPDATE execution_data SET error = :error WHERE execution_id = :id

-- name: set_progress
UPDATE execution_data SET progress = :progress WHERE execution_id = :id

-- name: write_change
-- Persist a change decided by fencepost.domain.machine.apply. Guarded by the
-- state and epoch it was decided from; anything else means a lost race.
UPDATE executions
SET state = :state, due_at = :due_at, attempt = :attempt, epoch = :epoch,
    lease_owner = :lease_owner, lease_until = :lease_until, updated_at = :updated_at
WHERE id = :id AND state = :from_state AND epoch = :from_epoch

-- name: expired_leases
SELECT * FROM execution_rows AS e
WHERE e.state = 'RUNNING' AND e.lease_until <= :now
ORDER BY e.lease_until, e.id
LIMIT :limit

-- name: schema_objects
-- The schema as SQLite stores it, for comparing migrations with schema.sql.
SELECT type, name, sql FROM sqlite_schema
WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND name != 'fencepost_migrations'
ORDER BY type, name

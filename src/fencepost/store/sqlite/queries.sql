-- Every statement the SQLite backend runs. Parameters are named (:name), except in
-- the statements the hot path runs once per row with executemany: those take
-- numbered parameters (?1, ?2, ...), listed in their comment, because binding a
-- tuple costs measurably less than binding a mapping (see bench/store_throughput.py).
-- Times are INTEGER microseconds since the epoch; see migrations/0001_initial.sql.

-- name: pragmas
-- Every connection's settings but one: PRAGMA synchronous comes from one of the
-- two blocks below, chosen by the URL (PRAGMA takes no bound parameters).
PRAGMA journal_mode = WAL;
PRAGMA foreign_keys = OFF;
PRAGMA temp_store = MEMORY;
PRAGMA cache_size = -65536;

-- name: synchronous_full
-- The default. In WAL mode every COMMIT syncs the WAL before it returns, so an
-- acknowledged write survives a power loss or an OS crash: one fsync per transaction.
PRAGMA synchronous = FULL

-- name: synchronous_normal
-- ?synchronous=normal. The WAL is synced only at checkpoints: the last transactions
-- committed before a power loss or an OS crash may roll back (an application crash
-- loses nothing, and the file is never corrupted).
PRAGMA synchronous = NORMAL

-- name: begin_immediate
BEGIN IMMEDIATE

-- name: begin
-- A read transaction (deferred: no lock until the first read), for reports that
-- take several statements from one snapshot.
BEGIN

-- name: commit
COMMIT

-- name: rollback
ROLLBACK

-- name: savepoint
SAVEPOINT fenced_batch

-- name: release_savepoint
RELEASE fenced_batch

-- name: rollback_to_savepoint
ROLLBACK TO fenced_batch

-- name: has_migrations_table
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'fencepost_migrations'

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

-- name: record_num_buckets
-- The bucket count of the first process that migrates (migrations/0011_settings.sql);
-- a count already recorded stays.
INSERT INTO fencepost_settings (id, num_buckets, changed_at) VALUES (1, :num_buckets, :at)
ON CONFLICT (id) DO NOTHING

-- name: recorded_num_buckets
SELECT num_buckets FROM fencepost_settings WHERE id = 1

-- name: set_num_buckets
-- A resize (Store.resize_buckets), in the transaction that moves the executions.
INSERT INTO fencepost_settings (id, num_buckets, changed_at) VALUES (1, :num_buckets, :at)
ON CONFLICT (id) DO UPDATE SET num_buckets = excluded.num_buckets, changed_at = excluded.changed_at

-- name: unfinished_buckets
-- What a resize moves: each unfinished execution, with what its bucket is made from.
SELECT id, bucket_key, bucket FROM executions
WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')

-- name: move_to_buckets
-- A resize's moves: :ids and :buckets, two JSON arrays of one length, paired by position.
UPDATE executions SET bucket = m.bucket
FROM (
    SELECT i.value AS id, b.value AS bucket
    FROM json_each(:ids) AS i JOIN json_each(:buckets) AS b ON b.key = i.key
) AS m
WHERE executions.id = m.id

-- name: get_execution
SELECT * FROM execution_rows AS e
WHERE e.id = :id

-- name: find_execution
-- By idempotency key (a submit's, or a materialized occurrence's): its unique index.
SELECT * FROM execution_rows AS e
WHERE e.idempotency_key = :key

-- fragment: query_filters
-- The state, job, queue, limit key, owner, error and attempt outcome filters of
-- Store.query, in every query_* and count_* block (e: a row of executions or of
-- execution_rows). An owner holds RUNNING rows only. The error is a LIKE pattern
-- (its %, _ and \ escaped: fencepost.store.values.like_pattern; LIKE folds ASCII
-- letters only), one probe of the row's payload (the error blocks match it as they
-- read the errored rows, and pass NULL here). An attempt ended with the outcome when
-- a transition from RUNNING has one of :outcome_events
-- (fencepost.domain.machine.ending_events): one probe of transitions_execution per
-- row the other filters kept.
  AND (:states IS NULL OR e.state IN (SELECT value FROM json_each(:states)))
  AND (:job IS NULL OR e.job = :job)
  AND (:queue IS NULL OR e.queue = :queue)
  AND (:limit_key IS NULL OR e.limit_key = :limit_key)
  AND (:owner IS NULL OR (e.state = 'RUNNING' AND e.lease_owner = :owner))
  AND (:error IS NULL OR EXISTS (
      SELECT 1 FROM execution_data AS d
      WHERE d.execution_id = e.id AND d.error LIKE :error ESCAPE '\'
  ))
  AND (:outcome_events IS NULL OR EXISTS (
      SELECT 1 FROM transitions AS t
      WHERE t.execution_id = e.id AND t.from_state = 'RUNNING'
        AND t.event IN (SELECT value FROM json_each(:outcome_events))
  ))

-- fragment: query_ranges
-- The bucket, due_at, created_at and finish time filters of Store.query, in every
-- query_* and count_* block. The ids of the creation range (:id_above, :id_below)
-- bound the primary key in each block; created_at then decides. A finished row's
-- updated_at is its finish time.
  AND (:bucket IS NULL OR e.bucket = :bucket)
  AND (:buckets IS NULL OR e.bucket IN (SELECT value FROM json_each(:buckets)))
  AND (:due_after IS NULL OR e.due_at >= :due_after)
  AND (:due_before IS NULL OR e.due_at < :due_before)
  AND (:created_after IS NULL OR e.created_at >= :created_after)
  AND (:created_before IS NULL OR e.created_at < :created_before)
  AND (:finished_after IS NULL AND :finished_before IS NULL
       OR e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
          AND e.updated_at >= coalesce(:finished_after, -9223372036854775808)
          AND e.updated_at < coalesce(:finished_before, 9223372036854775807))

-- fragment: oldest_first
-- The keyset window of a page oldest first: ids after the cursor, within the ids the
-- creation bounds allow (:id_above, :id_below; see fencepost.store.values.created_id_range).
  AND e.id > max(coalesce(:after, ''), coalesce(:id_above, ''))
  AND e.id < coalesce(:id_below, 'g')

-- fragment: newest_first
-- The keyset window of a page newest first: ids before the cursor (without one, 'g'
-- sorts after every id: lowercase hex), within the ids the creation bounds allow.
  AND e.id < min(coalesce(:after, 'g'), coalesce(:id_below, 'g'))
  AND e.id > coalesce(:id_above, '')

-- fragment: created_ids
-- The ids the creation bounds allow, in a count.
  AND e.id > coalesce(:id_above, '') AND e.id < coalesce(:id_below, 'g')

-- name: query_executions
-- Store.query when no filter has an index of its own (SqlStore._query_plan chooses):
-- the primary key, in order, each row checked.
SELECT * FROM execution_rows AS e
WHERE true
  -- include: oldest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id
LIMIT :limit

-- name: query_executions_newest_first
-- query_executions, newest first: the cursor is the last id of the previous page.
SELECT * FROM execution_rows AS e
WHERE true
  -- include: newest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id DESC
LIMIT :limit

-- name: find_idempotency_keys
SELECT idempotency_key, id, request_hash
FROM executions
WHERE idempotency_key IN (SELECT value FROM json_each(:keys))

-- name: insert_execution
-- executemany: ?1 id, ?2 job, ?3 job_version, ?4 due_at, ?5 priority, ?6 max_attempts,
-- ?7 timeout_us, ?8 idempotency_key, ?9 request_hash, ?10 bucket, ?11 bucket_key, ?12 now,
-- ?13 queue, ?14 trace_context, ?15 unset_defaults, ?16 limit_key, ?17 slo_marks (BACKFILL
-- for a time already past, see fencepost.domain.slo.is_backfill). The planned time is
-- the due_at inserted.
INSERT INTO executions (
    id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
    timeout_us, idempotency_key, request_hash, bucket, bucket_key, created_at, updated_at, queue,
    trace_context, unset_defaults, limit_key, planned_at, slo_marks
) VALUES (
    ?1, ?2, ?3, 'SCHEDULED', ?4, ?5, 0, ?6, 0,
    ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14, ?15, ?16, ?4, ?17
)

-- name: insert_execution_data
-- executemany: ?1 id, ?2 inputs.
INSERT INTO execution_data (execution_id, inputs) VALUES (?1, ?2)

-- name: insert_submitted
-- The SUBMITTED transitions of a batch of new executions, all created at one
-- instant: ?1 their ids as a JSON array (in order), ?2 at, ?3 the submitter (actor). One statement: an
-- executemany of a one-row INSERT cost a fifth of submit_many.
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
SELECT value, 'SUBMITTED', NULL, 'SCHEDULED', 0, ?3, NULL, ?2 FROM json_each(?1)

-- name: insert_claimed
-- The CLAIMED transition of claim_update. executemany: ?1 execution_id,
-- ?2 from_state, ?3 epoch (the new one), ?4 actor (the new owner), ?5 reason, ?6 at.
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
VALUES (?1, 'CLAIMED', ?2, 'RUNNING', ?3, ?4, ?5, ?6)

-- name: insert_completed
-- The COMPLETED transition of each lease complete_fenced ended (executemany;
-- :actor is the lease's owner).
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
VALUES (:execution_id, 'COMPLETED', 'RUNNING', 'SUCCEEDED', :epoch, :actor, NULL, :at)

-- name: insert_transition
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
VALUES (:execution_id, :event, :from_state, :to_state, :epoch, :actor, :reason, :at)

-- name: insert_stale_refusal
-- The refused caller's epoch and owner, next to the row's current state.
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
SELECT id, 'STALE_REFUSED', state, state, :epoch, :actor, :reason, :at
FROM executions WHERE id = :execution_id

-- name: mark_stale_refusal
-- With insert_stale_refusal: what the refusal says of the execution (:marks, a
-- fencepost.domain.slo.Mark: a refused heartbeat, a renewal failed; any other verb,
-- a stale completion refused).
UPDATE executions SET slo_marks = slo_marks | :marks WHERE id = :execution_id

-- name: select_transitions
SELECT seq, execution_id, event, from_state, to_state, epoch, actor, reason, at
FROM transitions WHERE execution_id = :id ORDER BY seq

-- name: execution_exists
SELECT 1 FROM executions WHERE id = :id

-- fragment: claim_filters
-- The restrictions every branch of a claim applies (see claim_candidates_queue).
      AND (:jobs IS NULL OR e.job IN (SELECT value FROM json_each(:jobs)))
      AND (:ids IS NULL OR e.id IN (SELECT value FROM json_each(:ids)))
      AND (:buckets IS NULL OR e.bucket IN (SELECT value FROM json_each(:buckets)))
      AND (:versions IS NULL OR e.job_version IS NULL
           OR e.job || ':' || e.job_version IN (SELECT value FROM json_each(:versions)))

-- fragment: claim_columns
-- What a claim reads of a candidate, in the order the store reads it (priority and
-- due_at last: the store merges branches in claim order by them).
    SELECT e.id, e.state, e.epoch, e.attempt, e.max_attempts, e.lease_owner, e.job,
           e.job_version, e.timeout_us, e.schedule_id, e.slot, d.inputs, e.queue,
           e.trace_context, e.priority, e.due_at
    FROM executions AS e
    JOIN execution_data AS d ON d.execution_id = e.id

-- fragment: claim_queue_takeovers
-- The second branch of the claim_*_queue blocks: the queue's expired leases with
-- attempts left (takeovers), from their own partial index.
UNION ALL
SELECT * FROM (
    -- include: claim_columns
    WHERE e.state = 'RUNNING' AND e.lease_until <= :now AND e.attempt < e.max_attempts
      AND e.queue = :queue
      -- include: claim_filters
    ORDER BY e.lease_until
    LIMIT :limit
)

-- name: claim_live_queues
-- The queues a claim over every queue reads: those with waiting rows, found by a
-- loose scan of executions_claimable (one index seek per queue, however many rows
-- each holds), and those with expired leases that have attempts left (from
-- executions_leased, which holds only RUNNING rows).
WITH RECURSIVE waiting (queue) AS (
    SELECT min(queue) FROM executions WHERE state IN ('RETRY_WAIT', 'SCHEDULED')
    UNION ALL
    SELECT (SELECT min(e.queue) FROM executions AS e
            WHERE e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.queue > w.queue)
    FROM waiting AS w
    WHERE w.queue IS NOT NULL
)
SELECT queue FROM waiting WHERE queue IS NOT NULL
UNION
SELECT queue FROM executions
WHERE state = 'RUNNING' AND lease_until <= :now AND attempt < max_attempts

-- name: claim_candidates_queue
-- One queue's (:queue) waiting rows that are due, in claim order, from
-- executions_claimable, then its expired leases with attempts left (takeovers);
-- both restricted to :jobs, :ids, :buckets and the 'job:version' pairs in
-- :versions (rows without a job_version run on any version), each branch at most
-- :limit rows. Usually the second branch is empty and the first is the answer;
-- otherwise the store merges both in claim order (priority DESC, due_at, id),
-- which is why priority and due_at come last. No ORDER BY over the union: it made
-- SQLite re-sort, in temporary B-trees, rows the index returns in order.
--
-- A claim runs it once per queue (those it names, or claim_live_queues) in its
-- BEGIN IMMEDIATE transaction, and merges the answers in claim order: SQLite has
-- no LATERAL join to do it in one statement, and an IN over the queues would read
-- the rows of every queue in one sort.
SELECT * FROM (
    -- include: claim_columns
    WHERE e.queue = :queue AND e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= :now
      -- include: claim_filters
    ORDER BY e.priority DESC, e.due_at, e.id
    LIMIT :limit
)
-- include: claim_queue_takeovers

-- fragment: claim_capped_pick
-- The waiting rows of a capped claim: those within their bucket's room, in claim
-- order (ranked and running are the block's own).
SELECT * FROM (
    SELECT r.id, r.state, r.epoch, r.attempt, r.max_attempts, r.lease_owner, r.job,
           r.job_version, r.timeout_us, r.schedule_id, r.slot, d.inputs, r.queue,
           r.trace_context, r.priority, r.due_at
    FROM ranked AS r
    JOIN execution_data AS d ON d.execution_id = r.id
    LEFT JOIN running AS n ON n.bucket = r.bucket
    WHERE r.queue = :queue AND r.bucket_rank <= :cap - coalesce(n.n, 0)
    ORDER BY r.priority DESC, r.due_at, r.id
    LIMIT :limit
)

-- name: claim_candidates_capped_queue
-- claim_candidates_queue under max_per_bucket (:cap): a bucket gives at most
-- :cap - (its RUNNING executions) waiting rows over all the claim's queues
-- (:rank_queues, a JSON array), the first in claim order across them, as one
-- claim over them all would; this queue's share of them is the answer. Ranking
-- within buckets reads every due row of those queues, so capped claims cost more
-- than plain ones. Takeovers are not capped: an expired execution is already
-- counted as RUNNING.
WITH running AS (
    SELECT bucket, count(*) AS n FROM executions WHERE state = 'RUNNING' GROUP BY bucket
),
ranked AS (
    SELECT e.id, e.state, e.epoch, e.attempt, e.max_attempts, e.lease_owner, e.job,
           e.job_version, e.timeout_us, e.schedule_id, e.slot, e.queue, e.trace_context,
           e.priority, e.due_at, e.bucket,
           row_number() OVER (PARTITION BY e.bucket ORDER BY e.priority DESC, e.due_at, e.id)
               AS bucket_rank
    FROM executions AS e
    WHERE e.queue IN (SELECT value FROM json_each(:rank_queues))
      AND e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= :now
      -- include: claim_filters
)
-- include: claim_capped_pick
-- include: claim_queue_takeovers

-- name: claim_update
-- Runs in the same BEGIN IMMEDIATE transaction as claim_candidates_queue, which
-- holds the database's write lock: no other claim can interleave. The first claim
-- is kept; taking over an expired lease (the row still RUNNING: SET reads the old
-- values) marks a renewal failed (fencepost.domain.slo.Mark.RENEWAL_FAILED).
UPDATE executions
SET state = 'RUNNING', epoch = epoch + 1, attempt = attempt + 1,
    lease_owner = :owner, lease_until = :until, updated_at = :now,
    first_claimed_at = coalesce(first_claimed_at, :now),
    slo_marks = slo_marks | CASE WHEN state = 'RUNNING' THEN 1 ELSE 0 END
WHERE id IN (SELECT value FROM json_each(:ids))

-- name: complete_fenced
-- The fence is the WHERE clause: same owner, same epoch, lease still live; the
-- changed-row count is the verdict. Run once per lease, in batch order (see
-- SqlDialect._fences_row_by_row); the store stores the results (set_result) and
-- COMPLETED transitions (insert_completed) of those it ended, and audits the others
-- (insert_stale_refusal).
UPDATE executions
SET state = 'SUCCEEDED', lease_owner = NULL, lease_until = NULL, updated_at = :now,
    first_finished_at = coalesce(first_finished_at, :now)
WHERE id = :id
  AND state = 'RUNNING'
  AND lease_owner = :owner
  AND epoch = :epoch
  AND lease_until > :now

-- name: heartbeat_fenced
-- A heartbeat only ever extends: a lease handed out must not end earlier than promised.
UPDATE executions
SET lease_until = max(lease_until, :now + :ttl), updated_at = :now
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
-- state and epoch it was decided from; anything else means a lost race. With it,
-- the marks its event sets (:marks) and, when it finishes the execution (SUCCEEDED
-- or FAILED), the first finish (:finished_at, else NULL): see verbs.sql_changes.persist_steps.
UPDATE executions
SET state = :state, due_at = :due_at, attempt = :attempt, epoch = :epoch,
    lease_owner = :lease_owner, lease_until = :lease_until, updated_at = :updated_at,
    slo_marks = slo_marks | :marks,
    first_finished_at = coalesce(first_finished_at, :finished_at)
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

-- name: register_node
-- A renewal keeps started_at; everything else is the latest declaration.
INSERT INTO nodes (id, kind, buckets, started_at, heartbeat_at, expires_at, jobs)
VALUES (:id, :kind, :buckets, :now, :now, :now + :ttl, :jobs)
ON CONFLICT (id) DO UPDATE SET
    kind = excluded.kind, buckets = excluded.buckets,
    heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at,
    jobs = excluded.jobs
RETURNING id, kind, buckets, started_at, heartbeat_at, expires_at, jobs

-- name: deregister_node
DELETE FROM nodes WHERE id = :id

-- name: select_nodes
SELECT id, kind, buckets, started_at, heartbeat_at, expires_at, jobs
FROM nodes
WHERE NOT :live_only OR expires_at > :now
ORDER BY id

-- name: orphans
SELECT * FROM execution_rows
WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')
  AND bucket IN (SELECT value FROM json_each(:buckets))
  AND updated_at <= :now - :older_than
ORDER BY updated_at, id
LIMIT :limit

-- name: insert_command
INSERT INTO commands (id, execution_id, kind, state, requested_by, requested_at, done_at)
VALUES (:id, :execution_id, :kind, :state, :requested_by, :requested_at, :done_at)

-- name: claim_commands
-- Open commands of the given executions, oldest request first: PENDING ones, and
-- CLAIMED ones whose claim has expired (claim_until <= now). Runs inside BEGIN
-- IMMEDIATE, so no other claim interleaves. RETURNING has no order; the store sorts.
UPDATE commands
SET state = 'CLAIMED', owner = :owner, claim_until = :now + :ttl
WHERE id IN (
    SELECT id FROM commands
    WHERE execution_id IN (SELECT value FROM json_each(:execution_ids))
      AND state IN ('CLAIMED', 'PENDING')
      AND (state = 'PENDING' OR claim_until <= :now)
    ORDER BY requested_at, id
    LIMIT :limit
)
RETURNING id, execution_id, kind, state, requested_by, requested_at, owner, claim_until,
          epoch, done_at

-- name: complete_command
-- The fence on both sides is the WHERE clause: the command is still CLAIMED by
-- :owner under a live claim, and :owner holds the execution at :epoch under a
-- live lease. No row back means refused.
UPDATE commands
SET state = 'DONE', claim_until = NULL, epoch = :epoch, done_at = :now
WHERE id = :id
  AND execution_id = :execution_id
  AND state = 'CLAIMED'
  AND owner = :owner
  AND claim_until > :now
  AND EXISTS (
      SELECT 1 FROM executions AS e
      WHERE e.id = :execution_id
        AND e.state = 'RUNNING'
        AND e.lease_owner = :owner
        AND e.epoch = :epoch
        AND e.lease_until > :now
  )
RETURNING id, execution_id, kind, state, requested_by, requested_at, owner, claim_until,
          epoch, done_at

-- name: release_command
-- Only the claimer gives a command back, and only while it is still its claim.
UPDATE commands
SET state = 'PENDING', owner = NULL, claim_until = NULL
WHERE id = :id AND state = 'CLAIMED' AND owner = :owner

-- name: select_commands
SELECT id, execution_id, kind, state, requested_by, requested_at, owner, claim_until,
       epoch, done_at
FROM commands WHERE execution_id = :id ORDER BY requested_at, id

-- Schedules. Every statement that returns a schedule lists its columns in the
-- order fencepost.store.rows.schedule reads; durations are microseconds.

-- name: query_schedule_executions
-- query_executions for one schedule: reads executions_schedule_state, so a
-- schedule's executions (by state) are found without scanning the table.
SELECT * FROM execution_rows AS e
WHERE e.schedule_id = :schedule
  -- include: oldest_first
  -- include: query_filters
  -- include: query_ranges
ORDER BY e.id
LIMIT :limit

-- name: query_schedule_executions_newest_first
-- query_schedule_executions, newest first: the cursor is the last id of the previous
-- page.
SELECT * FROM execution_rows AS e
WHERE e.schedule_id = :schedule
  -- include: newest_first
  -- include: query_filters
  -- include: query_ranges
ORDER BY e.id DESC
LIMIT :limit

-- name: query_state_executions
-- query_executions in one state (:state): executions_state in id order (its state is
-- compared COLLATE NOCASE, see migration 14), so a page of a rare state is not looked
-- for among the others. A query of several states runs it
-- once for each and merges the pages; an owner's executions are the RUNNING ones
-- (SqlStore._query_plan).
SELECT * FROM execution_rows AS e
WHERE e.state = :state COLLATE NOCASE
  -- include: oldest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id
LIMIT :limit

-- name: query_state_executions_newest_first
SELECT * FROM execution_rows AS e
WHERE e.state = :state COLLATE NOCASE
  -- include: newest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id DESC
LIMIT :limit

-- name: query_key_executions
-- query_executions under one limit key: executions_limit_key in id order.
SELECT * FROM execution_rows AS e
WHERE e.limit_key = :limit_key
  -- include: oldest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id
LIMIT :limit

-- name: query_key_executions_newest_first
SELECT * FROM execution_rows AS e
WHERE e.limit_key = :limit_key
  -- include: newest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id DESC
LIMIT :limit

-- name: query_error_executions
-- query_executions by error text: the errored payload rows (execution_data_errors),
-- in id order, each error matched; the executions that never failed are not read.
SELECT e.* FROM execution_data AS x JOIN execution_rows AS e ON e.id = x.execution_id
WHERE x.error IS NOT NULL AND x.error LIKE :error_driving ESCAPE '\'
  -- include: oldest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY x.execution_id
LIMIT :limit

-- name: query_error_executions_newest_first
SELECT e.* FROM execution_data AS x JOIN execution_rows AS e ON e.id = x.execution_id
WHERE x.error IS NOT NULL AND x.error LIKE :error_driving ESCAPE '\'
  -- include: newest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY x.execution_id DESC
LIMIT :limit

-- name: query_finished_executions
-- query_executions finished at or after :finished_after: the ids of that range of
-- executions_finished (named: executions_state would serve the states, and walking
-- the primary key reads every execution finished earlier first), in id order. Its
-- cost grows with the executions the range holds: a day of a million a month reads
-- in tens of milliseconds, the whole month in about a second.
SELECT * FROM execution_rows AS e
WHERE e.id IN (
    SELECT f.id FROM executions AS f INDEXED BY executions_finished
    WHERE f.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
      AND f.updated_at >= :finished_after
      AND f.updated_at < coalesce(:finished_before, 9223372036854775807)
      -- The index holds these three: the range is read without the table.
      AND (:states IS NULL OR f.state IN (SELECT value FROM json_each(:states)))
      AND (:job IS NULL OR f.job = :job)
      AND (:queue IS NULL OR f.queue = :queue)
)
  -- include: oldest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id
LIMIT :limit

-- name: query_finished_executions_newest_first
SELECT * FROM execution_rows AS e
WHERE e.id IN (
    SELECT f.id FROM executions AS f INDEXED BY executions_finished
    WHERE f.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
      AND f.updated_at >= :finished_after
      AND f.updated_at < coalesce(:finished_before, 9223372036854775807)
      -- The index holds these three: the range is read without the table.
      AND (:states IS NULL OR f.state IN (SELECT value FROM json_each(:states)))
      AND (:job IS NULL OR f.job = :job)
      AND (:queue IS NULL OR f.queue = :queue)
)
  -- include: newest_first
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
ORDER BY e.id DESC
LIMIT :limit

-- name: count_by_state
-- Store.count_by_state by states, job and queue alone (or no filter): the covering
-- index executions_state, never the table.
SELECT e.state, count(*) FROM executions AS e
WHERE (:states IS NULL OR e.state COLLATE NOCASE IN (SELECT value FROM json_each(:states)))
  AND (:job IS NULL OR e.job = :job) AND (:queue IS NULL OR e.queue = :queue)
GROUP BY e.state COLLATE NOCASE

-- name: count_filtered_by_state
-- Store.count_by_state when no filter has an index of its own: every execution in
-- the creation bounds' ids, checked (the payload rows only probed for an error).
SELECT e.state, count(*) FROM executions AS e
WHERE true
  -- include: created_ids
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
GROUP BY e.state

-- name: count_states_by_state
-- Store.count_by_state of some states (or an owner's: RUNNING): executions_state
-- (named: the creation bounds' ids would tempt the planner to the primary key), one
-- range for each state.
SELECT e.state, count(*) FROM executions AS e INDEXED BY executions_state
WHERE e.state COLLATE NOCASE IN (SELECT value FROM json_each(:states))
  -- include: created_ids
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
GROUP BY e.state COLLATE NOCASE

-- name: count_schedule_by_state
-- Store.count_by_state of one schedule's executions: executions_schedule_state.
SELECT e.state, count(*) FROM executions AS e
WHERE e.schedule_id = :schedule
  -- include: created_ids
  -- include: query_filters
  -- include: query_ranges
GROUP BY e.state

-- name: count_key_by_state
-- Store.count_by_state under one limit key: executions_limit_key.
SELECT e.state, count(*) FROM executions AS e
WHERE e.limit_key = :limit_key
  -- include: created_ids
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
GROUP BY e.state

-- name: count_error_by_state
-- Store.count_by_state by error text: the errored payload rows (execution_data_errors).
SELECT e.state, count(*) FROM execution_data AS x JOIN executions AS e ON e.id = x.execution_id
WHERE x.error IS NOT NULL AND x.error LIKE :error_driving ESCAPE '\'
  -- include: created_ids
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
GROUP BY e.state

-- name: count_finished_by_state
-- Store.count_by_state by finish time: that range of executions_finished (named, as
-- in query_finished_executions).
SELECT e.state, count(*) FROM executions AS e INDEXED BY executions_finished
WHERE e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
  AND e.updated_at >= coalesce(:finished_after, -9223372036854775808)
  AND e.updated_at < coalesce(:finished_before, 9223372036854775807)
  -- include: created_ids
  -- include: query_filters
  AND (:schedule IS NULL OR e.schedule_id = :schedule)
  -- include: query_ranges
GROUP BY e.state

-- name: count_finished_narrow_by_state
-- Store.count_by_state by finish time with no other filter but states, job and queue:
-- that range of executions_finished alone, which holds them (no read of the table).
SELECT e.state, count(*) FROM executions AS e INDEXED BY executions_finished
WHERE e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
  AND e.updated_at >= coalesce(:finished_after, -9223372036854775808)
  AND e.updated_at < coalesce(:finished_before, 9223372036854775807)
  AND (:states IS NULL OR e.state IN (SELECT value FROM json_each(:states)))
  AND (:job IS NULL OR e.job = :job)
  AND (:queue IS NULL OR e.queue = :queue)
GROUP BY e.state

-- name: insert_schedule
-- No row back: a schedule with this id exists (the store compares the fingerprints).
INSERT INTO schedules (
    id, job, job_version, inputs, cron, every_us, timezone, dst_gap, dst_fold, misfire,
    misfire_grace_us, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
    watermark, next_due, materializer, lease_until, request_hash, created_at, updated_at, queue,
    limit_key
) VALUES (
    :id, :job, :job_version, :inputs, :cron, :every, :timezone, :dst_gap, :dst_fold, :misfire,
    :misfire_grace, :max_catch_up, :overlap, :start_at, :end_at, :max_attempts, :priority,
    :paused, :watermark, :next_due, NULL, NULL, :request_hash, :created_at, :updated_at, :queue,
    :limit_key
)
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: get_schedule
-- The schedule, then the fingerprint of its add_schedule arguments.
SELECT id, job, job_version, inputs, cron, every_us, timezone, dst_gap, dst_fold, misfire,
       misfire_grace_us, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
       watermark, next_due, materializer, lease_until, created_at, updated_at, queue,
       limit_key, request_hash
FROM schedules WHERE id = :id

-- name: list_schedules
SELECT id, job, job_version, inputs, cron, every_us, timezone, dst_gap, dst_fold, misfire,
       misfire_grace_us, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
       watermark, next_due, materializer, lease_until, created_at, updated_at, queue,
       limit_key
FROM schedules
WHERE id > coalesce(:after, '')
  AND (:job IS NULL OR job = :job)
  AND (:paused IS NULL OR paused = :paused)
  AND (:due_before IS NULL OR next_due <= :due_before)
ORDER BY id
LIMIT :limit

-- name: write_schedule
-- Persist a schedule decided by fencepost.domain.schedules (update, pause, resume):
-- everything but the watermark, the creation time and the add_schedule fingerprint.
UPDATE schedules
SET job = :job, job_version = :job_version, inputs = :inputs, cron = :cron, every_us = :every,
    timezone = :timezone, dst_gap = :dst_gap, dst_fold = :dst_fold, misfire = :misfire,
    misfire_grace_us = :misfire_grace, max_catch_up = :max_catch_up, overlap = :overlap,
    start_at = :start_at, end_at = :end_at, max_attempts = :max_attempts, priority = :priority,
    paused = :paused, next_due = :next_due, materializer = :materializer,
    lease_until = :lease_until, updated_at = :updated_at, queue = :queue,
    limit_key = :limit_key
WHERE id = :id

-- name: delete_schedule
DELETE FROM schedules WHERE id = :id RETURNING id

-- name: waiting_schedule_executions
-- What deleting a schedule cancels (the state list is sources(CANCELLED) less RUNNING).
SELECT * FROM execution_rows
WHERE schedule_id = :id AND state IN ('RETRY_WAIT', 'SCHEDULED')
ORDER BY id

-- name: unstarted_schedule_executions
-- What pausing a schedule skips: its occurrences SCHEDULED and never claimed (see
-- fencepost.domain.schedules.skipped_by_pause). The pause's write transaction holds
-- the file, so no claim interleaves.
SELECT * FROM execution_rows
WHERE schedule_id = :id AND state = 'SCHEDULED' AND epoch = 0
ORDER BY id

-- name: acquire_schedules
-- Due schedules without a live materializer lease, oldest next_due first. Runs in
-- BEGIN IMMEDIATE (the store's now is read once the write lock is held): no other
-- acquire interleaves. RETURNING has no order; the store sorts.
UPDATE schedules
SET materializer = :owner, lease_until = :now + :ttl
WHERE id IN (
    SELECT id FROM schedules
    WHERE next_due <= :now AND (lease_until IS NULL OR lease_until <= :now)
    ORDER BY next_due, id
    LIMIT :limit
)
RETURNING id, job, job_version, inputs, cron, every_us, timezone, dst_gap, dst_fold, misfire,
          misfire_grace_us, max_catch_up, overlap, start_at, end_at, max_attempts, priority,
          paused, watermark, next_due, materializer, lease_until, created_at, updated_at, queue,
          limit_key

-- name: materialize_fenced
-- The fence is the WHERE clause: same materializer, same lease_until (the lease
-- as acquired, not one taken again), still live. Returns the schedules whose
-- plan is accepted, as they stand after the change; the store inserts their
-- occurrences next. :items is a JSON array of
-- [id, materializer, lease_until, new watermark, next_due] with distinct ids.
UPDATE schedules
SET watermark = max(schedules.watermark, m.watermark), next_due = m.next_due,
    materializer = NULL, lease_until = NULL
FROM (
    SELECT json_extract(value, '$[0]') AS id,
           json_extract(value, '$[1]') AS materializer,
           json_extract(value, '$[2]') AS lease_until,
           json_extract(value, '$[3]') AS watermark,
           json_extract(value, '$[4]') AS next_due
    FROM json_each(:items)
) AS m
WHERE schedules.id = m.id
  AND schedules.materializer = m.materializer
  AND schedules.lease_until = m.lease_until
  AND schedules.lease_until > :now
RETURNING schedules.id, schedules.job, schedules.job_version, schedules.inputs, schedules.cron,
          schedules.every_us, schedules.timezone, schedules.dst_gap, schedules.dst_fold,
          schedules.misfire, schedules.misfire_grace_us, schedules.max_catch_up,
          schedules.overlap, schedules.start_at, schedules.end_at, schedules.max_attempts,
          schedules.priority, schedules.paused, schedules.watermark, schedules.next_due,
          schedules.materializer, schedules.lease_until, schedules.created_at,
          schedules.updated_at, schedules.queue, schedules.limit_key

-- name: release_schedules
-- Only a lease still held as acquired is given back. :ids, :materializers and
-- :lease_untils are JSON arrays of the same length, read side by side.
UPDATE schedules
SET materializer = NULL, lease_until = NULL
FROM (
    SELECT i.value AS id,
           json_extract(:materializers, '$[' || i.key || ']') AS materializer,
           json_extract(:lease_untils, '$[' || i.key || ']') AS lease_until
    FROM json_each(:ids) AS i
) AS m
WHERE schedules.id = m.id
  AND schedules.materializer = m.materializer
  AND schedules.lease_until = m.lease_until

-- name: executions_by_keys
SELECT * FROM execution_rows
WHERE idempotency_key IN (SELECT value FROM json_each(:keys))

-- name: insert_occurrence
-- A schedule's occurrence as a new execution (SCHEDULED, or already SKIPPED as
-- fencepost.domain.machine decided). executemany: ?1 id, ?2 job, ?3 job_version,
-- ?4 state, ?5 due_at, ?6 priority, ?7 max_attempts, ?8 idempotency_key,
-- ?9 schedule_id, ?10 slot, ?11 bucket, ?12 now, ?13 queue, ?14 limit_key, ?15 planned_at
-- (its due_at), ?16 slo_marks (BACKFILL for a caller's occurrence of a time past).
INSERT INTO executions (
    id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
    idempotency_key, schedule_id, slot, bucket, created_at, updated_at, queue, limit_key,
    planned_at, slo_marks
) VALUES (
    ?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, 0, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14, ?15, ?16
)

-- Reports and housekeeping. Times are microseconds, so differences of two
-- instants are durations in microseconds.

-- name: bucket_counts
SELECT bucket, count(*) FROM executions
WHERE state IN (SELECT value FROM json_each(:states))
GROUP BY bucket
ORDER BY bucket

-- name: stats
-- Every figure of Store.stats in one statement (one snapshot), in the columns of
-- PostgreSQL's: executions by job, queue and state as a JSON array of [job, queue,
-- state, count]; the due backlog (held occurrences, due_at >= :held, are not due);
-- the lease and error events in (:start, :now] (refusals, expiries: LEASE_EXPIRED
-- and takeovers, the refusals of heartbeats among them: :heartbeat_refused, their
-- audit reason, TIMED_OUT and FAILED), a scan of the audit trail (SQLite keeps no
-- index of it by time: see migrations/0005_housekeeping.sql); claim lateness; the
-- throttle records of the window per scope as a JSON array of [scope, count, held
-- µs]; and the late first claims, counted in the scan that counts by state: first
-- claimed in the window more than :claim_within after the planned time net of the
-- held time, backfills and replays (:excluded_marks) left out (the late_claim class,
-- fencepost.domain.slo.claim_verdict).
-- Claim lateness is against the execution's current due_at, clamped at 0: count,
-- the nearest-rank 50th, 90th and 99th percentiles as a JSON array, and the maximum,
-- all in SQL (nothing per claim reaches Python). The rank of fraction f of n values
-- is ceil(f * n) in floating point, exactly as PostgreSQL's percentile_disc computes
-- it, so that both backends pick the same value. Throttled claims are left out:
-- those of an execution with a throttle record in [due_at, claim], read from
-- (:lookback, :now] once (MATERIALIZED: SQLite then indexes it by execution for the
-- lookups; the table's own index is by time only). counts is read twice and
-- scanned once (MATERIALIZED).
WITH counts AS MATERIALIZED (
    SELECT job, queue, state, count(*) AS n,
           count(*) FILTER (WHERE first_claimed_at > :start AND first_claimed_at <= :now
                              AND first_claimed_at - planned_at - held_us > :claim_within
                              AND slo_marks & :excluded_marks = 0) AS late_claims
    FROM executions GROUP BY job, queue, state
),
events AS (
    SELECT count(*) FILTER (WHERE event = 'STALE_REFUSED') AS refused,
           count(*) FILTER (WHERE event = 'LEASE_EXPIRED'
                               OR (event = 'CLAIMED' AND from_state = 'RUNNING')) AS expiries,
           count(*) FILTER (WHERE event = 'STALE_REFUSED'
                              AND reason = :heartbeat_refused) AS heartbeats,
           count(*) FILTER (WHERE event = 'TIMED_OUT') AS timed_out,
           count(*) FILTER (WHERE event = 'FAILED') AS failed
    FROM transitions
    WHERE event IN ('CLAIMED', 'FAILED', 'LEASE_EXPIRED', 'STALE_REFUSED', 'TIMED_OUT')
      AND at > :start AND at <= :now
),
throttled AS MATERIALIZED (
    SELECT execution_id, at FROM throttles WHERE at > :lookback AND at <= :now
),
late AS (
    SELECT max(t.at - e.due_at, 0) AS v
    FROM transitions AS t JOIN executions AS e ON e.id = t.execution_id
    WHERE t.event = 'CLAIMED' AND t.at > :start AND t.at <= :now
      AND NOT EXISTS (
          SELECT 1 FROM throttled AS th
          WHERE th.execution_id = e.id AND th.at >= e.due_at AND th.at <= t.at
      )
),
ranked AS (
    SELECT v, row_number() OVER (ORDER BY v) AS rn, count(*) OVER () AS n FROM late
),
ranks AS (
    SELECT rn, v, n, 0.5 * n AS f50, 0.9 * n AS f90, 0.99 * n AS f99 FROM ranked
),
lateness AS (
    SELECT count(*) AS n,
           max(CASE WHEN rn = CAST(f50 AS INTEGER) + (f50 > CAST(f50 AS INTEGER)) THEN v END)
               AS p50,
           max(CASE WHEN rn = CAST(f90 AS INTEGER) + (f90 > CAST(f90 AS INTEGER)) THEN v END)
               AS p90,
           max(CASE WHEN rn = CAST(f99 AS INTEGER) + (f99 > CAST(f99 AS INTEGER)) THEN v END)
               AS p99,
           max(v) AS longest
    FROM ranks
)
SELECT
    (SELECT json_group_array(json_array(job, queue, state, n)) FROM counts),
    (SELECT count(*) FROM executions
     WHERE state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= :now AND due_at < :held),
    events.refused,
    events.expiries,
    lateness.n,
    CASE WHEN lateness.n > 0 THEN json_array(lateness.p50, lateness.p90, lateness.p99) END,
    lateness.longest,
    (SELECT json_group_array(json_array(scope, n, held))
     FROM (SELECT scope, count(*) AS n, sum(held_us) AS held FROM throttles
           WHERE at > :start AND at <= :now
           GROUP BY scope ORDER BY scope)),
    events.heartbeats,
    events.timed_out,
    events.failed,
    (SELECT coalesce(sum(late_claims), 0) FROM counts)
FROM events, lateness

-- name: due_groups
-- Store.unserved in one statement (one snapshot): the due executions (as
-- stats counts the due backlog) by job and pinned version, as a JSON array of [job,
-- job_version, count], read through executions_claimable (its WHERE clause
-- repeated); and the schedules not paused with a slot still to come (next_due < NEVER).
SELECT
    (SELECT json_group_array(json_array(job, job_version, n))
     FROM (SELECT job, job_version, count(*) AS n FROM executions
           WHERE state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= :now AND due_at < :held
           GROUP BY job, job_version)),
    (SELECT count(*) FROM schedules WHERE paused = 0 AND next_due < :never)

-- name: job_counts
-- Store.job_counts: executions created in (:start, :now] by job and current state.
-- Ids are time-ordered, so the window is a range of the primary key from
-- :first_id (the window's start less a slack for submitters' clocks); created_at
-- then decides. No index on created_at: every insert would pay for one.
SELECT job, state, count(*) FROM executions
WHERE id >= :first_id AND created_at > :start AND created_at <= :now
  AND (:job IS NULL OR job = :job)
GROUP BY job, state

-- fragment: slo_facts
-- The start of the SLO blocks: p, the objectives at :now, and facts, the counted
-- executions (not SKIPPED, not CANCELLED before a claim) with what their verdicts
-- are decided from, as the shared fragment slo_verdicts reads them. The block adds
-- the rows it reads to the WHERE clause, closes facts and includes slo_verdicts.
WITH p (now, claim_within, finish_within) AS (SELECT :now, :claim_within, :finish_within),
facts AS (
    SELECT e.id, e.job, e.state, e.planned_at, e.first_claimed_at, e.first_finished_at,
           e.held_us AS held, e.slo_marks AS marks
    FROM executions AS e
    WHERE e.state <> 'SKIPPED' AND (e.state <> 'CANCELLED' OR e.first_claimed_at IS NOT NULL)

-- name: slo
-- Store.slo's counts: the executions planned in [:since, :now] (:since is the
-- earlier of the window's start and the 6 h burn window's), each objective's
-- verdicts (NULL: undecided) with how many were planned at or after :start (the
-- window), :h6 and :h1. One scan of the executions: no index on planned_at (every
-- insert would pay for one; prune keeps the table to about the window). Grouped by
-- both verdicts first (a few dozen pairs), then each objective from those: a
-- third of the time of materializing the pairs and reading them twice.
-- include: slo_facts
      AND e.planned_at >= :since AND e.planned_at <= :now
),
-- include: slo_verdicts
,
pairs AS (
    SELECT claim_verdict, finish_verdict,
           sum(planned_at >= :start) AS in_window,
           sum(planned_at >= :h6) AS in_6h,
           sum(planned_at >= :h1) AS in_1h
    FROM verdicts
    GROUP BY claim_verdict, finish_verdict
),
objectives (objective) AS (VALUES ('claim'), ('finish'))
SELECT o.objective,
       CASE o.objective WHEN 'claim' THEN r.claim_verdict ELSE r.finish_verdict END AS verdict,
       sum(r.in_window), sum(r.in_6h), sum(r.in_1h)
FROM pairs AS r CROSS JOIN objectives AS o
GROUP BY o.objective, verdict

-- name: slo_worst
-- Store.slo's worst offenders: the :worst executions planned in [:start, :now] by
-- claim lateness (first claim, or :now while unclaimed, less the planned time; at
-- least 0), largest first, then planned time, then id.
-- include: slo_facts
      AND e.planned_at >= :start AND e.planned_at <= :now
),
-- include: slo_verdicts
SELECT id, job, planned_at, first_claimed_at,
       max(coalesce(first_claimed_at, :now) - planned_at, 0) AS lateness, state, claim_verdict
FROM verdicts
ORDER BY lateness DESC, planned_at, id
LIMIT :worst

-- name: slo_rollups_between
-- The verdicts prune rolled up for the UTC days [:first_day, :last_day].
SELECT objective, verdict, sum(count) FROM slo_rollups
WHERE day >= :first_day AND day <= :last_day
GROUP BY objective, verdict

-- name: slo_rollup
-- executemany, in the transaction of prune's batch, before its rows go: how many of
-- the batch's executions (see prunable) had each verdict, added to what earlier
-- prunes rolled up.
INSERT INTO slo_rollups (day, job, objective, verdict, count)
VALUES (:day, :job, :objective, :verdict, :count)
ON CONFLICT (day, job, objective, verdict) DO UPDATE SET count = count + excluded.count

-- name: count_prunable
-- What prune would delete (see prunable): rows created before the cutoff sort below
-- :before, so this reads a range of the primary key.
SELECT count(*) FROM executions
WHERE id < :before
  AND state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED') AND updated_at <= :cutoff

-- name: prunable
-- One batch of prune: finished executions unchanged since the cutoff. Ids are
-- time-ordered, so every row created before the cutoff sorts below :before; a
-- batch walks the primary key from :after (where the previous batch stopped), so
-- a prune reads each row once, with no index to maintain on the hot path.
-- With each id, what slo_rollups keeps of it: the UTC day of its planned time
-- (floored: days since 1970-01-01), its job, and its verdicts at the default
-- objectives (:claim_within, :finish_within) at the prune's :now, NULL when
-- undecided or not counted (SKIPPED, CANCELLED before a claim). Computed here, on
-- the rows this walk reads anyway: a second statement reading the batch again by
-- its ids made prune a third slower, this an eighth (bench/slo_report.py).
WITH p (now, claim_within, finish_within) AS (SELECT :now, :claim_within, :finish_within),
facts AS (
    SELECT e.id, e.job, e.state, e.planned_at, e.first_claimed_at, e.first_finished_at,
           e.held_us AS held, e.slo_marks AS marks,
           e.state = 'SKIPPED' OR (e.state = 'CANCELLED' AND e.first_claimed_at IS NULL)
               AS uncounted
    FROM executions AS e
    WHERE e.id > :after AND e.id < :before
      AND e.state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED') AND e.updated_at <= :cutoff
),
-- include: slo_verdicts
SELECT id, planned_at / 86400000000 - (planned_at % 86400000000 < 0), job,
       CASE WHEN NOT uncounted THEN claim_verdict END,
       CASE WHEN NOT uncounted THEN finish_verdict END
FROM verdicts
ORDER BY id
LIMIT :batch

-- name: prune_commands
DELETE FROM commands WHERE execution_id IN (SELECT value FROM json_each(:ids))

-- name: prune_transitions
DELETE FROM transitions WHERE execution_id IN (SELECT value FROM json_each(:ids))

-- name: prune_execution_data
DELETE FROM execution_data WHERE execution_id IN (SELECT value FROM json_each(:ids))

-- name: prune_executions
DELETE FROM executions WHERE id IN (SELECT value FROM json_each(:ids))

-- name: insert_job
-- A published entry is immutable: one already stored is left as it is (the caller
-- compares digests with select_job_entry afterwards, in the same transaction).
INSERT INTO job_catalogue (name, version, digest, definition, published_at)
VALUES (:name, :version, :digest, :definition, :now)
ON CONFLICT (name, version) DO NOTHING

-- name: select_job_entry
SELECT name, version, digest, definition, published_at
FROM job_catalogue
WHERE name = :name AND version = :version

-- name: select_catalogue
SELECT name, version, digest, definition, published_at
FROM job_catalogue
ORDER BY name, version

-- name: catalogue_keys
SELECT name, version FROM job_catalogue

-- name: unpublished_jobs
-- The jobs that work submitted before their publication waits for (both through
-- their partial index or a small table).
SELECT job FROM executions WHERE unset_defaults IS NOT NULL
UNION
SELECT job FROM schedules WHERE unset_defaults IS NOT NULL

-- name: adopt_execution_defaults
-- The published defaults of :job fill in what the submitters of its unfinished
-- executions left out (a NULL default leaves the store's); never fewer attempts than
-- the one already made.
UPDATE executions
SET max_attempts = CASE WHEN :max_attempts IS NOT NULL AND instr(unset_defaults, 'max_attempts')
                        THEN max(:max_attempts, attempt) ELSE max_attempts END,
    timeout_us = CASE WHEN :timeout IS NOT NULL AND instr(unset_defaults, 'timeout')
                      THEN :timeout ELSE timeout_us END,
    priority = CASE WHEN :priority IS NOT NULL AND instr(unset_defaults, 'priority')
                    THEN :priority ELSE priority END,
    queue = CASE WHEN :queue IS NOT NULL AND instr(unset_defaults, 'queue')
                 THEN :queue ELSE queue END,
    unset_defaults = NULL
WHERE job = :job AND unset_defaults IS NOT NULL AND state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')

-- name: forget_unset_defaults
-- Finished executions keep what they ran with.
UPDATE executions SET unset_defaults = NULL WHERE job = :job AND unset_defaults IS NOT NULL

-- name: adopt_schedule_defaults
UPDATE schedules
SET max_attempts = CASE WHEN :max_attempts IS NOT NULL AND instr(unset_defaults, 'max_attempts')
                        THEN :max_attempts ELSE max_attempts END,
    priority = CASE WHEN :priority IS NOT NULL AND instr(unset_defaults, 'priority')
                    THEN :priority ELSE priority END,
    queue = CASE WHEN :queue IS NOT NULL AND instr(unset_defaults, 'queue')
                 THEN :queue ELSE queue END,
    unset_defaults = NULL
WHERE job = :job AND unset_defaults IS NOT NULL

-- name: mark_schedule_unset
UPDATE schedules SET unset_defaults = :unset WHERE id = :id AND job_version IS NULL

-- name: main_database_file
-- The file of a caller's connection (Store.submit(connection=...)): '' when in memory.
SELECT file FROM pragma_database_list WHERE name = 'main'

-- name: watched_executions
-- The waits' watcher (Store.wait), one query per poll for every waited-for id
-- (:ids, a JSON array): those finished, and those of :fresh (ids whose waiters
-- just arrived) whatever their state, so that an unknown id is known as such.
SELECT * FROM execution_rows
WHERE id IN (SELECT value FROM json_each(:ids))
  AND (state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
       OR id IN (SELECT value FROM json_each(:fresh)))

-- Flow control (fencepost.store.flow): limits, paused queues, token buckets, throttles.
-- SQLite has one writer: a limited claim's write transaction alone serializes it.

-- fragment: limit_columns
scope, rate_count, rate_period, burst, concurrency, per_key, paused, source, updated_by,
updated_at

-- name: flow_limits
SELECT
-- include: limit_columns
FROM flow_limits ORDER BY scope

-- name: flow_limits_locked
SELECT
-- include: limit_columns
FROM flow_limits ORDER BY scope

-- name: flow_running
-- Live leases per (scope, key) of the limits with a concurrency (:scopes, their
-- kinds, names and per_key flags, as JSON arrays of one length): RUNNING with
-- lease_until > now, through the executions_leased index.
SELECT json_extract(:scopes, '$[' || l.key || ']'),
       CASE WHEN json_extract(:per_keys, '$[' || l.key || ']') THEN coalesce(e.limit_key, '')
            ELSE '' END,
       count(*)
FROM json_each(:names) AS l
JOIN executions AS e
  ON e.state = 'RUNNING' AND e.lease_until > :now
 AND (CASE WHEN json_extract(:kinds, '$[' || l.key || ']') = 'job' THEN e.job ELSE e.queue END)
     = l.value
GROUP BY 1, 2

-- name: flow_buckets_held
SELECT scope, key, tokens, at, denied_at FROM flow_buckets
WHERE scope IN (SELECT value FROM json_each(:scopes)) AND (key = '' OR ready_at > :now)

-- name: flow_buckets_of
SELECT b.scope, b.key, b.tokens, b.at, b.denied_at
FROM json_each(:scopes) AS s
JOIN json_each(:keys) AS k ON k.key = s.key
JOIN flow_buckets AS b ON b.scope = s.value AND b.key = k.value

-- fragment: flow_filters
      AND (:queues IS NULL OR e.queue IN (SELECT value FROM json_each(:queues)))
      AND e.job NOT IN (SELECT value FROM json_each(:held_jobs))
      AND e.queue NOT IN (SELECT value FROM json_each(:held_queues))
      AND (e.job || char(31) || coalesce(e.limit_key, ''))
          NOT IN (SELECT value FROM json_each(:held_job_keys))
      AND (e.queue || char(31) || coalesce(e.limit_key, ''))
          NOT IN (SELECT value FROM json_each(:held_queue_keys))

-- name: flow_candidates
-- Claimable executions of one queue (:queue; the store asks each live queue in turn
-- and merges, as claim_candidates_queue) in claim order: due waiting ones through
-- executions_claimable, then expired leases with attempts left; within the claim's
-- filters, leaving out the paused and spent scopes and keys (:held_*; a key pair is
-- name || char(31) || key). Rows: id, job, queue, limit_key, due_at, priority. As in
-- claim_candidates_queue, no ORDER BY over the union (the store merges): it made
-- SQLite sort every due row in a temporary B-tree.
SELECT * FROM (
    SELECT e.id, e.job, e.queue, e.limit_key, e.due_at, e.priority
    FROM executions AS e
    WHERE e.queue = :queue AND e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= :now
      -- include: claim_filters
      -- include: flow_filters
      -- The claim's max_per_bucket (:cap): none of a bucket already at its cap.
      AND (:cap IS NULL OR (
          SELECT count(*) FROM executions AS r WHERE r.bucket = e.bucket AND r.state = 'RUNNING'
      ) < :cap)
    ORDER BY e.priority DESC, e.due_at, e.id
    LIMIT :n
)
UNION ALL
SELECT * FROM (
    SELECT e.id, e.job, e.queue, e.limit_key, e.due_at, e.priority
    FROM executions AS e
    WHERE e.state = 'RUNNING' AND e.lease_until <= :now AND e.attempt < e.max_attempts
      AND e.queue = :queue
      -- include: claim_filters
      -- include: flow_filters
    ORDER BY e.lease_until
    LIMIT :n
)

-- name: flow_put_bucket
-- executemany.
INSERT INTO flow_buckets (scope, key, tokens, at, ready_at, denied_at)
VALUES (:scope, :key, :tokens, :at, :ready_at, :denied_at)
ON CONFLICT (scope, key) DO UPDATE
SET tokens = excluded.tokens, at = excluded.at, ready_at = excluded.ready_at,
    denied_at = excluded.denied_at

-- name: flow_put_throttle
-- executemany.
INSERT INTO throttles (execution_id, scope, held_us, at) VALUES (:id, :scope, :held, :at)

-- name: flow_hold
-- executemany, with flow_put_throttle's rows (after the lease): a throttled first
-- claim's held time kept on its execution (the lateness a limit excuses,
-- fencepost.domain.slo). First claims only (epoch 1 after it): a hold of a retry must
-- not excuse a late first claim. The larger, not the sum: a pause's record at the
-- resume and the claim's record after it measure the same wait from the same due_at.
UPDATE executions SET held_us = max(held_us, :held) WHERE id = :id AND epoch = 1

-- name: flow_set_limit
INSERT INTO flow_limits (
-- include: limit_columns
) VALUES (
    :scope, :rate_count, :rate_period, :burst, :concurrency, :per_key, 0, 'operator',
    :updated_by, :now
)
ON CONFLICT (scope) DO UPDATE
SET rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    burst = excluded.burst, concurrency = excluded.concurrency, per_key = excluded.per_key,
    source = 'operator', updated_by = excluded.updated_by, updated_at = excluded.updated_at
RETURNING
-- include: limit_columns

-- name: flow_declare_limit
INSERT INTO flow_limits AS f (
-- include: limit_columns
) VALUES (
    :scope, :rate_count, :rate_period, :burst, :concurrency, :per_key, 0, 'code',
    :updated_by, :now
)
ON CONFLICT (scope) DO UPDATE
SET rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    burst = excluded.burst, concurrency = excluded.concurrency, per_key = excluded.per_key,
    updated_by = excluded.updated_by, updated_at = excluded.updated_at
WHERE f.source = 'code' AND NOT f.paused
  AND (f.rate_count IS NOT excluded.rate_count OR f.rate_period IS NOT excluded.rate_period
       OR f.burst IS NOT excluded.burst OR f.concurrency IS NOT excluded.concurrency
       OR f.per_key IS NOT excluded.per_key)
RETURNING scope

-- name: flow_get_limit
SELECT
-- include: limit_columns
FROM flow_limits WHERE scope = :scope

-- name: flow_clear_limit
UPDATE flow_limits
SET rate_count = NULL, rate_period = NULL, burst = NULL, concurrency = NULL, per_key = 0
WHERE scope = :scope

-- name: flow_delete_limit
DELETE FROM flow_limits WHERE scope = :scope

-- name: flow_pause
INSERT INTO flow_limits (scope, paused, source, updated_by, updated_at)
VALUES (:scope, 1, 'operator', :updated_by, :now)
ON CONFLICT (scope) DO UPDATE
SET paused = 1, updated_by = excluded.updated_by, updated_at = excluded.updated_at

-- name: flow_unpause
UPDATE flow_limits SET paused = 0, updated_by = :updated_by, updated_at = :now
WHERE scope = :scope

-- name: flow_resume_throttles
INSERT INTO throttles (execution_id, scope, held_us, at)
SELECT e.id, :scope, :now - max(e.due_at, :since), :now
FROM executions AS e
WHERE e.queue = :queue AND e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= :now

-- name: flow_resume_held
-- With flow_resume_throttles, the same executions: the time the pause held each one
-- kept as its held time (as flow_hold keeps a limited claim's), for those never
-- claimed (epoch 0) only, the larger of the two (see flow_hold).
UPDATE executions SET held_us = max(held_us, :now - max(due_at, :since))
WHERE queue = :queue AND state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= :now
  AND epoch = 0

-- name: flow_add_totals
-- executemany: one scope's throttled claims of a write, added to its totals.
INSERT INTO throttle_totals (scope, count, held_us) VALUES (:scope, :count, :held)
ON CONFLICT (scope) DO UPDATE
SET count = count + excluded.count, held_us = held_us + excluded.held_us

-- name: flow_resume_totals
-- flow_resume_throttles' records (this resume's scope, at its now), added to the totals.
INSERT INTO throttle_totals (scope, count, held_us)
SELECT scope, count(*), sum(held_us) FROM throttles WHERE scope = :scope AND at = :now
GROUP BY scope
ON CONFLICT (scope) DO UPDATE
SET count = throttle_totals.count + excluded.count,
    held_us = throttle_totals.held_us + excluded.held_us

-- name: flow_throttle_totals
SELECT scope, count, held_us / 1e6 FROM throttle_totals ORDER BY scope

-- name: flow_log_change
INSERT INTO flow_changes (at, actor, action, scope, detail)
VALUES (:now, :actor, :action, :scope, :detail)

-- name: flow_changes
SELECT at, actor, action, scope, detail FROM flow_changes ORDER BY seq DESC LIMIT :limit

-- name: flow_throttled
SELECT scope, count(*), coalesce(sum(held_us), 0) / 1e6
FROM throttles WHERE at >= :since
GROUP BY scope ORDER BY scope

-- name: flow_throttles_of
-- One execution's throttle records (Store.throttles), through throttles_execution.
SELECT execution_id, scope, held_us, at FROM throttles WHERE execution_id = :id ORDER BY at

-- name: flow_prune_throttles
DELETE FROM throttles WHERE at <= :cutoff

-- name: flow_prune_buckets
-- With a prune (same cutoff): the buckets that are full again and held nothing back
-- since it (a missing bucket is a full one), or whose scope has no limit any more.
DELETE FROM flow_buckets
WHERE (denied_at IS NULL OR denied_at <= :cutoff)
  AND NOT EXISTS (
      SELECT 1 FROM flow_limits AS l
      WHERE l.scope = flow_buckets.scope AND l.rate_count IS NOT NULL
        AND flow_buckets.tokens + (:now - flow_buckets.at) / 1e6 * l.rate_count / l.rate_period
            < l.burst
  )


-- History charts (fencepost.store.history, store/sqlhistory.py): minute rows rolled
-- up from finished executions and throttle records, and the windows read from them.

-- name: history_watermark
-- The roll-up's watermark (store.history), read first in the roll-up's BEGIN
-- IMMEDIATE, which holds the file's write lock: no other roll-up reads or moves it
-- until this one commits.
SELECT finished_at, finished_id, throttled_at FROM history_watermark WHERE id = 1

-- name: history_watermark_nowait
-- As history_watermark: BEGIN IMMEDIATE has already waited for the write lock
-- (SQLite has no row lock to skip).
SELECT finished_at, finished_id, throttled_at FROM history_watermark WHERE id = 1

-- name: history_read_watermark
-- The watermark as committed, for a chart's rolled_up_to.
SELECT finished_at, finished_id, throttled_at FROM history_watermark WHERE id = 1

-- name: history_make_watermark
-- The watermark's one row, as migration made it, if it is gone.
INSERT INTO history_watermark (id) VALUES (1) ON CONFLICT (id) DO NOTHING

-- name: history_finished
-- One roll-up's finished executions after the watermark, oldest finish first, through
-- executions_finished (whose WHERE clause this one repeats word for word).
SELECT e.id, e.updated_at, e.job, e.queue, e.state, e.attempt, e.planned_at,
       e.first_claimed_at, e.first_finished_at, e.held_us, e.slo_marks
FROM executions AS e
WHERE e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
  AND (e.updated_at, e.id) > (:after_at, :after_id)
  AND e.updated_at < :until
ORDER BY e.updated_at, e.id
LIMIT :limit

-- name: history_throttled
-- The throttle records of [since, until) by minute, with their execution's job and
-- queue (through throttles_at; records of executions already gone are left out).
SELECT t.at / 60000000 AS minute, e.job, e.queue, sum(t.held_us)
FROM throttles AS t JOIN executions AS e ON e.id = t.execution_id
WHERE t.at >= :since AND t.at < :until
GROUP BY 1, e.job, e.queue

-- name: history_add
-- executemany: one row's increments (of one span: store.sqlhistory), added to what it holds.
INSERT INTO history_minutes AS m (
    span_minutes, minute, job, queue,
-- include: history_columns
) VALUES (
    :span_minutes, :minute, :job, :queue, :succeeded, :dead, :retried, :timed_out, :cancelled,
    :skipped, :claims, :late_0, :late_1, :late_2, :late_3, :late_4, :late_5, :late_6,
    :late_7, :late_8, :late_9, :late_10, :late_11, :late_12, :late_13, :late_14,
    :late_15, :late_16, :late_17, :throttled_us, :claim_counted, :claim_missed,
    :finish_counted, :finish_missed
)
ON CONFLICT (span_minutes, minute, job, queue) DO UPDATE SET
-- include: history_add_counters

-- name: history_advance
UPDATE history_watermark
SET finished_at = :finished_at, finished_id = :finished_id, throttled_at = :throttled_at
WHERE id = 1

-- name: history_points
-- A window's rows of its step's span (per_point minutes) in [first, last), one per
-- step and key, summed per step (its index from the window's start), through the
-- primary key.
SELECT (minute - :first) / :per_point AS step,
-- include: history_sums
FROM history_minutes
WHERE span_minutes = :per_point AND minute >= :first AND minute < :last
GROUP BY 1

-- name: history_points_job
-- history_points of one job, through history_minutes_job (named: this store keeps no
-- statistics, and without them SQLite reads the primary key's whole window instead).
SELECT (minute - :first) / :per_point AS step,
-- include: history_sums
FROM history_minutes INDEXED BY history_minutes_job
WHERE job = :job AND span_minutes = :per_point AND minute >= :first AND minute < :last
GROUP BY 1

-- name: history_points_queue
-- history_points of one queue, through history_minutes_queue (see history_points_job).
SELECT (minute - :first) / :per_point AS step,
-- include: history_sums
FROM history_minutes INDEXED BY history_minutes_queue
WHERE queue = :queue AND span_minutes = :per_point AND minute >= :first AND minute < :last
GROUP BY 1

-- name: history_points_job_queue
-- history_points of one job in one queue, through history_minutes_job.
SELECT (minute - :first) / :per_point AS step,
-- include: history_sums
FROM history_minutes INDEXED BY history_minutes_job
WHERE job = :job AND queue = :queue AND span_minutes = :per_point
  AND minute >= :first AND minute < :last
GROUP BY 1

-- name: history_by_job
-- A window's minute rows summed per job.
SELECT job,
-- include: history_sums
FROM history_minutes
WHERE span_minutes = :per_point AND minute >= :first AND minute < :last
GROUP BY job

-- name: history_by_queue
-- A window's minute rows summed per queue.
SELECT queue,
-- include: history_sums
FROM history_minutes
WHERE span_minutes = :per_point AND minute >= :first AND minute < :last
GROUP BY queue

-- name: history_prune
-- With prune: the rows past their retention, of every span (:spans, a JSON array).
DELETE FROM history_minutes
WHERE span_minutes IN (SELECT value FROM json_each(:spans)) AND minute < :before

-- Deleting one execution (Store.delete, and a bulk delete: fencepost.store.bulk).
-- Its rows go as prune's do (prune_commands, prune_transitions, prune_execution_data,
-- prune_executions, given one id), its throttle records too, and a record stays.

-- name: deletable
-- The finished execution :id about to be deleted, with what slo_rollups keeps of it,
-- as prunable gives it for a batch: the UTC day of its planned time, its job, and its
-- verdicts at the default objectives at :now (NULL when undecided or not counted).
WITH p (now, claim_within, finish_within) AS (SELECT :now, :claim_within, :finish_within),
facts AS (
    SELECT e.id, e.job, e.state, e.planned_at, e.first_claimed_at, e.first_finished_at,
           e.held_us AS held, e.slo_marks AS marks,
           e.state = 'SKIPPED' OR (e.state = 'CANCELLED' AND e.first_claimed_at IS NULL)
               AS uncounted
    FROM executions AS e
    WHERE e.id = :id AND e.state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED')
),
-- include: slo_verdicts
SELECT id, planned_at / 86400000000 - (planned_at % 86400000000 < 0), job,
       CASE WHEN NOT uncounted THEN claim_verdict END,
       CASE WHEN NOT uncounted THEN finish_verdict END
FROM verdicts

-- name: delete_throttles
-- Through throttles_execution (migration 16).
DELETE FROM throttles WHERE execution_id IN (SELECT value FROM json_each(:ids))

-- name: insert_deletion
INSERT INTO deletions (execution_id, job, queue, state, actor, at)
VALUES (:execution_id, :job, :queue, :state, :actor, :at)

-- name: select_deletions
-- Store.deletions: oldest first, after the record numbered :after (0: from the first).
SELECT seq, execution_id, job, queue, state, actor, at FROM deletions
WHERE seq > :after
ORDER BY seq
LIMIT :limit

-- name: prune_deletions
-- With a prune (same cutoff): the records of deletions made at or before it.
DELETE FROM deletions WHERE at <= :cutoff

-- Every statement the PostgreSQL backend runs. Parameters are psycopg's %(name)s.
--
-- Time: every statement that decides anything about a lease reads
-- coalesce(%(now)s, clock_timestamp()) once, in a `clock` CTE. In production
-- %(now)s is NULL and the server's clock arbitrates; tests pin it with a
-- ManualClock. A worker's own clock never enters a lease decision.

-- name: configure_session
-- Every pooled connection: UTC timestamps, no JIT, the store's schema when one is
-- named, and the idle-in-transaction timeout when one is set (see connection.py's
-- IDLE_IN_TRANSACTION). (Behind a transaction pooler, per transaction instead:
-- connection.begin_statement.)
-- JIT compiles a plan whose estimated cost passes jit_above_cost; fencepost's
-- statements touch a few hundred rows at most, and a claim of 256 whose estimate
-- crossed it spent 60-490 ms compiling, ten times its run.
SELECT set_config('TimeZone', 'UTC', false), set_config('jit', 'off', false),
       set_config('search_path', coalesce(%(schema)s, current_setting('search_path')), false),
       set_config('idle_in_transaction_session_timeout',
                  coalesce(%(idle)s, current_setting('idle_in_transaction_session_timeout')),
                  false)

-- name: backend_pid
-- The server's process id of this connection: a pooler hands its clients another.
SELECT pg_backend_pid()

-- name: listen
-- {channel} is filled in with psycopg.sql.Identifier: LISTEN takes no parameters.
LISTEN {channel}

-- name: lock_migrations
-- Concurrent starts queue here; the first applies, the others find nothing to do.
SELECT pg_advisory_xact_lock(hashtext('fencepost.migrate:' || current_schema()))

-- name: has_migrations_table
-- In the store's schema (the search_path): without creating anything.
SELECT to_regclass('fencepost_migrations') IS NOT NULL

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS fencepost_migrations (
    version    INTEGER     NOT NULL PRIMARY KEY,
    name       TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
)

-- name: applied_migrations
SELECT version FROM fencepost_migrations ORDER BY version

-- name: record_migration
INSERT INTO fencepost_migrations (version, name) VALUES (%(version)s, %(name)s)

-- name: record_num_buckets
-- The bucket count of the first process that migrates (migrations/0013_settings.sql),
-- under the migration lock; a count already recorded stays.
INSERT INTO fencepost_settings (id, num_buckets) VALUES (1, %(num_buckets)s)
ON CONFLICT (id) DO NOTHING

-- name: recorded_num_buckets
SELECT num_buckets FROM fencepost_settings WHERE id = 1

-- name: set_num_buckets
-- A resize (Store.resize_buckets), in the transaction that moves the executions.
INSERT INTO fencepost_settings (id, num_buckets) VALUES (1, %(num_buckets)s)
ON CONFLICT (id) DO UPDATE SET num_buckets = excluded.num_buckets, changed_at = clock_timestamp()

-- name: lock_executions_for_resize
-- Writers wait (readers do not) while a resize moves every unfinished execution, so
-- that none committed before it ends keeps the bucket of the previous count.
LOCK TABLE executions IN EXCLUSIVE MODE

-- name: unfinished_buckets
-- What a resize moves: each unfinished execution, with what its bucket is made from.
SELECT id, bucket_key, bucket FROM executions
WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')

-- name: move_to_buckets
UPDATE executions AS e SET bucket = m.bucket
FROM unnest(%(ids)s::uuid[], %(buckets)s::integer[]) AS m (id, bucket)
WHERE e.id = m.id

-- name: find_store_schema
-- Where a URL that names no schema finds the store (store/postgres/schemas.py): whether
-- the default schema %(schema)s holds fencepost's tables, and else the schema in which the
-- role's own search_path finds them (an earlier fencepost's install, normally public).
SELECT to_regclass(quote_ident(%(schema)s) || '.fencepost_migrations') IS NOT NULL,
       (SELECT n.nspname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
        WHERE c.oid = to_regclass('fencepost_migrations'))

-- name: schema_state
-- Whether schema %(schema)s exists, and the role and database (named by its errors).
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %(schema)s),
       current_user, current_database()

-- name: moved_to
-- The mark a move left in the schema's fencepost_migrations (None: not moved away).
SELECT name FROM fencepost_migrations WHERE version = %(version)s

-- name: store_relations
-- What a move takes from schema %(schema)s: the tables and views named %(names)s and every
-- partition of them (indexes, constraints and owned sequences go with their tables).
WITH named AS (
    SELECT c.oid FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = %(schema)s AND c.relname = ANY(%(names)s) AND c.relkind IN ('r', 'p', 'v')
)
SELECT c.relname, c.relkind FROM pg_class AS c
WHERE c.oid IN (SELECT oid FROM named)
   OR c.oid IN (SELECT i.inhrelid FROM pg_inherits AS i JOIN named ON named.oid = i.inhparent)
ORDER BY c.relname

-- name: store_statistics
-- The extended statistics named %(names)s in schema %(schema)s (a table's move leaves them).
SELECT s.stxname FROM pg_statistic_ext AS s JOIN pg_namespace AS n ON n.oid = s.stxnamespace
WHERE n.nspname = %(schema)s AND s.stxname = ANY(%(names)s)
ORDER BY s.stxname

-- name: store_now
SELECT coalesce(%(now)s::timestamptz, clock_timestamp())

-- name: insert_executions
-- One round trip for a whole batch, returning one row: the store's now (every
-- item's created_at, and the origin of every delay) and the ids of the keyed
-- executions inserted. Rows whose idempotency key already exists are skipped (their
-- key's ON CONFLICT); the store then compares them with the request. Rows without a key
-- cannot conflict, so they take a plain INSERT: ON CONFLICT inserts each row
-- speculatively and confirms it with a second write, which cost a third of the
-- statement. The arrays travel in binary: quoting thirteen arrays of 1,000 as
-- text, and parsing them again, cost more than the inserts.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
-- The planned time is the due_at inserted; one more than %(backfill_slack)s before now
-- is a backfill (fencepost.domain.slo.is_backfill: Mark.BACKFILL, 16).
new AS (
    SELECT n.*, coalesce(n.execute_at, clock.now + n.delay) AS due_at, clock.now AS created_at,
           CASE WHEN coalesce(n.execute_at, clock.now + n.delay)
                     < clock.now - %(backfill_slack)s::interval
                THEN 16 ELSE 0 END AS marks
    FROM clock, unnest(
        %(ids)b::uuid[], %(jobs)b::text[], %(job_versions)b::integer[],
        %(execute_ats)b::timestamptz[], %(delays)b::interval[], %(priorities)b::integer[],
        %(max_attempts)b::integer[], %(timeouts)b::interval[], %(keys)b::text[],
        %(hashes)b::text[], %(buckets)b::integer[], %(bucket_keys)b::text[],
        %(inputs)b::jsonb[], %(queues)b::text[], %(trace_contexts)b::text[],
        %(unset_defaults)b::text[], %(limit_keys)b::text[]
    ) AS n(id, job, job_version, execute_at, delay, priority, max_attempts, timeout,
           idempotency_key, request_hash, bucket, bucket_key, inputs, queue, trace_context,
           unset_defaults, limit_key)
),
unkeyed AS (
    INSERT INTO executions (
        id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
        timeout, idempotency_key, request_hash, bucket, bucket_key, created_at, updated_at,
        queue, trace_context, unset_defaults, limit_key, planned_at, slo_marks
    )
    SELECT id, job, job_version, 'SCHEDULED', due_at, priority, 0, max_attempts, 0,
           timeout, NULL, NULL, bucket, bucket_key, created_at, created_at, queue, trace_context,
           unset_defaults, limit_key, due_at, marks
    FROM new WHERE idempotency_key IS NULL
),
-- A key is claimed in execution_keys (unique across the history's partitions,
-- see migration 10); only the executions whose key this statement claimed are
-- inserted. In key order, so that two batches racing for the same keys wait for
-- each other rather than deadlock.
claimed AS (
    INSERT INTO execution_keys (key, execution_id)
    SELECT idempotency_key, id FROM new WHERE idempotency_key IS NOT NULL
    ORDER BY idempotency_key
    ON CONFLICT (key) DO NOTHING
    RETURNING execution_id AS id
),
keyed AS (
    INSERT INTO executions (
        id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
        timeout, idempotency_key, request_hash, bucket, bucket_key, created_at, updated_at,
        queue, trace_context, unset_defaults, limit_key, planned_at, slo_marks
    )
    SELECT id, job, job_version, 'SCHEDULED', due_at, priority, 0, max_attempts, 0,
           timeout, idempotency_key, request_hash, bucket, bucket_key, created_at, created_at,
           queue, trace_context, unset_defaults, limit_key, due_at, marks
    FROM new JOIN claimed USING (id)
    RETURNING id
),
inserted AS (
    SELECT id, inputs, created_at FROM new WHERE idempotency_key IS NULL
    UNION ALL
    SELECT new.id, new.inputs, new.created_at FROM new JOIN keyed USING (id)
),
data AS (
    INSERT INTO execution_data (execution_id, inputs) SELECT id, inputs FROM inserted
),
audit AS (
    INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, at)
    SELECT id, 'SUBMITTED', NULL, 'SCHEDULED', 0, %(actor)s::text, created_at FROM inserted
),
-- Wake idle workers: one notification per batch, delivered when this
-- transaction commits, and only when the store's debounce allows (%(notify)s).
-- Never a per-row trigger: each NOTIFY takes a global lock at commit.
woken AS (
    SELECT pg_notify(%(channel)s, '') AS sent
    WHERE %(notify)s AND EXISTS (SELECT 1 FROM inserted)
)
SELECT clock.now, ARRAY(SELECT id FROM keyed)
FROM clock LEFT JOIN woken ON true

-- name: analyze_sample
-- The store's own ANALYZE (analyze_executions, in the same transaction) samples
-- 3,000 rows instead of the default 30,000: about 15 ms instead of 200 on a table
-- of 50,000 executions. What the claim's plans depend on, how many rows are in
-- each state, a sample of 3,000 tells as well; autovacuum's ANALYZE samples as
-- configured. (set_config(..., true) is SET LOCAL: until the transaction ends.)
SELECT set_config('default_statistics_target', '10', true)

-- name: newest_partition
-- The partition a row was stored in: the store's ANALYZE reads the partition that
-- received its inserts, not the whole history.
SELECT tableoid::regclass::text FROM executions WHERE id = %(id)s::uuid

-- name: find_idempotency_keys
-- Through execution_keys: a key names its execution's id, and the id one partition.
SELECT e.idempotency_key, e.id, e.request_hash
FROM execution_keys AS k JOIN executions AS e ON e.id = k.execution_id
WHERE k.key = ANY(%(keys)s::text[])

-- name: day_being_pruned
-- Whether the day of history whose executions partition is named %(name)s is being
-- pruned: the table exists but is no longer (or, DETACH ... CONCURRENTLY under way, no
-- longer wholly) a partition of executions. See history.drop_finished_days.
SELECT EXISTS (
    SELECT 1 FROM pg_class AS c
    WHERE c.oid = to_regclass(%(name)s)
      AND NOT EXISTS (
          SELECT 1 FROM pg_inherits AS i
          WHERE i.inhrelid = c.oid AND i.inhparent = 'executions'::regclass
            AND NOT i.inhdetachpending
      )
)

-- name: submitted_before
-- A retried submit (its connection was lost, maybe during COMMIT): which of its
-- ids an earlier attempt stored, and that attempt's now (every row of one insert
-- has the same created_at). No row found: the earlier attempt did not commit.
SELECT count(*), min(created_at),
       coalesce(array_agg(id) FILTER (WHERE idempotency_key IS NOT NULL), '{}')
FROM executions
WHERE id = ANY(%(ids)s::uuid[])

-- name: ended_by_holders
-- A retried fenced write (its connection was lost, maybe during COMMIT): the
-- leases (id, owner, epoch) that their own holder ended from RUNNING with one of
-- %(events)s. Only that holder's call writes such a record, so a refused retry
-- that finds one was preceded by its own accepted, committed attempt.
SELECT DISTINCT f.id, f.owner, f.epoch
FROM unnest(%(ids)s::uuid[], %(owners)s::text[], %(epochs)s::bigint[]) AS f(id, owner, epoch)
JOIN transitions AS t ON t.execution_id = f.id
WHERE t.epoch = f.epoch AND t.actor = f.owner
  AND t.from_state = 'RUNNING' AND t.event = ANY(%(events)s::text[])

-- name: get_execution
SELECT * FROM execution_rows WHERE id = %(id)s::uuid

-- name: find_execution
-- By idempotency key (a submit's, or a materialized occurrence's): execution_keys.
SELECT r.* FROM execution_keys AS k JOIN execution_rows AS r ON r.id = k.execution_id
WHERE k.key = %(key)s

-- name: lock_execution
-- Read-decide-write verbs (fail, cancel, replay) hold the row until they commit.
SELECT * FROM execution_rows WHERE id = %(id)s::uuid FOR UPDATE

-- fragment: query_filters
-- The state, job, queue, limit key, owner, error and attempt outcome filters of
-- Store.query, in every query_* and count_* block (each reads execution_rows
-- unaliased, or executions under that name). An owner holds RUNNING rows only. The
-- error is a LIKE pattern (percent signs, underscores and backslashes escaped by
-- fencepost.store.values.like_pattern), matched by ILIKE in the C collation, which
-- folds ASCII letters only, as SQLite's LIKE does (the memory store: ascii_lower).
-- An attempt ended with the outcome when a transition from RUNNING has one of
-- %(outcome_events)s (fencepost.domain.machine.ending_events): one probe of transitions_execution per
-- row the other filters kept, in the one partition holding that execution's trail
-- (pruned at run time). OFFSET 0 keeps it that: without it the planner may hash
-- the subquery instead, reading every partition's matching transitions to fill a
-- page the probes fill after a few rows.
  AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s::text[]))
  AND (%(job)s::text IS NULL OR job = %(job)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(limit_key)s::text IS NULL OR limit_key = %(limit_key)s::text)
  AND (%(owner)s::text IS NULL OR (state = 'RUNNING' AND lease_owner = %(owner)s::text))
  AND (%(error)s::text IS NULL OR EXISTS (
      SELECT 1 FROM execution_data AS d
      WHERE d.execution_id = execution_rows.id
        AND d.error COLLATE "C" ILIKE %(error)s::text ESCAPE '\'
  ))
  AND (%(outcome_events)s::text[] IS NULL OR EXISTS (
      SELECT 1 FROM transitions AS t
      WHERE t.execution_id = execution_rows.id AND t.from_state = 'RUNNING'
        AND t.event = ANY(%(outcome_events)s::text[])
      OFFSET 0
  ))

-- fragment: query_ranges
-- The bucket, due_at, created_at and finish time filters of Store.query, in every
-- query_* and count_* block. The ids of the creation range (%(id_above)s,
-- %(id_below)s) bound the primary key in each block (and so the partitions read);
-- created_at then decides. A finished row's updated_at is its finish time.
  AND (%(bucket)s::integer IS NULL OR bucket = %(bucket)s::integer)
  AND (%(buckets)s::integer[] IS NULL OR bucket = ANY(%(buckets)s::integer[]))
  AND (%(due_after)s::timestamptz IS NULL OR due_at >= %(due_after)s::timestamptz)
  AND (%(due_before)s::timestamptz IS NULL OR due_at < %(due_before)s::timestamptz)
  AND (%(created_after)s::timestamptz IS NULL OR created_at >= %(created_after)s::timestamptz)
  AND (%(created_before)s::timestamptz IS NULL OR created_at < %(created_before)s::timestamptz)
  AND (%(finished_after)s::timestamptz IS NULL AND %(finished_before)s::timestamptz IS NULL
       OR state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
          AND updated_at >= coalesce(%(finished_after)s::timestamptz, '-infinity')
          AND updated_at < coalesce(%(finished_before)s::timestamptz, 'infinity'))

-- fragment: oldest_first
-- The keyset window of a page oldest first: ids after the cursor, within the ids the
-- filters allow (%(id_above)s, %(id_below)s: see fencepost.store.values.created_id_range),
-- which prune the partitions read.
  AND id > coalesce(greatest(%(after)s::uuid, %(id_above)s::uuid), '00000000-0000-0000-0000-000000000000'::uuid)
  AND id < coalesce(%(id_below)s::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)

-- fragment: newest_first
-- The keyset window of a page newest first: ids before the cursor, within the ids the
-- filters allow.
  AND id < coalesce(least(%(after)s::uuid, %(id_below)s::uuid), 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)
  AND id > coalesce(%(id_above)s::uuid, '00000000-0000-0000-0000-000000000000'::uuid)

-- fragment: created_ids
-- The ids the filters allow, in a count.
  AND id > coalesce(%(id_above)s::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
  AND id < coalesce(%(id_below)s::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)

-- name: query_executions
-- Store.query when no filter has an index of its own (SqlStore._query_plan chooses):
-- the primary key, in order, each row checked. Every page block finds its ids first
-- and joins the payloads of those alone: joined before the LIMIT, the planner may
-- merge the payload table's whole primary key with the few rows found.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE true
      -- include: oldest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id

-- name: query_executions_newest_first
-- query_executions, newest first: the cursor is the last id of the previous page.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE true
      -- include: newest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id DESC
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id DESC

-- name: select_transitions
SELECT seq, execution_id, event, from_state, to_state, epoch, actor, reason, at
FROM transitions WHERE execution_id = %(id)s::uuid ORDER BY seq

-- name: execution_exists
SELECT 1 FROM executions WHERE id = %(id)s::uuid

-- fragment: claim_filters
-- The restrictions every branch of a claim applies (see claim). The first is the
-- live days of history: the store writes the oldest day holding a live execution
-- into the text (see LiveWindow in live_window.py), so the plan holds only those days'
-- partitions, and a claim neither plans nor locks the finished days.
      AND e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
      AND (%(jobs)s::text[] IS NULL OR e.job = ANY(%(jobs)s::text[]))
      AND (%(ids)s::uuid[] IS NULL OR e.id = ANY(%(ids)s::uuid[]))
      AND (%(buckets)s::integer[] IS NULL OR e.bucket = ANY(%(buckets)s::integer[]))
      AND (%(versions)s::text[] IS NULL OR e.job_version IS NULL
           OR e.job || ':' || e.job_version = ANY(%(versions)s::text[]))

-- fragment: claim_write
-- The end of every claim block, after its picked rows: the lease (and the first claim,
-- see fencepost.domain.slo), its audit, the answer in claim order.
claimed AS (
    UPDATE executions AS e
    SET state = 'RUNNING', epoch = e.epoch + 1, attempt = e.attempt + 1,
        lease_owner = %(owner)s, lease_until = clock.now + %(ttl)s::interval,
        updated_at = clock.now, first_claimed_at = coalesce(e.first_claimed_at, clock.now),
        -- A takeover of an expired lease: a renewal failed (Mark.RENEWAL_FAILED).
        slo_marks = e.slo_marks | CASE WHEN p.state = 'RUNNING' THEN 1 ELSE 0 END
    FROM picked AS p, clock
    WHERE e.id = p.id AND e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
    RETURNING e.id, p.state AS from_state, p.lease_owner AS from_owner, e.epoch, e.attempt,
              e.max_attempts, e.job, e.job_version, e.timeout, e.schedule_id, e.slot,
              e.lease_until, e.priority, e.due_at, clock.now AS at, e.queue, e.trace_context
),
audit AS (
    INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
    SELECT id, 'CLAIMED', from_state, 'RUNNING', epoch, %(owner)s,
           CASE WHEN from_state = 'RUNNING'
                THEN format(%(takeover_reason)s::text, from_owner, epoch - 1) END,
           at
    FROM claimed
)
SELECT c.id, c.epoch, c.attempt, c.max_attempts, c.job, c.job_version, c.timeout,
       c.schedule_id, c.slot, c.lease_until, c.due_at,
       (SELECT d.inputs::text FROM execution_data AS d
        WHERE d.execution_id = c.id
          AND d.execution_id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid), c.queue,
       c.trace_context
FROM claimed AS c
ORDER BY c.priority DESC, c.due_at, c.id

-- fragment: claim_lease
-- The end of claim and claim_capped, after their waiting rows: expired leases with
-- attempts left, the pick in claim order, the lease, its audit, the answer.
expired AS (
    -- now as a scalar subquery, not a join: then lease_until <= now is an index
    -- condition and the scan reads only expired leases, not every leased row.
    SELECT e.id, e.state, e.lease_owner, e.priority, e.due_at
    FROM executions AS e
    WHERE e.state = 'RUNNING' AND e.lease_until <= (SELECT now FROM clock)
      AND e.attempt < e.max_attempts
      -- include: claim_filters
    ORDER BY e.lease_until
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
),
picked AS (
    SELECT * FROM waiting
    UNION ALL
    SELECT * FROM expired
    ORDER BY priority DESC, due_at, id
    LIMIT %(limit)s
),
-- include: claim_write

-- fragment: claim_queue_lease
-- claim_lease for the claim_*_queues blocks, whose waiting rows carry their queue:
-- expired leases in those queues too, then at most each queue's limit of both
-- (rooms, the queues and their limits), in claim order.
expired AS (
    SELECT e.id, e.state, e.lease_owner, e.priority, e.due_at, e.queue
    FROM executions AS e
    WHERE e.state = 'RUNNING' AND e.lease_until <= (SELECT now FROM clock)
      AND e.attempt < e.max_attempts AND e.queue = ANY(%(queues)s::text[])
      -- include: claim_filters
    ORDER BY e.lease_until
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
),
picked AS (
    SELECT c.id, c.state, c.lease_owner
    FROM (
        SELECT u.*, row_number() OVER (
                   PARTITION BY u.queue ORDER BY u.priority DESC, u.due_at, u.id
               ) AS queue_rank
        FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) AS u
    ) AS c
    JOIN rooms AS r ON r.name = c.queue
    WHERE c.queue_rank <= r.n
    ORDER BY c.priority DESC, c.due_at, c.id
    LIMIT %(limit)s
),
-- include: claim_write

-- fragment: claim_rooms
-- The queues of a claim restricted to queues, each with its limit (at most the
-- claim's; the store leaves out queues without room).
rooms AS (
    SELECT q.name, q.n FROM unnest(%(queues)s::text[], %(queue_limits)s::integer[]) AS q(name, n)
),

-- name: claim
-- One statement: pick due rows (skipping rows another claim has locked), lease
-- them, write their CLAIMED transitions, and return them with their inputs as
-- text (the store checks them before the transaction commits, and decodes a
-- batch's texts in one parse).
-- Candidates are restricted to %(jobs)s, %(ids)s, %(buckets)s and the 'job:version'
-- pairs in %(versions)s (rows without a job_version run on any version).
--
-- A claim must not cost more as the backlog grows, whatever the planner believes
-- about sizes (a worker's prepared claim may have been planned while it polled an
-- empty table, before a burst arrived):
-- * now is a scalar subquery, not a join with clock: due_at <= now is then a
--   condition inside the claimable index, so a walk over rows not yet due reads
--   no table rows, and the walk keeps the index's order and stops at the limit.
-- * Each picked row is updated through its primary key: joined with picked, a
--   nested loop of index lookups in the generic plans psycopg's prepared
--   statements get. (A plan made for one call may still hash-join the whole of a
--   table under about 60,000 rows; bounded, where the alternatives were not.)
-- * Inputs are looked up per claimed row: joined, the planner hash-joined every
--   row of execution_data on every claim of a table under about 60,000 rows.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
waiting AS (
    SELECT e.id, e.state, e.lease_owner, e.priority, e.due_at
    FROM executions AS e
    WHERE e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= (SELECT now FROM clock)
      -- include: claim_filters
    ORDER BY e.priority DESC, e.due_at, e.id
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
),
-- include: claim_lease

-- name: claim_capped
-- claim under max_per_bucket (%(cap)s): a bucket gives at most %(cap)s minus its
-- RUNNING executions. Runs after lock_buckets in the same transaction, so two
-- capped claimers never count the same bucket at once. Ranking within buckets
-- reads every due row: capped claims cost more than plain ones.
-- One statement: pick due rows (skipping rows another claim has locked), lease
-- them, write their CLAIMED transitions, and return them with their inputs.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
running AS (
    SELECT bucket, count(*) AS n FROM executions
    WHERE state = 'RUNNING' AND id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
    GROUP BY bucket
),
ranked AS (
    SELECT e.id, e.bucket, e.priority, e.due_at,
           row_number() OVER (PARTITION BY e.bucket ORDER BY e.priority DESC, e.due_at, e.id)
               AS bucket_rank
    FROM executions AS e, clock
    WHERE e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= clock.now
      -- include: claim_filters
),
eligible AS (
    SELECT r.id FROM ranked AS r LEFT JOIN running AS n ON n.bucket = r.bucket
    WHERE r.bucket_rank <= %(cap)s - coalesce(n.n, 0)
    ORDER BY r.priority DESC, r.due_at, r.id
    LIMIT %(limit)s
),
waiting AS (
    SELECT e.id, e.state, e.lease_owner, e.priority, e.due_at
    FROM executions AS e
    WHERE e.id IN (SELECT id FROM eligible) AND e.state IN ('RETRY_WAIT', 'SCHEDULED')
      AND e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
    FOR UPDATE OF e SKIP LOCKED
),
-- include: claim_lease

-- name: claim_queues
-- claim restricted to queues (%(queues)s, each with its limit): one walk of
-- executions_queue_claimable per queue, in claim order, at most that queue's
-- limit each (a LATERAL join), then takeovers in those queues, the per-queue
-- limits over both and the claim's limit, in claim order. One statement, as claim.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
-- include: claim_rooms
waiting AS (
    SELECT w.*
    FROM rooms AS r
    CROSS JOIN LATERAL (
        SELECT e.id, e.state, e.lease_owner, e.priority, e.due_at, e.queue
        FROM executions AS e
        -- The queue as a range of one value, and first in the order: only
        -- executions_queue_claimable then gives that order and stops at the limit. As
        -- an equality (which the order would then leave out) the planner, not knowing
        -- the queue's share of the due rows (it takes each of two queues for half),
        -- could walk executions_claimable in claim order instead, filtering the queue:
        -- each claim of a quiet queue read every due row of a busy one.
        WHERE e.queue >= r.name AND e.queue <= r.name
          AND e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= (SELECT now FROM clock)
          -- include: claim_filters
        ORDER BY e.queue, e.priority DESC, e.due_at, e.id
        LIMIT r.n
        FOR UPDATE OF e SKIP LOCKED
    ) AS w
),
-- include: claim_queue_lease

-- name: claim_capped_queues
-- claim_capped restricted to queues: the bucket cap first, then each queue's
-- limit over the rows within it, then the claim's limit, in claim order.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
-- include: claim_rooms
running AS (
    SELECT bucket, count(*) AS n FROM executions
    WHERE state = 'RUNNING' AND id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
    GROUP BY bucket
),
ranked AS (
    SELECT e.id, e.bucket, e.priority, e.due_at, e.queue,
           row_number() OVER (PARTITION BY e.bucket ORDER BY e.priority DESC, e.due_at, e.id)
               AS bucket_rank
    FROM executions AS e, clock
    WHERE e.queue = ANY(%(queues)s::text[])
      AND e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= clock.now
      -- include: claim_filters
),
eligible AS (
    SELECT a.id
    FROM (
        SELECT r.id, r.priority, r.due_at, r.queue,
               row_number() OVER (PARTITION BY r.queue ORDER BY r.priority DESC, r.due_at, r.id)
                   AS queue_rank
        FROM ranked AS r LEFT JOIN running AS n ON n.bucket = r.bucket
        WHERE r.bucket_rank <= %(cap)s - coalesce(n.n, 0)
    ) AS a
    JOIN rooms AS q ON q.name = a.queue
    WHERE a.queue_rank <= q.n
    ORDER BY a.priority DESC, a.due_at, a.id
    LIMIT %(limit)s
),
waiting AS (
    SELECT e.id, e.state, e.lease_owner, e.priority, e.due_at, e.queue
    FROM executions AS e
    WHERE e.id IN (SELECT id FROM eligible) AND e.state IN ('RETRY_WAIT', 'SCHEDULED')
      AND e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
    FOR UPDATE OF e SKIP LOCKED
),
-- include: claim_queue_lease

-- name: lock_buckets
-- Serialize capped claimers per bucket, in bucket order so that two never deadlock.
SELECT pg_advisory_xact_lock(hashtext('fencepost.bucket:' || current_schema()), b)
FROM (SELECT b FROM unnest(%(buckets)s::integer[]) AS b ORDER BY b) AS ordered

-- fragment: lease_fence
-- The fence of complete and heartbeat, after the UPDATE of the leases l: same
-- owner, same epoch, lease still live.
    FROM l, clock
    WHERE e.id = l.id AND e.id = ANY(%(ids)b::uuid[])
      AND e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
      AND e.state = l.state
      AND e.lease_owner = l.owner
      AND e.epoch = l.epoch
      AND e.lease_until > clock.now

-- fragment: complete_leases
-- The start of complete_fenced and complete_returning, up to the RETURNING of done.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
-- Each lease must reach its row by primary key, whatever the statistics say:
-- * l is MATERIALIZED, so RUNNING stays a column of l. Inlined, the constant
--   reaches e.state, and a planner whose statistics say few rows are RUNNING
--   scans a partial index of every RUNNING row and compares each with every
--   lease of the batch: the generic plan of a prepared statement took 28-54 ms
--   for 256 leases that way, instead of 6-10.
-- * e.id = ANY(ids) bounds the rows read to the batch's: a plan made for the
--   batch's size otherwise hash-joins every row of a table smaller than about
--   60,000 rows.
-- The arrays travel in binary: quoting them as text costs milliseconds per batch.
l AS MATERIALIZED (
    SELECT *, 'RUNNING' AS state FROM unnest(
        %(ids)b::uuid[], %(owners)b::text[], %(epochs)b::bigint[], %(results)b::jsonb[]
    ) AS l(id, owner, epoch, result)
),
done AS (
    UPDATE executions AS e
    SET state = 'SUCCEEDED', lease_owner = NULL, lease_until = NULL, updated_at = clock.now,
        first_finished_at = coalesce(e.first_finished_at, clock.now)
    -- include: lease_fence

-- fragment: complete_records
-- The end of complete_fenced and complete_returning, after done: each accepted
-- lease's result and COMPLETED transition.
stored AS (
    UPDATE execution_data AS d SET result = done.result
    FROM done
    WHERE d.execution_id = done.id
      AND d.execution_id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
),
audit AS (
    INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, at)
    SELECT id, 'COMPLETED', 'RUNNING', 'SUCCEEDED', epoch, owner, at FROM done
),
-- Tell the waiters of Store.wait (see done_channel): one notification per 200
-- completed ids, joined by commas (7,400 bytes, under NOTIFY's 8,000), delivered
-- at commit. Never a per-row trigger: this rides in the statement that completes.
finished AS (
    SELECT pg_notify(left('fencepost_done_' || current_schema(), 63), string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM done) AS c
    GROUP BY chunk
)

-- name: complete_fenced
-- The fence is the WHERE clause: same owner, same epoch, lease still live. The
-- leases have distinct ids (the store splits a batch into rounds), so the ids
-- returned are exactly the accepted ones; the store audits the others with
-- insert_stale_refusals. Rows come in id order, so concurrent batches lock
-- rows in one order and cannot deadlock.
-- include: complete_leases
    RETURNING e.id, l.owner, l.epoch, l.result, clock.now AS at
),
-- include: complete_records
SELECT id FROM done
WHERE (SELECT count(*) FROM finished) >= 0  -- a join would be removed, and finished unread

-- name: complete_returning
-- complete_fenced for one lease (Store.complete), returning the execution as this
-- statement leaves it, a row of execution_rows, so that no second read follows.
-- The other execution_data columns are read from the statement's snapshot: the
-- completion changes only the result, which comes from l.
-- include: complete_leases
    RETURNING e.*, l.owner, l.result, clock.now AS at
),
-- include: complete_records
SELECT c.id, c.job, c.job_version, c.state, c.due_at, c.priority, c.attempt, c.max_attempts,
       c.epoch, c.lease_owner, c.lease_until, c.timeout, c.idempotency_key, c.schedule_id,
       c.slot, c.bucket, c.bucket_key, c.created_at, c.updated_at,
       d.inputs, c.result, d.error, d.progress, c.queue, c.limit_key, c.planned_at
FROM done AS c JOIN execution_data AS d
    ON d.execution_id = c.id
   AND d.execution_id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
WHERE (SELECT count(*) FROM finished) >= 0  -- a join would be removed, and finished unread

-- name: heartbeat_fenced
-- A heartbeat only ever extends: a lease handed out must not end earlier than promised.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
-- l MATERIALIZED, e.id = ANY(ids), arrays in binary: see complete_fenced.
l AS MATERIALIZED (
    SELECT *, 'RUNNING' AS state FROM unnest(
        %(ids)b::uuid[], %(owners)b::text[], %(epochs)b::bigint[], %(progress)b::jsonb[]
    ) AS l(id, owner, epoch, progress)
),
renewed AS (
    UPDATE executions AS e
    SET lease_until = greatest(e.lease_until, clock.now + %(ttl)s::interval),
        updated_at = clock.now
    -- include: lease_fence
    RETURNING e.id, e.lease_until, l.progress
),
progressed AS (
    UPDATE execution_data AS d SET progress = renewed.progress
    FROM renewed WHERE d.execution_id = renewed.id AND renewed.progress IS NOT NULL
      AND d.execution_id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
)
SELECT id, lease_until FROM renewed

-- name: insert_stale_refusals
-- Audit refused fenced calls. A statement of its own, after the fenced one in
-- the same transaction: under READ COMMITTED it sees the row as it is now (a
-- concurrent completion may just have committed), not as the refusing
-- statement's snapshot saw it. Each refused execution gains %(marks)s (a
-- fencepost.domain.slo.Mark: a refused heartbeat, a renewal failed; any other
-- verb, a stale completion refused), OR-ed in, so a retry's second time changes
-- nothing. SKIP LOCKED: this transaction already holds the rows its fenced statement
-- wrote, and another worker's may hold these (its own renewals) while it waits for
-- ours; waiting here could deadlock two heartbeat batches. A row skipped so keeps
-- the mark its lease's loss set already (the takeover or the expiry that made this
-- call stale), or at worst loses one class hint of a refusal, never a state change.
WITH marked AS (
    UPDATE executions AS e SET slo_marks = e.slo_marks | %(marks)s::integer
    WHERE e.id IN (
        SELECT x.id FROM executions AS x WHERE x.id = ANY(%(ids)s::uuid[])
        ORDER BY x.id FOR NO KEY UPDATE SKIP LOCKED
    )
)
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
SELECT e.id, 'STALE_REFUSED', e.state, e.state, r.epoch, r.owner, %(reason)s,
       coalesce(%(now)s::timestamptz, clock_timestamp())
FROM unnest(%(ids)s::uuid[], %(owners)s::text[], %(epochs)s::bigint[]) AS r(id, owner, epoch)
JOIN executions AS e ON e.id = r.id
-- A retry (%(again)s) whose earlier attempt may have committed this very refusal
-- before its answer was lost does not record it twice.
WHERE NOT (%(again)s::boolean AND EXISTS (
    SELECT 1 FROM transitions AS t
    WHERE t.execution_id = r.id AND t.event = 'STALE_REFUSED' AND t.epoch = r.epoch
      AND t.actor = r.owner AND t.reason = %(reason)s
))

-- name: write_change
-- Persist a change decided by fencepost.domain.machine.apply, guarded by the
-- state and epoch it was decided from. A change to a terminal state (fail to
-- dead letter, cancel, abort, skip, a lease expired with no attempt left...)
-- tells the waiters of Store.wait, in every process, on the schema's done
-- channel (see done_channel): delivered when this transaction commits. With it, the
-- marks its event sets (%(marks)s) and, when it finishes the execution (SUCCEEDED or
-- FAILED), the first finish (%(finished_at)s, else NULL): see verbs.sql_changes.persist_steps.
UPDATE executions
SET state = %(state)s, due_at = %(due_at)s, attempt = %(attempt)s, epoch = %(epoch)s,
    lease_owner = %(lease_owner)s, lease_until = %(lease_until)s, updated_at = %(updated_at)s,
    slo_marks = slo_marks | %(marks)s::integer,
    first_finished_at = coalesce(first_finished_at, %(finished_at)s::timestamptz)
WHERE id = %(id)s::uuid AND state = %(from_state)s AND epoch = %(from_epoch)s
RETURNING CASE WHEN state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
               THEN pg_notify(left('fencepost_done_' || current_schema(), 63), id::text) END

-- name: set_error
UPDATE execution_data SET error = %(error)s WHERE execution_id = %(id)s::uuid

-- name: insert_transition
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
VALUES (%(execution_id)s::uuid, %(event)s, %(from_state)s, %(to_state)s, %(epoch)s,
        %(actor)s, %(reason)s, %(at)s)

-- name: expired_leases
-- Rows another reaper holds are skipped, so reapers on many machines share the work.
SELECT * FROM execution_rows
WHERE id IN (
    SELECT e.id FROM executions AS e
    WHERE e.state = 'RUNNING' AND e.lease_until <= %(now)s
    ORDER BY e.lease_until, e.id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
ORDER BY lease_until, id

-- name: register_node
-- A renewal keeps started_at; everything else is the latest declaration.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)
INSERT INTO nodes (id, kind, buckets, started_at, heartbeat_at, expires_at, jobs)
SELECT %(id)s, %(kind)s, %(buckets)s::integer[], clock.now, clock.now,
       clock.now + %(ttl)s::interval, %(jobs)s::jsonb
FROM clock
ON CONFLICT (id) DO UPDATE SET
    kind = excluded.kind, buckets = excluded.buckets,
    heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at,
    jobs = excluded.jobs
RETURNING id, kind, buckets, started_at, heartbeat_at, expires_at, jobs

-- name: deregister_node
DELETE FROM nodes WHERE id = %(id)s

-- name: select_nodes
SELECT id, kind, buckets, started_at, heartbeat_at, expires_at, jobs
FROM nodes
WHERE NOT %(live_only)s OR expires_at > coalesce(%(now)s::timestamptz, clock_timestamp())
ORDER BY id

-- name: orphans
SELECT * FROM execution_rows
WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')
  AND bucket = ANY(%(buckets)s::integer[])
  AND updated_at <= coalesce(%(now)s::timestamptz, clock_timestamp()) - %(older_than)s::interval
ORDER BY updated_at, id
LIMIT %(limit)s

-- name: insert_command
INSERT INTO commands (id, execution_id, kind, state, requested_by, requested_at, done_at)
VALUES (%(id)s::uuid, %(execution_id)s::uuid, %(kind)s, %(state)s, %(requested_by)s,
        %(requested_at)s, %(done_at)s)

-- name: claim_commands
-- Open commands of the given executions, oldest request first: PENDING ones, and
-- CLAIMED ones whose claim has expired (claim_until <= now). Commands another
-- claim has locked are skipped. RETURNING has no order; the store sorts.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
picked AS (
    SELECT c.id
    FROM commands AS c
    WHERE c.execution_id = ANY(%(execution_ids)s::uuid[])
      AND c.state IN ('CLAIMED', 'PENDING')
      AND (c.state = 'PENDING' OR c.claim_until <= (SELECT now FROM clock))
    ORDER BY c.requested_at, c.id
    LIMIT %(limit)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE commands AS c
SET state = 'CLAIMED', owner = %(owner)s, claim_until = clock.now + %(ttl)s::interval
FROM picked, clock
WHERE c.id = picked.id
RETURNING c.id, c.execution_id, c.kind, c.state, c.requested_by, c.requested_at, c.owner,
          c.claim_until, c.epoch, c.done_at

-- name: complete_command
-- The fence on both sides is the WHERE clause: the command is still CLAIMED by
-- %(owner)s under a live claim, and %(owner)s holds the execution at %(epoch)s under
-- a live lease. The execution row is share-locked (and re-read if a concurrent
-- takeover or completion changed it) so the verdict cannot rest on a lease that
-- a committed transaction just ended. No row back means refused.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
holder AS (
    SELECT e.id
    FROM executions AS e
    WHERE e.id = %(execution_id)s::uuid
      AND e.state = 'RUNNING'
      AND e.lease_owner = %(owner)s
      AND e.epoch = %(epoch)s
      AND e.lease_until > (SELECT now FROM clock)
    FOR SHARE OF e
)
UPDATE commands AS c
SET state = 'DONE', claim_until = NULL, epoch = %(epoch)s, done_at = clock.now
FROM holder, clock
WHERE c.id = %(id)s::uuid
  AND c.execution_id = holder.id
  AND c.state = 'CLAIMED'
  AND c.owner = %(owner)s
  AND c.claim_until > clock.now
RETURNING c.id, c.execution_id, c.kind, c.state, c.requested_by, c.requested_at, c.owner,
          c.claim_until, c.epoch, c.done_at

-- name: release_command
-- Only the claimer gives a command back, and only while it is still its claim.
UPDATE commands
SET state = 'PENDING', owner = NULL, claim_until = NULL
WHERE id = %(id)s::uuid AND state = 'CLAIMED' AND owner = %(owner)s

-- name: select_commands
SELECT id, execution_id, kind, state, requested_by, requested_at, owner, claim_until,
       epoch, done_at
FROM commands WHERE execution_id = %(id)s::uuid ORDER BY requested_at, id

-- Schedules. Every statement that returns a schedule lists its columns in the
-- order fencepost.store.rows.schedule reads.

-- name: query_schedule_executions
-- query_executions for one schedule: schedule_id = %(schedule)s is a plain index
-- condition (no "IS NULL OR"), so every plan, custom or generic, reads
-- executions_schedule_state rather than scanning the table.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE schedule_id = %(schedule)s::text
      -- include: oldest_first
      -- include: query_filters
      -- include: query_ranges
    ORDER BY id
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id

-- name: query_schedule_executions_newest_first
-- query_schedule_executions, newest first: the cursor is the last id of the previous
-- page.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE schedule_id = %(schedule)s::text
      -- include: newest_first
      -- include: query_filters
      -- include: query_ranges
    ORDER BY id DESC
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id DESC

-- name: query_state_executions
-- query_executions in one state: executions_state in id order (its state compared
-- COLLATE "POSIX": see migration 17). A query of several states runs it
-- once for each and merges the pages; an owner's executions are the RUNNING ones
-- (SqlStore._query_plan). Ordered by id, whatever the plan.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE state COLLATE "POSIX" = %(state)s::text
      -- include: oldest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id

-- name: query_state_executions_newest_first
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE state COLLATE "POSIX" = %(state)s::text
      -- include: newest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id DESC
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id DESC

-- name: query_key_executions
-- query_executions under one limit key: executions_limit_key in id order.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE limit_key = %(limit_key)s::text
      -- include: oldest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id

-- name: query_key_executions_newest_first
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE limit_key = %(limit_key)s::text
      -- include: newest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id DESC
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id DESC

-- name: query_error_executions
-- query_executions by error text: the ids of the errored payload rows whose error
-- matches (execution_data_errors: the executions that never failed are not read),
-- then those executions, sorted by id. The ids come first whatever the plan: a
-- generic plan, knowing no parameter, would walk every execution in id order instead,
-- matching each one's error.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE id = ANY(ARRAY(
        SELECT x.execution_id FROM execution_data AS x
        WHERE x.error IS NOT NULL AND x.error COLLATE "C" ILIKE %(error_driving)s::text ESCAPE '\'
    ))
      -- include: oldest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id

-- name: query_error_executions_newest_first
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE id = ANY(ARRAY(
        SELECT x.execution_id FROM execution_data AS x
        WHERE x.error IS NOT NULL AND x.error COLLATE "C" ILIKE %(error_driving)s::text ESCAPE '\'
    ))
      -- include: newest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id DESC
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id DESC

-- name: query_finished_executions
-- query_executions finished at or after %(finished_after)s: the ids of that range of
-- executions_finished (an index-only read), then those rows, sorted by id. Not left
-- to the planner: it walks the primary key, expecting to meet the range early, and
-- reads every execution that finished before it first. Its cost grows with the
-- executions the range holds.
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE id = ANY(ARRAY(
        SELECT f.id FROM executions AS f
        WHERE f.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
          AND f.updated_at >= %(finished_after)s::timestamptz
          AND f.updated_at < coalesce(%(finished_before)s::timestamptz, 'infinity')
          -- The index includes these three: the range stays an index-only read.
          AND (%(states)s::text[] IS NULL OR f.state = ANY(%(states)s::text[]))
          AND (%(job)s::text IS NULL OR f.job = %(job)s::text)
          AND (%(queue)s::text IS NULL OR f.queue = %(queue)s::text)
    ))
      -- include: oldest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id

-- name: query_finished_executions_newest_first
SELECT r.* FROM (
    SELECT id FROM executions AS execution_rows
    WHERE id = ANY(ARRAY(
        SELECT f.id FROM executions AS f
        WHERE f.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
          AND f.updated_at >= %(finished_after)s::timestamptz
          AND f.updated_at < coalesce(%(finished_before)s::timestamptz, 'infinity')
          -- The index includes these three: the range stays an index-only read.
          AND (%(states)s::text[] IS NULL OR f.state = ANY(%(states)s::text[]))
          AND (%(job)s::text IS NULL OR f.job = %(job)s::text)
          AND (%(queue)s::text IS NULL OR f.queue = %(queue)s::text)
    ))
      -- include: newest_first
      -- include: query_filters
      AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
      -- include: query_ranges
    ORDER BY id DESC
    LIMIT %(limit)s
) AS page
JOIN execution_rows AS r ON r.id = page.id
ORDER BY r.id DESC

-- name: count_by_state
-- Store.count_by_state by states, job and queue alone (or no filter):
-- executions_state_counts, an index-only scan where the visibility map allows.
SELECT state, count(*) FROM executions
WHERE (%(states)s::text[] IS NULL OR state COLLATE "POSIX" = ANY(%(states)s::text[]))
  AND (%(job)s::text IS NULL OR job = %(job)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
GROUP BY state

-- name: count_filtered_by_state
-- Store.count_by_state when no filter has an index of its own: every execution in
-- the ids the filters allow, checked. It reads executions under the name the shared
-- filters read (execution_rows); the payload rows only probed for an error.
SELECT state, count(*) FROM executions AS execution_rows
WHERE true
  -- include: created_ids
  -- include: query_filters
  AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
  -- include: query_ranges
GROUP BY state

-- name: count_states_by_state
-- Store.count_by_state of some states (or an owner's: RUNNING): executions_state_counts.
SELECT state, count(*) FROM executions AS execution_rows
WHERE state COLLATE "POSIX" = ANY(%(states)s::text[])
  -- include: created_ids
  -- include: query_filters
  AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
  -- include: query_ranges
GROUP BY state

-- name: count_schedule_by_state
-- Store.count_by_state of one schedule's executions: executions_schedule_state.
SELECT state, count(*) FROM executions AS execution_rows
WHERE schedule_id = %(schedule)s::text
  -- include: created_ids
  -- include: query_filters
  -- include: query_ranges
GROUP BY state

-- name: count_key_by_state
-- Store.count_by_state under one limit key: executions_limit_key.
SELECT state, count(*) FROM executions AS execution_rows
WHERE limit_key = %(limit_key)s::text
  -- include: created_ids
  -- include: query_filters
  AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
  -- include: query_ranges
GROUP BY state

-- name: count_error_by_state
-- Store.count_by_state by error text: the errored payload rows (execution_data_errors)
-- whose error matches, joined to their executions (an array of their ids, as the page
-- takes, would be looked for in every day's partition).
SELECT state, count(*) FROM execution_data AS x
JOIN executions AS execution_rows ON execution_rows.id = x.execution_id
WHERE x.error IS NOT NULL AND x.error COLLATE "C" ILIKE %(error_driving)s::text ESCAPE '\'
  -- include: created_ids
  -- include: query_filters
  AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
  -- include: query_ranges
GROUP BY state

-- name: count_finished_by_state
-- Store.count_by_state by finish time: that range of executions_finished.
SELECT state, count(*) FROM executions AS execution_rows
WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
  AND updated_at >= coalesce(%(finished_after)s::timestamptz, '-infinity')
  AND updated_at < coalesce(%(finished_before)s::timestamptz, 'infinity')
  -- include: created_ids
  -- include: query_filters
  AND (%(schedule)s::text IS NULL OR schedule_id = %(schedule)s::text)
  -- include: query_ranges
GROUP BY state

-- name: count_finished_narrow_by_state
-- Store.count_by_state by finish time with no other filter but states, job and queue
-- (the SQLite block reads its index alone; here the same range of executions_finished).
SELECT state, count(*) FROM executions AS execution_rows
WHERE state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
  AND updated_at >= coalesce(%(finished_after)s::timestamptz, '-infinity')
  AND updated_at < coalesce(%(finished_before)s::timestamptz, 'infinity')
  AND (%(states)s::text[] IS NULL OR state = ANY(%(states)s::text[]))
  AND (%(job)s::text IS NULL OR job = %(job)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
GROUP BY state

-- name: insert_schedule
-- No row back: a schedule with this id exists (the store compares the fingerprints).
INSERT INTO schedules (
    id, job, job_version, inputs, cron, every, timezone, dst_gap, dst_fold, misfire,
    misfire_grace, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
    watermark, next_due, materializer, lease_until, request_hash, created_at, updated_at, queue,
    limit_key
) VALUES (
    %(id)s, %(job)s, %(job_version)s, %(inputs)s::jsonb, %(cron)s, %(every)s::interval,
    %(timezone)s, %(dst_gap)s, %(dst_fold)s, %(misfire)s, %(misfire_grace)s::interval,
    %(max_catch_up)s, %(overlap)s, %(start_at)s::timestamptz, %(end_at)s::timestamptz,
    %(max_attempts)s, %(priority)s, %(paused)s, %(watermark)s::timestamptz,
    %(next_due)s::timestamptz, NULL, NULL, %(request_hash)s, %(created_at)s::timestamptz,
    %(updated_at)s::timestamptz, %(queue)s, %(limit_key)s
)
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: get_schedule
-- The schedule, then the fingerprint of its add_schedule arguments.
SELECT id, job, job_version, inputs, cron, every, timezone, dst_gap, dst_fold, misfire,
       misfire_grace, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
       watermark, next_due, materializer, lease_until, created_at, updated_at, queue,
       limit_key, request_hash
FROM schedules WHERE id = %(id)s

-- name: lock_schedule
-- Read-decide-write verbs (update, pause, resume) hold the row until they commit.
SELECT id, job, job_version, inputs, cron, every, timezone, dst_gap, dst_fold, misfire,
       misfire_grace, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
       watermark, next_due, materializer, lease_until, created_at, updated_at, queue,
       limit_key
FROM schedules WHERE id = %(id)s
FOR UPDATE

-- name: share_schedule
-- add_occurrences keeps the schedule from being deleted under it (a concurrent
-- delete would miss the executions it is about to insert), without blocking
-- materializers, which take only a no-key-update lock on the row.
SELECT id FROM schedules WHERE id = %(id)s FOR KEY SHARE

-- name: list_schedules
SELECT id, job, job_version, inputs, cron, every, timezone, dst_gap, dst_fold, misfire,
       misfire_grace, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused,
       watermark, next_due, materializer, lease_until, created_at, updated_at, queue,
       limit_key
FROM schedules
WHERE (%(after)s::text IS NULL OR id > %(after)s::text)
  AND (%(job)s::text IS NULL OR job = %(job)s::text)
  AND (%(paused)s::boolean IS NULL OR paused = %(paused)s::boolean)
  AND (%(due_before)s::timestamptz IS NULL OR next_due <= %(due_before)s::timestamptz)
ORDER BY id
LIMIT %(limit)s

-- name: write_schedule
-- Persist a schedule decided by fencepost.domain.schedules (update, pause, resume):
-- everything but the watermark, the creation time and the add_schedule fingerprint.
UPDATE schedules
SET job = %(job)s, job_version = %(job_version)s, inputs = %(inputs)s::jsonb, cron = %(cron)s,
    every = %(every)s::interval, timezone = %(timezone)s, dst_gap = %(dst_gap)s,
    dst_fold = %(dst_fold)s, misfire = %(misfire)s, misfire_grace = %(misfire_grace)s::interval,
    max_catch_up = %(max_catch_up)s, overlap = %(overlap)s,
    start_at = %(start_at)s::timestamptz, end_at = %(end_at)s::timestamptz,
    max_attempts = %(max_attempts)s, priority = %(priority)s, paused = %(paused)s,
    next_due = %(next_due)s::timestamptz, materializer = %(materializer)s,
    lease_until = %(lease_until)s::timestamptz, updated_at = %(updated_at)s::timestamptz,
    queue = %(queue)s, limit_key = %(limit_key)s
WHERE id = %(id)s

-- name: delete_schedule
-- Waits for a materializer's transaction that holds the row; a materializer that
-- comes later finds no row to fence on.
DELETE FROM schedules WHERE id = %(id)s RETURNING id

-- name: waiting_schedule_executions
-- What deleting a schedule cancels (the state list is sources(CANCELLED) less
-- RUNNING), locked; a row a worker claimed meanwhile no longer qualifies.
SELECT * FROM execution_rows
WHERE id IN (
    SELECT e.id FROM executions AS e
    WHERE e.schedule_id = %(id)s::text AND e.state IN ('RETRY_WAIT', 'SCHEDULED')
    ORDER BY e.id
    FOR UPDATE
)
ORDER BY id

-- name: unstarted_schedule_executions
-- What pausing a schedule skips: its occurrences SCHEDULED and never claimed (see
-- fencepost.domain.schedules.skipped_by_pause), locked. A row a claim took first is
-- re-checked once its lock is free and, RUNNING now, drops out; a claim that comes
-- second skips the locked rows (SKIP LOCKED) and finds them SKIPPED afterwards.
SELECT * FROM execution_rows
WHERE id IN (
    SELECT e.id FROM executions AS e
    WHERE e.schedule_id = %(id)s::text AND e.state = 'SCHEDULED' AND e.epoch = 0
    ORDER BY e.id
    FOR UPDATE
)
ORDER BY id

-- name: acquire_schedules
-- One statement: pick due schedules without a live materializer lease (skipping
-- rows another acquire has locked) and lease them. A row leased by an acquire
-- that committed after this statement's snapshot is re-checked once locked and
-- dropped: two materializers never hold one schedule. The picked ids come back
-- as an array, so the update finds each by primary key: joined instead, a
-- generic plan (psycopg prepares the statement after a few runs) does not know
-- the limit and hash-joins against every schedule. RETURNING has no order; the
-- store sorts.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
picked AS (
    SELECT s.id
    FROM schedules AS s
    WHERE s.next_due <= (SELECT now FROM clock)
      AND (s.lease_until IS NULL OR s.lease_until <= (SELECT now FROM clock))
    ORDER BY s.next_due, s.id
    LIMIT %(limit)s
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE schedules AS s
SET materializer = %(owner)s, lease_until = (SELECT now FROM clock) + %(ttl)s::interval
WHERE s.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING s.id, s.job, s.job_version, s.inputs, s.cron, s.every, s.timezone, s.dst_gap,
          s.dst_fold, s.misfire, s.misfire_grace, s.max_catch_up, s.overlap, s.start_at,
          s.end_at, s.max_attempts, s.priority, s.paused, s.watermark, s.next_due,
          s.materializer, s.lease_until, s.created_at, s.updated_at, s.queue, s.limit_key

-- name: materialize_fenced
-- The fence is the WHERE clause: same materializer, same lease_until (the lease
-- as acquired, not one taken again), still live. The ids returned are the
-- schedules whose plan is accepted; their rows stay locked until the store has
-- inserted their occurrences (insert_occurrences) and commits. Ids are distinct
-- and sorted, so concurrent batches lock rows in one order.
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
m AS (
    SELECT * FROM unnest(
        %(ids)b::text[], %(materializers)b::text[], %(lease_untils)b::timestamptz[],
        %(watermarks)b::timestamptz[], %(next_dues)b::timestamptz[]
    ) AS m(id, materializer, lease_until, watermark, next_due)
)
UPDATE schedules AS s
SET watermark = greatest(s.watermark, m.watermark), next_due = m.next_due,
    materializer = NULL, lease_until = NULL
FROM m, clock
WHERE s.id = m.id
  AND s.materializer = m.materializer
  AND s.lease_until = m.lease_until
  AND s.lease_until > clock.now
RETURNING s.id

-- name: insert_occurrences
-- Occurrences of schedules (rows this transaction holds) as executions, in one
-- round trip (its arrays, as the materializer's fence's, travel in binary: quoted as
-- text they cost more than the statement; see insert_executions): insert-if-absent on the idempotency key (claimed in execution_keys;
-- an existing execution is
-- left as it is; the store reads it with executions_by_keys), with the inputs,
-- the SUBMITTED transition and, for an occurrence policy skipped, the SKIPPED
-- transition with its reason. Inserts go in key order, so two transactions
-- racing for the same keys wait for each other rather than deadlock. Returns the
-- inserted executions in execution_rows order. actors: the SUBMITTED record's
-- actor of each (NULL: the schedule's own; run_schedule's caller for a run now).
-- The planned time is the slot (an overlap policy may hold the occurrence with a
-- due_at far ahead), else the due_at inserted. %(by_caller)s: a caller's occurrences
-- (add_occurrences), of which those planned more than %(backfill_slack)s before now are
-- backfills (Mark.BACKFILL, 16; see insert_executions); never the materializer's own,
-- nor a run now (no slot: planned at its caller's now).
WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
new AS (
    SELECT o.*, s.job, s.job_version, s.inputs, s.max_attempts, s.priority, s.queue, s.limit_key,
           clock.now,
           coalesce(o.slot::timestamptz, o.due_at) AS planned_at,
           CASE WHEN %(by_caller)s::boolean AND o.slot IS NOT NULL
                     AND o.slot::timestamptz < clock.now - %(backfill_slack)s::interval
                THEN 16 ELSE 0 END AS marks
    FROM unnest(
        %(ids)b::uuid[], %(schedule_ids)b::text[], %(slots)b::text[], %(keys)b::text[],
        %(due_ats)b::timestamptz[], %(skipped)b::text[], %(buckets)b::integer[],
        %(actors)b::text[]
    ) AS o(id, schedule_id, slot, idempotency_key, due_at, skipped, bucket, actor)
    JOIN schedules AS s ON s.id = o.schedule_id
    CROSS JOIN clock
),
claimed AS (
    INSERT INTO execution_keys (key, execution_id)
    SELECT idempotency_key, id FROM new
    ORDER BY idempotency_key
    ON CONFLICT (key) DO NOTHING
    RETURNING execution_id AS id
),
inserted AS (
    INSERT INTO executions (
        id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
        idempotency_key, schedule_id, slot, bucket, created_at, updated_at, queue, limit_key,
        planned_at, slo_marks
    )
    SELECT id, job, job_version, CASE WHEN skipped IS NULL THEN 'SCHEDULED' ELSE 'SKIPPED' END,
           due_at, priority, 0, max_attempts, 0, idempotency_key, schedule_id, slot, bucket,
           now, now, queue, limit_key, planned_at, marks
    FROM new JOIN claimed USING (id)
    RETURNING id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
              lease_owner, lease_until, timeout, idempotency_key, schedule_id, slot, bucket,
              bucket_key, created_at, updated_at, queue, limit_key, planned_at
),
data AS (
    INSERT INTO execution_data (execution_id, inputs)
    SELECT new.id, new.inputs FROM new JOIN inserted USING (id)
),
-- One INSERT, ordered, so that each execution's SUBMITTED gets the lower seq.
audit AS (
    INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
    SELECT t.id, t.event, t.from_state, t.to_state, 0, t.actor, t.reason, t.at
    FROM (
        SELECT i.id, 1 AS step, 'SUBMITTED' AS event, NULL AS from_state,
               'SCHEDULED' AS to_state, n.actor, NULL AS reason, i.created_at AS at
        FROM inserted AS i JOIN new AS n ON n.id = i.id
        UNION ALL
        SELECT i.id, 2, 'SKIPPED', 'SCHEDULED', 'SKIPPED', NULL, n.skipped, i.created_at
        FROM inserted AS i JOIN new AS n ON n.id = i.id
        WHERE n.skipped IS NOT NULL
    ) AS t
    ORDER BY t.id, t.step
),
-- Wake idle workers when something is claimable now (see insert_executions).
woken AS (
    SELECT pg_notify(%(channel)s, '') AS sent
    WHERE %(notify)s AND EXISTS (
        SELECT 1 FROM inserted
        WHERE state = 'SCHEDULED' AND due_at <= (SELECT now FROM clock)
    )
)
SELECT i.id, i.job, i.job_version, i.state, i.due_at, i.priority, i.attempt, i.max_attempts,
       i.epoch, i.lease_owner, i.lease_until, i.timeout, i.idempotency_key, i.schedule_id,
       i.slot, i.bucket, i.bucket_key, i.created_at, i.updated_at,
       n.inputs, NULL::jsonb AS result, NULL::text AS error, NULL::jsonb AS progress, i.queue,
       i.limit_key, i.planned_at
FROM inserted AS i JOIN new AS n ON n.id = i.id LEFT JOIN woken ON true

-- name: executions_by_keys
SELECT r.* FROM execution_keys AS k JOIN execution_rows AS r ON r.id = k.execution_id
WHERE k.key = ANY(%(keys)s::text[])

-- name: release_schedules
-- Only a lease still held as acquired is given back.
UPDATE schedules AS s
SET materializer = NULL, lease_until = NULL
FROM unnest(
    %(ids)s::text[], %(materializers)s::text[], %(lease_untils)s::timestamptz[]
) AS m(id, materializer, lease_until)
WHERE s.id = m.id AND s.materializer = m.materializer AND s.lease_until = m.lease_until

-- Reports and housekeeping. The store reads its now once (store_now) and passes
-- it in as the now parameter, so every figure of a report is taken at one instant.

-- name: bucket_counts
SELECT bucket, count(*) FROM executions
WHERE state = ANY(%(states)s::text[])
GROUP BY bucket
ORDER BY bucket

-- name: stats
-- Every figure of Store.stats in one statement (one snapshot): counts by job, queue
-- and state as a JSON array of [job, queue, state, count], the due backlog (held occurrences,
-- due_at >= %(held)s, are not due), the lease events in (%(start)s, %(now)s] read
-- through transitions_lease_events, and claim lateness against the execution's
-- current due_at, clamped at 0, with nearest-rank percentiles (percentile_disc).
-- Throttled claims are left out of the lateness: those of an execution with a
-- throttle record in [due_at, claim], read from (%(lookback)s, %(now)s] once
-- (MATERIALIZED: hashed by execution, not searched again per claim; the table's
-- index is by time only); the records of the window itself are counted per scope.
-- Then the error classes' counts the lease events do not give: the refused
-- heartbeats among the refusals (%(heartbeat_refused)s, their audit reason), the
-- TIMED_OUT and FAILED transitions of the window (through transitions_failure_events),
-- and the late first claims, counted in the scan that counts by state: first claimed
-- in the window more than %(claim_within)s after the planned time net of the held
-- time, backfills and replays (%(excluded_marks)s) left out.
WITH counts AS (
    SELECT job, queue, state, count(*) AS n,
           count(*) FILTER (
               WHERE first_claimed_at > %(start)s::timestamptz
                 AND first_claimed_at <= %(now)s::timestamptz
                 AND first_claimed_at - planned_at - held > %(claim_within)s::interval
                 AND slo_marks & %(excluded_marks)s::integer = 0
           ) AS late_claims
    FROM executions GROUP BY job, queue, state
),
events AS (
    SELECT t.execution_id, t.event, t.from_state, t.reason, t.at
    FROM transitions AS t
    WHERE t.event IN ('CLAIMED', 'LEASE_EXPIRED', 'STALE_REFUSED')
      AND t.at > %(start)s::timestamptz AND t.at <= %(now)s::timestamptz
),
failures AS (
    SELECT t.event
    FROM transitions AS t
    WHERE t.event IN ('FAILED', 'TIMED_OUT')
      AND t.at > %(start)s::timestamptz AND t.at <= %(now)s::timestamptz
),
throttled AS MATERIALIZED (
    SELECT execution_id, scope, held, at FROM throttles
    WHERE at > %(lookback)s::timestamptz AND at <= %(now)s::timestamptz
),
late AS (
    SELECT greatest(ev.at - e.due_at, interval '0') AS v
    FROM events AS ev JOIN executions AS e ON e.id = ev.execution_id
    WHERE ev.event = 'CLAIMED'
      AND NOT EXISTS (
          SELECT 1 FROM throttled AS th
          WHERE th.execution_id = e.id AND th.at >= e.due_at AND th.at <= ev.at
      )
)
SELECT
    (SELECT coalesce(json_agg(json_build_array(job, queue, state, n)), '[]'::json) FROM counts),
    (SELECT count(*) FROM executions
     WHERE state IN ('RETRY_WAIT', 'SCHEDULED')
       AND due_at <= %(now)s::timestamptz AND due_at < %(held)s::timestamptz),
    (SELECT count(*) FROM events WHERE event = 'STALE_REFUSED'),
    (SELECT count(*) FROM events
     WHERE event = 'LEASE_EXPIRED' OR (event = 'CLAIMED' AND from_state = 'RUNNING')),
    (SELECT count(*) FROM late),
    (SELECT percentile_disc(ARRAY[0.5, 0.9, 0.99]::float8[]) WITHIN GROUP (ORDER BY v)
     FROM late),
    (SELECT max(v) FROM late),
    (SELECT coalesce(json_agg(json_build_array(scope, n, us) ORDER BY scope), '[]'::json)
     FROM (SELECT scope, count(*) AS n,
                  (extract(epoch FROM sum(held)) * 1000000)::bigint AS us
           FROM throttled WHERE at > %(start)s::timestamptz
           GROUP BY scope) AS by_scope),
    (SELECT count(*) FROM events
     WHERE event = 'STALE_REFUSED' AND reason = %(heartbeat_refused)s::text),
    (SELECT count(*) FROM failures WHERE event = 'TIMED_OUT'),
    (SELECT count(*) FROM failures WHERE event = 'FAILED'),
    (SELECT coalesce(sum(late_claims), 0) FROM counts)

-- name: due_groups
-- Store.unserved in one statement (one snapshot): the due executions (as stats counts
-- the due backlog) by job and pinned version, as a JSON array of [job, job_version,
-- count], read through executions_claimable; and the schedules not paused with a slot
-- still to come (next_due < NEVER).
SELECT
    (SELECT coalesce(json_agg(json_build_array(job, job_version, n)), '[]'::json)
     FROM (SELECT job, job_version, count(*) AS n FROM executions
           WHERE state IN ('RETRY_WAIT', 'SCHEDULED')
             AND due_at <= %(now)s::timestamptz AND due_at < %(held)s::timestamptz
           GROUP BY job, job_version) AS due),
    (SELECT count(*) FROM schedules
     WHERE NOT paused AND next_due < %(never)s::timestamptz)

-- name: job_counts
-- Store.job_counts: executions created in (%(start)s, %(now)s] by job and current
-- state. Ids are time-ordered (minted by the submitter's clock, created_at by the
-- server's), so the window is a range of executions_pkey from %(first_id)s (the
-- window's start less a slack for clock skew); created_at then decides. No index
-- on created_at: every insert would pay for one.
SELECT job, state, count(*) FROM executions
WHERE id >= %(first_id)s::uuid
  AND created_at > %(start)s::timestamptz AND created_at <= %(now)s::timestamptz
  AND (%(job)s::text IS NULL OR job = %(job)s::text)
GROUP BY job, state

-- fragment: slo_facts
-- The columns of the facts CTE of slo_verdicts (see store/shared.sql), from the
-- executions (or their rows deleted) as e.
    SELECT e.id, e.job, e.state, e.planned_at, e.first_claimed_at, e.first_finished_at,
           e.held, e.slo_marks AS marks

-- fragment: slo_counted
-- The executions the service-level report counts (fencepost.domain.slo.counted): not
-- SKIPPED, not CANCELLED before a claim. A condition of a WHERE clause over e.
      e.state <> 'SKIPPED' AND (e.state <> 'CANCELLED' OR e.first_claimed_at IS NOT NULL)

-- fragment: slo_few_groups
-- FROM the verdicts, for a GROUP BY of them. The planner takes the number of verdict
-- pairs for the number of distinct times they are computed from (every execution),
-- and sorted a million executions on disk to group them; through a subquery it
-- cannot look into (OFFSET 0) it assumes a few hundred groups, and hashes them.
    FROM (SELECT * FROM verdicts OFFSET 0) AS v

-- fragment: slo_objectives
-- The p CTE of slo_verdicts: the report's now and objectives.
p AS (
    SELECT %(now)s::timestamptz AS now, %(claim_within)s::interval AS claim_within,
           %(finish_within)s::interval AS finish_within
),

-- name: slo
-- Store.slo's counts (SqlStore._slo) in one scan of the counted executions planned in
-- [%(since)s, %(now)s] (since = min(start, now - 6 h): the report's window and its
-- burn windows): per objective and verdict (NULL: undecided), how many were planned
-- in the window (>= %(start)s), in the last 6 h (>= %(h6)s) and in the last hour
-- (>= %(h1)s). No index on planned_at: the window (30 days by default) is most of the
-- table, which prune keeps small, and every insert would pay for one.
WITH
-- include: slo_objectives
facts AS (
    -- include: slo_facts
    FROM executions AS e
    WHERE e.planned_at >= %(since)s::timestamptz AND e.planned_at <= %(now)s::timestamptz
      AND
      -- include: slo_counted
),
-- include: slo_verdicts
-- Counted by both verdicts at once, then per objective from those few rows: an
-- execution turned into a row per objective (a LATERAL VALUES) cost six times more.
, pairs AS MATERIALIZED (
    SELECT claim_verdict, finish_verdict,
           count(*) FILTER (WHERE planned_at >= %(start)s::timestamptz) AS in_window,
           count(*) FILTER (WHERE planned_at >= %(h6)s::timestamptz) AS in_6h,
           count(*) FILTER (WHERE planned_at >= %(h1)s::timestamptz) AS in_1h
    -- include: slo_few_groups
    GROUP BY claim_verdict, finish_verdict
)
SELECT 'claim', claim_verdict, sum(in_window)::bigint, sum(in_6h)::bigint, sum(in_1h)::bigint
FROM pairs GROUP BY claim_verdict
UNION ALL
SELECT 'finish', finish_verdict, sum(in_window)::bigint, sum(in_6h)::bigint, sum(in_1h)::bigint
FROM pairs GROUP BY finish_verdict

-- name: slo_worst
-- Store.slo's worst offenders: the %(worst)s counted executions planned in [%(start)s,
-- %(now)s] claimed latest (never claimed: late until now), then by planned time and
-- id, with their claim verdict (NULL: undecided).
WITH
-- include: slo_objectives
facts AS (
    -- include: slo_facts
           , greatest(coalesce(e.first_claimed_at, %(now)s::timestamptz) - e.planned_at,
                      interval '0') AS lateness
    FROM executions AS e
    WHERE e.planned_at >= %(start)s::timestamptz AND e.planned_at <= %(now)s::timestamptz
      AND
      -- include: slo_counted
    ORDER BY lateness DESC, e.planned_at, e.id
    LIMIT %(worst)s
),
-- include: slo_verdicts
SELECT id, job, planned_at, first_claimed_at, lateness, state, claim_verdict
FROM verdicts
ORDER BY lateness DESC, planned_at, id

-- name: slo_rollups_between
-- What prune rolled up of the days [%(first_day)s, %(last_day)s] (days since 1970-01-01,
-- UTC), per objective and verdict.
SELECT objective, verdict, sum(count)::bigint FROM slo_rollups
WHERE day >= %(first_day)s::integer AND day <= %(last_day)s::integer
GROUP BY objective, verdict

-- fragment: slo_rollup
-- Prune's rollups (migration 15), after a CTE facts of the counted executions it is
-- deleting (slo_verdicts): their verdicts at the default objectives (%(claim_within)s,
-- %(finish_within)s) at the store's now, added to slo_rollups by the UTC day of the
-- planned time (days since 1970-01-01: fencepost.domain.slo.day_number), job,
-- objective and verdict; the undecided are left out. In key order: two prunes adding
-- to the same rows wait for each other rather than deadlock. The end of a WITH list:
-- its last CTE is rolled.
p AS (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now,
           %(claim_within)s::interval AS claim_within,
           %(finish_within)s::interval AS finish_within
),
-- include: slo_verdicts
, pairs AS MATERIALIZED (  -- by both verdicts at once: see slo
    SELECT (planned_at AT TIME ZONE 'UTC')::date - date '1970-01-01' AS day, job,
           claim_verdict, finish_verdict, count(*) AS n
    -- include: slo_few_groups
    GROUP BY 1, 2, 3, 4
),
rolled AS (
    INSERT INTO slo_rollups AS r (day, job, objective, verdict, count)
    SELECT day, job, objective, verdict, sum(n)
    FROM (
        SELECT day, job, 'claim' AS objective, claim_verdict AS verdict, n FROM pairs
        UNION ALL
        SELECT day, job, 'finish', finish_verdict, n FROM pairs
    ) AS o
    WHERE verdict IS NOT NULL
    GROUP BY day, job, objective, verdict
    ORDER BY day, job, objective, verdict
    ON CONFLICT (day, job, objective, verdict) DO UPDATE SET count = r.count + excluded.count
)

-- name: count_prunable
-- What prune would delete, through executions_finished (:before, a bound SQLite's
-- needs, is not read here).
SELECT count(*) FROM executions
WHERE state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED')
  AND updated_at <= %(cutoff)s::timestamptz

-- name: prune_batch
-- One batch of prune, one statement (its own short transaction): the oldest
-- finished executions, read through executions_finished, skipping rows another
-- transaction holds (a replay, a concurrent prune). Their payloads, transitions,
-- commands and idempotency keys go by id or key, and their verdicts into the
-- rollups (slo_rollup). The ids come as arrays, so each table is read by key (see
-- acquire_schedules). Whole days of history go faster: see store/postgres/history.py.
WITH doomed AS (
    SELECT e.id FROM executions AS e
    WHERE e.state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED')
      AND e.updated_at <= %(cutoff)s::timestamptz
    ORDER BY e.updated_at
    LIMIT %(batch)s
    FOR UPDATE OF e SKIP LOCKED
),
gone AS (
    DELETE FROM executions AS e WHERE e.id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING e.id, e.idempotency_key, e.job, e.state, e.planned_at, e.first_claimed_at,
              e.first_finished_at, e.held, e.slo_marks
),
keys AS (
    DELETE FROM execution_keys AS k
    WHERE k.key = ANY(ARRAY(SELECT idempotency_key FROM gone WHERE idempotency_key IS NOT NULL))
),
orders AS (
    DELETE FROM commands AS c WHERE c.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
data AS (
    DELETE FROM execution_data AS d WHERE d.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
audit AS (
    DELETE FROM transitions AS t WHERE t.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
facts AS (
    -- include: slo_facts
    FROM gone AS e
    WHERE
      -- include: slo_counted
),
-- include: slo_rollup
SELECT count(*) FROM gone

-- name: roll_up_day
-- Before prune drops a day of history, in the transaction that drops its executions
-- (history.drop_finished_days): the verdicts of the day's counted executions into the
-- rollups (slo_rollup), and how many executions the day holds. {day} is the detached
-- executions partition (psycopg.sql.Identifier).
WITH facts AS (
    -- include: slo_facts
    FROM {day} AS e
    WHERE
      -- include: slo_counted
),
-- include: slo_rollup
SELECT count(*) FROM {day}

-- name: insert_job
-- A published entry is immutable: one already stored is left as it is (the caller
-- compares digests with select_job_entry afterwards, in the same transaction; a
-- concurrent publish of the same key is waited for, then seen).
INSERT INTO job_catalogue (name, version, digest, definition, published_at)
VALUES (%(name)s, %(version)s, %(digest)s, %(definition)s,
        coalesce(%(now)s::timestamptz, clock_timestamp()))
ON CONFLICT (name, version) DO NOTHING

-- name: select_job_entry
SELECT name, version, digest, definition, published_at
FROM job_catalogue
WHERE name = %(name)s AND version = %(version)s

-- name: select_catalogue
SELECT name, version, digest, definition, published_at
FROM job_catalogue
ORDER BY name, version

-- name: catalogue_keys
SELECT name, version FROM job_catalogue

-- name: caller_session
-- A caller's connection (Store.submit(connection=...)), and the store's own, described
-- the same way: which server and database (the postmaster's start time tells two
-- servers on one port apart), and the session's search_path and TimeZone.
SELECT current_database(), pg_postmaster_start_time(), current_setting('port'),
       current_setting('search_path'), current_setting('TimeZone')

-- name: caller_settings
-- Inside the caller's transaction only (set_config(..., true) is SET LOCAL): the store's
-- search_path and UTC for fencepost's statements; called again with the caller's values
-- afterwards.
SELECT set_config('search_path', %(search_path)s, true), set_config('TimeZone', %(zone)s, true)

-- name: watched_executions
-- The waits' watcher (Store.wait), one query per look for every waited-for id
-- named: those finished, and those of %(fresh)s (ids whose waiters just arrived)
-- whatever their state, so that an unknown id is known as such.
SELECT * FROM execution_rows
WHERE id = ANY(%(ids)s::uuid[])
  AND (state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED') OR id = ANY(%(fresh)s::uuid[]))

-- name: done_channel
-- The channel of terminal transitions (see write_change): one per schema.
SELECT left('fencepost_done_' || current_schema(), 63)

-- name: unpublished_jobs
-- The jobs that work submitted before their publication waits for (through the
-- executions' partial index; schedules are few).
SELECT job FROM executions WHERE unset_defaults IS NOT NULL
UNION
SELECT job FROM schedules WHERE unset_defaults IS NOT NULL

-- name: adopt_execution_defaults
-- The published defaults of %(job)s fill in what the submitters of its unfinished
-- executions left out (a NULL default leaves the store's); never fewer attempts than
-- the one already made.
UPDATE executions
SET max_attempts = CASE
        WHEN %(max_attempts)s::integer IS NOT NULL AND strpos(unset_defaults, 'max_attempts') > 0
        THEN greatest(%(max_attempts)s::integer, attempt) ELSE max_attempts END,
    timeout = CASE WHEN %(timeout)s::interval IS NOT NULL AND strpos(unset_defaults, 'timeout') > 0
                   THEN %(timeout)s::interval ELSE timeout END,
    priority = CASE WHEN %(priority)s::integer IS NOT NULL AND strpos(unset_defaults, 'priority') > 0
                    THEN %(priority)s::integer ELSE priority END,
    queue = CASE WHEN %(queue)s::text IS NOT NULL AND strpos(unset_defaults, 'queue') > 0
                 THEN %(queue)s::text ELSE queue END,
    unset_defaults = NULL
WHERE job = %(job)s AND unset_defaults IS NOT NULL
  AND state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')

-- name: forget_unset_defaults
-- Finished executions keep what they ran with.
UPDATE executions SET unset_defaults = NULL WHERE job = %(job)s AND unset_defaults IS NOT NULL

-- name: adopt_schedule_defaults
UPDATE schedules
SET max_attempts = CASE
        WHEN %(max_attempts)s::integer IS NOT NULL AND strpos(unset_defaults, 'max_attempts') > 0
        THEN %(max_attempts)s::integer ELSE max_attempts END,
    priority = CASE WHEN %(priority)s::integer IS NOT NULL AND strpos(unset_defaults, 'priority') > 0
                    THEN %(priority)s::integer ELSE priority END,
    queue = CASE WHEN %(queue)s::text IS NOT NULL AND strpos(unset_defaults, 'queue') > 0
                 THEN %(queue)s::text ELSE queue END,
    unset_defaults = NULL
WHERE job = %(job)s AND unset_defaults IS NOT NULL

-- name: mark_schedule_unset
UPDATE schedules SET unset_defaults = %(unset)s WHERE id = %(id)s AND job_version IS NULL

-- Flow control (fencepost.store.flow): limits, paused queues, token buckets, throttles.

-- fragment: limit_columns
scope, rate_count, rate_period, burst, concurrency, per_key, paused, source, updated_by,
updated_at

-- name: flow_limits
SELECT
-- include: limit_columns
FROM flow_limits ORDER BY scope

-- name: flow_limits_locked
-- A limited claim holds every limit for its transaction, in scope order: limited
-- claims take turns, so no two spend the same token or the same place. For the rest
-- of the transaction its statements run on generic plans once prepared: planning
-- flow_candidates afresh each time cost more than running it (about 1 ms of 1.4).
SELECT
-- include: limit_columns
FROM flow_limits
WHERE set_config('plan_cache_mode', 'force_generic_plan', true) IS NOT NULL
ORDER BY scope FOR UPDATE

-- name: flow_state
-- What a limited claim reads once it holds the limits, in one round trip: the
-- store's now (read after the lock, so that no claim stamps its starts earlier than
-- one that spent tokens before it), the live leases per (scope, key) of the limits
-- with a concurrency (%(counted)s), and the buckets of flow_buckets_held.
WITH clock AS MATERIALIZED (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
l AS (
    SELECT * FROM unnest(%(scopes)s::text[], %(kinds)s::text[], %(names)s::text[],
                         %(per_keys)s::boolean[], %(counted)s::boolean[])
        AS l(scope, kind, name, per_key, counted)
)
SELECT 'now', NULL::text, NULL::text, NULL::double precision, clock.now, NULL::timestamptz
FROM clock
UNION ALL
SELECT 'running', l.scope, CASE WHEN l.per_key THEN coalesce(e.limit_key, '') ELSE '' END,
       count(*)::double precision, NULL, NULL
FROM l JOIN executions AS e
  ON l.counted AND e.state = 'RUNNING' AND e.lease_until > (SELECT now FROM clock)
 AND ((l.kind = 'job' AND e.job = l.name) OR (l.kind = 'queue' AND e.queue = l.name))
WHERE e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
GROUP BY l.scope, 3
UNION ALL
SELECT 'bucket', b.scope, b.key, b.tokens, b.at, b.denied_at
FROM flow_buckets AS b
WHERE b.scope = ANY(%(scopes)s::text[]) AND (b.key = '' OR b.ready_at > (SELECT now FROM clock))

-- name: flow_buckets_of
SELECT b.scope, b.key, b.tokens, b.at, b.denied_at
FROM unnest(%(scopes)s::text[], %(keys)s::text[]) AS p(scope, key)
JOIN flow_buckets AS b ON b.scope = p.scope AND b.key = p.key

-- fragment: flow_filters
      AND (%(queues)s::text[] IS NULL OR e.queue = ANY(%(queues)s::text[]))
      AND e.job <> ALL(%(held_jobs)s::text[])
      AND e.queue <> ALL(%(held_queues)s::text[])
      AND (e.job || chr(31) || coalesce(e.limit_key, '')) <> ALL(%(held_job_keys)s::text[])
      AND (e.queue || chr(31) || coalesce(e.limit_key, '')) <> ALL(%(held_queue_keys)s::text[])

-- name: flow_candidates
-- Claimable executions (due waiting ones, then expired leases with attempts left) in
-- claim order, within the claim's filters and queues, leaving out the paused and
-- spent scopes and keys (the held_* arrays; a key pair is name || chr(31) || key).
WITH waiting AS (
    SELECT e.id, e.job, e.queue, e.limit_key, e.priority, e.due_at
    FROM executions AS e
    WHERE e.state IN ('RETRY_WAIT', 'SCHEDULED') AND e.due_at <= %(now)s::timestamptz
      -- include: claim_filters
      -- include: flow_filters
      -- The claim's max_per_bucket (%(cap)s): none of a bucket already at its cap.
      AND (%(cap)s::integer IS NULL OR (
          SELECT count(*) FROM executions AS r
          WHERE r.bucket = e.bucket AND r.state = 'RUNNING'
            AND r.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
      ) < %(cap)s::integer)
    ORDER BY e.priority DESC, e.due_at, e.id
    LIMIT %(n)s
),
expired AS (
    SELECT e.id, e.job, e.queue, e.limit_key, e.priority, e.due_at
    FROM executions AS e
    WHERE e.state = 'RUNNING' AND e.lease_until <= %(now)s::timestamptz
      AND e.attempt < e.max_attempts
      -- include: claim_filters
      -- include: flow_filters
    ORDER BY e.lease_until
    LIMIT %(n)s
)
SELECT id, job, queue, limit_key, due_at
FROM (SELECT * FROM waiting UNION ALL SELECT * FROM expired) AS c
ORDER BY priority DESC, due_at, id
LIMIT %(n)s

-- fragment: add_throttle_totals
INSERT INTO throttle_totals AS t (scope, count, held)
SELECT scope, count(*), sum(held) FROM throttled GROUP BY scope
ON CONFLICT (scope) DO UPDATE SET count = t.count + excluded.count, held = t.held + excluded.held

-- name: flow_put
-- A limited claim's writes in one round trip: its buckets (upserted), its throttle
-- records, their per-scope totals, and each throttled execution's held time (its
-- records' held added: fencepost.domain.slo, the throttled exclusion). The claim
-- leased those executions in this transaction: their rows are held already.
WITH buckets AS (
    INSERT INTO flow_buckets AS b (scope, key, tokens, at, ready_at, denied_at)
    SELECT * FROM unnest(
        %(scopes)s::text[], %(keys)s::text[], %(tokens)s::double precision[],
        %(ats)s::timestamptz[], %(ready_ats)s::timestamptz[], %(denied_ats)s::timestamptz[]
    )
    ON CONFLICT (scope, key) DO UPDATE
    SET tokens = excluded.tokens, at = excluded.at, ready_at = excluded.ready_at,
        denied_at = excluded.denied_at
),
throttled AS (
    INSERT INTO throttles (execution_id, scope, held, at)
    SELECT * FROM unnest(
        %(ids)s::uuid[], %(throttle_scopes)s::text[], %(helds)s::interval[],
        %(throttle_ats)s::timestamptz[]
    )
    RETURNING execution_id, scope, held
),
-- A throttled first claim's held time kept on its execution (epoch 1 after the lease
-- this transaction wrote): the larger, not the sum (see SQLite's flow_hold).
held AS (
    UPDATE executions AS e SET held = greatest(e.held, t.held)
    FROM (SELECT execution_id, max(held) AS held FROM throttled GROUP BY execution_id) AS t
    WHERE e.id = t.execution_id AND e.id = ANY(%(ids)s::uuid[]) AND e.epoch = 1
      AND e.id >= /*live*/'00000000-0000-0000-0000-000000000000'::uuid
)
-- include: add_throttle_totals

-- name: flow_set_limit
-- An operator's limit: replaces whatever the scope had, keeping a queue's pause.
INSERT INTO flow_limits AS f (
-- include: limit_columns
) VALUES (
    %(scope)s, %(rate_count)s, %(rate_period)s, %(burst)s, %(concurrency)s, %(per_key)s,
    false, 'operator', %(updated_by)s, %(now)s
)
ON CONFLICT (scope) DO UPDATE
SET rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    burst = excluded.burst, concurrency = excluded.concurrency, per_key = excluded.per_key,
    source = 'operator', updated_by = excluded.updated_by, updated_at = excluded.updated_at
RETURNING
-- include: limit_columns

-- name: flow_declare_limit
-- A limit declared with a job: written unless an operator set the scope (or paused
-- it), and only when it differs from the declaration stored.
INSERT INTO flow_limits AS f (
-- include: limit_columns
) VALUES (
    %(scope)s, %(rate_count)s, %(rate_period)s, %(burst)s, %(concurrency)s, %(per_key)s,
    false, 'code', %(updated_by)s, %(now)s
)
ON CONFLICT (scope) DO UPDATE
SET rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    burst = excluded.burst, concurrency = excluded.concurrency, per_key = excluded.per_key,
    updated_by = excluded.updated_by, updated_at = excluded.updated_at
WHERE f.source = 'code' AND NOT f.paused
  AND (f.rate_count, f.rate_period, f.burst, f.concurrency, f.per_key)
      IS DISTINCT FROM (excluded.rate_count, excluded.rate_period, excluded.burst,
                        excluded.concurrency, excluded.per_key)
RETURNING scope

-- name: flow_get_limit
SELECT
-- include: limit_columns
FROM flow_limits WHERE scope = %(scope)s FOR UPDATE

-- name: flow_clear_limit
-- remove_limit on a paused queue: the pause stays, its rate and concurrency go.
UPDATE flow_limits
SET rate_count = NULL, rate_period = NULL, burst = NULL, concurrency = NULL, per_key = false
WHERE scope = %(scope)s

-- name: flow_delete_limit
DELETE FROM flow_limits WHERE scope = %(scope)s

-- name: flow_pause
INSERT INTO flow_limits (scope, paused, source, updated_by, updated_at)
VALUES (%(scope)s, true, 'operator', %(updated_by)s, %(now)s)
ON CONFLICT (scope) DO UPDATE
SET paused = true, updated_by = excluded.updated_by, updated_at = excluded.updated_at

-- name: flow_unpause
UPDATE flow_limits SET paused = false, updated_by = %(updated_by)s, updated_at = %(now)s
WHERE scope = %(scope)s

-- name: flow_resume_throttles
-- Resuming a queue: each execution the pause kept waiting past its due time is
-- recorded as throttled by the queue, for the time since it was due (or paused),
-- and held that much longer (see flow_put).
WITH throttled AS (
    INSERT INTO throttles (execution_id, scope, held, at)
    SELECT e.id, %(scope)s, %(now)s::timestamptz - greatest(e.due_at, %(since)s::timestamptz),
           %(now)s::timestamptz
    FROM executions AS e
    WHERE e.queue = %(queue)s AND e.state IN ('RETRY_WAIT', 'SCHEDULED')
      AND e.due_at <= %(now)s::timestamptz
    RETURNING execution_id, scope, held
),
held AS (
    UPDATE executions AS e SET held = greatest(e.held, t.held)
    FROM throttled AS t WHERE e.id = t.execution_id AND e.epoch = 0
)
-- include: add_throttle_totals

-- name: flow_log_change
INSERT INTO flow_changes (at, actor, action, scope, detail)
VALUES (%(now)s, %(actor)s, %(action)s, %(scope)s, %(detail)s)

-- name: flow_changes
SELECT at, actor, action, scope, detail FROM flow_changes ORDER BY seq DESC LIMIT %(limit)s

-- name: flow_throttle_totals
SELECT scope, count, extract(epoch FROM held)::double precision FROM throttle_totals
ORDER BY scope

-- name: flow_throttled
SELECT scope, count(*), coalesce(sum(extract(epoch FROM held)), 0)::double precision
FROM throttles WHERE at >= %(since)s::timestamptz
GROUP BY scope ORDER BY scope

-- name: flow_throttles_of
-- One execution's throttle records (Store.throttles), through throttles_execution.
SELECT execution_id, scope, held, at FROM throttles WHERE execution_id = %(id)s::uuid
ORDER BY at

-- name: flow_prune
-- With a prune (same cutoff): throttle records at or before it, and the buckets that
-- are full again and held nothing back since it (a missing bucket is a full one), or
-- whose scope has no limit any more.
WITH gone AS (DELETE FROM throttles WHERE at <= %(cutoff)s::timestamptz)
DELETE FROM flow_buckets AS b
WHERE (b.denied_at IS NULL OR b.denied_at <= %(cutoff)s::timestamptz)
  AND NOT EXISTS (
      SELECT 1 FROM flow_limits AS l
      WHERE l.scope = b.scope AND l.rate_count IS NOT NULL
        AND b.tokens + extract(epoch FROM %(now)s::timestamptz - b.at)
                       * l.rate_count / l.rate_period < l.burst
  )


-- History charts (fencepost.store.history, store/sqlhistory.py): minute rows rolled
-- up from finished executions and throttle records, and the windows read from them.

-- name: history_watermark
-- The roll-up's watermark (store.history), locked first in the roll-up's
-- transaction: a second roll-up waits here until this one commits, then reads where
-- it left the watermark.
SELECT finished_at, finished_id, throttled_at FROM history_watermark WHERE id = 1 FOR UPDATE

-- name: history_watermark_nowait
-- As history_watermark, for a roll-up that would rather not wait: no row while
-- another transaction holds it (that one is rolling up).
SELECT finished_at, finished_id, throttled_at FROM history_watermark WHERE id = 1 FOR UPDATE SKIP LOCKED

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
       e.first_claimed_at, e.first_finished_at, e.held, e.slo_marks
FROM executions AS e
WHERE e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'SKIPPED')
  AND (e.updated_at, e.id) > (%(after_at)s, %(after_id)s::uuid)
  AND e.updated_at < %(until)s
ORDER BY e.updated_at, e.id
LIMIT %(limit)s

-- name: history_throttled
-- The throttle records of [since, until) by minute, with their execution's job and
-- queue (through throttles_at; records of executions already gone are left out).
SELECT floor(extract(epoch FROM t.at) / 60)::integer AS minute, e.job, e.queue, sum(t.held)
FROM throttles AS t JOIN executions AS e ON e.id = t.execution_id
WHERE t.at >= %(since)s AND t.at < %(until)s
GROUP BY 1, e.job, e.queue

-- name: history_add
-- executemany: one row's increments (of one span: store.sqlhistory), added to what it holds.
INSERT INTO history_minutes AS m (
    span_minutes, minute, job, queue,
-- include: history_columns
) VALUES (
    %(span_minutes)s, %(minute)s, %(job)s, %(queue)s, %(succeeded)s, %(dead)s, %(retried)s,
    %(timed_out)s, %(cancelled)s, %(skipped)s, %(claims)s, %(late_0)s, %(late_1)s,
    %(late_2)s, %(late_3)s, %(late_4)s, %(late_5)s, %(late_6)s, %(late_7)s, %(late_8)s,
    %(late_9)s, %(late_10)s, %(late_11)s, %(late_12)s, %(late_13)s, %(late_14)s,
    %(late_15)s, %(late_16)s, %(late_17)s, %(throttled_us)s, %(claim_counted)s,
    %(claim_missed)s, %(finish_counted)s, %(finish_missed)s
)
ON CONFLICT (span_minutes, minute, job, queue) DO UPDATE SET
-- include: history_add_counters

-- name: history_advance
UPDATE history_watermark
SET finished_at = %(finished_at)s, finished_id = %(finished_id)s, throttled_at = %(throttled_at)s
WHERE id = 1

-- name: history_points
-- A window's rows of its step's span (per_point minutes) in [first, last), one per
-- step and key, summed per step (its index from the window's start), through the
-- primary key.
SELECT (minute - %(first)s) / %(per_point)s AS step,
-- include: history_sums
FROM history_minutes
WHERE span_minutes = %(per_point)s AND minute >= %(first)s AND minute < %(last)s
GROUP BY 1

-- name: history_points_job
-- history_points of one job, through history_minutes_job.
SELECT (minute - %(first)s) / %(per_point)s AS step,
-- include: history_sums
FROM history_minutes
WHERE job = %(job)s AND span_minutes = %(per_point)s AND minute >= %(first)s AND minute < %(last)s
GROUP BY 1

-- name: history_points_queue
-- history_points of one queue, through history_minutes_queue.
SELECT (minute - %(first)s) / %(per_point)s AS step,
-- include: history_sums
FROM history_minutes
WHERE queue = %(queue)s AND span_minutes = %(per_point)s AND minute >= %(first)s AND minute < %(last)s
GROUP BY 1

-- name: history_points_job_queue
-- history_points of one job in one queue.
SELECT (minute - %(first)s) / %(per_point)s AS step,
-- include: history_sums
FROM history_minutes
WHERE job = %(job)s AND queue = %(queue)s AND span_minutes = %(per_point)s
  AND minute >= %(first)s AND minute < %(last)s
GROUP BY 1

-- name: history_by_job
-- A window's minute rows summed per job.
SELECT job,
-- include: history_sums
FROM history_minutes
WHERE span_minutes = %(per_point)s AND minute >= %(first)s AND minute < %(last)s
GROUP BY job

-- name: history_by_queue
-- A window's minute rows summed per queue.
SELECT queue,
-- include: history_sums
FROM history_minutes
WHERE span_minutes = %(per_point)s AND minute >= %(first)s AND minute < %(last)s
GROUP BY queue

-- name: history_prune
-- With prune: the rows past their retention, of every span (%(spans)s).
DELETE FROM history_minutes WHERE span_minutes = ANY(%(spans)s) AND minute < %(before)s

-- Deleting one execution (Store.delete, and a bulk delete: fencepost.store.bulk).

-- name: delete_execution
-- The finished execution %(id)s, which this transaction holds (lock_execution), with
-- every row of it, in one statement as a batch of prune deletes (prune_batch): its
-- payload, transitions, commands, throttle records (through throttles_execution,
-- migration 19) and idempotency key, its verdicts into the rollups (slo_rollup), and
-- a record of the deletion by %(actor)s at %(now)s.
WITH gone AS (
    DELETE FROM executions AS e
    WHERE e.id = %(id)s::uuid AND e.state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED')
    RETURNING e.id, e.idempotency_key, e.job, e.queue, e.state, e.planned_at,
              e.first_claimed_at, e.first_finished_at, e.held, e.slo_marks
),
keys AS (
    DELETE FROM execution_keys AS k
    WHERE k.key = ANY(ARRAY(SELECT idempotency_key FROM gone WHERE idempotency_key IS NOT NULL))
),
orders AS (
    DELETE FROM commands AS c WHERE c.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
data AS (
    DELETE FROM execution_data AS d WHERE d.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
audit AS (
    DELETE FROM transitions AS t WHERE t.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
held_back AS (
    DELETE FROM throttles AS h WHERE h.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
recorded AS (
    INSERT INTO deletions (execution_id, job, queue, state, actor, at)
    SELECT id, job, queue, state, %(actor)s, %(now)s::timestamptz FROM gone
    RETURNING seq
),
facts AS (
    -- include: slo_facts
    FROM gone AS e
    WHERE
      -- include: slo_counted
),
-- include: slo_rollup
SELECT seq FROM recorded

-- name: select_deletions
-- Store.deletions: oldest first, after the record numbered %(after)s (0: from the first).
SELECT seq, execution_id, job, queue, state, actor, at FROM deletions
WHERE seq > %(after)s::bigint
ORDER BY seq
LIMIT %(limit)s

-- name: prune_deletions
-- With a prune (same cutoff): the records of deletions made at or before it.
DELETE FROM deletions WHERE at <= %(cutoff)s::timestamptz

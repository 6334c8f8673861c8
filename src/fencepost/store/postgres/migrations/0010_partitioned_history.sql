-- fencepost PostgreSQL schema, version 10: history partitioned by creation day.
--
-- At a million hourly schedules, fourteen days of history are 336 million rows,
-- and deleting them row by row is the dominant cost of the database (and its
-- bloat). From this version executions, their payloads and their audit trail are
-- partitioned by RANGE of the execution's id: ids are UUIDv7, so an id's first 48
-- bits are its creation time in milliseconds and a range of ids is a span of
-- time. The store creates one partition per UTC day ahead of the rows it inserts
-- (store/postgres/history.py), and prune detaches and drops whole days whose
-- executions all finished before its cutoff; only the edges are deleted by row.
-- Every lookup by id names one partition (the planner prunes the rest).
--
-- The rows that exist when this migration runs are not copied: the old tables
-- become the first partition of each (executions_p0, execution_data_p0,
-- transitions_p0), covering every id below the first day boundary after the
-- newest row (a database with no executions keeps no first partition). Prune deletes from it by row, and drops it whole once all of it is
-- older than the cutoff.
--
-- Idempotency keys are unique across partitions in execution_keys (a partitioned
-- table's unique index must contain the partition key, and a key is not an id):
-- a keyed submit claims its key there, in the same statement that inserts the
-- execution. Prune deletes a partition's keys before dropping it.
--
-- On a large database this migration, run as it is, reads the executions once
-- for their keys and once more to check the first partition's bound, with writes
-- waiting. `fencepost db migrate` does both beforehand, online, in batches, with a
-- progress bar (store/postgres/conversion.py), and leaves its bound in
-- execution_history_prepared: then this migration only renames and attaches.

CREATE TABLE IF NOT EXISTS execution_keys (
    key text COLLATE "C" PRIMARY KEY,
    execution_id uuid NOT NULL
);

DO $migration$
DECLARE
    newest uuid;
    boundary timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    bound uuid;
    prepared uuid;
    keys_ready boolean;
    suffix record;
BEGIN
    -- Keys: copied here unless `fencepost db migrate` copied them beforehand and
    -- kept them current with a trigger (store/postgres/conversion.py); it left the
    -- first partition's bound, already checked against every row, in a table.
    IF to_regclass('execution_history_prepared') IS NOT NULL THEN
        SELECT p.bound, p.keys_done INTO prepared, keys_ready FROM execution_history_prepared AS p;
        DROP TRIGGER IF EXISTS executions_keys_sync ON executions;
        DROP FUNCTION IF EXISTS executions_keys_sync();
        DROP TABLE execution_history_prepared;
    END IF;
    IF NOT coalesce(keys_ready, false) THEN
        INSERT INTO execution_keys (key, execution_id)
        SELECT idempotency_key, id FROM executions WHERE idempotency_key IS NOT NULL
        ON CONFLICT (key) DO NOTHING;
    END IF;

    -- The first partition ends at the first UTC day boundary after its newest row
    -- (at today's start when it is empty), or at the bound `fencepost migrate`
    -- validated beforehand.
    IF prepared IS NOT NULL THEN
        bound := prepared;
    ELSE
        SELECT id INTO newest FROM executions ORDER BY id DESC LIMIT 1;
        IF newest IS NOT NULL THEN
            boundary := greatest(
                boundary + interval '1 day',
                date_trunc('day', to_timestamp(
                    ('x' || substr(replace(newest::text, '-', ''), 1, 12))::bit(48)::bigint
                    / 1000.0) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day');
        END IF;
        bound := (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
            FROM (SELECT lpad(to_hex((extract(epoch FROM boundary) * 1000)::bigint), 12, '0') AS h) AS x;
    END IF;

    DROP VIEW execution_rows;
    ALTER TABLE commands DROP CONSTRAINT IF EXISTS commands_execution_id_fkey;
    DROP INDEX IF EXISTS executions_idempotency_key;

    -- The old tables become the first partitions; their indexes are renamed after
    -- them (executions_claimable -> executions_p0_claimable), as the store names
    -- every partition's indexes.
    ALTER TABLE executions RENAME TO executions_p0;
    ALTER STATISTICS executions_version_key RENAME TO executions_p0_version_key;
    ALTER TABLE execution_data RENAME TO execution_data_p0;
    ALTER TABLE transitions RENAME TO transitions_p0;
    FOR suffix IN
        SELECT c.relname AS name, t.relname AS tab
        FROM pg_index AS i
        JOIN pg_class AS c ON c.oid = i.indexrelid
        JOIN pg_class AS t ON t.oid = i.indrelid
        WHERE i.indrelid IN ('executions_p0'::regclass, 'execution_data_p0'::regclass,
                             'transitions_p0'::regclass)
    LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', suffix.name,
                       suffix.tab || substr(suffix.name, length(suffix.tab) - 2));
    END LOOP;

    -- The audit's seq: a partitioned table has no identity column before
    -- PostgreSQL 17, so a sequence default carries on from the last seq.
    ALTER TABLE transitions_p0 ALTER COLUMN seq DROP IDENTITY;
    CREATE SEQUENCE transitions_seq_seq;
    PERFORM setval('transitions_seq_seq', coalesce(max(seq), 0) + 1, false) FROM transitions_p0;

    CREATE TABLE executions (LIKE executions_p0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (id);
    ALTER TABLE executions ADD CONSTRAINT executions_pkey PRIMARY KEY (id);
    CREATE INDEX executions_active_bucket ON executions (bucket, updated_at)
        WHERE state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED');
    CREATE INDEX executions_claimable ON executions (priority DESC, due_at, id)
        WHERE state IN ('RETRY_WAIT', 'SCHEDULED');
    CREATE INDEX executions_failed ON executions (id) WHERE state = 'FAILED';
    CREATE INDEX executions_finished ON executions (updated_at)
        WHERE state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED');
    CREATE INDEX executions_leased ON executions (lease_until) WHERE state = 'RUNNING';
    CREATE INDEX executions_queue_claimable ON executions (queue, priority DESC, due_at, id)
        WHERE state IN ('RETRY_WAIT', 'SCHEDULED');
    CREATE INDEX executions_running_bucket ON executions (bucket) WHERE state = 'RUNNING';
    CREATE INDEX executions_schedule ON executions (schedule_id, slot)
        WHERE schedule_id IS NOT NULL;
    CREATE INDEX executions_schedule_state ON executions (schedule_id, state, id)
        WHERE schedule_id IS NOT NULL;
    CREATE STATISTICS executions_version_key ON ((job || ':') || job_version) FROM executions;
    EXECUTE format('ALTER TABLE executions ATTACH PARTITION executions_p0 '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', bound);

    CREATE TABLE execution_data (LIKE execution_data_p0 INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (execution_id);
    ALTER TABLE execution_data ADD CONSTRAINT execution_data_pkey PRIMARY KEY (execution_id);
    EXECUTE format('ALTER TABLE execution_data ATTACH PARTITION execution_data_p0 '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', bound);

    -- No primary key: it would have to contain execution_id; (execution_id, seq)
    -- is the audit's order and its index.
    CREATE TABLE transitions (LIKE transitions_p0 INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (execution_id);
    ALTER TABLE transitions ALTER COLUMN seq SET DEFAULT nextval('transitions_seq_seq');
    ALTER SEQUENCE transitions_seq_seq OWNED BY transitions.seq;
    CREATE INDEX transitions_execution ON transitions (execution_id, seq);
    CREATE INDEX transitions_lease_events ON transitions (at)
        WHERE event IN ('CLAIMED', 'LEASE_EXPIRED', 'STALE_REFUSED');
    EXECUTE format('ALTER TABLE transitions ATTACH PARTITION transitions_p0 '
                   'FOR VALUES FROM (MINVALUE) TO (%L)', bound);

    -- A new database (nothing stored yet) keeps no first partition: its days are
    -- made as rows arrive, whatever day a test's clock says.
    IF newest IS NULL AND prepared IS NULL THEN
        ALTER TABLE executions DETACH PARTITION executions_p0;
        ALTER TABLE execution_data DETACH PARTITION execution_data_p0;
        ALTER TABLE transitions DETACH PARTITION transitions_p0;
        DROP TABLE executions_p0, execution_data_p0, transitions_p0;
    END IF;
END
$migration$;

CREATE VIEW execution_rows AS
    SELECT e.id, e.job, e.job_version, e.state, e.due_at, e.priority, e.attempt,
           e.max_attempts, e.epoch, e.lease_owner, e.lease_until, e.timeout,
           e.idempotency_key, e.schedule_id, e.slot, e.bucket, e.bucket_key,
           e.created_at, e.updated_at, d.inputs, d.result, d.error, d.progress, e.queue
    FROM executions AS e JOIN execution_data AS d ON d.execution_id = e.id;

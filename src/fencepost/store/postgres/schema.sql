CREATE TABLE commands (
    id uuid NOT NULL,
    execution_id uuid NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    requested_by text NOT NULL,
    requested_at timestamp with time zone NOT NULL,
    owner text,
    claim_until timestamp with time zone,
    epoch bigint,
    done_at timestamp with time zone,
    CONSTRAINT commands_kind_known CHECK ((kind = ANY (ARRAY['cancel'::text, 'pause'::text, 'resume'::text]))),
    CONSTRAINT commands_state_known CHECK ((state = ANY (ARRAY['PENDING'::text, 'CLAIMED'::text, 'DONE'::text])))
);
CREATE TABLE deletions (
    seq bigint NOT NULL,
    execution_id uuid NOT NULL,
    job text NOT NULL,
    queue text NOT NULL,
    state text NOT NULL,
    actor text NOT NULL,
    at timestamp with time zone NOT NULL
);
ALTER TABLE deletions ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME deletions_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);
CREATE TABLE execution_data (
    execution_id uuid NOT NULL,
    inputs jsonb NOT NULL,
    result jsonb,
    error text,
    progress jsonb
)
PARTITION BY RANGE (execution_id);
CREATE TABLE execution_keys (
    key text NOT NULL COLLATE pg_catalog."C",
    execution_id uuid NOT NULL
);
CREATE TABLE executions (
    id uuid NOT NULL,
    job text NOT NULL,
    job_version integer,
    state text NOT NULL,
    due_at timestamp with time zone NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempt integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_until timestamp with time zone,
    timeout interval,
    idempotency_key text,
    request_hash text,
    schedule_id text,
    slot text,
    bucket integer NOT NULL,
    bucket_key text,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    trace_context text,
    unset_defaults text,
    limit_key text,
    planned_at timestamp with time zone NOT NULL,
    first_claimed_at timestamp with time zone,
    first_finished_at timestamp with time zone,
    held interval DEFAULT '00:00:00'::interval NOT NULL,
    slo_marks integer DEFAULT 0 NOT NULL,
    CONSTRAINT executions_state_known CHECK ((state = ANY (ARRAY['SCHEDULED'::text, 'RUNNING'::text, 'RETRY_WAIT'::text, 'SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text, 'SKIPPED'::text])))
)
PARTITION BY RANGE (id);
CREATE VIEW execution_rows AS
 SELECT e.id,
    e.job,
    e.job_version,
    e.state,
    e.due_at,
    e.priority,
    e.attempt,
    e.max_attempts,
    e.epoch,
    e.lease_owner,
    e.lease_until,
    e.timeout,
    e.idempotency_key,
    e.schedule_id,
    e.slot,
    e.bucket,
    e.bucket_key,
    e.created_at,
    e.updated_at,
    d.inputs,
    d.result,
    d.error,
    d.progress,
    e.queue,
    e.limit_key,
    e.planned_at
   FROM (executions e
     JOIN execution_data d ON ((d.execution_id = e.id)));
CREATE TABLE fencepost_settings (
    id integer NOT NULL,
    num_buckets integer NOT NULL,
    changed_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT fencepost_settings_id_check CHECK ((id = 1)),
    CONSTRAINT fencepost_settings_num_buckets_check CHECK (((num_buckets >= 1) AND (num_buckets <= 65536)))
);
CREATE TABLE flow_buckets (
    scope text NOT NULL,
    key text NOT NULL,
    tokens double precision NOT NULL,
    at timestamp with time zone NOT NULL,
    ready_at timestamp with time zone NOT NULL,
    denied_at timestamp with time zone
);
CREATE TABLE flow_changes (
    seq bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    scope text NOT NULL,
    detail text NOT NULL
);
ALTER TABLE flow_changes ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME flow_changes_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);
CREATE TABLE flow_limits (
    scope text NOT NULL,
    rate_count double precision,
    rate_period double precision,
    burst integer,
    concurrency integer,
    per_key boolean DEFAULT false NOT NULL,
    paused boolean DEFAULT false NOT NULL,
    source text NOT NULL,
    updated_by text,
    updated_at timestamp with time zone NOT NULL
);
CREATE TABLE history_minutes (
    span_minutes integer NOT NULL,
    minute integer NOT NULL,
    job text NOT NULL,
    queue text NOT NULL,
    succeeded integer DEFAULT 0 NOT NULL,
    dead integer DEFAULT 0 NOT NULL,
    retried integer DEFAULT 0 NOT NULL,
    timed_out integer DEFAULT 0 NOT NULL,
    cancelled integer DEFAULT 0 NOT NULL,
    skipped integer DEFAULT 0 NOT NULL,
    claims integer DEFAULT 0 NOT NULL,
    late_0 integer DEFAULT 0 NOT NULL,
    late_1 integer DEFAULT 0 NOT NULL,
    late_2 integer DEFAULT 0 NOT NULL,
    late_3 integer DEFAULT 0 NOT NULL,
    late_4 integer DEFAULT 0 NOT NULL,
    late_5 integer DEFAULT 0 NOT NULL,
    late_6 integer DEFAULT 0 NOT NULL,
    late_7 integer DEFAULT 0 NOT NULL,
    late_8 integer DEFAULT 0 NOT NULL,
    late_9 integer DEFAULT 0 NOT NULL,
    late_10 integer DEFAULT 0 NOT NULL,
    late_11 integer DEFAULT 0 NOT NULL,
    late_12 integer DEFAULT 0 NOT NULL,
    late_13 integer DEFAULT 0 NOT NULL,
    late_14 integer DEFAULT 0 NOT NULL,
    late_15 integer DEFAULT 0 NOT NULL,
    late_16 integer DEFAULT 0 NOT NULL,
    late_17 integer DEFAULT 0 NOT NULL,
    throttled_us bigint DEFAULT 0 NOT NULL,
    claim_counted integer DEFAULT 0 NOT NULL,
    claim_missed integer DEFAULT 0 NOT NULL,
    finish_counted integer DEFAULT 0 NOT NULL,
    finish_missed integer DEFAULT 0 NOT NULL
);
CREATE TABLE history_watermark (
    id integer NOT NULL,
    finished_at timestamp with time zone,
    finished_id uuid,
    throttled_at timestamp with time zone,
    CONSTRAINT history_watermark_id_check CHECK ((id = 1))
);
CREATE TABLE job_catalogue (
    name text NOT NULL COLLATE pg_catalog."C",
    version integer NOT NULL,
    digest text NOT NULL,
    definition text NOT NULL,
    published_at timestamp with time zone NOT NULL
);
CREATE TABLE nodes (
    id text NOT NULL,
    kind text NOT NULL,
    buckets integer[],
    started_at timestamp with time zone NOT NULL,
    heartbeat_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    jobs jsonb DEFAULT '[]'::jsonb NOT NULL
);
CREATE TABLE schedules (
    id text NOT NULL COLLATE pg_catalog."C",
    job text NOT NULL,
    job_version integer,
    inputs jsonb NOT NULL,
    cron text,
    every interval,
    timezone text NOT NULL,
    dst_gap text NOT NULL,
    dst_fold text NOT NULL,
    misfire text NOT NULL,
    misfire_grace interval NOT NULL,
    max_catch_up integer NOT NULL,
    overlap text NOT NULL,
    start_at timestamp with time zone,
    end_at timestamp with time zone,
    max_attempts integer NOT NULL,
    priority integer NOT NULL,
    paused boolean NOT NULL,
    watermark timestamp with time zone NOT NULL,
    next_due timestamp with time zone NOT NULL,
    materializer text,
    lease_until timestamp with time zone,
    request_hash text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    unset_defaults text,
    limit_key text,
    CONSTRAINT schedules_one_rule CHECK (((cron IS NULL) <> (every IS NULL)))
);
CREATE TABLE slo_rollups (
    day integer NOT NULL,
    job text NOT NULL,
    objective text NOT NULL,
    verdict text NOT NULL,
    count bigint NOT NULL
);
CREATE TABLE throttle_totals (
    scope text NOT NULL,
    count bigint NOT NULL,
    held interval NOT NULL
);
CREATE TABLE throttles (
    execution_id uuid NOT NULL,
    scope text NOT NULL,
    held interval NOT NULL,
    at timestamp with time zone NOT NULL
);
CREATE TABLE transitions (
    seq bigint NOT NULL,
    execution_id uuid NOT NULL,
    event text NOT NULL,
    from_state text,
    to_state text NOT NULL,
    epoch bigint NOT NULL,
    actor text,
    reason text,
    at timestamp with time zone NOT NULL
)
PARTITION BY RANGE (execution_id);
CREATE SEQUENCE transitions_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE transitions_seq_seq OWNED BY transitions.seq;
ALTER TABLE ONLY transitions ALTER COLUMN seq SET DEFAULT nextval('transitions_seq_seq'::regclass);
ALTER TABLE ONLY commands
    ADD CONSTRAINT commands_pkey PRIMARY KEY (id);
ALTER TABLE ONLY deletions
    ADD CONSTRAINT deletions_pkey PRIMARY KEY (seq);
ALTER TABLE ONLY execution_data
    ADD CONSTRAINT execution_data_pkey PRIMARY KEY (execution_id);
ALTER TABLE ONLY execution_keys
    ADD CONSTRAINT execution_keys_pkey PRIMARY KEY (key);
ALTER TABLE ONLY executions
    ADD CONSTRAINT executions_pkey PRIMARY KEY (id);
ALTER TABLE ONLY fencepost_settings
    ADD CONSTRAINT fencepost_settings_pkey PRIMARY KEY (id);
ALTER TABLE ONLY flow_buckets
    ADD CONSTRAINT flow_buckets_pkey PRIMARY KEY (scope, key);
ALTER TABLE ONLY flow_changes
    ADD CONSTRAINT flow_changes_pkey PRIMARY KEY (seq);
ALTER TABLE ONLY flow_limits
    ADD CONSTRAINT flow_limits_pkey PRIMARY KEY (scope);
ALTER TABLE ONLY history_minutes
    ADD CONSTRAINT history_minutes_pkey PRIMARY KEY (span_minutes, minute, job, queue);
ALTER TABLE ONLY history_watermark
    ADD CONSTRAINT history_watermark_pkey PRIMARY KEY (id);
ALTER TABLE ONLY job_catalogue
    ADD CONSTRAINT job_catalogue_pkey PRIMARY KEY (name, version);
ALTER TABLE ONLY nodes
    ADD CONSTRAINT nodes_pkey PRIMARY KEY (id);
ALTER TABLE ONLY schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (id);
ALTER TABLE ONLY slo_rollups
    ADD CONSTRAINT slo_rollups_pkey PRIMARY KEY (day, job, objective, verdict);
ALTER TABLE ONLY throttle_totals
    ADD CONSTRAINT throttle_totals_pkey PRIMARY KEY (scope);
CREATE INDEX commands_execution ON commands USING btree (execution_id, requested_at, id);
CREATE INDEX deletions_at ON deletions USING btree (at);
CREATE INDEX execution_data_errors ON ONLY execution_data USING btree (execution_id) WHERE (error IS NOT NULL);
CREATE INDEX execution_keys_execution ON execution_keys USING btree (execution_id);
CREATE INDEX executions_active_bucket ON ONLY executions USING btree (bucket, updated_at) WHERE (state = ANY (ARRAY['RETRY_WAIT'::text, 'RUNNING'::text, 'SCHEDULED'::text]));
CREATE INDEX executions_claimable ON ONLY executions USING btree (priority DESC, due_at, id) WHERE (state = ANY (ARRAY['RETRY_WAIT'::text, 'SCHEDULED'::text]));
CREATE INDEX executions_failed ON ONLY executions USING btree (id) WHERE (state = 'FAILED'::text);
CREATE INDEX executions_finished ON ONLY executions USING btree (updated_at, id) INCLUDE (state, job, queue) WHERE (state = ANY (ARRAY['SUCCEEDED'::text, 'FAILED'::text, 'CANCELLED'::text, 'SKIPPED'::text]));
CREATE INDEX executions_leased ON ONLY executions USING btree (lease_until) WHERE (state = 'RUNNING'::text);
CREATE INDEX executions_limit_key ON ONLY executions USING btree (limit_key, id) WHERE (limit_key IS NOT NULL);
CREATE INDEX executions_queue_claimable ON ONLY executions USING btree (queue, priority DESC, due_at, id) WHERE (state = ANY (ARRAY['RETRY_WAIT'::text, 'SCHEDULED'::text]));
CREATE INDEX executions_running_bucket ON ONLY executions USING btree (bucket) WHERE (state = 'RUNNING'::text);
CREATE INDEX executions_schedule ON ONLY executions USING btree (schedule_id, slot) WHERE (schedule_id IS NOT NULL);
CREATE INDEX executions_schedule_state ON ONLY executions USING btree (schedule_id, state, id) WHERE (schedule_id IS NOT NULL);
CREATE INDEX executions_state ON ONLY executions USING btree (state COLLATE "POSIX", id);
CREATE INDEX executions_state_counts ON ONLY executions USING btree (state COLLATE "POSIX", queue, job);
CREATE INDEX executions_unpublished ON ONLY executions USING btree (job) WHERE (unset_defaults IS NOT NULL);
CREATE INDEX flow_buckets_ready ON flow_buckets USING btree (scope, ready_at);
CREATE INDEX history_minutes_job ON history_minutes USING btree (job, span_minutes, minute);
CREATE INDEX history_minutes_queue ON history_minutes USING btree (queue, span_minutes, minute);
CREATE INDEX schedules_due ON schedules USING btree (next_due, id);
CREATE INDEX throttles_at ON throttles USING btree (at);
CREATE INDEX throttles_execution ON throttles USING btree (execution_id);
CREATE INDEX transitions_execution ON ONLY transitions USING btree (execution_id, seq);
CREATE INDEX transitions_failure_events ON ONLY transitions USING btree (at) WHERE (event = ANY (ARRAY['FAILED'::text, 'TIMED_OUT'::text]));
CREATE INDEX transitions_lease_events ON ONLY transitions USING btree (at) WHERE (event = ANY (ARRAY['CLAIMED'::text, 'LEASE_EXPIRED'::text, 'STALE_REFUSED'::text]));
CREATE STATISTICS executions_version_key ON ((job || ':'::text) || job_version) FROM executions;

-- fencepost PostgreSQL schema, version 13: the store's settings, recorded in the database.
--
-- num_buckets decides which bucket each execution lands in (bucket_for(bucket_key or
-- id, num_buckets)); a process with another count than the workers' put executions in
-- buckets nobody claims from. One row holds the count of the first process that
-- migrates the schema (connection.migrate writes it after the migrations, in their
-- transaction, under the migration lock); every store then opens with it or refuses.
-- It changes only through Store.resize_buckets (`fencepost db set-buckets N`), which
-- moves the unfinished executions in the same transaction.
CREATE TABLE IF NOT EXISTS fencepost_settings (
    id          integer     NOT NULL PRIMARY KEY CHECK (id = 1),  -- one row
    num_buckets integer     NOT NULL CHECK (num_buckets BETWEEN 1 AND 65536),
    changed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

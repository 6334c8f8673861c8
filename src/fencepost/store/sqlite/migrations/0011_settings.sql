-- fencepost SQLite schema, version 11: the store's settings, recorded in the database.
--
-- num_buckets decides which bucket each execution lands in (bucket_for(bucket_key or
-- id, num_buckets)); a process with another count than the workers' put executions in
-- buckets nobody claims from. One row holds the count of the first process that
-- migrates the database (connection.migrate writes it after the migrations, in their
-- transaction); every store then opens with it or refuses. It changes only through
-- Store.resize_buckets (`fencepost db set-buckets N`), which moves the unfinished
-- executions in the same transaction.
CREATE TABLE fencepost_settings (
    id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),  -- one row
    num_buckets INTEGER NOT NULL CHECK (num_buckets BETWEEN 1 AND 65536),
    changed_at  INTEGER NOT NULL                               -- microseconds
);

-- fencepost SQLite schema, version 5: nothing to add.
--
-- PostgreSQL's version 5 adds two indexes, for prune (finished executions by
-- updated_at) and for stats (the audit trail by time). On SQLite each of them
-- cost about 11% of claim+complete throughput (bench/store_throughput.py: one
-- writer, every index maintained inline), which put the worker's burst target
-- out of reach. Here prune walks the primary key instead: ids are time-ordered
-- by the store's clock, so every row created before the cutoff sorts below the
-- cutoff's first id. Stats reads the audit trail, which prune keeps small.
SELECT 1;

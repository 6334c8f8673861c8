"""Migrations' slow parts, done online beforehand: ``fencepost db migrate`` on PostgreSQL.

Migration 11 indexes ``execution_keys`` by execution id; run as it is, the build
makes every submit wait. Before it, this module builds the index ``CONCURRENTLY``
(an interrupted build leaves an invalid index: it is dropped and built again), and
the migration then finds it. The rest of this docstring is migration 10.

Migration 10 partitions the history by day (see ``history.py``). Run as it is on a
database that already holds executions, it reads every one of them twice while
writes wait: once to copy the idempotency keys into ``execution_keys``, once to
check that every row falls below the first partition's bound. This module does both
first, while workers and services keep claiming and completing:

1. In one short transaction: ``execution_keys``, a trigger that copies the key of
   every execution inserted from now on, the first partition's bound (the start of
   the UTC day after tomorrow, or after the newest row's day), recorded in
   ``execution_history_prepared``, and ``CHECK (id < bound) NOT VALID`` constraints,
   which hold every new row to the bound from then on.
2. The existing keys, copied in batches by id (each batch its own transaction).
3. ``VALIDATE CONSTRAINT`` on each table: a scan that reads and writes do not wait
   for (it takes SHARE UPDATE EXCLUSIVE).

Migration 10 then finds the prepared table, skips the copy, attaches the old tables
with the validated bound (no scan) and drops the trigger: what is left for the
writers to wait for is renames and attaching. Interrupted, a later run carries on
(the bound and the constraints stay; copied keys are copied again harmlessly).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from psycopg import sql

from fencepost.domain.ids import id_floor
from fencepost.store.postgres.connection import QUERIES, Database, applied_migrations
from fencepost.store.postgres.history import DAY_MS, TABLES, day_of

#: The version whose copy and checks this module does beforehand.
VERSION = 10

#: The version whose index this module builds beforehand, and the index.
KEYS_INDEX_VERSION = 11
KEYS_INDEX = "execution_keys_execution"

#: Keys copied per transaction.
BATCH = 10_000

#: (table, column) the first partition's bound applies to: the partitioned tables.
_BOUNDED = TABLES

Progress = Callable[[str, int, "int | None"], None]


def _quiet(stage: str, done: int, total: int | None) -> None:
    """The default progress report: none."""


def needs_preparing(db: Database) -> bool:
    """Whether this database is before version 10 and holds executions."""
    applied = applied_migrations(db)
    if not applied or VERSION in applied:
        return False
    with db.connection() as conn:
        return conn.execute("SELECT EXISTS (SELECT 1 FROM executions)").fetchone() == (True,)


def prepare(db: Database, *, progress: Progress = _quiet, batch: int = BATCH) -> int:
    """Do the pending migrations' reading online (see the module); return the keys
    copied for migration 10.

    Does nothing (returns 0) where there is nothing to prepare.
    """
    copied = _prepare_history(db, progress, batch)
    _index_keys(db, progress)
    return copied


def _index_keys(db: Database, progress: Progress) -> None:
    """Migration 11's index, built CONCURRENTLY where the migration is pending."""
    applied = applied_migrations(db)
    if not applied or KEYS_INDEX_VERSION in applied:
        return
    with db.connection() as conn:
        if conn.execute("SELECT to_regclass('execution_keys')").fetchone() == (None,):
            return  # before migration 10 with no executions: it makes an empty table
        found = conn.execute(
            "SELECT i.indisvalid FROM pg_index AS i WHERE i.indexrelid = to_regclass(%s)",
            (KEYS_INDEX,),
        ).fetchone()
        if found is not None and found[0]:
            return
        progress("indexing idempotency keys by execution", 0, 1)
        if found is not None:  # left invalid by an interrupted build
            conn.execute(sql.SQL("DROP INDEX CONCURRENTLY {}").format(sql.Identifier(KEYS_INDEX)))
        conn.execute(
            sql.SQL("CREATE INDEX CONCURRENTLY {} ON execution_keys (execution_id)").format(
                sql.Identifier(KEYS_INDEX)
            )
        )
        progress("indexing idempotency keys by execution", 1, 1)


def _prepare_history(db: Database, progress: Progress, batch: int) -> int:
    """Migration 10's copy and checks (see the module); the keys copied."""
    if not needs_preparing(db):
        return 0
    _begin(db)
    copied = _copy_keys(db, progress, batch)
    with db.connection() as conn:
        conn.execute("UPDATE execution_history_prepared SET keys_done = true")
        for step, (table, _column) in enumerate(_BOUNDED):
            progress("checking the first partition's bound", step, len(_BOUNDED))
            conn.execute(
                sql.SQL("ALTER TABLE {} VALIDATE CONSTRAINT {}").format(
                    sql.Identifier(table), sql.Identifier(f"{table}_p0_bound")
                )
            )
        progress("checking the first partition's bound", len(_BOUNDED), len(_BOUNDED))
    return copied


def _begin(db: Database) -> str:
    """Step 1 (see the module), once: the bound, the keys' table and trigger, the checks."""
    with db.transaction() as conn:
        conn.execute(QUERIES["lock_migrations"])  # not beside a migration
        conn.execute(
            "CREATE TABLE IF NOT EXISTS execution_keys ("
            ' key text COLLATE "C" PRIMARY KEY, execution_id uuid NOT NULL)'
        )
        found = conn.execute("SELECT to_regclass('execution_history_prepared')").fetchone()
        if found is not None and found[0] is not None:
            row = conn.execute("SELECT bound::text FROM execution_history_prepared").fetchone()
            assert row is not None
            return str(row[0])
        newest = conn.execute("SELECT id::text FROM executions ORDER BY id DESC LIMIT 1").fetchone()
        today = int(datetime.now(UTC).timestamp() * 1000) // DAY_MS
        last = max(today, day_of(str(newest[0])) if newest else today)
        # Two days after the later of today and the newest row's day: rows keep
        # arriving below it while the copy and the checks run.
        bound = id_floor((last + 2) * DAY_MS)
        conn.execute(
            "CREATE TABLE execution_history_prepared ("
            " bound uuid NOT NULL, keys_done boolean NOT NULL DEFAULT false)"
        )
        conn.execute("INSERT INTO execution_history_prepared (bound) VALUES (%s)", (bound,))
        conn.execute(
            "CREATE FUNCTION executions_keys_sync() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN INSERT INTO execution_keys (key, execution_id) "
            "VALUES (NEW.idempotency_key, NEW.id) ON CONFLICT (key) DO NOTHING; RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER executions_keys_sync AFTER INSERT ON executions FOR EACH ROW "
            "WHEN (NEW.idempotency_key IS NOT NULL) EXECUTE FUNCTION executions_keys_sync()"
        )
        for table, column in _BOUNDED:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} CHECK ({} < {}) NOT VALID").format(
                    sql.Identifier(table),
                    sql.Identifier(f"{table}_p0_bound"),
                    sql.Identifier(column),
                    sql.Literal(bound),
                )
            )
        return bound


def _copy_keys(db: Database, progress: Progress, batch: int) -> int:
    """Step 2: the existing keys, in batches by id; the trigger has the new ones."""
    with db.connection() as conn:
        row = conn.execute(
            "SELECT count(*) FROM executions WHERE idempotency_key IS NOT NULL"
        ).fetchone()
    total = int(row[0]) if row else 0
    copied, last = 0, "00000000-0000-0000-0000-000000000000"
    progress("copying idempotency keys", 0, total)
    while True:
        with db.connection() as conn:
            found = conn.execute(
                "WITH b AS (SELECT id, idempotency_key FROM executions"
                " WHERE id > %s::uuid AND idempotency_key IS NOT NULL ORDER BY id LIMIT %s),"
                " copied AS (INSERT INTO execution_keys (key, execution_id)"
                " SELECT idempotency_key, id FROM b ON CONFLICT (key) DO NOTHING)"
                " SELECT count(*), max(id::text) FROM b",
                (last, batch),
            ).fetchone()
        assert found is not None
        count, newest = int(found[0]), found[1]
        if count == 0:
            break
        copied += count
        last = str(newest)
        progress("copying idempotency keys", min(copied, total), total)
        if count < batch:
            break
    return copied

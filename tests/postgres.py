"""Where the PostgreSQL tests find their server, and a fresh schema per store.

``FENCEPOST_TEST_POSTGRES_DSN`` names the server (default: the local one on
127.0.0.1:5432, database ``test``). When it cannot be reached the PostgreSQL
tests are skipped with the reason shown — unless ``FENCEPOST_REQUIRE_POSTGRES``
is set, as ``.ci/run`` does, and then they fail.
"""

from __future__ import annotations

import functools
import os
import uuid
from typing import Any

import pytest

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def dsn() -> str:
    return os.environ.get("FENCEPOST_TEST_POSTGRES_DSN", DEFAULT_DSN)


@functools.cache
def unavailable_reason() -> str | None:
    """Why the server cannot be used, or None when it can."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - dev installs include it
        return "psycopg is not installed (pip install fencepost[postgres])"
    try:
        with psycopg.connect(dsn(), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {dsn()} is unreachable: {exc}".strip()
    return None


def require_postgres() -> None:
    """Skip (locally) or fail (CI) the calling test when there is no server."""
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("FENCEPOST_REQUIRE_POSTGRES"):
        pytest.fail(f"FENCEPOST_REQUIRE_POSTGRES is set but {reason}", pytrace=False)
    pytest.skip(reason)


def new_schema() -> str:
    """Create an empty schema and return its name."""
    import psycopg

    name = f"fp_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return name


#: What a schema holds, with the day in a partition's name left out (an emptied schema
#: keeps the day partitions of every test that used it): relations and their storage
#: settings, constraints, triggers, functions, and the migrations recorded.
_OBJECTS = r"""
SELECT md5(string_agg(o, E'\n' ORDER BY o)) FROM (
    SELECT DISTINCT regexp_replace(format('%s %s %s %s', relkind, relname, relpersistence,
        reloptions), '_p[0-9]{8}', '_p', 'g') AS o
    FROM pg_class WHERE relnamespace = '{schema}'::regnamespace
    UNION ALL
    SELECT DISTINCT regexp_replace(format('constraint %s %s', conname, contype),
        '_p[0-9]{8}', '_p', 'g')
    FROM pg_constraint WHERE connamespace = '{schema}'::regnamespace
    UNION ALL
    SELECT DISTINCT regexp_replace(format('trigger %s %s', t.tgname, c.relname),
        '_p[0-9]{8}', '_p', 'g')
    FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid
    WHERE c.relnamespace = '{schema}'::regnamespace AND NOT t.tgisinternal
    UNION ALL
    SELECT format('function %s', proname) FROM pg_proc
    WHERE pronamespace = '{schema}'::regnamespace
    UNION ALL
    SELECT format('version %s', version) FROM {schema}.fencepost_migrations
) AS objects
"""

#: The tables and sequences a store's schema holds (partitions are emptied through
#: their parent), and how each is emptied.
_CONTENTS = """
SELECT CASE relkind
    WHEN 'S' THEN 'SELECT setval(''{schema}.' || relname || ''', 1, false)'
    ELSE 'DELETE FROM {schema}.' || relname END
FROM pg_class WHERE relnamespace = '{schema}'::regnamespace AND relkind IN ('r', 'p', 'S')
    AND NOT relispartition AND relname <> 'fencepost_migrations'
ORDER BY relname
"""


class SchemaPool:
    """Store schemas used by one test and emptied for the next, in one test process.

    A store opened on a new schema migrates it and makes its day partitions: about
    0.2 s of DDL, most of it the server building each partition's indexes, and the
    PostgreSQL tests open thousands of stores. When a test's stores are all closed,
    its schema is emptied (rows deleted, sequences restarted; its tables, indexes
    and partitions stay) and handed to a later test, whose store finds it migrated
    and its days (mostly) made. A schema whose objects are no longer those of a
    freshly migrated one (a test changed them), or that cannot be emptied within
    ``lock_timeout`` (a lock left held), is never handed on; every schema the pool
    made is dropped by :meth:`close`.
    """

    def __init__(self, *, lock_timeout: str = "5s") -> None:
        #: Emptied schemas, ready for another test.
        self.free: list[str] = []
        self._made: list[str] = []
        self._lock_timeout = lock_timeout
        self._conn: Any = None
        #: What a freshly migrated schema holds (_OBJECTS), and the statements that
        #: empty one (_CONTENTS): read from the first schema the pool makes.
        self._reference: str | None = None
        self._contents: list[str] = []

    def take(self) -> str:
        """A schema for a new store: an emptied one if there is, else a new one."""
        if self._reference is None:
            self._read_reference()
        if self.free:
            return self.free.pop()
        name = new_schema()
        self._made.append(name)
        return name

    def give_back(self, name: str) -> None:
        """``name``'s stores are closed: empty it for another test, if it can be."""
        import psycopg

        try:
            if self._objects(name) != self._reference:
                return  # changed by its test: dropped by close
            self._connection().execute(
                ";\n".join(statement.format(schema=name) for statement in self._contents)
            )
        except psycopg.Error:
            self._close_connection()  # a failed statement may have left it unusable
            return
        self.free.append(name)

    def close(self) -> None:
        """Drop every schema this pool made."""
        self._close_connection()
        for name in self._made:
            drop_schema(name)
        self._made.clear()
        self.free.clear()

    def _read_reference(self) -> None:
        import fencepost

        name = new_schema()
        self._made.append(name)
        fencepost.connect(store_url(name)).close()
        self._reference = self._objects(name)
        contents = self._connection().execute(_CONTENTS.replace("'{schema}'", f"'{name}'"))
        self._contents = [row[0] for row in contents]
        self.free.append(name)

    def _objects(self, name: str) -> str | None:
        found = self._connection().execute(_OBJECTS.replace("{schema}", name)).fetchone()
        return found[0] if found else None

    def _connection(self) -> Any:
        """One connection for all of the pool's reads and emptyings (its catalogue
        caches warm: a new connection's first statements on a schema cost ~10 ms)."""
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(dsn(), autocommit=True)
            self._conn.execute(f"SET lock_timeout = '{self._lock_timeout}'")
        return self._conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def drop_schema(name: str) -> None:
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


#: The system catalogues a run's schemas churn: each store's tables, indexes and
#: partitions are rows of these, deleted again when its schema is dropped.
_CATALOGUES = (
    "pg_attribute",
    "pg_depend",
    "pg_class",
    "pg_index",
    "pg_constraint",
    "pg_type",
    "pg_statistic_ext",
    "pg_inherits",
    "pg_attrdef",
    "pg_rewrite",
    "pg_namespace",
)


def vacuum_catalogues() -> None:
    """Vacuum the test database's system catalogues after a run.

    A run creates and drops thousands of tables; where autovacuum is off (as on this
    project's shared test server) their dead catalogue rows stay, and every later
    run's DDL and catalogue reads slow down: 2.1 million dead rows in pg_attribute
    (449 MB) had made opening a store 16% slower and reading a schema's objects 8
    times slower. A plain VACUUM makes their space reusable and blocks no one.
    """
    if unavailable_reason() is not None:
        return
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute("VACUUM " + ", ".join(f"pg_catalog.{name}" for name in _CATALOGUES))


def store_url(schema: str, server: str | None = None) -> str:
    """The URL of a store in ``schema`` on ``server`` (a DSN; default: :func:`dsn`)."""
    server = server or dsn()
    separator = "&" if "?" in server else "?"
    return f"{server}{separator}schema={schema}"

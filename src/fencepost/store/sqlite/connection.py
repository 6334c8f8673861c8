"""Opening SQLite connections the way fencepost needs them, and migrating the file.

One connection per thread (sqlite3 connections must not be shared across
threads mid-transaction). WAL lets readers run beside the one writer; every
write is a ``BEGIN IMMEDIATE`` transaction, which takes the write lock up front
so that a read-then-write inside it cannot be overtaken by another process.

Durability: ``PRAGMA synchronous = FULL`` by default, so that in WAL mode each
COMMIT syncs the WAL before it returns and an acknowledged write survives a power
loss or an OS crash. ``normal`` (``sqlite:///jobs.db?synchronous=normal``) syncs
only at checkpoints: faster for single writes, but the last transactions committed
before a power loss or OS crash may roll back. An application crash loses
nothing in either mode, and neither corrupts the file. Every connection of a
store runs in the store's mode.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal, get_args

from fencepost.domain.errors import StoreRefused, StoreUnavailable
from fencepost.store.sql import load_queries, migration_files, refuse_newer

QUERIES = load_queries("fencepost.store.sqlite", "queries.sql")
MIGRATIONS_PACKAGE = "fencepost.store.sqlite.migrations"

#: How long a writer waits for another process's write lock before giving up.
DEFAULT_BUSY_TIMEOUT = 30.0

#: A value of ``PRAGMA synchronous`` that fencepost offers (lowercase, as in the URL).
Synchronous = Literal["full", "normal"]
#: The value an acknowledged write survives a power loss with.
DEFAULT_SYNCHRONOUS: Synchronous = "full"
#: The offered values, in the order error messages list them.
SYNCHRONOUS_CHOICES: tuple[Synchronous, ...] = get_args(Synchronous)
#: The query block that sets each value (PRAGMA takes no bound parameters).
_SYNCHRONOUS_BLOCKS: dict[Synchronous, str] = {
    "full": "synchronous_full",
    "normal": "synchronous_normal",
}


class Connections:
    """Per-thread connections to one database file."""

    def __init__(
        self,
        path: str,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Synchronous = DEFAULT_SYNCHRONOUS,
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreUnavailable(f"sqlite store {self.path!r} is closed")
            conn = open_connection(
                self.path, busy_timeout=self.busy_timeout, synchronous=self.synchronous
            )
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on error.

        Driver errors are translated as by :func:`translate_errors`, spelled out with
        :func:`translated` rather than nested ``with translate_errors(...)`` blocks:
        three more context managers cost a single submit a tenth of its Python time.
        """
        conn = self.get()
        try:
            conn.execute(QUERIES["begin_immediate"])
        except sqlite3.Error as exc:
            raise translated(exc, self.path) from exc
        try:
            try:
                yield conn
            except sqlite3.Error as exc:
                raise translated(exc, self.path) from exc
        except BaseException:
            # Nothing half-written survives: any error, ours or the driver's, undoes it all.
            conn.execute(QUERIES["rollback"])
            raise
        try:
            conn.execute(QUERIES["commit"])
        except sqlite3.Error as exc:
            raise translated(exc, self.path) from exc

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every statement inside reads the same snapshot (WAL).

        Takes no write lock, so writers carry on beside it.
        """
        conn = self.get()
        with translate_errors(self.path):
            conn.execute(QUERIES["begin"])
        try:
            with translate_errors(self.path):
                yield conn
        finally:
            with translate_errors(self.path):
                conn.execute(QUERIES["rollback"])

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection for autocommit reads, with driver errors translated."""
        conn = self.get()
        with translate_errors(self.path):
            yield conn

    def close(self) -> None:
        """Close every connection this object opened, in any thread."""
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


def open_connection(
    path: str, *, busy_timeout: float, synchronous: Synchronous = DEFAULT_SYNCHRONOUS
) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode (transactions are explicit) with fencepost's pragmas."""
    with translate_errors(path):
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.executescript(QUERIES["pragmas"])
        conn.execute(QUERIES[_SYNCHRONOUS_BLOCKS[synchronous]])
    return conn


def open_read_only(path: str) -> sqlite3.Connection:
    """``path`` opened read-only, without fencepost's pragmas: looking changes nothing."""
    with translate_errors(path):
        uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
        return sqlite3.connect(uri, uri=True, isolation_level=None)


@contextmanager
def translate_errors(path: str) -> Iterator[None]:
    """Driver errors become :class:`StoreUnavailable`; ours pass through.

    A data error (a value SQLite refuses, such as a string or blob too big) is the
    call's problem, not an outage: :class:`StoreRefused`.
    """
    try:
        yield
    except sqlite3.Error as exc:
        raise translated(exc, path) from exc


def translated(exc: sqlite3.Error, path: str) -> StoreRefused | StoreUnavailable:
    """The error :func:`translate_errors` raises for the driver's ``exc`` (from ``exc``)."""
    if isinstance(exc, sqlite3.DataError):
        return StoreRefused(f"sqlite refused a value: {exc}")
    return StoreUnavailable(f"sqlite store {path!r}: {exc}")


def applied_migrations(conn: sqlite3.Connection) -> set[int] | None:
    """The migration versions ``conn``'s database records (None: no migrations table)."""
    if not conn.execute(QUERIES["has_migrations_table"]).fetchone()[0]:
        return None
    return {row[0] for row in conn.execute(QUERIES["applied_migrations"])}


def migrate(conn: sqlite3.Connection, *, num_buckets: int | None = None) -> list[int]:
    """Apply pending migrations in one immediate transaction; return the versions applied.

    Safe when several processes open a new file at once: the write lock
    serializes them and the later ones find nothing left to do. In the same
    transaction, ``num_buckets`` (if given) is recorded unless a count already is:
    the first process to migrate decides (see :func:`recorded_num_buckets`).
    """
    conn.execute(QUERIES["begin_immediate"])
    try:
        conn.execute(QUERIES["create_migrations_table"])
        done = {row[0] for row in conn.execute(QUERIES["applied_migrations"])}
        applied = []
        for version, name, sql in migration_files(MIGRATIONS_PACKAGE):
            if version in done:
                continue
            # executescript would COMMIT our transaction; run statements one by one.
            for statement in split_statements(sql):
                conn.execute(statement)
            conn.execute(
                QUERIES["record_migration"],
                {"version": version, "name": name, "at": int(time.time() * 1_000_000)},
            )
            applied.append(version)
        refuse_newer(done, MIGRATIONS_PACKAGE)
        if num_buckets is not None:
            conn.execute(
                QUERIES["record_num_buckets"],
                {"num_buckets": int(num_buckets), "at": int(time.time() * 1_000_000)},
            )
    except BaseException:
        conn.execute(QUERIES["rollback"])
        raise
    conn.execute(QUERIES["commit"])
    return applied


def recorded_num_buckets(conn: sqlite3.Connection) -> int | None:
    """The bucket count the database records (None: none, e.g. an emptied settings table)."""
    row = conn.execute(QUERIES["recorded_num_buckets"]).fetchone()
    return None if row is None else int(row[0])


def split_statements(script: str) -> Iterator[str]:
    """Split a migration into complete statements (``sqlite3.complete_statement``)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            if statement.strip(";").strip() and not _only_comments(statement):
                yield statement
            buffer = ""
    if buffer.strip() and not _only_comments(buffer):
        raise ValueError(f"incomplete statement at the end of a migration: {buffer!r}")


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


def dump_schema(conn: sqlite3.Connection) -> str:
    """The schema of a migrated database as text: what ``schema.sql`` must equal."""
    objects = conn.execute(QUERIES["schema_objects"]).fetchall()
    return "\n\n".join(f"-- {kind}: {name}\n{sql};" for kind, name, sql in objects) + "\n"

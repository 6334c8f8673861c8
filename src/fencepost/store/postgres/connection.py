"""Connections to PostgreSQL: a pool, fencepost's session settings, migrations.

Every connection runs with ``TimeZone = UTC`` and loads ``uuid`` columns as
text (ids are strings everywhere in fencepost). Broken connections — a
restarted server, a backend killed with ``pg_terminate_backend`` — are checked
and replaced by the pool when handed out, so the store heals by itself; a call
that was in flight when the connection died raises :class:`StoreUnavailable`.

The check is a round trip, so only a connection idle for :data:`CHECK_AFTER_IDLE`
seconds is checked: a busy worker's claim/complete loop would otherwise pay one
extra round trip per call (a sixth of its time). A connection that broke in use
is discarded by the pool anyway; one that died in the last second of idling
fails its next call with :class:`StoreUnavailable` (which callers retry), and
that failure has every other pooled connection checked before its next use.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
import psycopg.sql
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool

from fencepost.domain.errors import StoreRefused, StoreUnavailable, ValidationError
from fencepost.store.postgres.outages import DEFAULT_RETRY_TIMEOUT, READ_ONLY
from fencepost.store.sql import load_queries, migration_files, refuse_newer

QUERIES = load_queries("fencepost.store.postgres", "queries.sql")

#: A pooled connection; rows are plain tuples.
Connection = psycopg.Connection[tuple[Any, ...]]
MIGRATIONS_PACKAGE = "fencepost.store.postgres.migrations"

#: A pooled connection idle for at least this many seconds is checked before use.
CHECK_AFTER_IDLE = 1.0

#: Seconds the first connection of a store may take before its failure is reported
#: (libpq's ``connect_timeout``; it accepts no less than 2).
CONNECT_TIMEOUT = 3

#: URL query parameters that fencepost reads itself (the rest go to libpq).
OWN_OPTIONS = (
    "schema",
    "pool_min",
    "pool_max",
    "pool_timeout",
    "reconnect_timeout",
    "retry_timeout",
    "unknown_jobs",  # read by fencepost.store.connect, for every backend
)


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Separate fencepost's own options from the libpq connection string."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in OWN_OPTIONS]
    scheme = "postgresql"
    # quote, not quote_plus: libpq decodes %20 but takes "+" literally.
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(rest, quote_via=quote), "")), own


def _int_option(own: dict[str, str], name: str, default: int) -> int:
    try:
        value = int(own.get(name, default))
    except ValueError:
        raise ValidationError(f"url.{name}", f"must be an integer, got {own[name]!r}") from None
    if value < 0:
        raise ValidationError(f"url.{name}", f"must be >= 0, got {value}")
    return value


class Database:
    """A pool of configured connections to one PostgreSQL database (and schema)."""

    def __init__(self, url: str) -> None:
        conninfo, own = split_url(url)
        self.conninfo = conninfo
        self.schema = own.get("schema")
        if self.schema is not None and not self.schema.replace("_", "").isalnum():
            raise ValidationError("url.schema", f"must be a plain identifier, got {self.schema!r}")
        #: The NOTIFY channel that wakes this store's workers (one per schema).
        self.channel = f"fencepost_work_{self.schema}" if self.schema else "fencepost_work"
        pool_max = _int_option(own, "pool_max", 8)
        pool_min = min(_int_option(own, "pool_min", 1), pool_max)
        timeout = float(_int_option(own, "pool_timeout", 10))
        # psycopg_pool retries a lost server with backoff doubling from 1 s until
        # reconnect_timeout, then gives up and starts afresh on the next request.
        # A short one bounds how long after the server's return a worker waits.
        reconnect = float(_int_option(own, "reconnect_timeout", 4))
        #: Seconds a call keeps retrying after a lost connection (see outages).
        self.retry_timeout = float(_int_option(own, "retry_timeout", DEFAULT_RETRY_TIMEOUT))
        self._last_used: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
        self.pool = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=max(pool_max, 1),
            timeout=timeout,
            reconnect_timeout=reconnect,
            configure=self._configure,
            check=self._check,
            kwargs={"autocommit": True},
            open=False,
            name="fencepost",
        )
        probe(conninfo)  # the cause of a failure in one line, before the pool retries it
        with translate_errors():
            self.pool.open(wait=True, timeout=timeout)

    def _configure(self, conn: Connection) -> None:
        conn.adapters.register_loader("uuid", TextLoader)
        conn.execute(QUERIES["configure_session"], {"schema": self.schema})

    def _check(self, conn: Connection) -> None:
        """The pool's check on handing ``conn`` out: a round trip, if it has idled."""
        if time.monotonic() - self._last_used.get(conn, -CHECK_AFTER_IDLE) < CHECK_AFTER_IDLE:
            return
        ConnectionPool.check_connection(conn)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection in autocommit mode, with driver errors translated."""
        try:
            with translate_errors(), self.pool.connection() as conn, _on_standby_close(conn):
                yield conn
                self._last_used[conn] = time.monotonic()
        except StoreUnavailable:
            self._last_used.clear()  # what broke one may have broken all: check each
            raise

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A pooled connection inside one transaction: committed, or rolled back on error."""
        try:
            with translate_errors(), self.pool.connection() as conn, _on_standby_close(conn):
                with conn.transaction():
                    yield conn
                self._last_used[conn] = time.monotonic()
        except StoreUnavailable:
            self._last_used.clear()
            raise

    def close(self) -> None:
        """Close every pooled connection."""
        self.pool.close()


@contextmanager
def _on_standby_close(conn: Connection) -> Iterator[None]:
    """Close ``conn`` if it turns out to be on a read-only standby (after a failover
    the old address may lead to one): the pool then discards it and connects afresh,
    and a retried call does not meet the same standby again."""
    try:
        yield
    except psycopg.Error as exc:
        if exc.sqlstate == READ_ONLY:
            conn.close()
        raise


class Listener:
    """A dedicated connection that LISTENs for wake-ups (not taken from the pool)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._conn: Connection | None = None

    def _connect(self) -> Connection:
        if self._conn is None or self._conn.closed:
            conn: Connection = psycopg.connect(self._db.conninfo, autocommit=True)
            conn.execute(
                psycopg.sql.SQL(QUERIES["listen"]).format(
                    channel=psycopg.sql.Identifier(self._db.channel)
                )
            )
            self._conn = conn
        return self._conn

    def wait(self, timeout: float) -> bool:
        """True if a notification arrived within ``timeout`` seconds."""
        with translate_errors():
            try:
                conn = self._connect()
                return any(True for _ in conn.notifies(timeout=timeout, stop_after=1))
            except psycopg.OperationalError:
                self.close()  # reconnect next time; meanwhile the caller polls
                raise

    def close(self) -> None:
        """Stop listening."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def target(conninfo: str) -> str:
    """Where ``conninfo`` connects, for messages: ``user@host:port/database``, no password."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    hosts = str(params.get("host") or "localhost").split(",")
    ports = str(params.get("port") or "5432").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    where = ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))
    user = str(params.get("user") or "")
    database = str(params.get("dbname") or user)
    return f"{user + '@' if user else ''}{where}/{database}"


def probe(conninfo: str) -> None:
    """Connect once, and say in one line why that failed (:class:`StoreUnavailable`).

    The pool retries a failing server quietly until its timeout and then reports
    only that it timed out; a wrong port, host, user or database name, or a server
    that demands TLS, is known at the first attempt and named at once.
    """
    try:
        psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT).close()
    except psycopg.Error as exc:
        raise StoreUnavailable(
            f"cannot connect to PostgreSQL at {target(conninfo)}: {connect_failure(exc)}"
        ) from None


def connect_failure(exc: psycopg.Error) -> str:
    """The cause in libpq's message about a failed connection, as one short line."""
    text = str(exc)
    host = re.search(
        r"(?:failed to resolve host|could not translate host name) '?\"?([^'\"]+)", text
    )
    if host:
        return f"unknown host {host.group(1)!r}"
    cause = text.rpartition(" failed: ")[2] if " failed: " in text else text
    cause = " ".join(cause.replace("FATAL:", "").split("\n")[0].split())
    if cause.lower() == "connection refused":
        return "connection refused (is PostgreSQL running and accepting TCP connections there?)"
    if "timeout expired" in cause:
        return f"no answer within {CONNECT_TIMEOUT} s"
    return cause or type(exc).__name__


@contextmanager
def translate_errors(*, callers: bool = False) -> Iterator[None]:
    """Driver and pool errors become :class:`StoreUnavailable`; ours pass through.

    A data error (a value the server refuses: an untranslatable character, a
    number out of range) is the call's problem, not an outage: :class:`StoreRefused`.
    With ``callers`` (statements run in the caller's own transaction), an error that
    asks the caller to retry that transaction — a serialization failure under
    REPEATABLE READ or SERIALIZABLE, a deadlock — passes through as the driver raised
    it, so the caller's retry loop sees what its own writes would raise.
    """
    try:
        yield
    except psycopg.Error as exc:
        if callers and (exc.sqlstate or "").startswith(TRANSACTION_ROLLBACK):
            raise
        if isinstance(exc, psycopg.DataError):
            raise StoreRefused(f"postgresql refused a value: {exc}") from exc
        raise StoreUnavailable(f"postgresql store: {exc}") from exc
    except Exception as exc:  # psycopg_pool.PoolTimeout and friends
        if type(exc).__module__.startswith("psycopg_pool"):
            raise StoreUnavailable(f"postgresql store: {exc}") from exc
        raise


#: SQLSTATE class 40, "transaction rollback": serialization failures, deadlocks.
TRANSACTION_ROLLBACK = "40"


def applied_migrations(db: Database) -> set[int] | None:
    """The migration versions the store's schema records (None: no migrations table)."""
    with db.connection() as conn:
        row = conn.execute(QUERIES["has_migrations_table"]).fetchone()
        if not (row and row[0]):
            return None
        return {r[0] for r in conn.execute(QUERIES["applied_migrations"])}


def migrate(db: Database) -> list[int]:
    """Apply pending migrations under an advisory lock; return the versions applied."""
    known = migration_files(MIGRATIONS_PACKAGE)
    with db.transaction() as conn:
        conn.execute(QUERIES["lock_migrations"])
        conn.execute(QUERIES["create_migrations_table"])
        done: set[int] = {row[0] for row in conn.execute(QUERIES["applied_migrations"])}
        refuse_newer(done, MIGRATIONS_PACKAGE)
        applied = []
        for version, name, sql in known:
            if version not in done:
                conn.execute(sql)  # a script: several statements, no parameters
                conn.execute(QUERIES["record_migration"], {"version": version, "name": name})
                applied.append(version)
    return applied

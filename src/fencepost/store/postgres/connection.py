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

Behind a transaction pooler (PgBouncer's ``pool_mode = transaction``) a client's
statements run on whichever server connection is free at each transaction, so
nothing may live in the session: the store then prepares no statements, sets its
``search_path`` and time zone inside every transaction (``set_config(..., true)``,
sent with the ``BEGIN`` in one round trip), leaves the server connection as it
found it, and listens for wake-ups only on a connection of ``listen_url`` (straight
to the server) or not at all (the workers and waiters poll). See :class:`Database`.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.conninfo
import psycopg.errors
import psycopg.sql
from psycopg.types.string import TextLoader
from psycopg_pool import ConnectionPool

from fencepost.domain.errors import StoreRefused, StoreUnavailable, ValidationError
from fencepost.store.postgres import schemas
from fencepost.store.postgres.outages import (
    DEFAULT_RETRY_TIMEOUT,
    READ_ONLY,
    fold_pool_warnings,
)
from fencepost.store.sql import load_queries, migration_files, refuse_newer

QUERIES = load_queries("fencepost.store.postgres", "queries.sql")

#: A pooled connection; rows are plain tuples.
Connection = psycopg.Connection[tuple[Any, ...]]
AsyncConnection = psycopg.AsyncConnection[tuple[Any, ...]]
MIGRATIONS_PACKAGE = "fencepost.store.postgres.migrations"

#: A pooled connection idle for at least this many seconds is checked before use.
CHECK_AFTER_IDLE = 1.0

#: Seconds the first connection of a store may take before its failure is reported
#: (libpq's ``connect_timeout``; it accepts no less than 2).
CONNECT_TIMEOUT = 3

#: Seconds a session of the store may sit idle inside a transaction before the server
#: ends it (``idle_in_transaction_session_timeout``; the URL option
#: ``idle_in_transaction_timeout``, 0 for the server's own setting). fencepost never
#: waits on anything but the server inside a transaction, so a session idle there that
#: long belongs to a process that stalled mid-transaction (stopped, paused, swapped
#: out): its locks — the limits a limited claim holds, a row being completed — would
#: otherwise hold up every other worker until it resumed.
IDLE_IN_TRANSACTION = 10
#: The longest the server takes (``idle_in_transaction_session_timeout`` is in ms, an int).
MAX_IDLE_IN_TRANSACTION = 2_147_483

#: URL query parameters that fencepost reads itself (the rest go to libpq).
OWN_OPTIONS = (
    "schema",
    "pool_min",
    "pool_max",
    "pool_timeout",
    "reconnect_timeout",
    "retry_timeout",
    "pooler",
    "listen_url",
    "idle_in_transaction_timeout",
    "unknown_jobs",  # read by fencepost.store.connect, for every backend
    "num_buckets",  # the same
)


#: libpq's network settings unless the URL sets its own: a connection to a host that went
#: silent (a partition, a powered-off primary) is given up in bounded time, not after
#: the operating system's retransmissions (some 15 minutes): a connect waits at most
#: 10 s per host, data sent and unacknowledged for 30 s breaks the connection, and an
#: idle one is probed after 30 s, every 10 s, three times. Ignored on Unix sockets.
NETWORK_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}


def split_url(url: str) -> tuple[str, dict[str, str]]:
    """Separate fencepost's own options from the libpq connection string, and add
    :data:`NETWORK_DEFAULTS` the URL does not set."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    own = {k: v for k, v in query if k in OWN_OPTIONS}
    rest = [(k, v) for k, v in query if k not in OWN_OPTIONS]
    given = {k for k, _ in rest}
    rest += [(k, v) for k, v in NETWORK_DEFAULTS.items() if k not in given]
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


#: The values of the URL option ``pooler``: what sits between the store and the server.
POOLERS = ("auto", "transaction", "session")


def _pooler_option(own: dict[str, str]) -> str:
    pooler = own.get("pooler", "auto")
    if pooler not in POOLERS:
        raise ValidationError("url.pooler", f"must be one of {', '.join(POOLERS)}, got {pooler!r}")
    return pooler


def _listen_option(own: dict[str, str]) -> str | None:
    """``listen_url``'s libpq connection string (fencepost's own options dropped), if any."""
    url = own.get("listen_url")
    if url is None:
        return None
    if urlsplit(url).scheme not in ("postgresql", "postgres"):
        raise ValidationError(
            "url.listen_url", f"must be a postgresql:// URL (percent-encoded), got {url!r}"
        )
    return split_url(url)[0]


class Database:
    """A pool of configured connections to one PostgreSQL database (and schema).

    ``pooler`` (a URL option) says what sits in between: ``session`` (the server
    itself, or a pooler that keeps one server connection per client session),
    ``transaction`` (a transaction pooler: nothing may live in the session), or
    ``auto`` (the default): a transaction pooler when the first connection's
    backend is not the one the server says it is. PgBouncer (like other poolers)
    hands its clients a key of its own for cancelling queries, whose process id
    is not the server's ``pg_backend_pid()``; a direct connection's always is.
    ``listen_url`` names a connection straight to the server for LISTEN, which a
    transaction pooler cannot carry; without it, wake-ups poll there.
    """

    def __init__(self, url: str) -> None:
        conninfo, own = split_url(url)
        self.conninfo = conninfo
        pooler = _pooler_option(own)
        listen = _listen_option(own)
        named = own.get("schema")
        if named is not None:
            schemas.check_name(named)  # before connecting: bad input is told at once
        pool_max = _int_option(own, "pool_max", 8)
        pool_min = min(_int_option(own, "pool_min", 1), pool_max)
        timeout = float(_int_option(own, "pool_timeout", 10))
        # psycopg_pool retries a lost server with backoff doubling from 1 s until
        # reconnect_timeout, then gives up and starts afresh on the next request.
        # A short one bounds how long after the server's return a worker waits.
        reconnect = float(_int_option(own, "reconnect_timeout", 4))
        #: Seconds a call keeps retrying after a lost connection (see outages).
        self.retry_timeout = float(_int_option(own, "retry_timeout", DEFAULT_RETRY_TIMEOUT))
        idle = _int_option(own, "idle_in_transaction_timeout", IDLE_IN_TRANSACTION)
        if idle > MAX_IDLE_IN_TRANSACTION:  # the server's bound: INT32_MAX milliseconds
            raise ValidationError(
                "url.idle_in_transaction_timeout",
                f"must be at most {MAX_IDLE_IN_TRANSACTION} seconds, got {idle}",
            )
        self._last_used: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
        # The cause of a failure in one line, before the pool retries it.
        behind_pooler = probe(conninfo)
        placement = schemas.place(conninfo, named)
        #: The schema of the store's tables (see schemas: ``fencepost`` unless named).
        self.schema: str = placement.schema
        #: The NOTIFY channel that wakes this store's workers (one per schema). An earlier
        #: fencepost's tables keep its channel: its processes and these wake each other.
        self.channel = "fencepost_work" if placement.legacy else f"fencepost_work_{self.schema}"
        #: Whether a transaction pooler sits in between (see the class's docstring).
        self.transaction_pooled = pooler == "transaction" or (pooler == "auto" and behind_pooler)
        if listen is not None and probe(listen):
            raise ValidationError(
                "url.listen_url", "reaches a pooler, not the server: LISTEN needs a session"
            )
        #: Where LISTEN connections go; None: nowhere (wake-ups poll).
        self.listen_conninfo = listen or (None if self.transaction_pooled else conninfo)
        #: What starts each transaction behind a transaction pooler: BEGIN and the
        #: settings every other connection keeps for its session.
        #: The session's settings (configure_session's parameters): the schema, and the
        #: idle-in-transaction timeout (None: the server's).
        self.settings: dict[str, str | None] = {
            "schema": self.schema,
            "idle": f"{idle}s" if idle else None,
        }
        self.begin = begin_statement(self.settings) if self.transaction_pooled else None
        fold_pool_warnings()  # an outage is reported once, by the store's caller
        self.pool = ConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=max(pool_max, 1),
            timeout=timeout,
            reconnect_timeout=reconnect,
            configure=self._configure,
            check=self._check,
            kwargs=self.connection_options(),
            open=False,
            name="fencepost",
        )
        with translate_errors():
            self.pool.open(wait=True, timeout=timeout)

    def connection_options(self) -> dict[str, Any]:
        """psycopg's connection options for the store's pools.

        Behind a transaction pooler no statement is prepared: a prepared statement
        lives in one server connection, and the next transaction may run on another.
        """
        if self.transaction_pooled:
            return {"autocommit": True, "prepare_threshold": None}
        return {"autocommit": True}

    def _configure(self, conn: Connection) -> None:
        conn.adapters.register_loader("uuid", TextLoader)
        if self.begin is None:  # a session of our own: set once (else per transaction)
            conn.execute(QUERIES["configure_session"], self.settings)

    def _check(self, conn: Connection) -> None:
        """The pool's check on handing ``conn`` out: a round trip, if it has idled."""
        if time.monotonic() - self._last_used.get(conn, -CHECK_AFTER_IDLE) < CHECK_AFTER_IDLE:
            return
        ConnectionPool.check_connection(conn)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection in autocommit mode, with driver errors translated.

        Behind a transaction pooler, a connection inside one transaction instead:
        the store's settings last only as long as a transaction.
        """
        if self.begin is not None:
            with self.transaction() as conn:
                yield conn
            return
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
                if self.begin is None:
                    with conn.transaction():
                        yield conn
                else:
                    with pooled_transaction(conn, self.begin):
                        yield conn
                self._last_used[conn] = time.monotonic()
        except StoreUnavailable:
            self._last_used.clear()
            raise

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A pooled connection inside one read-only REPEATABLE READ transaction: each of
        its statements sees the snapshot the first one took (a report read in parts)."""
        begin = SNAPSHOT_BEGIN + (self.begin or b"").removeprefix(b"BEGIN")
        try:
            with translate_errors(), self.pool.connection() as conn, _on_standby_close(conn):
                with pooled_transaction(conn, begin):
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


#: What starts a transaction of :meth:`Database.snapshot` (behind a transaction pooler,
#: followed by the rest of :func:`begin_statement`'s query).
SNAPSHOT_BEGIN = b"BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"


def begin_statement(session: dict[str, str | None]) -> bytes:
    """``BEGIN`` and the store's settings (configure_session's: ``session`` gives its
    schema and idle timeout) for that transaction only, as one simple query.

    ``set_config(..., true)`` is ``SET LOCAL``: undone at the transaction's end, so
    the pooler's server connection goes back as it came. Without a schema the
    search_path is the server's (the role's) and left alone; without an idle timeout,
    the server's.
    """
    settings: list[psycopg.sql.Composable] = [
        psycopg.sql.SQL("set_config('TimeZone', 'UTC', true), set_config('jit', 'off', true)")
    ]
    for name, key in (("search_path", "schema"), ("idle_in_transaction_session_timeout", "idle")):
        value = session.get(key)
        if value is not None:
            settings.append(
                psycopg.sql.SQL("set_config({}, {}, true)").format(
                    psycopg.sql.Literal(name), psycopg.sql.Literal(value)
                )
            )
    query = psycopg.sql.SQL("BEGIN; SELECT {}").format(psycopg.sql.SQL(", ").join(settings))
    return query.as_bytes(None)


@contextmanager
def pooled_transaction(conn: Connection, begin: bytes) -> Iterator[Connection]:
    """One transaction on an autocommit connection, opened by ``begin`` (one round trip,
    where ``conn.transaction()`` and a SET LOCAL would take two); committed, or rolled
    back on error."""
    conn.execute(begin)
    try:
        yield conn
    except BaseException:
        if not conn.closed:
            with suppress(psycopg.Error):
                conn.rollback()
        raise
    conn.commit()


@asynccontextmanager
async def pooled_transaction_async(conn: AsyncConnection, begin: bytes) -> AsyncIterator[None]:
    """:func:`pooled_transaction` on a psycopg ``AsyncConnection``."""
    await conn.execute(begin)
    try:
        yield
    except BaseException:
        if not conn.closed:
            with suppress(psycopg.Error):
                await conn.rollback()
        raise
    await conn.commit()


class Listener:
    """A dedicated connection that LISTENs for wake-ups (not taken from the pool)."""

    def __init__(self, db: Database) -> None:
        assert db.listen_conninfo is not None, "no connection to listen on"
        self._db = db
        self._conninfo = db.listen_conninfo
        self._conn: Connection | None = None

    def _connect(self) -> Connection:
        if self._conn is None or self._conn.closed:
            conn: Connection = psycopg.connect(self._conninfo, autocommit=True)
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


def probe(conninfo: str) -> bool:
    """Connect once, and say in one line why that failed (:class:`StoreUnavailable`).

    The pool retries a failing server quietly until its timeout and then reports
    only that it timed out; a wrong port, host, user or database name, or a server
    that demands TLS, is known at the first attempt and named at once.

    Returns whether a pooler sits in between: the process id in the connection's
    cancel key is not the server's ``pg_backend_pid()`` (see :class:`Database`).
    """
    given = psycopg.conninfo.conninfo_to_dict(conninfo).get("connect_timeout")
    # The probe's own short timeout, unless the URL's is one libpq refuses: then the
    # probe keeps it, to name it (overridden, the pool alone would meet it, and retry).
    quick: dict[str, Any] = (
        {"connect_timeout": CONNECT_TIMEOUT} if str(given).strip().isdigit() else {}
    )
    try:
        with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None, **quick) as conn:
            row = conn.execute(QUERIES["backend_pid"]).fetchone()
            return row is not None and row[0] != conn.info.backend_pid
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
        done = {r[0] for r in conn.execute(QUERIES["applied_migrations"])}
        _refuse_moved(conn, done)
        return done


def migrate(db: Database, *, num_buckets: int | None = None) -> list[int]:
    """Apply pending migrations under an advisory lock; return the versions applied.

    In the same transaction, ``num_buckets`` (if given) is recorded unless a count
    already is: the first process to migrate decides (see :func:`recorded_num_buckets`).
    """
    known = migration_files(MIGRATIONS_PACKAGE)
    schemas.make(db)
    try:
        with db.transaction() as conn:
            conn.execute(QUERIES["lock_migrations"])
            conn.execute(QUERIES["create_migrations_table"])
            done: set[int] = {row[0] for row in conn.execute(QUERIES["applied_migrations"])}
            _refuse_moved(conn, done)
            refuse_newer(done, MIGRATIONS_PACKAGE)
            applied = []
            for version, name, sql in known:
                if version not in done:
                    conn.execute(sql)  # a script: several statements, no parameters
                    conn.execute(QUERIES["record_migration"], {"version": version, "name": name})
                    applied.append(version)
            if num_buckets is not None:
                conn.execute(QUERIES["record_num_buckets"], {"num_buckets": int(num_buckets)})
    except StoreUnavailable as exc:
        if isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
            with db.connection() as conn:
                state = conn.execute(QUERIES["schema_state"], {"schema": db.schema}).fetchone()
            raise schemas.cannot_write(db.schema, str(state[1] if state else "")) from None
        raise
    return applied


def recorded_num_buckets(db: Database) -> int | None:
    """The bucket count the schema records (None: none, e.g. an emptied settings table)."""
    with db.connection() as conn:
        row = conn.execute(QUERIES["recorded_num_buckets"]).fetchone()
    return None if row is None else int(row[0])


def _refuse_moved(conn: Connection, done: set[int]) -> None:
    """A :class:`ValidationError` naming where the tables went, for a schema whose tables
    a move took away (its mark, :data:`schemas.MOVED_VERSION`)."""
    if schemas.MOVED_VERSION in done:
        row = conn.execute(QUERIES["moved_to"], {"version": schemas.MOVED_VERSION}).fetchone()
        target = str(row[0] if row else "").removeprefix("moved to schema ")
        raise ValidationError(
            "url.schema", f"fencepost's tables were moved to schema {target}: use ?schema={target}"
        )

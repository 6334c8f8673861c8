"""Calls that outlive a lost connection: which failures are outages, and how long to retry.

A connection can be lost at any moment: a backend killed (``pg_terminate_backend``),
a server shutting down or crashing, a failover that leaves the old address on a
read-only standby. When that happens *during COMMIT* (or during a statement that
runs in autocommit, which is its own commit) the outcome is unknown: the write may or
may not have committed. The PostgreSQL store retries the calls that can tell on the
next attempt what the first one did (submits by their client-made ids, fenced writes
by the audit record their lease wrote) within a budget of time, the URL's
``retry_timeout`` (:data:`DEFAULT_RETRY_TIMEOUT` seconds), then lets the last
:class:`StoreUnavailable` reach the caller as before.

:func:`retried` and :func:`retried_async` drive the attempts: each one is told
whether an earlier attempt may have been committed (``again``), and the waits between
them grow exponentially with full jitter up to :data:`BACKOFF_CAP`, so that many
clients cut off at once do not all come back in the same instant.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg
import psycopg.errors
import psycopg_pool

from fencepost.domain.errors import StoreUnavailable

log = logging.getLogger("fencepost.store")

T = TypeVar("T")

#: Seconds a call keeps retrying after a lost connection (the URL's ``retry_timeout``).
DEFAULT_RETRY_TIMEOUT = 30
#: The first wait's upper bound, in seconds; it doubles on each retry...
BACKOFF_FIRST = 0.05
#: ...up to this bound.
BACKOFF_CAP = 2.0

#: Server errors that say the session, not the statement, is the problem: the
#: administrator or a crash ended it (57P01, 57P02), the server is starting or
#: stopping (57P03), or the session is on a read-only standby after a failover
#: (25006: the store closes that connection, so the pool connects afresh).
OUTAGE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25006"})
#: SQLSTATE class 08, "connection exception".
CONNECTION_EXCEPTION = "08"
#: A read-only transaction: the session is on a standby.
READ_ONLY = "25006"


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` (a :class:`StoreUnavailable` raised from a driver or pool error,
    or that error itself) means the connection or the server went away.

    Not an outage: a statement the server refused (a constraint, a timeout, a lock it
    could not get), or a closed store. Those are answered the same way on a retry.
    """
    cause = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
    if cause is None:
        return False
    if _is_pool_error(cause):
        return not isinstance(cause, psycopg_pool.PoolClosed)  # the store was closed: final
    if not isinstance(cause, psycopg.Error):
        return False
    state = cause.sqlstate
    if state is None:  # raised by the client: "server closed the connection unexpectedly"
        return isinstance(cause, psycopg.OperationalError)
    return state in OUTAGE_SQLSTATES or state.startswith(CONNECTION_EXCEPTION)


def unsent(exc: BaseException) -> bool:
    """Whether ``exc`` failed the call before any statement of it reached the server.

    The pool hands out a connection only after it connected (and checked it, if it
    idled): a pool error means no connection was handed out, so nothing was sent.
    """
    cause = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
    return cause is not None and _is_pool_error(cause) and is_outage(cause)


def lost_race(exc: BaseException) -> bool:
    """Whether a retried insert met the row of an earlier attempt of its own.

    An execution's id is made by this process (UUIDv7, random bits): only an earlier
    attempt of the same submit, whose session was still committing on the server when
    the client gave up on it, can have stored it. The next attempt finds that row.
    """
    cause = exc.__cause__ if isinstance(exc, StoreUnavailable) else exc
    return (
        isinstance(cause, psycopg.errors.UniqueViolation)
        and cause.diag.constraint_name == "executions_pkey"
    )


def _is_pool_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("psycopg_pool")


class Backoff:
    """Capped exponential waits with full jitter, within a budget of seconds."""

    def __init__(
        self, budget: float, *, rng: random.Random | None = None, started: float | None = None
    ) -> None:
        self.deadline = (time.monotonic() if started is None else started) + budget
        self.retries = 0
        # The module's generator unless given one: a Random() of its own would seed
        # itself from the OS on every call of the store.
        self._uniform = random.uniform if rng is None else rng.uniform

    def next_wait(self) -> float | None:
        """The wait before the next attempt, or None once the budget is spent (the last
        attempt starts when it ends, not earlier)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        bound = min(BACKOFF_CAP, BACKOFF_FIRST * 2**self.retries)
        self.retries += 1
        return min(left, self._uniform(0, bound))


def retried(
    attempt: Callable[[bool], T],
    *,
    budget: float,
    retry_if: Callable[[StoreUnavailable], bool] = is_outage,
    what: str = "call",
) -> T:
    """``attempt(again)`` until it returns, retrying the failures ``retry_if`` accepts.

    ``again`` is False on the first attempt and True on the others: an earlier attempt
    may have committed, and the attempt must find out before it writes. After
    ``budget`` seconds (0: no retry) the last :class:`StoreUnavailable` is raised.
    """
    started = time.monotonic()
    backoff: Backoff | None = None  # made on the first failure: most calls never fail
    again = False
    while True:
        try:
            return attempt(again)
        except StoreUnavailable as exc:
            if not retry_if(exc):
                raise
            backoff = backoff or Backoff(budget, started=started)
            wait = backoff.next_wait()
            if wait is None:
                raise
            _log_retry(what, backoff.retries, wait, exc)
        time.sleep(wait)
        again = True


async def retried_async(
    attempt: Callable[[bool], Awaitable[T]],
    *,
    budget: float,
    retry_if: Callable[[StoreUnavailable], bool] = is_outage,
    what: str = "call",
) -> T:
    """:func:`retried`, awaiting each attempt and each wait."""
    started = time.monotonic()
    backoff: Backoff | None = None  # made on the first failure: most calls never fail
    again = False
    while True:
        try:
            return await attempt(again)
        except StoreUnavailable as exc:
            if not retry_if(exc):
                raise
            backoff = backoff or Backoff(budget, started=started)
            wait = backoff.next_wait()
            if wait is None:
                raise
            _log_retry(what, backoff.retries, wait, exc)
        await asyncio.sleep(wait)
        again = True


#: How psycopg_pool's log lines about a server it cannot reach begin (their templates).
POOL_OUTAGE_LINES = (
    "error connecting in",
    "reconnection attempt in pool",
    "discarding broken connection",
    "discarding closed connection",
    "task run",
)


class PoolOutageLines(logging.Filter):
    """psycopg_pool's warnings about a server it cannot reach, folded into DEBUG lines.

    While the server is away the pool warns, in several lines each, about every
    connection attempt that failed and every broken connection it discarded (16 in
    15 s of a worker's outage). Whoever calls the store says so once per outage
    (the worker's "database unreachable" and "reachable again"), so these become
    one-line DEBUG records, kept only when the ``psycopg.pool`` logger is set to
    DEBUG. The pool's other warnings (a connection returned mid-transaction, a
    reset that failed) are left as they are: they are not about an outage.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Fold an outage warning (see the class); pass every other record unchanged."""
        if record.levelno != logging.WARNING or not str(record.msg).startswith(POOL_OUTAGE_LINES):
            return True
        if not logging.getLogger(POOL_LOGGER).isEnabledFor(logging.DEBUG):
            return False
        record.msg, record.args = " ".join(record.getMessage().split()), None
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


#: The logger psycopg_pool writes to.
POOL_LOGGER = "psycopg.pool"
_FOLDED = PoolOutageLines()


def fold_pool_warnings() -> None:
    """Install :class:`PoolOutageLines` on psycopg_pool's logger (once; idempotent)."""
    logging.getLogger(POOL_LOGGER).addFilter(_FOLDED)


def _log_retry(what: str, retry: int, wait: float, exc: StoreUnavailable) -> None:
    # INFO, not WARNING: a retry that succeeds needs nobody's attention, and the
    # last failure still reaches the caller.
    log.info("%s: retry %d in %.3f s after a lost connection: %s", what, retry, wait, exc)

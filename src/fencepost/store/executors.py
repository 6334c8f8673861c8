"""Executors: a verb's statements decided once, run on whichever connection holds them.

The pattern (docs/explanation/architecture.md, "One logic, two executors"). A verb
is split in two:

* a **plan**, pure code: a generator that yields each :class:`Statement` to run (the
  SQL text of one of the dialect's named blocks, its parameters, and what it wants
  back: one row, all rows, nothing, or an ``executemany``), receives that statement's
  result from ``yield``, decides the next one from it, and finally *returns* the
  verb's result. Every decision of the verb — validation leftovers, idempotency,
  which statements, which errors — lives in the plan and only there. A
  :class:`Plan` pairs the generator with whether it must run inside a transaction
  (a one-statement plan may run in autocommit on the store's own connection);
* an **executor**, which knows nothing of the verb: it takes the plan's statements to
  a connection and sends the results back. :func:`run` drives a plan synchronously,
  :func:`run_async` asynchronously; each takes a small ``execute`` function made for
  one kind of connection: :func:`sqlite_execute` (stdlib :mod:`sqlite3`),
  :func:`psycopg_execute` (a psycopg connection or cursor, sync) and
  :func:`psycopg_async_execute` (psycopg's ``AsyncConnection`` or ``AsyncCursor``).

A driver error raised by a statement is thrown *into* the plan at its ``yield``, so a
plan may clean up with statements of its own (:func:`in_savepoint` rolls back to
its savepoint that way) before the error reaches the caller.

The store's own path wraps a plan in the store's transaction handling (its pool, its
``BEGIN IMMEDIATE``); a caller's path wraps the same plan in :func:`in_savepoint` on
the caller's connection, inside the caller's transaction, which fencepost never
commits nor rolls back. The insert verb (``_insert_plan`` of each dialect) was the
first verb written this way; the reading, operator, command-request and schedule
verbs of :class:`~fencepost.store.sqlstore.SqlStore` followed (the ones
:class:`~fencepost.store.asyncstore.AsyncStore` offers).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")

#: What a statement gives back: its first row (or None), all its rows, nothing, the
#: number of rows it changed, or, run once per parameter set (``executemany``), the
#: number of rows all the runs changed.
Fetch = Literal["one", "all", "none", "count", "many"]


@dataclass(frozen=True, slots=True, init=False)
class Statement:
    """One statement of a plan: SQL text, its parameters, and what the plan wants back.

    ``prepare`` is psycopg's: None lets the driver prepare a statement it runs often,
    False plans it afresh each time (a dialect's ``_prepare_for``; SQLite ignores it).
    """

    sql: str
    params: Any = None
    fetch: Fetch = "none"
    prepare: bool | None = None

    def __init__(
        self, sql: str, params: Any = None, fetch: Fetch = "none", prepare: bool | None = None
    ) -> None:
        # Through the slots' descriptors: a frozen dataclass's own __init__ calls
        # object.__setattr__ per field, which made building a plan's statements cost
        # more than running them through the executor (see domain.slots).
        _set_sql(self, sql)
        _set_params(self, params)
        _set_fetch(self, fetch)
        _set_prepare(self, prepare)


_set_sql = Statement.__dict__["sql"].__set__
_set_params = Statement.__dict__["params"].__set__
_set_fetch = Statement.__dict__["fetch"].__set__
_set_prepare = Statement.__dict__["prepare"].__set__


#: A plan's steps: yields statements, receives each one's result, returns the verb's.
Steps = Generator[Statement, Any, T]


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """A verb's steps, and whether they must run inside one transaction.

    ``atomic=False`` lets the store's own executor run a plan of one statement in
    autocommit (PostgreSQL's unkeyed insert: no BEGIN and COMMIT round trips). Inside
    a caller's transaction every plan is atomic anyway.
    """

    steps: Steps[T]
    atomic: bool = True


#: Runs one statement on one connection and returns what its ``fetch`` asks for.
Execute = Callable[[Statement], Any]
#: The same, as a coroutine.
ExecuteAsync = Callable[[Statement], Awaitable[Any]]


def run(steps: Steps[T], execute: Execute) -> T:
    """Drive ``steps`` to their result, running each statement with ``execute``."""
    try:
        statement = next(steps)
        while True:
            try:
                result = execute(statement)
            except BaseException as exc:
                statement = steps.throw(exc)
            else:
                statement = steps.send(result)
    except StopIteration as done:
        value: T = done.value
        return value
    finally:
        steps.close()


async def run_async(steps: Steps[T], execute: ExecuteAsync) -> T:
    """:func:`run`, with a coroutine running each statement."""
    try:
        statement = next(steps)
        while True:
            try:
                result = await execute(statement)
            except BaseException as exc:
                statement = steps.throw(exc)
            else:
                statement = steps.send(result)
    except StopIteration as done:
        value: T = done.value
        return value
    finally:
        steps.close()


def returning(value: T) -> Steps[T]:
    """A plan that runs no statement: the verb's answer is known without asking."""
    return value
    yield  # a generator, for run and yield from


def in_savepoint(steps: Steps[T], *, savepoint: str, release: str, rollback_to: str) -> Steps[T]:
    """``steps`` inside a savepoint of the caller's transaction (the dialect's SQL).

    On any error — a driver's, or the plan's own (:class:`IdempotencyConflict`) — the
    savepoint is rolled back, so the caller's transaction holds nothing of the plan
    and stays usable, and the error goes on to the caller. If even the rollback
    fails, that error is raised: the caller's transaction is then not usable.
    """
    yield Statement(savepoint)
    try:
        result = yield from steps
    except BaseException:
        yield Statement(rollback_to)
        yield Statement(release)
        raise
    yield Statement(release)
    return result


# -- execute functions, one per kind of connection ------------------------------------------


def sqlite_execute(conn: Any) -> Execute:
    """Statements on a :class:`sqlite3.Connection` (or a cursor of one)."""

    def execute(statement: Statement) -> Any:
        if statement.fetch == "many":
            return conn.executemany(statement.sql, statement.params).rowcount
        cursor = (
            conn.execute(statement.sql)
            if statement.params is None
            else conn.execute(statement.sql, statement.params)
        )
        if statement.fetch == "one":
            return cursor.fetchone()
        if statement.fetch == "all":
            return cursor.fetchall()
        if statement.fetch == "count":
            return cursor.rowcount
        return None

    return execute


def psycopg_execute(conn: Any, *, prepare: bool | None = None) -> Execute:
    """Statements on a psycopg ``Connection`` or ``Cursor`` (sync).

    ``prepare=False`` for a caller's connection: server-side prepared statements
    would outlive the call on a connection fencepost does not own. Otherwise each
    statement's own ``prepare`` holds.
    """

    def execute(statement: Statement) -> Any:
        if statement.fetch == "many":
            cursor = conn.cursor() if hasattr(conn, "cursor") else conn
            cursor.executemany(statement.sql, statement.params)
            return cursor.rowcount
        cursor = conn.execute(
            statement.sql,
            statement.params,
            prepare=statement.prepare if prepare is None else prepare,
        )
        if statement.fetch == "one":
            return cursor.fetchone()
        if statement.fetch == "all":
            return cursor.fetchall()
        if statement.fetch == "count":
            return cursor.rowcount
        return None

    return execute


def psycopg_async_execute(conn: Any, *, prepare: bool | None = None) -> ExecuteAsync:
    """Statements on a psycopg ``AsyncConnection`` or ``AsyncCursor`` (``prepare``: as
    :func:`psycopg_execute`'s)."""

    async def execute(statement: Statement) -> Any:
        if statement.fetch == "many":
            cursor = conn.cursor() if hasattr(conn, "cursor") else conn
            await cursor.executemany(statement.sql, statement.params)
            return cursor.rowcount
        cursor = await conn.execute(
            statement.sql,
            statement.params,
            prepare=statement.prepare if prepare is None else prepare,
        )
        if statement.fetch == "one":
            return await cursor.fetchone()
        if statement.fetch == "all":
            return await cursor.fetchall()
        if statement.fetch == "count":
            return cursor.rowcount
        return None

    return execute

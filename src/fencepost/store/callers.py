"""A caller's connection: what a submit with ``connection=`` joins, and what it refuses.

``Store.submit(..., connection=conn)`` runs the insert's plan (see
:mod:`fencepost.store.executors`) inside the caller's open transaction, so the
execution exists exactly when the caller commits. Accepted: the driver connection
of the store's own kind (psycopg for PostgreSQL, :mod:`sqlite3` for SQLite) and
SQLAlchemy's ``Connection``, ``Session``, ``AsyncConnection`` and ``AsyncSession``
over those drivers, unwrapped to the driver connection so the statements run in
SQLAlchemy's transaction. fencepost never commits nor rolls back that transaction.

Each refusal is a :class:`ValidationError` on ``connection`` saying why. SQLAlchemy
is imported here only when one of its objects is passed: a worker never loads it.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from fencepost.domain.errors import ValidationError

FIELD = "connection"

#: SQLAlchemy (dialect, driver) pairs whose driver connection fencepost can use.
SYNC_DRIVERS = {("postgresql", "psycopg"), ("sqlite", "pysqlite")}
ASYNC_DRIVERS = {("postgresql", "psycopg")}


def refuse(message: str) -> ValidationError:
    """The refusal of a caller's connection."""
    return ValidationError(FIELD, message)


def kind_of(connection: object) -> str:
    """A connection's class, for messages: ``module.Class``."""
    kind = type(connection)
    return f"{kind.__module__}.{kind.__qualname__}"


def _is_sqlalchemy(connection: object) -> bool:
    return type(connection).__module__.startswith("sqlalchemy.")


def driver_connection(connection: object) -> object:
    """The DB-API connection under a sync SQLAlchemy ``Connection`` or ``Session``.

    Its transaction is begun first if it has not been (what SQLAlchemy's autobegin
    does on the first statement), so fencepost's statements run inside it and the
    caller's ``commit()`` commits them. Anything else is returned unchanged.
    """
    if not _is_sqlalchemy(connection):
        return connection
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
    from sqlalchemy.orm import Session

    if isinstance(connection, AsyncConnection | AsyncSession):
        raise refuse(
            f"{kind_of(connection)} is asynchronous: submit through fencepost.connect_async"
        )
    if isinstance(connection, Session):
        connection = connection.connection()
    if not isinstance(connection, Connection):
        raise refuse(f"cannot join a transaction of {kind_of(connection)}")
    if connection.closed or connection.invalidated:
        raise refuse("the SQLAlchemy connection is closed")
    dialect = connection.dialect
    if dialect.is_async or (dialect.name, dialect.driver) not in SYNC_DRIVERS:
        raise refuse(
            f"SQLAlchemy driver {dialect.name}+{dialect.driver} is not supported: "
            "use postgresql+psycopg or sqlite+pysqlite"
        )
    if not connection.in_transaction():
        connection.begin()
    return connection.connection.driver_connection


async def async_driver_connection(connection: object) -> object:
    """The psycopg ``AsyncConnection`` under a SQLAlchemy ``AsyncConnection`` or
    ``AsyncSession`` (its transaction begun); anything else unchanged."""
    if not _is_sqlalchemy(connection):
        return connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    if isinstance(connection, AsyncSession):
        connection = await connection.connection()
    if not isinstance(connection, AsyncConnection):
        raise refuse(
            f"{kind_of(connection)} is synchronous: an AsyncStore joins an asynchronous "
            "connection (use fencepost.connect for a sync one)"
        )
    if connection.closed:
        raise refuse("the SQLAlchemy connection is closed")
    dialect = connection.dialect
    if (dialect.name, dialect.driver) not in ASYNC_DRIVERS:
        raise refuse(
            f"SQLAlchemy driver {dialect.name}+{dialect.driver} is not supported "
            "asynchronously: use postgresql+psycopg"
        )
    if not connection.in_transaction():
        await connection.begin()
    raw = await connection.get_raw_connection()
    return raw.driver_connection


def check_psycopg(connection: Any, kind: type[Any], *, store: str) -> None:
    """Refuse a psycopg connection that is not ``kind``, closed, in autocommit, or
    inside a failed transaction."""
    if not isinstance(connection, kind):
        raise refuse(
            f"a PostgreSQL store ({store}) joins a transaction of a {kind.__module__}."
            f"{kind.__qualname__} (or SQLAlchemy over psycopg), got {kind_of(connection)}"
        )
    if connection.closed:
        raise refuse("the psycopg connection is closed")
    if connection.autocommit:
        raise refuse(
            "the psycopg connection is in autocommit mode: there is no transaction to join "
            "(open one with autocommit=False)"
        )
    import psycopg.pq

    if connection.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
        raise refuse("the connection's transaction has failed: roll it back first")


def check_sqlite(connection: object, *, store: str) -> sqlite3.Connection:
    """Refuse a connection that is not an open :class:`sqlite3.Connection` able to
    hold a transaction (its file is compared with the store's by the plan)."""
    if not isinstance(connection, sqlite3.Connection):
        raise refuse(
            f"a SQLite store ({store}) joins a transaction of a sqlite3.Connection "
            f"(or SQLAlchemy over pysqlite), got {kind_of(connection)}"
        )
    try:
        in_transaction = connection.in_transaction
    except sqlite3.ProgrammingError:
        raise refuse("the sqlite3 connection is closed") from None
    autocommit = getattr(connection, "autocommit", None)  # Python 3.12+
    if not in_transaction and (
        autocommit is True or (autocommit is not False and connection.isolation_level is None)
    ):
        raise refuse(
            "the sqlite3 connection is in autocommit mode and no transaction is open: "
            "BEGIN one first (or open it with the default isolation_level)"
        )
    return connection


def refuse_memory(connection: object) -> ValidationError:
    """The memory store's refusal: it has no database, so no transaction to join."""
    return refuse(
        "the memory store keeps executions in this process and has no database "
        f"transaction to join; got {kind_of(connection)}"
    )

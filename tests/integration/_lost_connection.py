"""Lose the PostgreSQL store's connection at one exact point, after or before the work.

:class:`LostConnection` patches psycopg (for one test, through ``monkeypatch``) so that
the next matching COMMIT, or the next run of one named statement, is cut off (on
``Connection`` and ``AsyncConnection`` alike):

* ``committed=True``: the server does the work (the COMMIT, or the autocommit
  statement, completes), then the connection closes before the client reads the
  answer: the outcome is unknown to the client, and it was a success;
* ``committed=False``: the connection closes before the COMMIT or the statement is
  sent: the server rolls the transaction back, nothing of it is stored.

Either way the store sees what a killed backend or a failover shows it: an
``OperationalError`` with no SQLSTATE, on a connection that is now closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from fencepost.store.postgres.live_window import unbounded


@dataclass
class Fault:
    """Where to cut, whether the server did the work first, and how many times."""

    sql: str | None  # None: at COMMIT
    committed: bool
    times: int
    hits: int = 0


class LostConnection:
    """Armed faults on psycopg's COMMIT and statement execution (see the module doc)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.faults: list[Fault] = []
        real_exit = psycopg.Transaction.__exit__
        real_execute = psycopg.Connection.execute
        faults = self.faults

        def take(sql: str | None) -> Fault | None:
            # A hot statement runs with the live window written in: the block it is.
            sql = None if sql is None else unbounded(sql)
            for fault in faults:
                if fault.sql == sql and fault.hits < fault.times:
                    fault.hits += 1
                    return fault
            return None

        def exit_(tx: psycopg.Transaction, exc_type: Any, exc: Any, tb: Any) -> Any:
            fault = take(None) if exc_type is None else None
            if fault is None:
                return real_exit(tx, exc_type, exc, tb)
            if fault.committed:
                real_exit(tx, None, None, None)
            cut(tx.connection)

        def execute(conn: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            fault = take(query) if isinstance(query, str) else None
            if fault is None:
                return real_execute(conn, query, *args, **kwargs)
            if fault.committed:
                real_execute(conn, query, *args, **kwargs)
            cut(conn)

        real_aexit = psycopg.AsyncTransaction.__aexit__
        real_aexecute = psycopg.AsyncConnection.execute

        async def aexit(tx: psycopg.AsyncTransaction, exc_type: Any, exc: Any, tb: Any) -> Any:
            fault = take(None) if exc_type is None else None
            if fault is None:
                return await real_aexit(tx, exc_type, exc, tb)
            if fault.committed:
                await real_aexit(tx, None, None, None)
            await acut(tx.connection)

        async def aexecute(
            conn: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kwargs: Any
        ) -> Any:
            fault = take(query) if isinstance(query, str) else None
            if fault is None:
                return await real_aexecute(conn, query, *args, **kwargs)
            if fault.committed:
                await real_aexecute(conn, query, *args, **kwargs)
            await acut(conn)

        monkeypatch.setattr(psycopg.Transaction, "__exit__", exit_)
        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        monkeypatch.setattr(psycopg.AsyncTransaction, "__aexit__", aexit)
        monkeypatch.setattr(psycopg.AsyncConnection, "execute", aexecute)

    def at_commit(self, *, committed: bool, times: int = 1) -> Fault:
        """Cut the next ``times`` COMMITs of any transaction."""
        fault = Fault(None, committed, times)
        self.faults.append(fault)
        return fault

    def at_statement(self, sql: str, *, committed: bool, times: int = 1) -> Fault:
        """Cut the next ``times`` runs of the statement whose text is ``sql``."""
        fault = Fault(sql, committed, times)
        self.faults.append(fault)
        return fault


async def acut(conn: psycopg.AsyncConnection[Any]) -> None:
    """:func:`cut` for an ``AsyncConnection``."""
    await conn.close()
    cut_off()


def cut(conn: psycopg.Connection[Any]) -> None:
    """Close ``conn`` and raise what psycopg raises for a connection the server dropped."""
    conn.close()
    cut_off()


def cut_off() -> None:
    """Raise what psycopg raises for a connection the server dropped."""
    raise psycopg.OperationalError(
        "consuming input failed: server closed the connection unexpectedly"
    )

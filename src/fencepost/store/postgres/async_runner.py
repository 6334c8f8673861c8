"""The PostgreSQL store's :class:`~fencepost.store.runners.AsyncRunner`: the sync
store's plans on psycopg's ``AsyncConnection``.

The pool is the AsyncStore's own, opened on first use and configured as the sync
store's (UTC, the store's schema, ids as text; behind a transaction pooler, the
settings in each transaction). A verb that is not one plan (a bulk action's many
short transactions, the service-level report's reads in one snapshot) runs as the
sync store's own method on a worker thread, on a connection of the sync store's pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from fencepost.store.callers import async_driver_connection, check_psycopg
from fencepost.store.executors import Plan, psycopg_async_execute, run_async
from fencepost.store.postgres.connection import (
    QUERIES,
    pooled_transaction_async,
    translate_errors,
)
from fencepost.store.postgres.outages import retried_async

if TYPE_CHECKING:
    from fencepost.domain.models import Execution
    from fencepost.domain.submission import NewExecution
    from fencepost.store.base import Store
    from fencepost.store.postgres.store import PostgresStore

T = TypeVar("T")


class PoolRunner:
    """Runs a :class:`~fencepost.store.postgres.store.PostgresStore`'s plans on a pool
    of ``AsyncConnection``\\ s (see the module doc)."""

    runs_plans = True

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self._db = store._db
        self._pool: Any = None
        self._pool_lock = asyncio.Lock()

    async def call(self, verb: Callable[[Store], T]) -> T:
        return await asyncio.to_thread(verb, self.store)

    async def execute(self, plan: Plan[T]) -> T:
        """Run ``plan`` on a pooled connection: in a transaction when it is atomic, else
        in autocommit (as the sync store's executor does)."""
        pool = await self._open_pool()
        begin = self._db.begin
        with translate_errors():
            async with pool.connection() as conn:
                if begin is not None:  # a transaction pooler: the settings per transaction
                    async with pooled_transaction_async(conn, begin):
                        return await run_async(plan.steps, psycopg_async_execute(conn))
                if plan.atomic:
                    async with conn.transaction():
                        return await run_async(plan.steps, psycopg_async_execute(conn))
                return await run_async(plan.steps, psycopg_async_execute(conn))

    async def insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        from fencepost.store.postgres.store import submit_retryable

        store = self.store

        async def attempt(again: bool) -> tuple[list[Execution], int]:
            # Retried after a lost connection as the sync store's submit is: a retry
            # finds what an earlier attempt (whose COMMIT's answer was lost) stored.
            plan = store._insert_plan(batch, notify=store._should_notify, again=again)
            return await self.execute(plan)

        executions, inserted = await retried_async(
            attempt, budget=self._db.retry_timeout, retry_if=submit_retryable, what="submit"
        )
        await self._count_inserts(inserted)
        return list(executions)

    async def insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        """The batch inside the caller's open transaction on ``connection`` (a psycopg
        ``AsyncConnection``, or a SQLAlchemy ``AsyncConnection`` or ``AsyncSession`` over
        psycopg), in a savepoint; refusals as the sync store's."""
        import psycopg
        from psycopg.types.string import TextLoader

        store = self.store
        conn = await async_driver_connection(connection)
        check_psycopg(conn, psycopg.AsyncConnection, store=store.location)
        assert isinstance(conn, psycopg.AsyncConnection)
        await asyncio.to_thread(store._session)  # read once, on the store's own connection
        cursor = conn.cursor()
        cursor.adapters.register_loader("uuid", TextLoader)  # this cursor's, not the caller's
        with translate_errors(callers=True):
            executions, inserted = await run_async(
                store._caller_insert(batch), psycopg_async_execute(cursor, prepare=False)
            )
        await self._count_inserts(inserted)
        return list(executions)

    def flow_changed(self) -> None:
        self.store._flow_changed()

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        await asyncio.to_thread(self.store.close)

    async def _count_inserts(self, rows_inserted: int) -> None:
        """The store's count towards its periodic ANALYZE; the ANALYZE itself (a tenth
        of a second) runs on a worker thread, never on the event loop."""
        if self.store._analyze_due(rows_inserted):
            await asyncio.to_thread(self.store._analyze)

    async def _open_pool(self) -> Any:
        if self._pool is not None:
            return self._pool
        async with self._pool_lock:
            if self._pool is None:
                from psycopg.types.string import TextLoader
                from psycopg_pool import AsyncConnectionPool

                db = self._db

                async def configure(conn: Any) -> None:
                    conn.adapters.register_loader("uuid", TextLoader)
                    if db.begin is None:  # a session of our own (else per transaction)
                        await conn.execute(QUERIES["configure_session"], db.settings)

                pool: Any = AsyncConnectionPool(
                    db.conninfo,
                    min_size=1,
                    max_size=max(db.pool.max_size, 1),
                    timeout=db.pool.timeout,
                    configure=configure,
                    kwargs=db.connection_options(),
                    open=False,
                    name="fencepost-async",
                )
                with translate_errors():
                    await pool.open(wait=True, timeout=db.pool.timeout)
                self._pool = pool
        return self._pool

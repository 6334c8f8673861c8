"""How an :class:`~fencepost.store.asyncstore.AsyncStore` runs a verb without blocking
its event loop: one runner per backend, which the sync store it wraps gives it.

A runner is the asynchronous half of "one logic, two executors"
(docs/explanation/architecture.md): the verb's decisions are the sync store's (its
validation, its plan); the runner decides only *where* they run:

* :class:`InlineRunner` (the memory store): on the event loop itself; nothing waits
  for I/O;
* :class:`ThreadRunner` (SQLite): on one dedicated thread, which holds the store's
  connection for that thread. sqlite3 is blocking and in-process, so there is no
  asynchronous protocol to speak; one thread keeps every write of the AsyncStore in one
  ``BEGIN IMMEDIATE`` after the other, as the sync store does;
* ``PoolRunner`` (PostgreSQL, :mod:`fencepost.store.postgres.async_runner`): a verb's
  plan on psycopg's ``AsyncConnection`` from a pool of its own; a verb that is not a
  plan runs on a worker thread with a connection of the sync store's pool.

A store names its runner (``Store._async_runner``), so no code chooses by the store's
class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypeVar

from fencepost.store.callers import refuse
from fencepost.store.executors import Plan

if TYPE_CHECKING:
    from fencepost.domain.models import Execution
    from fencepost.domain.submission import NewExecution
    from fencepost.store.base import Store

T = TypeVar("T")


class AsyncRunner(Protocol):
    """Where an AsyncStore's verbs run (see the module doc)."""

    #: True when :meth:`execute` runs the sync store's plans on an asynchronous driver;
    #: False when every verb is :meth:`call`\\ed as the sync store's own method.
    runs_plans: bool

    async def call(self, verb: Callable[[Store], T]) -> T:
        """``verb(store)``, the sync store's own path, without blocking the loop."""
        ...

    async def execute(self, plan: Plan[T]) -> T:
        """Run one of the sync store's plans on an asynchronous connection."""
        ...

    async def insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        """Store a validated batch of submits (``Store._insert``)."""
        ...

    async def insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        """Store a validated batch inside the caller's open transaction on ``connection``."""
        ...

    def flow_changed(self) -> None:
        """A plan changed the limits behind the sync store's back: it forgets its view."""
        ...

    async def close(self) -> None:
        """Close what the runner opened, then the sync store."""
        ...


class InlineRunner:
    """The memory store's runner: each verb on the event loop itself."""

    runs_plans = False

    def __init__(self, store: Store) -> None:
        self.store = store

    async def call(self, verb: Callable[[Store], T]) -> T:
        return verb(self.store)

    async def execute(self, plan: Plan[T]) -> T:
        raise AssertionError("the memory store has no plans to execute")

    async def insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        return list(self.store._insert(batch))

    async def insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        return list(self.store._insert_in(batch, connection))  # refuses, as the sync store

    def flow_changed(self) -> None:
        pass  # the sync verbs forget it themselves

    async def close(self) -> None:
        await asyncio.to_thread(self.store.close)


class ThreadRunner(InlineRunner):
    """SQLite's runner: each verb on one dedicated thread, with that thread's connection."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._thread: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="fencepost-sqlite"
        )

    async def call(self, verb: Callable[[Store], T]) -> T:
        if self._thread is None:
            raise refuse("this AsyncStore is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, verb, self.store)

    async def insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        return await self.call(lambda store: list(store._insert(batch)))

    async def insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        raise refuse(
            "an AsyncStore on SQLite cannot join a caller's transaction (sqlite3 "
            "connections are blocking): use the sync Store's submit(connection=...)"
        )

    async def close(self) -> None:
        if self._thread is None:
            return
        thread, self._thread = self._thread, None
        await asyncio.get_running_loop().run_in_executor(thread, self.store.close)
        thread.shutdown(wait=True)


__all__ = ["AsyncRunner", "InlineRunner", "ThreadRunner"]

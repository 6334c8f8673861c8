"""What every part of :class:`~fencepost.store.asyncstore.AsyncStore` stands on: the
sync store it validates with, the runner that runs its verbs, and how a verb runs
(its plan where the runner runs plans, else the sync verb where the runner calls)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from fencepost.store.base import Store
from fencepost.store.catalogue import CATALOGUE_REFRESH
from fencepost.store.executors import Plan

if TYPE_CHECKING:
    from fencepost.store.runners import AsyncRunner

T = TypeVar("T")


class AsyncVerbs:
    """The state and the running of an ``AsyncStore``'s verbs (its parts are one
    module each: this, :mod:`fencepost.store.async_flow`, and the rest in
    :mod:`fencepost.store.asyncstore`).

    ``store`` is the sync store it validates with; the AsyncStore closes it.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.location: str = getattr(store, "location", "memory://")
        self._runner: AsyncRunner = store._async_runner()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close what the runner opened (a pool, a thread) and the sync store."""
        await self._runner.close()

    def _flow_changed(self) -> None:
        """The sync store's view of the limits is stale: on PostgreSQL a plan changed
        them behind its back (the sync verbs forget it themselves)."""
        self._runner.flow_changed()

    # -- executing -----------------------------------------------------------------------

    async def _verb(self, call: Callable[[Any], T], plan: Callable[[Any], Plan[T]]) -> T:
        """One verb: ``plan(store)`` (the sync store's plan of it, after its validation)
        when the runner runs plans, else ``call(store)`` (the sync verb) where the
        runner runs it."""
        if self._runner.runs_plans:
            return await self._runner.execute(plan(self.store))
        return await self._runner.call(call)

    async def _fresh_catalogue(self, jobs: Iterable[object] = ()) -> None:
        """Read the job catalogue again off the event loop when the sync store's copy is
        due for it, or lacks one of ``jobs`` (the sync store would read it again before
        refusing or flagging the submit), so that ``_prepare`` (the store's code) never
        blocks the loop on it."""
        store = self.store
        known = store._catalogue.latest
        missing = any(isinstance(job, str) and job not in known for job in jobs)
        if missing or time.monotonic() - store._catalogue_read_at >= CATALOGUE_REFRESH:
            await self._runner.call(lambda s: s._refresh_catalogue())

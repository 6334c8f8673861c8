"""The contract suite against :class:`~fencepost.store.asyncstore.AsyncStore`.

The suite is synchronous; :class:`AwaitedStore` lets it drive an AsyncStore without a
copy of any test. Each of AsyncStore's public coroutines (every verb of the sync
store: tests/unit/test_store_shape.py holds the two surfaces equal) runs on an event
loop in a thread of its own and the caller blocks for its answer, result or error, so
the suite checks exactly what ``await store.verb(...)`` gives. What is not a verb (the
store's settings, its clock) is read from the sync store beneath it.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fencepost.store.asyncstore import AsyncStore
from fencepost.store.base import Store

T = TypeVar("T")

#: AsyncStore's verbs: its public coroutines, but ``close`` (closing is the adapter's).
ASYNC_VERBS = frozenset(
    name
    for name, member in vars(AsyncStore).items()
    if inspect.iscoroutinefunction(member) and not name.startswith("_") and name != "close"
)


class AwaitedStore:
    """A store whose AsyncStore verbs are awaited on a background loop (see the module doc).

    ``awaited`` counts the verbs that ran as coroutines, so a test can tell that the
    contract suite really went through AsyncStore.
    """

    def __init__(self, store: Store) -> None:
        self.sync_store = store
        self.awaited: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fencepost-awaited", daemon=True
        )
        self._thread.start()
        self.async_store = AsyncStore(store)
        self._closed = False

    def _await(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        if name in ASYNC_VERBS:
            verb: Callable[..., Coroutine[Any, Any, Any]] = getattr(self.async_store, name)

            def awaited(*args: Any, **kwargs: Any) -> Any:
                self.awaited[name] = self.awaited.get(name, 0) + 1
                return self._await(verb(*args, **kwargs))

            return awaited
        return getattr(self.sync_store, name)

    async def _wait_async(self, execution_id: str, **options: Any) -> Any:
        """AsyncStore.wait from a caller's own event loop (the pool lives on ours)."""
        future = asyncio.run_coroutine_threadsafe(
            self.async_store.wait(execution_id, **options), self._loop
        )
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Close the AsyncStore (and with it the sync store), then the loop; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._await(self.async_store.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

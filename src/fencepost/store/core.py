"""What every part of the store contract stands on: settings, ids, payload and bucket checks."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Self

from fencepost.domain import payloads
from fencepost.domain.buckets import buckets_of
from fencepost.domain.ids import IdGenerator
from fencepost.domain.models import JSON, Transition
from fencepost.store.observers import Observers
from fencepost.store.values import StoreConfig

if TYPE_CHECKING:
    from fencepost.store.runners import AsyncRunner


class StoreCore(ABC):
    """The state every backend has, and the helpers its verbs share."""

    #: Whether writes from several threads of one process proceed at once (so a worker
    #: writes outcomes on a thread of their own, beside its claims). False for SQLite:
    #: one writer per file, a second would only wait for the lock.
    parallel_writes = False

    #: Where the data lives, for log lines and messages: a URL without credentials.
    location = "memory://"

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.clock = config.clock
        self._ids = IdGenerator()
        #: Migration versions this store applied when it opened (empty: already current).
        self.migrations_applied: list[int] = []
        #: The schema version the store runs on (0 for stores without a schema).
        self.schema_version = 0
        #: Who is told of the leasing work this store does (:mod:`fencepost.store.observers`).
        self.observers = Observers(config.observers)

    def _encode(self, value: JSON, field: str) -> str:
        return payloads.encode(value, field=field, limit=self.config.max_payload_bytes)

    def _buckets(self, buckets: Iterable[int]) -> tuple[int, ...]:
        return buckets_of(buckets, self.config.num_buckets)

    def _async_runner(self) -> AsyncRunner:
        """Where an :class:`~fencepost.store.asyncstore.AsyncStore` over this store runs
        its verbs (:mod:`fencepost.store.runners`): on the event loop itself, unless the
        backend says otherwise."""
        from fencepost.store.runners import InlineRunner

        return InlineRunner(self)  # type: ignore[arg-type]

    @abstractmethod
    def transitions(self, execution_id: str) -> list[Transition]:
        """The audit trail of one execution, oldest first; :class:`NotFound` if unknown.

        A reading verb, declared here because a snooze (leasing) counts the snoozes in it.
        """

    @abstractmethod
    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""What a worker needs from wherever its work comes from.

A :class:`~fencepost.store.base.Store` is one (a worker with a database URL); the
HTTP client is another (``fencepost worker --server URL``, through the worker
protocol). The worker calls nothing else, so either can feed it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, Unpack

from fencepost.domain.catalogue import JobEntry
from fencepost.domain.claims import ClaimOptions
from fencepost.domain.errors import StaleLease
from fencepost.domain.limits import Limit
from fencepost.domain.models import JSON, Command, Execution, Lease
from fencepost.domain.nodes import Node


class WorkSource(Protocol):
    """The leasing verbs of :class:`~fencepost.store.base.Store`, as a worker uses them.

    Each has the store's meaning and fence; see the store's docstrings.
    """

    def claim(self, owner: str, **options: Unpack[ClaimOptions]) -> list[Lease]: ...

    def heartbeat_many(
        self, beats: Sequence[tuple[Lease, JSON]], *, ttl: float | timedelta = ...
    ) -> list[Lease | StaleLease]: ...

    def complete_many(self, results: Sequence[tuple[Lease, JSON]]) -> list[StaleLease | None]: ...

    def fail(
        self,
        lease: Lease,
        error: str,
        *,
        retryable: bool = ...,
        retry_in: float | timedelta | None = ...,
        timed_out: bool = ...,
    ) -> Execution: ...

    def release(self, lease: Lease, *, reason: str = ...) -> Execution: ...

    def snooze(
        self, lease: Lease, seconds: float | timedelta, *, reason: str | None = ...
    ) -> Execution: ...

    def abort(self, lease: Lease, *, reason: str = ...) -> Execution: ...

    def reap_expired(self, *, limit: int = ...) -> int: ...

    def wait_for_work(self, timeout: float) -> bool: ...

    def claim_commands(
        self,
        owner: str,
        execution_ids: Iterable[str],
        *,
        ttl: float | timedelta = ...,
        limit: int = ...,
    ) -> list[Command]: ...

    def complete_command(self, command: Command, lease: Lease) -> Command: ...

    def release_command(self, command: Command) -> None: ...

    def register_node(
        self,
        node_id: str | None = ...,
        *,
        kind: str = ...,
        buckets: Iterable[int] | None = ...,
        ttl: float | timedelta = ...,
        jobs: Iterable[tuple[str, int]] = ...,
    ) -> Node: ...

    def publish_jobs(self, entries: Iterable[JobEntry]) -> list[JobEntry]: ...

    def declare_limits(self, limits: Iterable[Limit], *, actor: str = ...) -> None: ...

    def deregister_node(self, node_id: str) -> None: ...

    def clock_offset(self, written_at: datetime) -> float | None: ...

    def close(self) -> Any: ...

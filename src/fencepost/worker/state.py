"""What every part of a worker shares: its state, and whether the store answers.

A :class:`~fencepost.worker.runtime.Worker` is one object assembled from parts, one
module each, so that each concern reads on its own page:

* :mod:`~fencepost.worker.runtime`: the control loop, claiming, lifecycle, shutdown;
* :mod:`~fencepost.worker.handlers`: the handler threads and event loop, timeouts;
* :mod:`~fencepost.worker.outbox`: collecting outcomes and writing them in batches;
* :mod:`~fencepost.worker.held`: heartbeats and commands for the runs it holds.

They are mixins of one class rather than objects calling each other: the hot path
(one claimed execution, one handler run, one outcome written) makes exactly the
calls it made as one class, and every part reads the same attributes, all set in
``Worker.__init__`` and declared here.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import StoreUnavailable
from fencepost.jobs.registry import JobRegistry
from fencepost.worker.options import WorkerOptions
from fencepost.worker.prefetch import ClaimBuffer, FinishRate
from fencepost.worker.runs import Run, RunOutcome, WorkerCounters
from fencepost.worker.source import WorkSource

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are asked for
    from fencepost.worker.metrics import WorkerMetrics

log = logging.getLogger("fencepost.worker")


class WorkerState:
    """The attributes a worker's parts share, and the store's health (see the module)."""

    store: WorkSource
    registry: JobRegistry
    options: WorkerOptions
    owner: str
    counters: WorkerCounters
    _monotonic: Callable[[], float]
    _wake: threading.Event  #: set from any thread to end the control loop's wait
    _stopping: threading.Event  #: first signal: drain
    _immediate: threading.Event  #: second signal: stop now
    _stopped: threading.Event
    _runs: dict[str, Run]  #: every run held, buffered or running, by execution id
    _done: queue.SimpleQueue[RunOutcome]  #: handlers' outcomes (put by handler threads)
    _outbox: list[RunOutcome]  #: outcomes waiting to be written
    _outbox_since: float  #: when the oldest outcome in the outbox arrived
    _buffer: ClaimBuffer[Run]
    _writer: ThreadPoolExecutor | None  #: writes outcome batches beside the claims (PostgreSQL)
    _writing: Future[tuple[list[RunOutcome], Exception | None]] | None  #: the batch in flight
    _in_flight: list[RunOutcome]  #: the outcomes of the batch in flight
    _queues: tuple[str, ...] | None  #: claim only from these queues (None: every queue)
    _queue_limits: dict[str, int]  #: at most this many leases held of a queue
    _rate: FinishRate
    _next_hand_back: float
    _next_scan: float  #: when held runs are next scanned for timeouts and heartbeats
    _threads: list[threading.Thread]
    _loop: asyncio.AbstractEventLoop | None
    _loop_thread: threading.Thread | None
    _healthy: bool  #: False while the store is unreachable (store calls wait for _retry_at)
    _clock_agrees: bool  #: this process's clock is within a lease of the store's
    _backoff: float
    _retry_at: float
    _thread: threading.Thread | None
    _groups: dict[timedelta, tuple[list[str], list[tuple[str, int]]]]  #: claims by lease ttl
    metrics: WorkerMetrics | None  #: the worker's metrics, once serve_metrics started them

    def _store_call(self, action: Callable[[], Any], *, probe: bool = False) -> Any:
        """Run one store operation; None if the store is down (the worker then backs off).

        Only a ``probe`` (node registration: a write, a real round trip on every
        store) that succeeds ends an outage. Other calls can return without
        reaching the store (commands of no held execution, an empty batch), so
        their success proves nothing.
        """
        try:
            value = action()
        except StoreUnavailable as exc:
            self._store_down(exc)
            return None
        if probe:
            self._store_up()
        return value

    def _store_up(self) -> None:
        """A round trip succeeded: if the store was down, say so (once) and resume."""
        if not self._healthy:
            log.warning("database reachable again; resuming claims")
            self._healthy = True
            self._backoff = 0.0

    def _store_down(self, exc: Exception) -> None:
        """A store call met an outage: back off (doubling, up to ``max_backoff``), say so once.

        Never longer than a quarter of the shortest lease either: the leases held
        are renewed by the first pass after the store answers again, in time.
        """
        cap = min(self.options.max_backoff, min(self._groups).total_seconds() / 4)
        self._backoff = min(cap, max(0.1, self._backoff * 2))
        self._retry_at = self._monotonic() + self._backoff
        if self._healthy:
            log.error(
                "database unreachable (%s): not claiming; holding %d outcomes, retrying",
                " ".join(str(exc).split()),  # one line: driver messages span several
                len(self._outbox),
            )
        self._healthy = False

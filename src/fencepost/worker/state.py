"""What the parts of a worker share: the runs it holds, and whether the store answers.

A :class:`~fencepost.worker.runtime.Worker` is composed of objects, one module each,
so that each concern reads on its own page:

* :mod:`~fencepost.worker.runtime`: the control loop, claiming, lifecycle, shutdown;
* :mod:`~fencepost.worker.handlers`: the handler threads and event loop, timeouts;
* :mod:`~fencepost.worker.outbox`: collecting outcomes and writing them in batches;
* :mod:`~fencepost.worker.held`: heartbeats and commands for the runs it holds;
* :mod:`~fencepost.worker.node`: its jobs published, its node registered, its clock;
* :mod:`~fencepost.worker.prefetch`: the claim buffer and the finish rate.

Each part is given this one :class:`WorkerState` and the parts it hands work to; none
reads another's private attributes. What is here is what more than one part reads or
changes: the store (replaced once when metrics wrap it), the runs held, the claim
buffer, the counters, the control thread's wake-up, and the store's health.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import StoreUnavailable
from fencepost.jobs.registry import JobRegistry
from fencepost.worker.options import WorkerOptions
from fencepost.worker.prefetch import ClaimBuffer
from fencepost.worker.runs import Run, WorkerCounters
from fencepost.worker.source import WorkSource

if TYPE_CHECKING:  # prometheus_client is loaded only when metrics are asked for
    from fencepost.worker.metrics import WorkerMetrics

log = logging.getLogger("fencepost.worker")


class WorkerState:
    """The state a worker's parts share, and the store's health (see the module).

    Changed only on the worker's control thread, but for :attr:`wake` (set from any
    thread) and :attr:`buffer` (which locks itself): handler threads read nothing
    else here but :attr:`metrics` and :attr:`monotonic`.
    """

    def __init__(
        self,
        store: WorkSource,
        registry: JobRegistry,
        options: WorkerOptions,
        owner: str,
        monotonic: Callable[[], float],
    ) -> None:
        self.store = store
        self.registry = registry
        self.options = options
        self.owner = owner
        self.monotonic = monotonic
        self.counters = WorkerCounters()
        #: Set from any thread to end the control loop's wait.
        self.wake = threading.Event()
        #: The first signal: claim no more, drain.
        self.stopping = threading.Event()
        #: Every run held, buffered or running, by execution id.
        self.runs: dict[str, Run] = {}
        self.buffer: ClaimBuffer[Run] = ClaimBuffer(options.concurrency, monotonic)
        #: The worker's metrics, once ``Worker.serve_metrics`` started them.
        self.metrics: WorkerMetrics | None = None
        #: False while the store is unreachable (store calls wait for :attr:`retry_at`).
        self.healthy = True
        self.backoff = 0.0
        self.retry_at = 0.0
        #: The longest an outage backs off: a quarter of the shortest lease held (set by
        #: the worker from its jobs), so that leases are renewed in time once it ends.
        self.max_backoff = options.max_backoff
        #: How many outcomes wait to be written (the outbox's size, for the outage's log line).
        self.unwritten: Callable[[], int] = lambda: 0

    def call(self, action: Callable[[], Any], *, probe: bool = False) -> Any:
        """Run one store operation; None if the store is down (the worker then backs off).

        Only a ``probe`` (node registration: a write, a real round trip on every
        store) that succeeds ends an outage. Other calls can return without
        reaching the store (commands of no held execution, an empty batch), so
        their success proves nothing.
        """
        try:
            value = action()
        except StoreUnavailable as exc:
            self.down(exc)
            return None
        if probe:
            self.up()
        return value

    def up(self) -> None:
        """A round trip succeeded: if the store was down, say so (once) and resume."""
        if not self.healthy:
            log.warning("database reachable again; resuming claims")
            self.healthy = True
            self.backoff = 0.0

    def down(self, exc: Exception) -> None:
        """A store call met an outage: back off (doubling, to :attr:`max_backoff`), say so once."""
        self.backoff = min(self.max_backoff, max(0.1, self.backoff * 2))
        self.retry_at = self.monotonic() + self.backoff
        if self.healthy:
            log.error(
                "database unreachable (%s): not claiming; holding %d outcomes, retrying",
                " ".join(str(exc).split()),  # one line: driver messages span several
                self.unwritten(),
            )
        self.healthy = False

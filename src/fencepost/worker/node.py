"""This worker in the store's registry: its jobs published, its node registered, its clock.

A worker publishes its jobs to the catalogue once, before it claims anything, then
registers its node and renews it a third of the node's time to live apart; each
registration is also the probe that ends an outage. The store's answer says how far
this process's clock is from the store's: while it is off by more than a lease, the
worker claims and reaps nothing.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from fencepost.domain.catalogue import JobEntry
from fencepost.domain.errors import FencepostError
from fencepost.jobs.catalogue import publish
from fencepost.worker.state import WorkerState

log = logging.getLogger("fencepost.worker")


class NodeMembership:
    """Publishing a worker's jobs, registering its node, and judging its clock (a part of
    ``Worker``). ``entries``: the jobs' catalogue entries; ``shortest_lease``: the
    shortest lease the worker takes, the most its clock may be off."""

    def __init__(
        self, state: WorkerState, entries: list[JobEntry], shortest_lease: timedelta
    ) -> None:
        self.state = state
        self._entries = entries
        self._limit = shortest_lease.total_seconds()
        #: This worker's jobs are in the store's catalogue (claiming waits for it).
        self.published = False
        #: This process's clock is within a lease of the store's (see :meth:`check_clock`).
        self.clock_agrees = True

    def register(self) -> None:
        """Publish this worker's jobs to the catalogue (once), then register (or renew) the node.

        Publishing comes before anything is claimed: a job version whose definition
        differs from the one published under its name and version raises
        :class:`~fencepost.domain.errors.CatalogueConflict`, which stops the worker.
        """
        if not self.published:
            # The jobs' declared limits go with them (an operator's limit stays).
            publish(self.state.store, self.state.registry, self._entries)
            self.published = True
        node = self.state.store.register_node(
            self.state.owner,
            kind="worker",
            buckets=self.state.options.buckets,
            ttl=self.state.options.node_ttl,
            jobs=[spec.key for spec in self.state.registry],
        )
        self.check_clock(self.state.store.clock_offset(node.heartbeat_at))

    def check_clock(self, offset: float | None) -> None:
        """Stop claiming and reaping while this process's clock disagrees with the store's.

        Where leases are judged by this process's clock (SQLite), a clock ahead by
        more than a lease would see live leases as expired and take them over, and
        one behind would write leases that others see expired at once. So, by more
        than the shortest lease this worker takes: log an error, claim and reap
        nothing (running handlers go on; their outcomes are still fenced) until the
        clocks agree again.
        """
        limit = self._limit
        agrees = offset is None or abs(offset) <= limit
        if agrees and not self.clock_agrees:
            log.warning("clock agrees with the store again; resuming claims")
        elif not agrees and self.clock_agrees:
            log.error(
                "this process's clock is %+.1f s off the store's record of its writes, more "
                "than a lease (%.1f s): not claiming or reaping until it agrees",
                offset,
                limit,
            )
        self.clock_agrees = agrees

    def warn_without_scheduler(self) -> None:
        """Warn, after the start line, when schedules exist that no live materializer fires.

        A plain worker runs executions but materializes no schedule: that takes a
        ``--with-scheduler`` worker or ``fencepost serve`` somewhere. A remote worker
        asks nothing (its source has no node listing: its service materializes, unless
        told not to), and a store that cannot answer now is not worth a warning.
        """
        store: Any = self.state.store  # a Store (or its metered wrapper) when it lists nodes
        if getattr(store, "live_schedulers", None) is None:
            return
        # Loaded only here: a remote worker never needs the scheduler's planning.
        from fencepost.scheduler.materializer import scheduler_warning

        try:
            warning = scheduler_warning(store)
        except FencepostError as exc:
            log.debug("could not look for a live scheduler: %s", exc)
            return
        if warning is not None:
            log.warning("worker %s: %s", self.state.owner, warning)

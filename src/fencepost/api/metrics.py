"""Prometheus metrics: ``GET /metrics``, and what this process counts for it.

The figures come from two places, because they answer different questions:

* **The store, read at scrape time** (:class:`StoreCollector`): executions by
  state, queue depth by job, unfinished executions by named queue and state, the
  due backlog, and the work no live process serves (due executions per job whose
  job no live worker serves; active schedules while no scheduler runs). They are
  database-wide, so every
  replica of the service reports the same, true value for the whole cluster.
  ``fencepost_store_up`` says whether they could be read; an unreachable store
  never turns the scrape into an error.
* **This process, counted as it works**
  (:class:`~fencepost.api.metered_store.MeteredStore`): claim lateness, attempts by
  outcome, stale calls refused, lease expiries reaped, misfires and occurrences
  materialized. The service hands its embedded workers, materializer and reaper the
  same wrapped store, so these count everything the process did; Prometheus sums
  them across processes.

Each application gets its own :class:`~prometheus_client.CollectorRegistry`,
never the global default one: a process (a test run) may build many apps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fencepost.api.auth import Scope
from fencepost.api.deps import guarded
from fencepost.api.metered_store import Instruments, MeteredStore
from fencepost.domain.errors import StoreUnavailable
from fencepost.domain.states import State
from fencepost.store.base import Store

log = logging.getLogger(__name__)

router = APIRouter()

# The collector reads only the instantaneous figures of Store.stats; the smallest
# window keeps its audit-trail part (a sort of the window's claims, on PostgreSQL
# through an index on the transitions' time) close to free on every scrape.
_SCRAPE_WINDOW = timedelta(microseconds=1)

#: The states ``fencepost_queue_executions`` reports per queue. Only these: a series
#: per queue and state, and queues are as many as submitters name, so finished
#: states (known per state from ``fencepost_executions``) would multiply the series
#: for no operational question. Queues whose executions were all pruned drop out.
UNFINISHED = (State.SCHEDULED, State.RETRY_WAIT, State.RUNNING)


class StoreCollector(Collector):
    """Gauges read from the store on each scrape: one :meth:`Store.stats` call."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._was_up = True

    def describe(self) -> Iterator[Metric]:
        """The metric families, without reading the store (used at registration)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """The families with their samples; only ``fencepost_store_up 0`` if unreachable."""
        up, executions, queue_depth, by_queue, due_backlog, unserved, schedules = self._families()
        try:
            stats = self.store.stats(window=_SCRAPE_WINDOW)
        except StoreUnavailable as exc:
            if self._was_up:  # once per outage, not once per scrape
                log.warning("metrics: store unavailable, store figures left out: %s", exc)
            self._was_up = False
            up.add_metric([], 0)
            yield up
            return
        if not self._was_up:
            log.info("metrics: store reachable again")
        self._was_up = True
        up.add_metric([], 1)
        for state, count in stats.by_state.items():
            executions.add_metric([state.value], count)
        for job, counts in stats.by_job.items():
            queue_depth.add_metric([job], counts[State.SCHEDULED] + counts[State.RETRY_WAIT])
        for queue, counts in stats.by_queue.items():
            for state in UNFINISHED:
                by_queue.add_metric([queue, state.value], counts[state])
        due_backlog.add_metric([], stats.due_backlog)
        if stats.unserved is not None:
            waiting: dict[str, int] = {}
            for group in stats.unserved.executions:  # pinned versions add up per job
                waiting[group.job] = waiting.get(group.job, 0) + group.count
            for job, count in waiting.items():
                unserved.add_metric([job], count)
            schedules.add_metric([], stats.unserved.schedules)
        yield from (up, executions, queue_depth, by_queue, due_backlog, unserved, schedules)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily("fencepost_store_up", "1 if the store answered this scrape, else 0."),
            GaugeMetricFamily(
                "fencepost_executions",
                "Executions in the store, by state (every state, zeros included).",
                labels=["state"],
            ),
            GaugeMetricFamily(
                "fencepost_queue_depth",
                "Waiting executions (SCHEDULED or RETRY_WAIT, due or not) per job.",
                labels=["job"],
            ),
            GaugeMetricFamily(
                "fencepost_queue_executions",
                "Unfinished executions (SCHEDULED, RETRY_WAIT, RUNNING) per named queue.",
                labels=["queue", "state"],
            ),
            GaugeMetricFamily(
                "fencepost_due_backlog",
                "Waiting executions already due: claimable now and not yet claimed.",
            ),
            GaugeMetricFamily(
                "fencepost_unserved_due_executions",
                "Due executions no live worker serves (none serves their job, or their "
                "pinned version), per job; jobs with none are not listed.",
                labels=["job"],
            ),
            GaugeMetricFamily(
                "fencepost_unserved_schedules",
                "Active schedules (not paused, not finished) while no scheduler runs: "
                "none of them fires. 0 while a scheduler node is live.",
            ),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Metrics:
    """One application's metrics: its registry, instruments and metered store."""

    registry: CollectorRegistry
    instruments: Instruments
    #: The store to give the API, workers, materializer and reaper of this process so
    #: that their work is counted (a :class:`MeteredStore`).
    store: Store


def create_metrics(store: Store) -> Metrics:
    """A fresh registry with the store's gauges and this process's counters over ``store``."""
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    instruments = Instruments.create(registry)
    return Metrics(
        registry=registry,
        instruments=instruments,
        store=cast(Store, MeteredStore(store, instruments)),
    )


_EXPOSITION = {"schema": {"type": "string"}}


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics",
    **guarded(
        Scope.READ,
        **{
            "200": {
                "description": "The Prometheus text format (OpenMetrics when asked for)",
                "content": {
                    "text/plain": _EXPOSITION,
                    "application/openmetrics-text": _EXPOSITION,
                },
            }
        },
    ),
)
def metrics(request: Request) -> Response:
    """Every metric, in the format the ``Accept`` header asks for (Prometheus text by default)."""
    registry: CollectorRegistry = request.app.state.metrics.registry
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(registry), media_type=content_type)

"""Prometheus metrics: ``GET /metrics``, and what this process counts for it.

The figures come from two places, because they answer different questions:

* **The store, read at scrape time** (:class:`StoreCollector`): executions by
  state, queue depth by job, unfinished executions by named queue and state, the
  due backlog, the work no live process serves (due executions per job whose
  job no live worker serves; active schedules while no scheduler runs), the limits
  and paused queues, and the throttle records (executions a limit or a paused
  queue held, per scope). They are database-wide, so every
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fencepost.api.auth import Scope
from fencepost.api.deps import guarded
from fencepost.api.metered_store import Instruments, MeteredStore
from fencepost.domain.errors import StoreUnavailable
from fencepost.domain.limits import Limit, ThrottleCount
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
    """Figures read from the store on each scrape: :meth:`Store.stats`, the limits and
    the throttle records (three reads)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._was_up = True

    def describe(self) -> Iterator[Metric]:
        """The metric families, without reading the store (used at registration)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """The families with their samples; only ``fencepost_store_up 0`` if unreachable."""
        families = self._families()
        up, executions, queue_depth, by_queue, due_backlog, unserved, schedules = families[:7]
        try:
            stats = self.store.stats(window=_SCRAPE_WINDOW)
            limits = self.store.limits()
            # Totals since the beginning (Store.throttled(window=None)): counters, the
            # same on every replica, never reset by a restart nor by a prune.
            throttled = self.store.throttled(window=None)
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
        _flow_samples(families[7:], limits, throttled, queues=stats.by_queue)
        yield from families

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily | CounterMetricFamily, ...]:
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
            *_flow_families(),
        )


def _flow_families() -> tuple[GaugeMetricFamily | CounterMetricFamily, ...]:
    """The families of limits, paused queues and throttling (see :func:`_flow_samples`)."""
    return (
        CounterMetricFamily(
            "fencepost_throttled",
            "Executions a limit or a paused queue held past their due time, per scope "
            "(job:NAME or queue:NAME), counted when such an execution is claimed (or its "
            "paused queue resumed). Totals the store keeps, so neither a restart nor a "
            "prune resets them; database-wide, so take max() across replicas, not sum(). "
            "fencepost stats leaves these claims out of its "
            "claim lateness (fencepost_claim_lateness_seconds does not).",
            labels=["scope"],
        ),
        CounterMetricFamily(
            "fencepost_throttled_seconds",
            "Time the executions of fencepost_throttled_total were held past their due "
            "time (or since their queue was paused), in seconds, per scope.",
            labels=["scope"],
        ),
        GaugeMetricFamily(
            "fencepost_limit_info",
            "1 for each limit set (by an operator, or declared with a job: source code): "
            "its rate (starts per period, as written), burst, concurrency and whether each "
            "limit key has its own allowance; empty when not set. Paused queues are "
            "fencepost_queue_paused.",
            labels=["scope", "rate", "burst", "concurrency", "per_key", "source"],
        ),
        GaugeMetricFamily(
            "fencepost_limit_rate_per_second",
            "The starts per second a limit's rate allows, per scope (limits with a rate).",
            labels=["scope"],
        ),
        GaugeMetricFamily(
            "fencepost_limit_concurrency",
            "How many executions a limit lets run at once, per scope (limits with one).",
            labels=["scope"],
        ),
        GaugeMetricFamily(
            "fencepost_queue_paused",
            "1 while a queue is paused (nothing in it is claimed), else 0: every queue that "
            "holds executions or has a limit.",
            labels=["queue"],
        ),
    )


def _flow_samples(
    families: tuple[GaugeMetricFamily | CounterMetricFamily, ...],
    limits: list[Limit],
    throttled: list[ThrottleCount],
    *,
    queues: Mapping[str, object],
) -> None:
    """Fill :func:`_flow_families` from the store's limits and throttle records, and
    the ``queues`` that hold executions."""
    throttles, held, info, rate, concurrency, paused = families
    for count in throttled:
        throttles.add_metric([count.scope], count.count)
        held.add_metric([count.scope], count.held.total_seconds())
    pauses = dict.fromkeys(queues, False)
    for limit in limits:
        if limit.kind == "queue":
            pauses[limit.name] = limit.paused
        if limit.rate is None and limit.concurrency is None:
            continue  # a pause alone: fencepost_queue_paused says it
        info.add_metric(
            [
                limit.scope,
                "" if limit.rate is None else str(limit.rate),
                "" if limit.burst is None else str(limit.burst),
                "" if limit.concurrency is None else str(limit.concurrency),
                "true" if limit.per_key else "false",
                limit.source,
            ],
            1,
        )
        if limit.rate is not None:
            rate.add_metric([limit.scope], limit.rate.per_second)
        if limit.concurrency is not None:
            concurrency.add_metric([limit.scope], limit.concurrency)
    for queue, is_paused in sorted(pauses.items()):
        paused.add_metric([queue], 1 if is_paused else 0)


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

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
* **The service-level report**, from the store too (:class:`SloCollector`):
  ``Store.slo()`` at its defaults, taken at most once every
  :data:`SLO_CACHE_SECONDS` however often it is scraped, so every process's work
  counts, not only this one's. Left out of a scrape whose report failed.
* **This process, counted as it works**
  (:class:`~fencepost.api.counters.ProcessCounters`, an observer of the store): claim
  lateness, attempts by outcome, stale calls refused, lease expiries reaped, misfires
  and occurrences materialized. The service's embedded workers, materializer and
  reaper work on the same store, so these count everything the process did;
  Prometheus sums them across processes.

Each application gets its own :class:`~prometheus_client.CollectorRegistry`,
never the global default one: a process (a test run) may build many apps.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fencepost.api.auth import Scope
from fencepost.api.counters import Instruments, ProcessCounters, count_on
from fencepost.api.deps import guarded
from fencepost.domain.errors import StoreUnavailable
from fencepost.domain.limits import Limit, ThrottleCount
from fencepost.domain.reports import SloReport
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


# -- the service-level report ------------------------------------------------------------

#: How long one service-level report serves scrapes, in seconds. A report reads the
#: window's executions (30 days); several Prometheus servers, or a storm of scrapes,
#: then cost one report in this time, not one each.
SLO_CACHE_SECONDS = 30.0


class SloCollector(Collector):
    """The service-level report as gauges: :meth:`Store.slo` at its defaults (30 days;
    claimed within 10 s, 99%; finished within 5 min, 99.9%), read from the store, so
    every process's work counts, and the same on every replica.

    One report serves the scrapes of :data:`SLO_CACHE_SECONDS`; concurrent scrapes
    wait for the one being taken. A report that fails (the store unreachable, or
    anything else) is logged, once until one succeeds again, and that scrape has no
    SLO families: the others are served as ever.

    A share or a burn rate with nothing decided (no execution in its window) is left
    out rather than exposed as NaN: a NaN in an alert's comparison is silently false,
    where ``absent()`` can say it.
    """

    def __init__(
        self,
        store: Store,
        *,
        cache_seconds: float = SLO_CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._report: SloReport | None = None
        self._taken = -math.inf
        self._failing = False

    def describe(self) -> Iterator[Metric]:
        """The metric families, without reading the store (used at registration)."""
        yield from _slo_families()

    def collect(self) -> Iterator[Metric]:
        """The families with the latest report's samples; none if it cannot be taken."""
        report = self.report()
        if report is None:
            return
        families = _slo_families()
        share, target, remaining, burn, misses, excluded = families
        for o in (report.claimed, report.finished):
            if o.share is not None:
                share.add_metric([o.name], o.share)
            target.add_metric([o.name], o.target)
            remaining.add_metric([o.name], o.remaining)
            for b in o.burn:
                if b.rate is not None:
                    burn.add_metric([o.name, _hours(b.window.total_seconds())], b.rate)
            for error_class, count in o.misses.items():
                misses.add_metric([o.name, error_class.value], count)
            for reason, count in o.excluded.items():
                excluded.add_metric([o.name, reason], count)
        yield from families

    def report(self) -> SloReport | None:
        """The report of the last :attr:`cache_seconds`, taking one if it is older;
        None if it cannot be taken."""
        with self._lock:
            now = self._monotonic()
            if self._report is not None and now - self._taken < self.cache_seconds:
                return self._report
            try:
                report = self.store.slo(worst=0)
            # Any error: a broken report must not take the rest of /metrics with it.
            except Exception as exc:
                if not self._failing:  # once per outage, not once per scrape
                    log.warning("metrics: SLO report failed, SLO figures left out: %r", exc)
                self._failing = True
                return None
            if self._failing:
                log.info("metrics: SLO report taken again")
            self._failing = False
            self._report, self._taken = report, now
            return report


def _hours(seconds: float) -> str:
    """A burn window as its label: ``1h``, ``6h``."""
    return f"{int(seconds // 3600)}h"


def _slo_families() -> tuple[GaugeMetricFamily, ...]:
    """The SLO gauges (see :class:`SloCollector`), each labelled by ``objective``:
    ``claim`` or ``finish``."""
    return (
        GaugeMetricFamily(
            "fencepost_slo_share",
            "The share of the executions planned in the last 30 days that met the "
            "objective (claim: claimed within 10 s of the planned time; finish: "
            "SUCCEEDED or FAILED within 5 min), decided ones only, exclusions left out. "
            "Absent while nothing is decided.",
            labels=["objective"],
        ),
        GaugeMetricFamily(
            "fencepost_slo_target",
            "The share the objective must reach (0.99 claim, 0.999 finish).",
            labels=["objective"],
        ),
        GaugeMetricFamily(
            "fencepost_slo_budget_remaining",
            "Misses the error budget still allows over the window: (1 - target) * "
            "decided - misses. Negative once overspent.",
            labels=["objective"],
        ),
        GaugeMetricFamily(
            "fencepost_slo_burn_rate",
            "How fast the budget burned over the last hour or six hours: that "
            "window's miss share over (1 - target); 1 spends exactly the budget over "
            "the report's window. Absent while nothing in the window is decided.",
            labels=["objective", "window"],
        ),
        GaugeMetricFamily(
            "fencepost_slo_misses",
            "Misses of the objective over the window, by error class (late_claim, "
            "renewal_failed, timed_out, handler_failed, stale_completion_refused, "
            "ran_long; those the objective can miss by), zeros included.",
            labels=["objective", "class"],
        ),
        GaugeMetricFamily(
            "fencepost_slo_excluded",
            "Executions left out of the objective over the window, by reason "
            "(backfill, replay, throttled), zeros included.",
            labels=["objective", "reason"],
        ),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Metrics:
    """One application's metrics: its registry, instruments and store."""

    registry: CollectorRegistry
    #: The observer of :attr:`store` that feeds :attr:`instruments`.
    counters: ProcessCounters
    #: The store whose leasing work :attr:`instruments` count (they observe it).
    store: Store

    @property
    def instruments(self) -> Instruments:
        """The process counters, fed by the store's events."""
        return self.counters.instruments

    def close(self) -> None:
        """Stop counting the store's work (the registry still serves what was counted).
        Closing twice is harmless."""
        with contextlib.suppress(ValueError):  # closed already
            self.store.observers.remove(self.counters)


def create_metrics(store: Store) -> Metrics:
    """A fresh registry with the store's gauges and this process's counters over ``store``.

    The counters observe ``store`` until :meth:`Metrics.close`: an application that
    made its own metrics (``create_app(store)`` without ``metrics=``) closes them when
    it is garbage collected, so that apps made and dropped over one store leave it
    no observers.
    """
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    registry.register(SloCollector(store))
    return Metrics(registry=registry, counters=count_on(store, registry), store=store)


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

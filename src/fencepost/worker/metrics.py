"""A worker's Prometheus metrics: ``fencepost worker --metrics-port``.

Loaded only when metrics are asked for (it imports ``prometheus_client``): a worker
without them stays lean. :func:`serve_metrics` starts prometheus-client's own HTTP
server on a daemon thread, over a registry of this worker's own (never the global
default one).

What a worker exports, besides what ``fencepost serve`` counts:

* **Per job** (:class:`WorkerInstruments`): attempts started, leases claimed, and
  how long each attempt's handler ran, by how it ended
  (``fencepost_attempt_duration_seconds``; its ``_count`` is the attempts finished
  by job and outcome). Outcomes are the service's ``fencepost_attempts_total``
  ones, as the handler left them: the store may still refuse the write (counted in
  ``fencepost_stale_refused_total``).
* **Held back**: claims from which a rate limit held work back
  (``fencepost_worker_claims_held_back_total``, from the store's ``next_start_in``).
* **Now** (:class:`WorkerCollector`, read at each scrape): leases waiting in the
  claim buffer, handlers running and their number, outcomes not yet written, and
  whether the worker's store answers.
* **The service's process counters** (claim lateness, attempts by outcome, stale
  refusals, lease expiries reaped, occurrences), under the same names and labels,
  when the worker works on a database (``--db``): the service's
  :class:`~fencepost.api.counters.ProcessCounters` observe its store. A remote worker
  (``--server``) does not export them: its calls pass through the service's own
  store, which counts them already, and a sum across processes would count twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import start_http_server
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fencepost.domain.errors import ValidationError
from fencepost.domain.payloads import RESULT_INVALID
from fencepost.domain.states import ATTEMPT_OUTCOMES

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from fencepost.domain.models import Lease
    from fencepost.jobs.registry import JobRegistry
    from fencepost.worker.runs import Run, RunOutcome
    from fencepost.worker.runtime import Worker
    from fencepost.worker.source import WorkSource

log = logging.getLogger("fencepost.worker")

#: Counts a worker's store on a registry and returns it (the service's process
#: counters: ``fencepost.api.counters.meter_store``). Given by the caller, which may
#: import the API layer; the worker may not.
Meter = Callable[[CollectorRegistry, Any], Any]

#: Upper bounds of the attempt duration histogram, in seconds: from a few
#: milliseconds up to an hour.
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
)

#: Where ``--metrics-port`` listens unless ``--metrics-host`` says otherwise.
DEFAULT_METRICS_HOST = "127.0.0.1"

#: How the outbox's verbs map to ``fencepost_attempts_total`` outcomes.
_OUTCOME_OF_VERB = {
    "complete": "succeeded",
    "fail": "failed",
    "timeout": "timed_out",
    "abort": "cancelled",
    "release": "released",
    "snooze": "snoozed",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerInstruments:
    """The per-job counters and histogram a worker feeds as it works."""

    duration: Histogram
    started: Counter
    claimed: Counter
    held_back: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry, jobs: list[str]) -> WorkerInstruments:
        """Every instrument, in ``registry``, with a series at zero for each of ``jobs``."""
        instruments = cls(
            duration=Histogram(
                "fencepost_attempt_duration_seconds",
                "How long each attempt's handler ran in this worker, by job and by how it "
                "ended (its _count: attempts finished).",
                ["job", "outcome"],
                buckets=DURATION_BUCKETS,
                registry=registry,
            ),
            started=Counter(
                "fencepost_attempts_started",
                "Attempts whose handler this worker started, by job.",
                ["job"],
                registry=registry,
            ),
            claimed=Counter(
                "fencepost_leases_claimed",
                "Leases this worker claimed, by job (started at once or buffered first).",
                ["job"],
                registry=registry,
            ),
            held_back=Counter(
                "fencepost_worker_claims_held_back",
                "Claims of this worker from which a rate limit held work back (the store "
                "said when it may start). A concurrency limit or a paused queue does not "
                "tell the worker: fencepost_throttled_total counts every throttled "
                "execution, per scope.",
                registry=registry,
            ),
        )
        for job in jobs:
            instruments.started.labels(job=job)
            instruments.claimed.labels(job=job)
            for outcome in ATTEMPT_OUTCOMES:
                instruments.duration.labels(job=job, outcome=outcome)
        return instruments


class WorkerCollector(Collector):
    """Gauges of one worker, read from it at each scrape (no store call)."""

    def __init__(self, worker: Worker | None = None) -> None:
        self.worker = worker

    def describe(self) -> Iterator[Metric]:
        """The metric families, without reading the worker (used at registration)."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """The families with this worker's figures now."""
        families = self._families()
        worker = self.worker
        if worker is None:
            return
        buffered, busy, handlers, outbox, up = families
        load = worker.load()
        buffered.add_metric([], load.buffered)
        busy.add_metric([], load.busy)
        handlers.add_metric([], worker.options.concurrency)
        outbox.add_metric([], load.unwritten)
        up.add_metric([], 1 if load.store_up else 0)
        yield from families

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "fencepost_worker_buffered",
                "Leases this worker holds in its claim buffer, waiting for a free handler.",
            ),
            GaugeMetricFamily(
                "fencepost_worker_handlers_busy", "Handlers of this worker running an attempt."
            ),
            GaugeMetricFamily(
                "fencepost_worker_handlers", "Handlers this worker runs at most (--concurrency)."
            ),
            GaugeMetricFamily(
                "fencepost_worker_outbox",
                "Finished attempts whose outcome this worker has not yet written.",
            ),
            GaugeMetricFamily(
                "fencepost_worker_store_up",
                "1 while this worker's store answers, 0 during an outage.",
            ),
        )


class WorkerMetrics:
    """One worker's metrics: its registry, the hooks the worker calls, and the server.

    Made by :meth:`Worker.serve_metrics <fencepost.worker.runtime.Worker.serve_metrics>`,
    which wraps the worker's store (:meth:`wrap`), binds the worker (:meth:`bind`)
    and starts the endpoint (:meth:`serve`); the worker calls the hooks as it works
    and :meth:`close` when it stops.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._collector = WorkerCollector()
        self.registry.register(self._collector)
        self.instruments: WorkerInstruments | None = None
        self._server: WSGIServer | None = None

    def wrap(self, source: WorkSource, meter: Meter | None) -> WorkSource:
        """``source``, counted on this registry by ``meter`` (when given)."""
        return source if meter is None else cast("WorkSource", meter(self.registry, source))

    def bind(self, worker: Worker, registry: JobRegistry) -> None:
        """Read ``worker``'s gauges at each scrape; a series at zero per job it serves."""
        self._collector.worker = worker
        jobs = sorted({spec.name for spec in registry})
        self.instruments = WorkerInstruments.create(self.registry, jobs)

    # -- hooks, called by the worker ------------------------------------------------------

    def claimed(self, leases: list[Lease]) -> None:
        """Leases were claimed."""
        assert self.instruments is not None
        for lease in leases:
            self.instruments.claimed.labels(job=lease.job).inc()

    def held_back(self) -> None:
        """A claim's store said a rate limit held some of its work back."""
        assert self.instruments is not None
        self.instruments.held_back.inc()

    def started(self, run: Run) -> None:
        """A handler started ``run``."""
        assert self.instruments is not None
        self.instruments.started.labels(job=run.lease.job).inc()

    def finished(self, outcome: RunOutcome, now: float) -> None:
        """``outcome``'s handler ended (returned, raised, timed out) at ``now`` (monotonic)."""
        assert self.instruments is not None
        run = outcome.run
        if run.started_at is None:
            return  # released from the buffer: it never ran
        label = _OUTCOME_OF_VERB.get(outcome.verb, outcome.verb)
        if outcome.verb == "fail" and outcome.error.startswith(RESULT_INVALID):
            label = "result_invalid"
        ended = now if outcome.ended_at is None else outcome.ended_at
        seconds = max(0.0, ended - run.started_at - run.paused_for)
        self.instruments.duration.labels(job=run.lease.job, outcome=label).observe(seconds)

    # -- the endpoint ---------------------------------------------------------------------

    def serve(self, host: str, port: int) -> str:
        """Serve ``GET /metrics`` on ``host:port`` (0: any free port); the URL it serves."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValidationError("metrics-port", f"must be a port number 0-65535, got {port!r}")
        try:
            server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ValidationError(
                "metrics-port", f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            ) from None
        self._server = server
        address = server.server_address  # an IPv4 or IPv6 (host, port, ...): never bytes
        bound_host, bound_port = str(address[0]), int(address[1])
        shown = f"[{bound_host}]" if ":" in str(bound_host) else bound_host
        url = f"http://{shown}:{bound_port}/metrics"
        log.info("serving metrics at %s", url)
        return url

    def close(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

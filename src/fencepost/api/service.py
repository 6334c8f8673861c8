"""One process that is the whole scheduler: the API, a materializer, a reaper, workers.

``fencepost serve`` builds a :class:`Service` and runs it. Every part shares one
store, wrapped so that ``/metrics`` counts what each does
(:func:`~fencepost.api.metrics.create_metrics`). Several services may share one
PostgreSQL database: materializers and workers coordinate through leases, never
through each other.
"""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass, field, replace
from types import FrameType

import uvicorn
from fastapi import FastAPI

from fencepost.api.app import create_app
from fencepost.api.auth import Auth
from fencepost.api.defaults import (
    DEFAULT_BODY_BUDGET,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_WAIT,
)
from fencepost.api.guard import DEFAULT_MAX_BODY_BYTES, is_loopback
from fencepost.api.history import ROLL_UP_INTERVAL, HistoryRoller
from fencepost.api.metrics import Metrics, create_metrics
from fencepost.api.protocol import guarded_protocol
from fencepost.domain.nodes import default_node_id
from fencepost.jobs.registry import JobRegistry
from fencepost.scheduler.materializer import Materializer, MaterializerOptions
from fencepost.scheduler.reaper import Reaper
from fencepost.store.base import Store
from fencepost.worker.prefetch import DEFAULT_CONCURRENCY
from fencepost.worker.runtime import Worker, WorkerOptions

log = logging.getLogger("fencepost.service")


class _StopServing(Exception):
    """Raised by our signal handler when uvicorn re-raises the signal it handled."""


def _stop_serving(signum: int, frame: FrameType | None) -> None:
    raise _StopServing


@dataclass(frozen=True, kw_only=True)
class ServiceOptions:
    """What runs in the process besides the API."""

    #: Embedded worker runtimes for the registered jobs (0: remote workers only).
    workers: int = 1
    #: Handlers each embedded worker runs at once.
    concurrency: int = DEFAULT_CONCURRENCY  #: handlers per worker, as ``fencepost worker``
    #: Run a materializer (schedules -> executions). Safe in several services at once.
    materializer: bool = True
    #: How often expired leases are timed out, in seconds.
    reap_interval: float = 1.0
    #: Node id prefix for the parts of this process; default ``host:pid``.
    node: str = field(default_factory=default_node_id)
    #: Cap on one request body (413 beyond).
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: Seconds a client has to send a request's headers, from connecting or from the
    #: previous response (408 past it): uvicorn itself has no such limit.
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    #: Seconds a client has to send a whole body once its headers are in (408 past it).
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    #: Bytes of request bodies buffered at once across all requests (503 beyond).
    body_budget: int = DEFAULT_BODY_BUDGET
    #: Worker options other than owner and concurrency (grace, poll interval, ...).
    worker: WorkerOptions = field(default_factory=WorkerOptions)
    #: The longest long-poll (``GET /executions/{id}?wait=``), seconds; more is a 422.
    max_wait: float = DEFAULT_MAX_WAIT
    #: How often the history charts' roll-up runs, in seconds (0: never; charts then
    #: roll up only when read).
    history_interval: float = ROLL_UP_INTERVAL


class Service:
    """The API over ``store`` plus the background parts :class:`ServiceOptions` asks for.

    :meth:`start` and :meth:`stop` run the background parts; :meth:`serve` runs
    them around a uvicorn server until SIGTERM/SIGINT. The caller owns ``store``.
    """

    def __init__(
        self,
        store: Store,
        *,
        registry: JobRegistry | None = None,
        auth: Auth | None = None,
        options: ServiceOptions | None = None,
    ) -> None:
        self.options = options if options is not None else ServiceOptions()
        self.auth = auth if auth is not None else Auth()
        self.metrics: Metrics = create_metrics(store)
        metered = self.metrics.store
        self.store = metered
        jobs = registry if registry is not None and len(registry) else None
        self.app: FastAPI = create_app(
            metered,
            auth=self.auth,
            registry=jobs,
            metrics=self.metrics,
            max_body_bytes=self.options.max_body_bytes,
            body_timeout=self.options.body_timeout,
            body_budget=self.options.body_budget,
            max_wait=self.options.max_wait,
            # Without tokens, only loopback names may reach us (DNS rebinding: guard.py).
            loopback_only=not self.auth.enabled,
        )
        node = self.options.node
        self.materializer = (
            Materializer(metered, MaterializerOptions(owner=f"{node}:scheduler"))
            if self.options.materializer
            else None
        )
        self.workers: list[Worker] = []
        if jobs is not None:
            for i in range(self.options.workers):
                worker_options = replace(
                    self.options.worker,
                    owner=f"{node}:worker-{i + 1}",
                    concurrency=self.options.concurrency,
                )
                self.workers.append(Worker(metered, jobs, worker_options))
        # Time out expired leases even when no embedded worker runs (remote workers only).
        self._reaper = Reaper(metered, interval=self.options.reap_interval)
        # The history charts' minute rows, kept up to date off the event loop (workers
        # do not roll up: api/history.py).
        self.history = (
            HistoryRoller(metered, interval=self.options.history_interval)
            if self.options.history_interval > 0
            else None
        )

    def start(self) -> None:
        """Start the materializer, the reaper, the history roll-up and the embedded workers."""
        if self.materializer is not None:
            self.materializer.start()
        if self.history is not None:
            self.history.start()
        if not self.workers:  # embedded workers reap as part of their loop
            self._reaper.start()
        for worker in self.workers:
            worker.start()

    def stop(self) -> None:
        """Stop claiming, let running handlers finish (their grace), stop everything."""
        for worker in self.workers:
            worker.stop()
        for worker in self.workers:
            worker.join()
        if self.materializer is not None:
            self.materializer.stop()
        self._reaper.stop()
        if self.history is not None:
            self.history.stop()

    def serve(self, host: str = "127.0.0.1", port: int = 8080, *, log_level: str = "info") -> None:
        """Run everything until SIGTERM/SIGINT, then stop gracefully.

        The first signal stops the HTTP server (uvicorn finishes open requests),
        then the workers drain within their grace; a second signal during the
        drain stops them at once, releasing their leases.

        uvicorn's own lines (its error and access loggers) go through the
        process's logging when it has been configured (the root logger has a
        handler, as ``fencepost serve --log-format json`` gives it): every line
        then has one format. Otherwise uvicorn prints them its own way.
        """
        if self.auth.enabled is False and not is_loopback(host):
            raise ValueError(
                f"refusing to listen on {host} without tokens: anyone who can reach it "
                "could run jobs. Configure tokens (--tokens FILE or $FENCEPOST_TOKENS) "
                "or bind to 127.0.0.1"
            )
        config = uvicorn.Config(
            self.app,
            host=host,
            port=port,
            log_level=log_level,
            # None: uvicorn installs no handlers and its loggers propagate to ours.
            log_config=None if logging.getLogger().handlers else uvicorn.config.LOGGING_CONFIG,
            lifespan="off",
            # uvicorn bounds neither the time nor (with httptools) the size of a request's
            # headers; this protocol does (protocol.py). The body's limits are the app's.
            http=guarded_protocol(header_timeout=self.options.header_timeout),
        )
        server = uvicorn.Server(config)
        # uvicorn captures SIGTERM/SIGINT while it runs, shuts down, restores the handlers
        # it found and raises the signal again. Ours turn that into a return, so the
        # workers still drain (the default SIGTERM action would kill the process).
        previous = {s: signal.signal(s, _stop_serving) for s in (signal.SIGTERM, signal.SIGINT)}
        self.start()
        try:
            server.run()
        except _StopServing:
            pass
        finally:
            for signum in previous:
                signal.signal(signum, self._hurry)
            try:
                self.stop()
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)

    def _hurry(self, signum: int, frame: FrameType | None) -> None:
        """A second signal while draining: stop the workers now, releasing their leases."""
        log.warning("signal %d during shutdown: stopping workers at once", signum)
        for worker in self.workers:
            worker.stop(immediate=True)

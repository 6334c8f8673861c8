"""The worker: claim due executions, run their handlers, keep leases alive, report outcomes.

One control thread does all the talking to the store — claims, batched
heartbeats, completions, command polling, node registration, reaping — so a
worker holds no transaction while a handler runs (docs/explanation/promise.md,
"The rules of a lease") and the store sees at most one caller from this
process. Handlers run elsewhere:

* plain functions on ``concurrency`` handler threads;
* coroutines on one event loop thread.

A claim takes what the free handlers start now plus what they will start soon
(:mod:`fencepost.worker.prefetch`): the surplus waits in a bounded buffer of
leases, renewed like running ones, so one round trip feeds many handler starts.

Each finished handler drops its outcome in an outbox and wakes the control
thread, which writes outcomes in batches. When the database is unreachable
the outbox keeps them (until their lease has surely expired), claiming stops,
and the loop retries with backoff until the store answers again.

A handler that outlives its lease keeps running; its completion is still sent
and the store refuses it (``STALE_REFUSED``): the fence, not the worker,
decides which result counts.

This module holds the control loop, claiming, the lifecycle and shutdown; the rest
of the :class:`Worker` is the objects it is composed of (:mod:`fencepost.worker.state`
lists them): the handler threads (:mod:`~fencepost.worker.handlers`), the outbox
(:mod:`~fencepost.worker.outbox`) and the heartbeats and commands of held runs
(:mod:`~fencepost.worker.held`), over the state they share.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

from fencepost import tracing
from fencepost.domain.checks import require_int
from fencepost.domain.errors import StoreUnavailable, ValidationError
from fencepost.domain.models import Lease
from fencepost.domain.nodes import default_node_id
from fencepost.jobs.catalogue import entries_of
from fencepost.jobs.context import Context, RunControl
from fencepost.jobs.registry import JobRegistry
from fencepost.scheduler.reaper import reap_all
from fencepost.worker.handlers import HandlerPool
from fencepost.worker.held import HeldRuns
from fencepost.worker.node import NodeMembership
from fencepost.worker.options import WorkerOptions, check_queues
from fencepost.worker.outbox import Outbox
from fencepost.worker.prefetch import HAND_BACK, MAX_CLAIM, FinishRate, claim_groups
from fencepost.worker.runs import (
    CANCEL_REQUESTED,
    SHUTTING_DOWN,
    TIMED_OUT,
    Run,
    RunOutcome,
    WorkerCounters,
    WorkerLoad,
)
from fencepost.worker.source import WorkSource
from fencepost.worker.state import WorkerState

if TYPE_CHECKING:
    from fencepost.worker.metrics import Meter, WorkerMetrics

__all__ = [
    "CANCEL_REQUESTED",
    "SHUTTING_DOWN",
    "TIMED_OUT",
    "Worker",
    "WorkerCounters",
    "WorkerOptions",
    "describe",
]

log = logging.getLogger("fencepost.worker")


class Worker:
    """Claims and runs executions of the jobs in ``registry`` from ``store``.

    ``store`` is a :class:`~fencepost.store.base.Store` or anything else that
    serves the leasing verbs (:class:`~fencepost.worker.source.WorkSource`), such
    as the HTTP client of a ``fencepost serve``.

    Use :meth:`run` in a process's main thread (it handles SIGTERM and SIGINT),
    or :meth:`start` / :meth:`stop` / :meth:`join` to run it in the background.
    """

    def __init__(
        self,
        store: WorkSource,
        registry: JobRegistry,
        options: WorkerOptions | None = None,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        options = options if options is not None else WorkerOptions()
        require_int(options.concurrency, "concurrency", low=1)
        require_int(options.prefetch, "prefetch", low=0)
        self._queues, self._queue_limits = check_queues(options.queues, options.queue_concurrency)
        self._groups = claim_groups(registry)
        if not self._groups:
            raise ValidationError("registry", "a worker needs at least one job to run")
        self.registry = registry
        self.options = options
        self.owner = options.owner or default_node_id()
        # The parts, each given the state they share and the parts they hand work to.
        self._state = state = WorkerState(store, registry, options, self.owner, monotonic)
        # Leases held are renewed by the first pass after an outage ends, in time.
        state.max_backoff = min(options.max_backoff, min(self._groups).total_seconds() / 4)
        self.counters = state.counters
        self._monotonic = monotonic
        self._wake = state.wake
        self._stopping = state.stopping
        self._immediate = threading.Event()  # second signal: stop now
        self._stopped = threading.Event()
        self._runs = state.runs
        self._buffer = state.buffer
        self._outbox = Outbox(state)
        self._handlers = HandlerPool(state, self._outbox)
        self._held_runs = HeldRuns(state, self._outbox)
        self._rate = FinishRate(options.prefetch)
        self._next_hand_back = 0.0
        self._next_scan = 0.0  # when held runs are next scanned for timeouts and heartbeats
        # Seconds until the work a rate limit held back in the last claim pass may
        # start (the store's next_start_in); None: that pass held nothing back.
        self._held_for: float | None = None
        # The monotonic time before which no claim is made, because a rate held work
        # back (see _hold); None: claim whenever there is room.
        self._held_until: float | None = None
        # Built now: a job whose schema cannot be derived is refused before anything runs.
        self._node = NodeMembership(state, entries_of(registry), min(self._groups))
        self._thread: threading.Thread | None = None

    @property
    def store(self) -> WorkSource:
        """Where this worker claims and reports (wrapped to be counted once metrics serve)."""
        return self._state.store

    @property
    def metrics(self) -> WorkerMetrics | None:
        """This worker's metrics, once :meth:`serve_metrics` started them (else None)."""
        return self._state.metrics

    def load(self) -> WorkerLoad:
        """What this worker holds now (read from any thread; its metrics' gauges)."""
        return WorkerLoad(
            buffered=len(self._buffer),
            busy=self._buffer.busy,
            unwritten=self._outbox.pending,
            store_up=self._state.healthy,
        )

    # -- lifecycle -------------------------------------------------------------------

    def run(self, *, handle_signals: bool = True) -> None:
        """Run until :meth:`stop` (or SIGTERM/SIGINT when ``handle_signals``); then drain.

        The first signal stops claiming, waits up to ``grace`` seconds for
        running handlers, and releases the leases of those still running so
        other workers can claim them at once. A second signal skips the wait.
        """
        previous: dict[signal.Signals, Any] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous[signum] = signal.signal(signum, self._on_signal)
        try:
            self._main()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def serve_metrics(
        self, port: int, host: str = "127.0.0.1", *, meter: Meter | None = None
    ) -> str:
        """Serve this worker's Prometheus metrics on ``host:port``; the URL (``.../metrics``).

        Call it before :meth:`run` or :meth:`start`; the endpoint closes when the
        worker stops. Port 0 takes any free port (the URL says which).
        prometheus-client is imported here, not with the worker: a worker without
        metrics never loads it. What is exported: :mod:`fencepost.worker.metrics`.
        :class:`~fencepost.domain.errors.ValidationError` (field ``metrics-port``)
        if the port is not one or cannot be listened on. ``meter`` counts the worker's
        store on the worker's registry too (the CLI and ``App`` give
        :func:`fencepost.api.counters.meter_store`: the service's counters).
        """
        from fencepost.worker.metrics import WorkerMetrics

        if self.metrics is not None:
            raise ValidationError("metrics-port", "this worker already serves its metrics")
        metrics = WorkerMetrics()
        url = metrics.serve(host, port)  # first: a port refused leaves the worker as it was
        self._state.store = metrics.wrap(self.store, meter)
        metrics.bind(self, self.registry)
        self._state.metrics = metrics
        return url

    def start(self) -> None:
        """Run the worker on a background thread (no signal handling)."""
        self._thread = threading.Thread(
            target=self.run, kwargs={"handle_signals": False}, name="fencepost-worker"
        )
        self._thread.start()

    def stop(self, *, immediate: bool = False) -> None:
        """Stop claiming and drain (see :meth:`run`); ``immediate`` skips the grace period."""
        if immediate:
            self._immediate.set()
        self._stopping.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for a started worker to finish; True if it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._stopped.is_set()

    @property
    def running(self) -> dict[str, Lease]:
        """The leases of the executions whose handlers run now, by execution id."""
        return {
            eid: run.lease
            for eid, run in list(self._runs.items())
            if run.started_at is not None and not run.finished
        }

    @property
    def held(self) -> dict[str, Lease]:
        """Every lease this worker holds: running, and buffered waiting for a handler."""
        return {eid: run.lease for eid, run in list(self._runs.items())}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._stopping.is_set():
            log.warning("%s again: stopping now, releasing %d leases", name, len(self._runs))
            self.stop(immediate=True)
        else:
            log.info(
                "%s: no longer claiming; waiting up to %ss for %d running handlers",
                name,
                self.options.grace,
                len(self._runs),
            )
            self.stop()

    # -- the control loop ------------------------------------------------------------

    def _main(self) -> None:
        opts = self.options
        # Registering first: credentials or scopes the store refuses (a remote worker's
        # token) end the run here, before anything started, as the caller's error. An
        # outage does not: the loop below retries it.
        try:
            self._state.call(self._node.register, probe=True)
        except BaseException:
            self._stopped.set()
            raise
        registered = self._state.healthy  # False: the store is down, the loop registers later
        self._handlers.start()
        log.info(
            "worker %s started: jobs %s, concurrency %d, prefetch up to %d, store %s",
            self.owner,
            ", ".join(f"{s.name}@{s.version}" for s in self.registry),
            opts.concurrency,
            opts.prefetch,
            describe(self.store),
        )
        if registered:
            self._node.warn_without_scheduler()
        notifier = threading.Thread(target=self._listen, name="fencepost-notify", daemon=True)
        notifier.start()
        now = self._monotonic()
        next_reap = next_commands = now
        next_node = now + (opts.node_ttl / 3 if registered and self._node.clock_agrees else 0.0)
        grace_until: float | None = None
        try:
            while True:
                self._wake.clear()  # before looking: a wake-up during this pass is kept
                now = self._monotonic()
                self._outbox.collect()
                self._handlers.dispatch()
                if self._outbox.due(now):
                    self._outbox.flush(now)
                # The per-run scans (timeouts, due heartbeats) run at most every
                # _SCAN_EVERY: a busy worker passes here once per finished handler, and
                # scanning hundreds of held runs each time cost more than the jobs.
                scan = now >= self._next_scan
                if scan:
                    self._next_scan = now + _SCAN_EVERY
                    self._handlers.enforce_timeouts(now)
                if now >= self._next_hand_back:
                    self._hand_back(self._buffer.stale(now, _max_wait), _WAITED_TOO_LONG)
                    self._next_hand_back = now + _HAND_BACK_CHECK
                if self._stopping.is_set():
                    if grace_until is None:
                        grace_until = now + opts.grace
                        self._hand_back(self._buffer.clear(), SHUTTING_DOWN)
                    if not self._runs or self._immediate.is_set() or now >= grace_until:
                        break
                # During an outage, registering again is the probe, once per backoff:
                # only a round trip that succeeds ends it (the node may have expired
                # meanwhile, too), and nothing else reaches the store until one has.
                if now >= (next_node if self._state.healthy else self._state.retry_at):
                    self._state.call(self._node.register, probe=True)
                    # A clock found off is looked at again every second, not every third
                    # of a registration, so claiming resumes soon after it agrees.
                    next_node = now + (opts.node_ttl / 3 if self._node.clock_agrees else 1.0)
                    now = self._monotonic()  # the call may have waited for the store
                if self._state.healthy:
                    if scan:
                        self._held_runs.heartbeat(now)
                    if now >= next_commands:
                        self._state.call(partial(self._held_runs.poll_commands, now))
                        next_commands = now + opts.command_interval
                    if now >= next_reap and self._node.clock_agrees:
                        # One batch a pass: this thread also renews the leases it holds.
                        self._state.call(partial(reap_all, self.store, batches=1))
                        next_reap = now + opts.reap_interval
                claimed = 0
                if (
                    not self._stopping.is_set()
                    and self._state.healthy
                    and self._node.clock_agrees
                    and self._node.published  # the catalogue knows this worker's jobs first
                    and (self._held_until is None or now >= self._held_until)
                ):
                    claimed = self._claim(now)
                    self._handlers.dispatch()
                if claimed and self._held_until is None and self._room(min(self._groups)) > 0:
                    continue  # more may be due: claim again before sleeping
                if not self._buffer:
                    self._outbox.flush(now)  # no work waiting: write everything before waiting
                self._wake.wait(self._idle_wait(now))
        finally:
            self._shutdown()
            self._stopped.set()
            if self.metrics is not None:
                self.metrics.close()

    def _hold(self, now: float) -> None:
        """Set when claiming may resume, from the last pass's ``_held_for``.

        A pass a rate held work back in (whether or not it took some) claims again
        at the rate's next token, not at once nor each time a handler finishes and
        wakes the loop: those claims would find nothing, and on SQLite each takes
        the one write lock the other workers' completions wait for. Never sooner
        than the poll interval (a bucket holds a tenth of a second's worth, so
        claiming at that pace loses no start), never later than _HELD_WAIT_MAX, so
        that a limit raised or removed (and work of other jobs, where nothing wakes
        us) is seen within a second.
        """
        if self._held_for is None:
            self._held_until = None
            return
        wait = min(max(self._held_for, self.options.poll_interval), _HELD_WAIT_MAX)
        self._held_until = now + wait

    def _idle_wait(self, now: float) -> float:
        wait = (
            self.options.poll_interval
            if self._state.healthy
            else max(0.0, self._state.retry_at - now)
        )
        if self._state.healthy and self._held_until is not None:
            wait = self._held_until - now  # see _hold
        if self._runs:  # held runs have heartbeats and timeouts: look again at the next scan
            wait = min(wait, self._next_scan - now)
        return max(wait, 0.001)

    def _listen(self) -> None:
        """Wake the control loop when the store says work arrived (PostgreSQL NOTIFY)."""
        while not self._stopped.is_set() and not self._stopping.is_set():
            try:
                if self.store.wait_for_work(1.0):
                    self._wake.set()
            except Exception:  # a store that cannot listen simply leaves us to poll
                time.sleep(1.0)

    # -- claiming and running ----------------------------------------------------------

    def _room(self, ttl: timedelta) -> int:
        """How many executions of lease ``ttl`` to claim now.

        The free handlers' worth, plus the lead the finish rate asks for, less what
        already waits in the buffer. (Waiting until half the lead had drained, to
        claim in larger batches, measured 8% slower on PostgreSQL and no faster on
        SQLite: a claim in flight is what keeps the handlers fed.)
        """
        free = self.options.concurrency - self._buffer.busy - len(self._buffer)
        return min(MAX_CLAIM, free + self._rate.lead(ttl.total_seconds()))

    def _claim(self, now: float) -> int:
        opts = self.options
        self._rate.observe(now, self._buffer.freed)
        claimed = 0
        self._held_for = None
        for ttl, (names, versions) in self._groups.items():
            limit = self._room(ttl)
            if limit <= 0:
                continue
            queues = self._queue_rooms(limit)
            if isinstance(queues, dict) and not any(queues.values()):
                continue  # every limited queue is full, and no other queue is claimed
            started = tracing.claim_started()
            sent = self._monotonic()
            leases = self._state.call(
                partial(
                    self.store.claim,
                    self.owner,
                    limit=limit,
                    ttl=ttl,
                    jobs=names,
                    versions=versions,
                    buckets=opts.buckets,
                    max_per_bucket=opts.max_per_bucket,
                    queues=queues,
                )
            )
            if leases:
                tracing.claimed(leases, self.owner, started)
                if self.metrics is not None:
                    self.metrics.claimed(leases)
                # The buffer's wait counts from the leases' arrival, not from the pass's
                # start: a pass that first waited for a store coming back from an outage
                # would otherwise hand its first claim straight back (see _hand_back).
                arrived = self._monotonic()
                self._buffer.add([self._begin(lease, ttl, sent, arrived) for lease in leases])
                claimed += len(leases)
            self._note_held()
        self._hold(now)
        return claimed

    def _note_held(self) -> None:
        """Keep the soonest time a claim of this pass says held-back work may start.

        The store's ``next_start_in`` (the HTTP client's too, from the service's
        answer); a source without it holds nothing back that we know of.
        """
        next_start_in = getattr(self.store, "next_start_in", None)
        if next_start_in is None:
            return
        try:
            held = next_start_in()
        except Exception:  # a hint only: polling stays the source of truth
            return
        if isinstance(held, int | float) and held >= 0:
            self._held_for = held if self._held_for is None else min(self._held_for, held)
            if self.metrics is not None:
                self.metrics.held_back()

    def _queue_rooms(self, limit: int) -> list[str] | dict[str, int] | None:
        """The ``queues`` of the next claim: None (every queue), names, or names to room.

        A queue with a concurrency limit has room for its limit less the leases of
        it this worker holds: buffered, running, and finished but not yet written
        (until its outcome is in the store the lease is still RUNNING there).
        """
        if self._queues is None or not self._queue_limits:
            return None if self._queues is None else list(self._queues)
        held = Counter(run.lease.queue for run in self._runs.values())
        held.update(self._outbox.queues())
        return {
            q: max(0, self._queue_limits[q] - held[q]) if q in self._queue_limits else limit
            for q in self._queues
        }

    def _begin(self, lease: Lease, ttl: timedelta, sent: float, arrived: float) -> Run:
        """Track a claimed lease: asked for at ``sent``, here at ``arrived`` (monotonic).

        Its expiry and heartbeats count from ``sent`` (the store set ``lease_until``
        no earlier); its wait in the buffer from ``arrived``.
        """
        spec = self.registry.get(lease.job, lease.job_version)
        # The execution's own timeout (set at submit) wins over the job's default.
        timeout = lease.timeout if lease.timeout is not None else spec.timeout
        control = RunControl(self._wake.set)
        seconds = ttl.total_seconds()
        run = Run(
            spec=spec,
            lease=lease,
            control=control,
            ctx=Context(lease, control),
            expires=sent + seconds,
            timeout=None if timeout is None else timeout.total_seconds(),
            next_beat=sent + seconds / 3,
            claimed_at=arrived,
            is_async=spec.is_async,
            span=tracing.attempt_started(lease),
        )
        self._runs[lease.execution_id] = run
        self.counters.claimed += 1
        return run

    def _hand_back(self, runs: list[Run], reason: str) -> None:
        """Release buffered leases that will not start here (claimable at once elsewhere)."""
        for run in runs:
            run.finished = True
            self._runs.pop(run.lease.execution_id, None)
            self._outbox.add(RunOutcome(run, "release", error=reason))
        if runs and reason == _WAITED_TOO_LONG:
            log.info("handed back %d buffered leases: %s", len(runs), reason)

    # -- shutdown --------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Release what is still running, write what is finished, leave the node registry."""
        immediate = self._immediate.is_set()
        self._hand_back(self._buffer.clear(), SHUTTING_DOWN)
        for run in list(self._runs.values()):
            run.control.request_stop(SHUTTING_DOWN)
        # Give stopped handlers (and command jobs killing their process groups) a moment.
        settle = self._monotonic() + (0.2 if immediate else 2.5)
        while self._runs and self._monotonic() < settle:
            self._outbox.collect()
            if self._runs:
                self._wake.wait(0.02)
                self._wake.clear()
        self._outbox.collect()
        for run in list(self._runs.values()):
            run.finished = True
            self._outbox.add(RunOutcome(run, "release"))
        self._runs.clear()
        deadline = self._monotonic() + (1.0 if immediate else 10.0)
        self._state.healthy = True
        self._outbox.flush(self._monotonic(), wait=True)  # the batch in flight, then the rest
        while self._outbox and self._monotonic() < deadline:
            self._state.healthy = True  # at shutdown each write is its own probe
            self._outbox.flush(self._monotonic(), wait=True)
            if self._outbox:
                time.sleep(min(0.5, max(0.0, self._state.retry_at - self._monotonic())))
        if self._outbox:
            log.error(
                "stopped with %d outcomes unwritten; their leases will expire", len(self._outbox)
            )
        self._buffer.close()
        self._outbox.close()
        self._handlers.stop()
        try:
            self.store.deregister_node(self.owner)
        except StoreUnavailable as exc:
            log.error("could not deregister node %s: %s", self.owner, exc)
        log.info(
            "worker %s stopped: %d succeeded, %d failed, %d timed out, %d cancelled, "
            "%d released, %d refused",
            self.owner,
            self.counters.succeeded,
            self.counters.failed,
            self.counters.timed_out,
            self.counters.cancelled,
            self.counters.released,
            self.counters.refused,
        )


#: Why a buffered lease went back: no handler became free within HAND_BACK of its ttl.
_WAITED_TOO_LONG = "not started within half its lease; handed back"
_HAND_BACK_CHECK = 0.1  # seconds between looks for buffered leases that waited too long
_SCAN_EVERY = 0.02  # seconds between scans of held runs (timeouts fire at most this late)
#: The longest a worker held back by a rate limit sleeps before claiming again: a limit
#: changed by an operator takes effect within a second (docs/explanation/flow-control.md).
_HELD_WAIT_MAX = 1.0


def describe(store: object) -> str:
    """Where a worker's store is, for its start line (a URL without credentials)."""
    return str(getattr(store, "location", None) or type(store).__name__)


def _max_wait(run: Run) -> float:
    """How long a buffered run may wait for a handler: HAND_BACK of its lease."""
    return run.spec.lease_ttl.total_seconds() * HAND_BACK

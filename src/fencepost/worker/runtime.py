"""The worker: claim due executions, run their handlers, keep leases alive, report outcomes.

One control thread does all the talking to the store — claims, batched
heartbeats, completions, command polling, node registration, reaping — so a
worker holds no transaction while a handler runs (DESIGN.md, rule 6) and the
store sees at most one caller from this process. Handlers run elsewhere:

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
"""

from __future__ import annotations

import asyncio
import logging
import queue
import signal
import threading
import time
import traceback
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from types import FrameType
from typing import Any

from fencepost.domain.checks import MAX_ERROR_CHARS, require_int, sanitize_text
from fencepost.domain.errors import (
    Cancelled,
    PermanentFailure,
    StaleLease,
    StoreUnavailable,
    ValidationError,
)
from fencepost.domain.models import JSON, Command, Lease
from fencepost.domain.nodes import default_node_id
from fencepost.domain.payloads import RESULT_INVALID
from fencepost.domain.states import CommandKind, State
from fencepost.worker.context import Context
from fencepost.worker.jobs import JobSpec
from fencepost.worker.prefetch import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PREFETCH,
    HAND_BACK,
    MAX_CLAIM,
    ClaimBuffer,
    FinishRate,
)
from fencepost.worker.registry import JobRegistry
from fencepost.worker.source import WorkSource

log = logging.getLogger("fencepost.worker")

#: Why a handler was told to stop, as recorded and as raised by checkpoints.
CANCEL_REQUESTED = "cancel requested"
TIMED_OUT = "timed out"
SHUTTING_DOWN = "worker shutting down"


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """How a worker claims and paces itself. Every interval is in seconds."""

    owner: str | None = None  #: lease owner and node id; default ``host:pid``
    concurrency: int = DEFAULT_CONCURRENCY  #: handlers running at once
    prefetch: int = DEFAULT_PREFETCH  #: most leases held ahead of the handlers (0: none)
    buckets: tuple[int, ...] | None = None  #: claim only from these buckets
    max_per_bucket: int | None = None  #: cap RUNNING executions per bucket
    grace: float = 30.0  #: on shutdown, how long running handlers may finish
    poll_interval: float = 0.05  #: idle wait between claims (NOTIFY wakes earlier)
    command_interval: float = 0.25  #: how often held executions' commands are polled
    progress_interval: float = 1.0  #: checkpoint progress is written at most this often
    reap_interval: float = 5.0  #: how often expired leases are timed out
    node_ttl: float = 30.0  #: node registration lifetime (renewed at a third of it)
    command_ttl: float = 5.0  #: how long a claimed command stays ours
    max_backoff: float = 5.0  #: the longest wait between tries while the store is down
    flush_batch: int = 128  #: while busy, completions are written once this many wait ...
    flush_delay: float = 0.02  #: ... or once the oldest has waited this long


@dataclass(eq=False)
class _Run:
    """One claimed execution, from claim to reported outcome.

    Monotonic times throughout. A run waits in the claim buffer from
    ``claimed_at`` until a handler starts it (``started_at``).
    """

    spec: JobSpec
    lease: Lease
    ctx: Context
    expires: float  #: by when the lease has surely expired
    timeout: float | None  #: seconds the attempt may run (None: no timeout)
    next_beat: float
    claimed_at: float
    is_async: bool
    started_at: float | None = None
    holds_slot: bool = False  #: a handler slot is taken by this run (see ClaimBuffer)
    paused_at: float | None = None
    paused_for: float = 0.0  #: seconds spent paused since the start (not counted)
    cancel_requested: bool = False
    future: Any = None  #: the concurrent.futures.Future of a coroutine run
    finished: bool = False  #: the outcome is known (reported, or abandoned)

    @property
    def deadline(self) -> float | None:
        """When the attempt times out: its timeout counts from the handler's start."""
        if self.timeout is None or self.started_at is None:
            return None
        return self.started_at + self.timeout + self.paused_for

    def resume(self, now: float) -> None:
        """End a pause; the part of it after the start does not count against the timeout."""
        if self.paused_at is not None and self.started_at is not None:
            self.paused_for += max(0.0, now - max(self.paused_at, self.started_at))
        self.paused_at = None


@dataclass
class _Outcome:
    """A result to write: ``verb`` is complete, fail, timeout, abort or release."""

    run: _Run
    verb: str
    result: JSON = None
    error: str = ""
    retryable: bool = True
    exc: BaseException | None = None  #: what the handler raised (for the log's traceback)
    logged: bool = False  #: the failed attempt's log line is out (an outage may retry the write)


@dataclass
class WorkerCounters:
    """What a worker has done since it started (for logs, tests and benchmarks)."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    cancelled: int = 0
    released: int = 0
    refused: int = 0  #: outcomes refused because the lease was lost
    rejected: int = 0  #: outcomes whose values the store refused (each logged)
    dropped: int = 0  #: outcomes given up because their lease expired while the store was down
    commands: int = 0


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
        self.store = store
        self.registry = registry
        self.options = options if options is not None else WorkerOptions()
        require_int(self.options.concurrency, "concurrency", low=1)
        require_int(self.options.prefetch, "prefetch", low=0)
        self.owner = self.options.owner or default_node_id()
        self.counters = WorkerCounters()
        self._monotonic = monotonic
        self._wake = threading.Event()
        self._stopping = threading.Event()  # first signal: drain
        self._immediate = threading.Event()  # second signal: stop now
        self._stopped = threading.Event()
        self._runs: dict[str, _Run] = {}
        self._done: queue.SimpleQueue[_Outcome] = queue.SimpleQueue()
        self._outbox: list[_Outcome] = []
        self._outbox_since = 0.0  # when the oldest outcome in the outbox arrived
        self._buffer: ClaimBuffer[_Run] = ClaimBuffer(self.options.concurrency, monotonic)
        # Outcomes are written beside the claims where the store takes both at once.
        self._writer: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(1, thread_name_prefix="fencepost-writer")
            if getattr(store, "parallel_writes", False)
            else None
        )
        self._writing: Future[tuple[list[_Outcome], Exception | None]] | None = None
        self._rate = FinishRate(self.options.prefetch)
        self._next_hand_back = 0.0
        self._next_scan = 0.0  # when held runs are next scanned for timeouts and heartbeats
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._healthy = True
        self._clock_agrees = True  # see _check_clock
        self._backoff = 0.0
        self._retry_at = 0.0
        self._thread: threading.Thread | None = None
        self._groups = _claim_groups(registry)
        if not self._groups:
            raise ValidationError("registry", "a worker needs at least one job to run")

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
            self._store_call(self._register)
        except BaseException:
            self._stopped.set()
            raise
        registered = self._healthy  # False: the store is down, the loop registers later
        self._start_handlers()
        log.info(
            "worker %s started: jobs %s, concurrency %d, prefetch up to %d, store %s",
            self.owner,
            ", ".join(f"{s.name}@{s.version}" for s in self.registry),
            opts.concurrency,
            opts.prefetch,
            describe(self.store),
        )
        notifier = threading.Thread(target=self._listen, name="fencepost-notify", daemon=True)
        notifier.start()
        now = self._monotonic()
        next_reap = next_commands = now
        next_node = now + (opts.node_ttl / 3 if registered and self._clock_agrees else 0.0)
        grace_until: float | None = None
        try:
            while True:
                self._wake.clear()  # before looking: a wake-up during this pass is kept
                now = self._monotonic()
                self._collect()
                self._dispatch()
                if self._flush_due(now):
                    self._flush(now)
                # The per-run scans (timeouts, due heartbeats) run at most every
                # _SCAN_EVERY: a busy worker passes here once per finished handler, and
                # scanning hundreds of held runs each time cost more than the jobs.
                scan = now >= self._next_scan
                if scan:
                    self._next_scan = now + _SCAN_EVERY
                    self._enforce_timeouts(now)
                if now >= self._next_hand_back:
                    self._hand_back(self._buffer.stale(now, _max_wait), _WAITED_TOO_LONG)
                    self._next_hand_back = now + _HAND_BACK_CHECK
                if self._stopping.is_set():
                    if grace_until is None:
                        grace_until = now + opts.grace
                        self._hand_back(self._buffer.clear(), SHUTTING_DOWN)
                    if not self._runs or self._immediate.is_set() or now >= grace_until:
                        break
                if self._healthy or now >= self._retry_at:
                    if now >= next_node:
                        self._store_call(self._register)
                        # A clock found off is looked at again every second, not every third
                        # of a registration, so claiming resumes soon after it agrees.
                        next_node = now + (opts.node_ttl / 3 if self._clock_agrees else 1.0)
                    if scan:
                        self._heartbeat(now)
                    if now >= next_commands:
                        self._store_call(partial(self._poll_commands, now))
                        next_commands = now + opts.command_interval
                    if now >= next_reap and self._clock_agrees:
                        self._store_call(self.store.reap_expired)
                        next_reap = now + opts.reap_interval
                claimed = 0
                if not self._stopping.is_set() and self._healthy and self._clock_agrees:
                    claimed = self._claim(now)
                    self._dispatch()
                if claimed and self._room(min(self._groups)) > 0:
                    continue  # more may be due: claim again before sleeping
                if not self._buffer:
                    self._flush(now)  # no work waiting: write everything before waiting
                self._wake.wait(self._idle_wait(now))
        finally:
            self._shutdown()
            self._stopped.set()

    def _idle_wait(self, now: float) -> float:
        wait = self.options.poll_interval if self._healthy else max(0.0, self._retry_at - now)
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

    def _store_call(self, action: Callable[[], Any]) -> Any:
        """Run one store operation; None if the store is down (the worker then backs off)."""
        try:
            value = action()
        except StoreUnavailable as exc:
            self._store_down(exc)
            return None
        self._store_up()
        return value

    def _store_up(self) -> None:
        """A store call succeeded: if the store was down, say so and resume."""
        if not self._healthy:
            log.warning("database reachable again; resuming claims")
            self._healthy = True
            self._backoff = 0.0

    def _store_down(self, exc: Exception) -> None:
        self._backoff = min(self.options.max_backoff, max(0.1, self._backoff * 2))
        self._retry_at = self._monotonic() + self._backoff
        if self._healthy:
            log.error(
                "database unreachable (%s): not claiming; holding %d outcomes, retrying",
                exc,
                len(self._outbox),
            )
        self._healthy = False

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
        for ttl, (names, versions) in self._groups.items():
            limit = self._room(ttl)
            if limit <= 0:
                continue
            leases = self._store_call(
                partial(
                    self.store.claim,
                    self.owner,
                    limit=limit,
                    ttl=ttl,
                    jobs=names,
                    versions=versions,
                    buckets=opts.buckets,
                    max_per_bucket=opts.max_per_bucket,
                )
            )
            if leases:
                self._buffer.add([self._begin(lease, ttl, now) for lease in leases])
                claimed += len(leases)
        return claimed

    def _begin(self, lease: Lease, ttl: timedelta, now: float) -> _Run:
        spec = self.registry.get(lease.job, lease.job_version)
        # The execution's own timeout (set at submit) wins over the job's default.
        timeout = lease.timeout if lease.timeout is not None else spec.timeout
        seconds = ttl.total_seconds()
        run = _Run(
            spec=spec,
            lease=lease,
            ctx=Context(lease, wake=self._wake.set),
            expires=now + seconds,
            timeout=None if timeout is None else timeout.total_seconds(),
            next_beat=now + seconds / 3,
            claimed_at=now,
            is_async=spec.is_async,
        )
        self._runs[lease.execution_id] = run
        self.counters.claimed += 1
        return run

    def _dispatch(self) -> None:
        """Start the buffered coroutine runs that free slots allow (threads take their own)."""
        for run in self._buffer.take_coroutines():
            loop = self._event_loop()
            run.future = asyncio.run_coroutine_threadsafe(self._run_async(run), loop)

    def _hand_back(self, runs: list[_Run], reason: str) -> None:
        """Release buffered leases that will not start here (claimable at once elsewhere)."""
        for run in runs:
            run.finished = True
            self._runs.pop(run.lease.execution_id, None)
            if not self._outbox:
                self._outbox_since = self._monotonic()
            self._outbox.append(_Outcome(run, "release", error=reason))
        if runs and reason == _WAITED_TOO_LONG:
            log.info("handed back %d buffered leases: %s", len(runs), reason)

    def _start_handlers(self) -> None:
        for _ in range(self.options.concurrency):
            self._spawn_handler()

    def _spawn_handler(self) -> None:
        thread = threading.Thread(
            target=self._handler_thread, name="fencepost-handler", daemon=True
        )
        thread.start()
        # Abandoned handlers' threads leave when their handler finally returns.
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)

    def _handler_thread(self) -> None:
        while True:
            run = self._buffer.take()
            if run is None:
                return
            outcome = self._execute(run)
            mine = self._buffer.free(run)  # False: abandoned, the slot went to a replacement
            self._done.put(outcome)
            self._wake.set()
            if not mine:
                return  # abandoned after a timeout: a replacement thread took our place

    def _execute(self, run: _Run) -> _Outcome:
        try:
            result = run.spec.run(run.ctx, _inputs(run.lease))
        except BaseException as exc:  # the handler's failure is the execution's, not ours
            return _failure(run, exc)
        return _Outcome(run, "complete", result=result)

    async def _run_async(self, run: _Run) -> None:
        try:
            result = await run.spec.run(run.ctx, _inputs(run.lease))
            outcome = _Outcome(run, "complete", result=result)
        except asyncio.CancelledError:
            outcome = _failure(run, Cancelled(run.ctx.stop_reason or CANCEL_REQUESTED))
        except BaseException as exc:
            outcome = _failure(run, exc)
        self._buffer.free(run)
        self._done.put(outcome)
        self._wake.set()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=_run_loop, args=(loop,), name="fencepost-async", daemon=True
            )
            self._loop_thread.start()
            self._loop = loop
        return self._loop

    def _enforce_timeouts(self, now: float) -> None:
        for run in list(self._runs.values()):
            if run.deadline is None or run.paused_at is not None or now < run.deadline:
                continue
            timeout = run.lease.timeout or run.spec.timeout
            log.warning(
                "execution %s (epoch %d, owner %s) timed out after %s; abandoning its handler",
                run.lease.execution_id,
                run.lease.epoch,
                self.owner,
                timeout,
                extra=_about(run.lease),
            )
            self._abandon(run, TIMED_OUT)
            self._outbox.append(_Outcome(run, "timeout", error=f"timed out after {timeout}"))

    def _abandon(self, run: _Run, reason: str) -> None:
        """Tell a handler to stop and stop waiting for it; its thread is replaced."""
        run.finished = True
        run.ctx._request_stop(reason)
        self._runs.pop(run.lease.execution_id, None)
        # Whoever frees the slot first owns what follows: if the handler returned just
        # now, its thread carries on and needs no replacement.
        handler_still_running = self._buffer.free(run)
        if run.future is not None:
            run.future.cancel()
        elif handler_still_running and not self._stopping.is_set():
            self._spawn_handler()

    # -- outcomes --------------------------------------------------------------------

    def _collect(self) -> None:
        """Move finished handlers' outcomes from the queue to the outbox."""
        while True:
            try:
                outcome = self._done.get_nowait()
            except queue.Empty:
                return
            run = outcome.run
            if run.finished:
                continue  # timed out (already reported) or released at shutdown
            run.finished = True
            self._runs.pop(run.lease.execution_id, None)
            if not self._outbox:
                self._outbox_since = self._monotonic()
            if outcome.verb == "cancelled":
                if run.ctx.stop_reason == SHUTTING_DOWN:
                    outcome.verb = "release"
                elif run.cancel_requested:
                    outcome.verb = "abort"
                else:
                    outcome.verb = "fail"
            self._outbox.append(outcome)

    def _flush_due(self, now: float) -> bool:
        """Whether the outbox is worth a transaction now (batches amortize its cost)."""
        return bool(self._outbox) and (
            len(self._outbox) >= self.options.flush_batch
            or now - self._outbox_since >= self.options.flush_delay
            or self._stopping.is_set()
        )

    def _flush(self, now: float, *, wait: bool = False) -> None:
        """Write the outbox: completions in one batch, then the rest one by one.

        Where the store takes writes from several threads at once (PostgreSQL),
        the batch is written on the writer thread while this one goes on claiming
        (one batch in flight; the next waits for it) — unless ``wait``. A claim
        and a completion then overlap instead of taking turns, and handlers do not
        idle through both round trips.

        Stops at the first outage and keeps what is unwritten for the next try.
        While the store is down, an outcome whose lease has surely expired is
        dropped: the store will time that attempt out and retry it anyway.
        """
        if self._writing is not None:
            if not (wait or self._writing.done()):
                return  # the batch in flight first: outcomes keep gathering meanwhile
            self._written(*self._writing.result())
            self._writing = None
        if not self._outbox or (not self._healthy and now < self._retry_at):
            return
        if not self._healthy:
            self._outbox = [o for o in self._outbox if not self._expired(o, now)]
        batch, self._outbox = self._outbox, []
        if self._writer is None or wait:
            self._written(*self._write_outcomes(batch))
            return
        self._writing = self._writer.submit(self._write_outcomes, batch)
        self._writing.add_done_callback(lambda _: self._wake.set())

    def _write_outcomes(self, batch: list[_Outcome]) -> tuple[list[_Outcome], Exception | None]:
        """Write ``batch``; what an outage left unwritten, and the outage (None: all written)."""
        completions = [o for o in batch if o.verb == "complete"]
        steps: list[tuple[list[_Outcome], Callable[[], bool]]] = []
        checkpointed = [o for o in batch if o.run.ctx._has_progress()]
        if checkpointed:  # progress of a job that ended before its next heartbeat: first
            steps.append(([], partial(self._write_progress, checkpointed)))
        if completions:
            steps.append((completions, partial(self._complete, completions)))
        for outcome in batch:
            if outcome.verb != "complete":
                steps.append(([outcome], partial(self._write, outcome)))
        for index, (_, write) in enumerate(steps):
            try:
                write()
            except StoreUnavailable as exc:
                return [o for unwritten, _ in steps[index:] for o in unwritten], exc
        return [], None

    def _write_progress(self, outcomes: list[_Outcome]) -> bool:
        """Write the last checkpoint's progress of finished runs, with a heartbeat each."""
        by_ttl: dict[timedelta, list[tuple[Lease, JSON]]] = defaultdict(list)
        for outcome in outcomes:
            dirty, progress = outcome.run.ctx._take_progress()
            if dirty and progress is not None:
                by_ttl[outcome.run.spec.lease_ttl].append((outcome.run.lease, progress))
        for ttl, beats in by_ttl.items():
            self.store.heartbeat_many(beats, ttl=ttl)  # a lost lease: its outcome is refused
        return True

    def _written(self, unwritten: list[_Outcome], outage: Exception | None) -> None:
        """Account for a written batch: an outage puts what it left back in front."""
        if outage is None:
            self._store_up()
            return
        self._outbox = unwritten + self._outbox
        if unwritten and self._outbox[0] is unwritten[0]:
            self._outbox_since = self._monotonic()
        self._store_down(outage)

    def _expired(self, outcome: _Outcome, now: float) -> bool:
        if outcome.run.expires > now:
            return False
        self.counters.dropped += 1
        log.error(
            "execution %s (epoch %d, owner %s): lease expired before its %s could be "
            "written; the store will time the attempt out and retry it",
            outcome.run.lease.execution_id,
            outcome.run.lease.epoch,
            self.owner,
            outcome.verb,
            extra=_about(outcome.run.lease),
        )
        return True

    def _complete(self, outcomes: Sequence[_Outcome]) -> bool:
        try:
            verdicts = self.store.complete_many([(o.run.lease, o.result) for o in outcomes])
        except ValidationError:
            # One completion the store refuses fails the batch's transaction: write
            # them one by one, so the refusal stays that completion's problem.
            for outcome in outcomes:
                self._write(outcome)
            return True
        for outcome, verdict in zip(outcomes, verdicts, strict=True):
            if verdict is None:
                self.counters.succeeded += 1
            else:
                self._refused(outcome, verdict)
        return True

    def _write(self, outcome: _Outcome) -> bool:
        """Write one outcome. A refusal (stale lease, refused value) is that outcome's problem."""
        try:
            self._apply(outcome)
        except StaleLease as exc:
            self._refused(outcome, exc)
        except ValidationError as exc:
            self._rejected(outcome, exc)
        return True

    def _apply(self, outcome: _Outcome) -> None:
        lease = outcome.run.lease
        # Error texts come from handlers and commands and may hold anything: they are
        # made storable here (U+0000 and lone surrogates replaced), never refused.
        error = sanitize_text(outcome.error, max_len=MAX_ERROR_CHARS)
        if outcome.verb == "complete":
            refused = self.store.complete_many([(lease, outcome.result)])[0]
            if refused is not None:
                raise refused
            self.counters.succeeded += 1
        elif outcome.verb in ("fail", "timeout"):
            retry = outcome.run.spec.retry
            timed_out = outcome.verb == "timeout"
            if not timed_out:  # a timeout was logged when it fired
                self._log_failure(outcome)
            execution = self.store.fail(
                lease,
                error,
                retryable=outcome.retryable,  # True for a timeout: it retries like a failure
                timed_out=timed_out,
                retry_in=None if retry is None else retry.delay(lease.attempt),
            )
            if execution.state is State.FAILED:
                log.error(
                    "execution %s (job %s) dead-lettered after attempt %d of %d: %s",
                    lease.execution_id,
                    lease.job,
                    lease.attempt,
                    lease.max_attempts,
                    _first_line(error),
                    extra=_about(lease),
                )
            if timed_out:
                self.counters.timed_out += 1
            else:
                self.counters.failed += 1
        elif outcome.verb == "abort":
            self.store.abort(lease, reason=CANCEL_REQUESTED)
            self.counters.cancelled += 1
        elif outcome.verb == "release":
            self.store.release(lease, reason=outcome.error or SHUTTING_DOWN)
            self.counters.released += 1
        else:  # pragma: no cover - the verbs are ours
            raise AssertionError(outcome.verb)

    def _log_failure(self, outcome: _Outcome) -> None:
        """One WARNING line per failed attempt, with the handler's traceback on the record."""
        if outcome.logged:
            return
        outcome.logged = True
        lease = outcome.run.lease
        exc = outcome.exc
        log.warning(
            "execution %s (job %s) attempt %d of %d failed (epoch %d, owner %s): %s",
            lease.execution_id,
            lease.job,
            lease.attempt,
            lease.max_attempts,
            lease.epoch,
            self.owner,
            _first_line(outcome.error),
            exc_info=None if exc is None else (type(exc), exc, exc.__traceback__),
            extra=_about(lease),
        )

    def _rejected(self, outcome: _Outcome, exc: ValidationError) -> None:
        """The store refused a value of this outcome: record it, log it once, go on.

        Not an outage: the worker keeps claiming and writing the others. A refused
        completion fails the execution instead (retrying cannot mend the result);
        anything else is left for its lease to expire, so the store times it out.
        """
        self.counters.rejected += 1
        lease = outcome.run.lease
        log.error(
            "execution %s (epoch %d, owner %s): the store refused its %s (%s)",
            lease.execution_id,
            lease.epoch,
            self.owner,
            outcome.verb,
            exc,
            extra=_about(lease),
        )
        if outcome.verb == "complete":
            message = sanitize_text(f"{RESULT_INVALID}: {exc}", max_len=MAX_ERROR_CHARS)
            self._write(_Outcome(outcome.run, "fail", error=message, retryable=False))

    def _refused(self, outcome: _Outcome, exc: StaleLease) -> None:
        self.counters.refused += 1
        log.warning(
            "execution %s (epoch %d, owner %s): %s refused, the lease was lost (%s)",
            outcome.run.lease.execution_id,
            outcome.run.lease.epoch,
            self.owner,
            outcome.verb,
            exc,
            extra=_about(outcome.run.lease),
        )

    # -- heartbeats, commands, nodes ---------------------------------------------------

    def _heartbeat(self, now: float) -> None:
        """Renew, in one batch per lease length, every lease whose beat is due.

        A lease is due a third of its length after it was last renewed; a
        checkpoint's progress makes it due after ``progress_interval``.
        """
        due: dict[timedelta, list[tuple[_Run, JSON]]] = defaultdict(list)
        for run in list(self._runs.values()):
            dirty = run.ctx._has_progress()
            soon = (
                run.next_beat
                - run.spec.lease_ttl.total_seconds() / 3
                + self.options.progress_interval
            )
            if now >= run.next_beat or (dirty and now >= soon):
                dirty, progress = run.ctx._take_progress()
                due[run.spec.lease_ttl].append((run, progress if dirty else None))
        for ttl, beats in due.items():
            self._store_call(partial(self._renew, ttl, beats, now))

    def _renew(self, ttl: timedelta, beats: list[tuple[_Run, JSON]], now: float) -> None:
        renewed = self.store.heartbeat_many([(run.lease, p) for run, p in beats], ttl=ttl)
        seconds = ttl.total_seconds()
        for (run, _), verdict in zip(beats, renewed, strict=True):
            if isinstance(verdict, StaleLease):
                if not run.ctx.lease_lost:
                    log.warning(
                        "execution %s (epoch %d, owner %s): heartbeat refused, lease lost; "
                        "the handler's result will be refused",
                        run.lease.execution_id,
                        run.lease.epoch,
                        self.owner,
                        extra=_about(run.lease),
                    )
                run.ctx._lose()
                run.next_beat = float("inf")
            else:
                run.lease = verdict
                run.expires = now + seconds
                run.next_beat = now + seconds / 3

    def _poll_commands(self, now: float) -> None:
        if not self._runs:
            return
        commands = self.store.claim_commands(
            self.owner, list(self._runs), ttl=self.options.command_ttl
        )
        for command in commands:
            self._deliver(command, now)

    def _deliver(self, command: Command, now: float) -> None:
        """Acknowledge and apply a command, or give it back if we do not hold its execution."""
        run = self._runs.get(command.execution_id)
        try:
            if run is None:  # finished or released since the claim: not ours any more
                raise StaleLease(command.execution_id, self.owner, 0)
            self.store.complete_command(command, run.lease)
        except StaleLease:
            log.info(
                "command %s for %s: not held by %s; released for its holder",
                command.kind.value,
                command.execution_id,
                self.owner,
                extra={"execution_id": command.execution_id, "owner": self.owner},
            )
            self.store.release_command(command)
            return
        self.counters.commands += 1
        log.info(
            "execution %s (epoch %d, owner %s): %s requested by %s",
            run.lease.execution_id,
            run.lease.epoch,
            self.owner,
            command.kind.value,
            command.requested_by,
            extra=_about(run.lease),
        )
        if command.kind is CommandKind.CANCEL and self._buffer.remove(run):
            # Still waiting in the buffer: no handler to stop, cancel it at once.
            run.finished = True
            self._runs.pop(run.lease.execution_id, None)
            self._outbox.append(_Outcome(run, "abort"))
        elif command.kind is CommandKind.CANCEL:
            run.cancel_requested = True
            if run.paused_at is not None:
                run.ctx._resume()
                run.resume(now)
            run.ctx._request_stop(CANCEL_REQUESTED)
        elif command.kind is CommandKind.PAUSE:
            if run.paused_at is None:
                run.paused_at = now
                run.ctx._pause()
        elif command.kind is CommandKind.RESUME and run.paused_at is not None:
            # Time spent paused does not count against the attempt's timeout.
            run.resume(now)
            run.ctx._resume()

    def _register(self) -> None:
        node = self.store.register_node(
            self.owner, kind="worker", buckets=self.options.buckets, ttl=self.options.node_ttl
        )
        self._check_clock(self.store.clock_offset(node.heartbeat_at))

    def _check_clock(self, offset: float | None) -> None:
        """Stop claiming and reaping while this process's clock disagrees with the store's.

        Where leases are judged by this process's clock (SQLite), a clock ahead by
        more than a lease would see live leases as expired and take them over, and
        one behind would write leases that others see expired at once. So, by more
        than the shortest lease this worker takes: log an error, claim and reap
        nothing (running handlers go on; their outcomes are still fenced) until the
        clocks agree again.
        """
        limit = min(ttl.total_seconds() for ttl in self._groups)
        agrees = offset is None or abs(offset) <= limit
        if agrees and not self._clock_agrees:
            log.warning("clock agrees with the store again; resuming claims")
        elif not agrees and self._clock_agrees:
            log.error(
                "this process's clock is %+.1f s off the store's record of its writes, more "
                "than a lease (%.1f s): not claiming or reaping until it agrees",
                offset,
                limit,
            )
        self._clock_agrees = agrees

    # -- shutdown --------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Release what is still running, write what is finished, leave the node registry."""
        immediate = self._immediate.is_set()
        self._hand_back(self._buffer.clear(), SHUTTING_DOWN)
        for run in list(self._runs.values()):
            run.ctx._request_stop(SHUTTING_DOWN)
        # Give stopped handlers (and command jobs killing their process groups) a moment.
        settle = self._monotonic() + (0.2 if immediate else 2.5)
        while self._runs and self._monotonic() < settle:
            self._collect()
            if self._runs:
                self._wake.wait(0.02)
                self._wake.clear()
        self._collect()
        for run in list(self._runs.values()):
            run.finished = True
            self._outbox.append(_Outcome(run, "release"))
        self._runs.clear()
        deadline = self._monotonic() + (1.0 if immediate else 10.0)
        self._healthy = True
        self._flush(self._monotonic(), wait=True)  # the batch in flight, then the rest
        while self._outbox and self._monotonic() < deadline:
            self._flush(self._monotonic(), wait=True)
            if self._outbox:
                time.sleep(min(0.5, max(0.0, self._retry_at - self._monotonic())))
        if self._outbox:
            log.error(
                "stopped with %d outcomes unwritten; their leases will expire", len(self._outbox)
            )
        self._buffer.close()
        if self._writer is not None:
            self._writer.shutdown(wait=False)
        if self._loop is not None and self._loop_thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(2.0)
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


def describe(store: object) -> str:
    """Where a worker's store is, for its start line (a URL without credentials)."""
    return str(getattr(store, "location", None) or type(store).__name__)


def _max_wait(run: _Run) -> float:
    """How long a buffered run may wait for a handler: HAND_BACK of its lease."""
    return run.spec.lease_ttl.total_seconds() * HAND_BACK


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run coroutine handlers until the worker stops; then cancel stragglers and close."""
    loop.run_forever()
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
    loop.close()


def _about(lease: Lease) -> dict[str, object]:
    """The structured fields of a log line about one execution (``--log-format json``)."""
    return {
        "execution_id": lease.execution_id,
        "epoch": lease.epoch,
        "owner": lease.owner,
        "job": lease.job,
        "attempt": lease.attempt,
    }


def _inputs(lease: Lease) -> dict[str, Any]:
    return dict(lease.inputs) if isinstance(lease.inputs, dict) else {}


def _failure(run: _Run, exc: BaseException) -> _Outcome:
    if isinstance(exc, Cancelled):
        return _Outcome(run, "cancelled", error=str(exc), retryable=True, exc=exc)
    if isinstance(exc, PermanentFailure):
        error = f"{type(exc).__name__}: {exc}"
        return _Outcome(run, "fail", error=error, retryable=False, exc=exc)
    lines = traceback.format_exception(exc)
    error = f"{type(exc).__name__}: {exc}\n{''.join(lines[-6:])}"
    return _Outcome(run, "fail", error=error, exc=exc)


def _first_line(error: str) -> str:
    """An error's first line (its type and message), for a one-line log message."""
    return error.partition("\n")[0]


def _claim_groups(
    registry: JobRegistry,
) -> dict[timedelta, tuple[list[str], list[tuple[str, int]]]]:
    """Jobs grouped by lease length: one claim per group, so each job gets its own ttl."""
    groups: dict[timedelta, tuple[list[str], list[tuple[str, int]]]] = {}
    for spec in registry:
        names, versions = groups.setdefault(spec.lease_ttl, ([], []))
        if spec.name not in names:
            names.append(spec.name)
        versions.append(spec.key)
    return groups

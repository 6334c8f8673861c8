"""The outbox: a worker's finished outcomes, collected and written in batches.

Each finished handler drops its outcome in a queue and wakes the control thread,
which moves it to the outbox and writes the outbox once it is worth a transaction:
completions in one batch, the rest one by one. When the database is unreachable
the outbox keeps them (until their lease has surely expired) and the next flush
tries again. A refusal (a stale lease, a value the store refuses) is that outcome's
problem, logged and counted, never the worker's.
"""

from __future__ import annotations

import logging
import queue
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from functools import partial

from fencepost import tracing
from fencepost.domain.checks import MAX_ERROR_CHARS, sanitize_text
from fencepost.domain.errors import StaleLease, StoreUnavailable, ValidationError
from fencepost.domain.machine import MAX_SNOOZE_REASON
from fencepost.domain.models import JSON, Lease
from fencepost.domain.payloads import RESULT_INVALID
from fencepost.domain.states import State
from fencepost.worker.runs import CANCEL_REQUESTED, SHUTTING_DOWN, RunOutcome, about, first_line
from fencepost.worker.state import WorkerState

log = logging.getLogger("fencepost.worker")


class Outbox:
    """A worker's finished outcomes, collected and written to the store (see the module).

    Handler threads :meth:`put` outcomes; everything else runs on the control thread.
    """

    def __init__(self, state: WorkerState) -> None:
        self.state = state
        self._done: queue.SimpleQueue[RunOutcome] = queue.SimpleQueue()  # put by handlers
        self._outbox: list[RunOutcome] = []  # collected, waiting to be written
        self._outbox_since = 0.0  # when the oldest outcome in the outbox arrived
        # Outcomes are written beside the claims where the store takes both at once.
        self._writer: ThreadPoolExecutor | None = (
            ThreadPoolExecutor(1, thread_name_prefix="fencepost-writer")
            if getattr(state.store, "parallel_writes", False)
            else None
        )
        self._writing: Future[tuple[list[RunOutcome], Exception | None]] | None = None
        self._in_flight: list[RunOutcome] = []  # the outcomes of the batch in flight
        state.unwritten = self.__len__

    def __len__(self) -> int:
        """How many outcomes wait to be written (not counting the batch in flight)."""
        return len(self._outbox)

    @property
    def pending(self) -> int:
        """How many outcomes are not yet written: waiting, and in the batch in flight."""
        return len(self._outbox) + len(self._in_flight)

    def queues(self) -> Iterator[str]:
        """The queue of each outcome not yet written (its lease is still RUNNING there)."""
        for outcome in (*self._outbox, *self._in_flight):
            yield outcome.run.lease.queue

    def put(self, outcome: RunOutcome) -> None:
        """A handler finished (any thread): queue its outcome and wake the control thread."""
        self._done.put(outcome)
        self.state.wake.set()

    def add(self, outcome: RunOutcome) -> None:
        """An outcome the control thread decided (a release, a timeout, an abort)."""
        if not self._outbox:
            self._outbox_since = self.state.monotonic()
        self._outbox.append(outcome)

    def close(self) -> None:
        """Stop the writer thread (the worker has written what it could)."""
        if self._writer is not None:
            self._writer.shutdown(wait=False)

    def collect(self) -> None:
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
            self.state.runs.pop(run.lease.execution_id, None)
            if not self._outbox:
                self._outbox_since = self.state.monotonic()
            if outcome.verb == "cancelled":
                if run.ctx.stop_reason == SHUTTING_DOWN:
                    outcome.verb = "release"
                elif run.cancel_requested:
                    outcome.verb = "abort"
                else:
                    outcome.verb = "fail"
            elif outcome.verb == "snooze" and run.cancel_requested:
                # The cancel command was delivered (and completed): a snooze must not
                # put the execution back to run again as if nobody had asked.
                outcome.verb = "abort"
            if self.state.metrics is not None:
                self.state.metrics.finished(outcome, self.state.monotonic())
            self._outbox.append(outcome)

    def due(self, now: float) -> bool:
        """Whether the outbox is worth a transaction now (batches amortize its cost)."""
        return bool(self._outbox) and (
            len(self._outbox) >= self.state.options.flush_batch
            or now - self._outbox_since >= self.state.options.flush_delay
            or self.state.stopping.is_set()
        )

    def flush(self, now: float, *, wait: bool = False) -> None:
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
            self._in_flight = []
        if not self.state.healthy:
            # Nothing is written until a probe found the store again (the worker's control loop);
            # what can no longer be written in time is dropped meanwhile.
            self._outbox = [o for o in self._outbox if not self._expired(o, now)]
            return
        if not self._outbox:
            return
        batch, self._outbox = self._outbox, []
        if self._writer is None or wait:
            self._written(*self._write_outcomes(batch))
            return
        self._in_flight = batch  # held until written (see Outbox.queues)
        self._writing = self._writer.submit(self._write_outcomes, batch)
        self._writing.add_done_callback(lambda _: self.state.wake.set())

    def _write_outcomes(self, batch: list[RunOutcome]) -> tuple[list[RunOutcome], Exception | None]:
        """Write ``batch``; what an outage left unwritten, and the outage (None: all written)."""
        completions = [o for o in batch if o.verb == "complete"]
        steps: list[tuple[list[RunOutcome], Callable[[], bool]]] = []
        checkpointed = [o for o in batch if o.run.control.has_progress()]
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

    def _write_progress(self, outcomes: list[RunOutcome]) -> bool:
        """Write the last checkpoint's progress of finished runs, with a heartbeat each."""
        by_ttl: dict[timedelta, list[tuple[Lease, JSON]]] = defaultdict(list)
        for outcome in outcomes:
            dirty, progress = outcome.run.control.take_progress()
            if dirty and progress is not None:
                by_ttl[outcome.run.spec.lease_ttl].append((outcome.run.lease, progress))
        for ttl, beats in by_ttl.items():
            self.state.store.heartbeat_many(beats, ttl=ttl)  # a lost lease: its outcome is refused
        return True

    def _written(self, unwritten: list[RunOutcome], outage: Exception | None) -> None:
        """Account for a written batch: an outage puts what it left back in front."""
        if outage is None:
            return
        self._outbox = unwritten + self._outbox
        if unwritten and self._outbox[0] is unwritten[0]:
            self._outbox_since = self.state.monotonic()
        self.state.down(outage)

    def _expired(self, outcome: RunOutcome, now: float) -> bool:
        if outcome.run.expires > now:
            return False
        self.state.counters.dropped += 1
        tracing.end_attempt(outcome.run, "dropped", error="lease expired before the write")
        log.error(
            "execution %s (epoch %d, owner %s): lease expired before its %s could be "
            "written; the store will time the attempt out and retry it",
            outcome.run.lease.execution_id,
            outcome.run.lease.epoch,
            self.state.owner,
            outcome.verb,
            extra=about(outcome.run.lease),
        )
        return True

    def _complete(self, outcomes: Sequence[RunOutcome]) -> bool:
        try:
            verdicts = self.state.store.complete_many([(o.run.lease, o.result) for o in outcomes])
        except ValidationError:
            # One completion the store refuses fails the batch's transaction: write
            # them one by one, so the refusal stays that completion's problem.
            for outcome in outcomes:
                self._write(outcome)
            return True
        for outcome, verdict in zip(outcomes, verdicts, strict=True):
            if verdict is None:
                self.state.counters.succeeded += 1
                tracing.end_attempt(outcome.run, "succeeded", state=State.SUCCEEDED.value)
            else:
                self._refused(outcome, verdict)
        return True

    def _write(self, outcome: RunOutcome) -> bool:
        """Write one outcome. A refusal (stale lease, refused value) is that outcome's problem."""
        try:
            self._apply(outcome)
        except StaleLease as exc:
            self._refused(outcome, exc)
        except ValidationError as exc:
            self._rejected(outcome, exc)
        return True

    def _apply(self, outcome: RunOutcome) -> None:
        lease = outcome.run.lease
        # Error texts come from handlers and commands and may hold anything: they are
        # made storable here (U+0000 and lone surrogates replaced), never refused.
        error = sanitize_text(outcome.error, max_len=MAX_ERROR_CHARS)
        if outcome.verb == "complete":
            refused = self.state.store.complete_many([(lease, outcome.result)])[0]
            if refused is not None:
                raise refused
            self.state.counters.succeeded += 1
            tracing.end_attempt(outcome.run, "succeeded", state=State.SUCCEEDED.value)
        elif outcome.verb in ("fail", "timeout"):
            retry = outcome.run.spec.retry
            timed_out = outcome.verb == "timeout"
            if not timed_out:  # a timeout was logged when it fired
                self._log_failure(outcome)
            retry_in = outcome.retry_in  # the handler's Retry(after=), else the backoff
            if retry_in is None and retry is not None:
                retry_in = retry.delay(lease.attempt).total_seconds()
            execution = self.state.store.fail(
                lease,
                error,
                retryable=outcome.retryable,  # True for a timeout: it retries like a failure
                timed_out=timed_out,
                retry_in=retry_in,
            )
            self._log_dead_letter(lease, execution.state, error)
            if timed_out:
                self.state.counters.timed_out += 1
            else:
                self.state.counters.failed += 1
            tracing.end_attempt(
                outcome.run,
                _failed_outcome(outcome, execution.state, lease),
                state=execution.state.value,
                error=error,
                exc=outcome.exc,
            )
        elif outcome.verb == "abort":
            execution = self.state.store.abort(lease, reason=CANCEL_REQUESTED)
            self.state.counters.cancelled += 1
            tracing.end_attempt(outcome.run, "cancelled", state=execution.state.value)
        elif outcome.verb == "snooze":
            self._snooze(outcome)
        elif outcome.verb == "release":
            execution = self.state.store.release(lease, reason=outcome.error or SHUTTING_DOWN)
            self.state.counters.released += 1
            tracing.end_attempt(outcome.run, "released", state=execution.state.value)
        else:  # pragma: no cover - the verbs are ours
            raise AssertionError(outcome.verb)

    def _snooze(self, outcome: RunOutcome) -> None:
        """Write a snooze; past its bound the store fails the attempt instead (logged so)."""
        lease = outcome.run.lease
        # A handler's reason is run-time text: made storable, never refused.
        text = sanitize_text(outcome.error, max_len=MAX_SNOOZE_REASON)
        reason = text if text.strip() else None
        execution = self.state.store.snooze(lease, outcome.snooze, reason=reason)
        if execution.state is State.SCHEDULED:
            self.state.counters.snoozed += 1
            log.info(
                "execution %s (job %s) snoozed for %g s (attempt %d, epoch %d)",
                lease.execution_id,
                lease.job,
                outcome.snooze,
                lease.attempt,
                lease.epoch,
                extra=about(lease),
            )
            tracing.end_attempt(outcome.run, "snoozed", state=execution.state.value)
            return
        # Snoozed too often: the store failed the attempt (its error says so).
        error = execution.error or ""
        self.state.counters.failed += 1
        log.warning(
            "execution %s (job %s) attempt %d of %d failed (epoch %d, owner %s): %s",
            lease.execution_id,
            lease.job,
            lease.attempt,
            lease.max_attempts,
            lease.epoch,
            self.state.owner,
            first_line(error),
            extra=about(lease),
        )
        self._log_dead_letter(lease, execution.state, error)
        failed = RunOutcome(outcome.run, "fail", error=error)
        tracing.end_attempt(
            outcome.run,
            _failed_outcome(failed, execution.state, lease),
            state=execution.state.value,
            error=error,
        )

    def _log_dead_letter(self, lease: Lease, state: State, error: str) -> None:
        if state is State.FAILED:
            log.error(
                "execution %s (job %s) dead-lettered after attempt %d of %d: %s",
                lease.execution_id,
                lease.job,
                lease.attempt,
                lease.max_attempts,
                first_line(error),
                extra=about(lease),
            )

    def _log_failure(self, outcome: RunOutcome) -> None:
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
            self.state.owner,
            first_line(outcome.error),
            exc_info=None if exc is None else (type(exc), exc, exc.__traceback__),
            extra=about(lease),
        )

    def _rejected(self, outcome: RunOutcome, exc: ValidationError) -> None:
        """The store refused a value of this outcome: record it, log it once, go on.

        Not an outage: the worker keeps claiming and writing the others. A refused
        completion fails the execution instead (retrying cannot mend the result);
        anything else is left for its lease to expire, so the store times it out.
        """
        self.state.counters.rejected += 1
        lease = outcome.run.lease
        log.error(
            "execution %s (epoch %d, owner %s): the store refused its %s (%s)",
            lease.execution_id,
            lease.epoch,
            self.state.owner,
            outcome.verb,
            exc,
            extra=about(lease),
        )
        if outcome.verb == "complete":
            message = sanitize_text(f"{RESULT_INVALID}: {exc}", max_len=MAX_ERROR_CHARS)
            self._write(RunOutcome(outcome.run, "fail", error=message, retryable=False))
        tracing.end_attempt(outcome.run, "rejected", error=str(exc))  # if the fail did not

    def _refused(self, outcome: RunOutcome, exc: StaleLease) -> None:
        self.state.counters.refused += 1
        if outcome.run.span is not None:
            tracing.stale_refused(
                outcome.run, outcome.run.lease, exc, self._current_epoch(outcome.run.lease)
            )
        log.warning(
            "execution %s (epoch %d, owner %s): %s refused, the lease was lost (%s)",
            outcome.run.lease.execution_id,
            outcome.run.lease.epoch,
            self.state.owner,
            outcome.verb,
            exc,
            extra=about(outcome.run.lease),
        )

    def _current_epoch(self, lease: Lease) -> int | None:
        """The execution's epoch now, for a traced stale refusal (None: unknown)."""
        get = getattr(self.state.store, "get", None)  # a remote worker's source may not read
        if get is None:
            return None
        try:
            return int(get(lease.execution_id).epoch)
        except Exception:  # the refusal is recorded either way; the epoch is a detail
            return None


def _failed_outcome(outcome: RunOutcome, state: State, lease: Lease) -> str:
    """An attempt span's outcome for a written fail or timeout that left ``state``."""
    if outcome.verb == "timeout":
        return "timed_out"
    if state is State.RETRY_WAIT:
        return "retried"
    if state is State.FAILED and lease.attempt >= lease.max_attempts:
        return "dead_lettered"
    return "failed"

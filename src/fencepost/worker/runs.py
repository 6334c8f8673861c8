"""One claimed execution as a worker tracks it, and the outcome its handler left.

A :class:`Run` lives from its claim to its reported outcome; a :class:`RunOutcome` is
what the outbox (:mod:`fencepost.worker.outbox`) writes for it. The helpers below
turn what a handler raised into an outcome and say which execution a log line is
about.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from fencepost.domain.checks import MAX_ERROR_CHARS, sanitize_text
from fencepost.domain.errors import Cancelled, PermanentFailure, Retry, Snooze, ValidationError
from fencepost.domain.models import JSON, Lease
from fencepost.domain.payloads import RESULT_INVALID
from fencepost.jobs.context import Context, RunControl
from fencepost.jobs.spec import JobSpec

#: Why a handler was told to stop, as recorded and as raised by checkpoints.
CANCEL_REQUESTED = "cancel requested"
TIMED_OUT = "timed out"
SHUTTING_DOWN = "worker shutting down"


@dataclass(eq=False)
class Run:
    """One claimed execution, from claim to reported outcome.

    Monotonic times throughout. A run waits in the claim buffer from
    ``claimed_at`` until a handler starts it (``started_at``).
    """

    spec: JobSpec
    lease: Lease
    ctx: Context
    control: RunControl  #: the worker's side of ``ctx``: stop, pause, resume, progress
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
    #: The attempt's OpenTelemetry span, until its outcome is written (None: tracing off).
    span: Any = None

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
class RunOutcome:
    """A result to write: ``verb`` is complete, fail, timeout, abort, release or snooze."""

    run: Run
    verb: str
    result: JSON = None
    error: str = ""  #: a fail's error; a release's or snooze's reason ("": none)
    retryable: bool = True
    #: A fail's retry delay in seconds, chosen by the handler (``Retry(after=)``);
    #: None: the job's backoff.
    retry_in: float | None = None
    snooze: float = 0.0  #: a snooze's seconds
    exc: BaseException | None = None  #: what the handler raised (for the log's traceback)
    logged: bool = False  #: the failed attempt's log line is out (an outage may retry the write)
    ended_at: float | None = None  #: when the handler returned or raised (monotonic)


@dataclass
class WorkerCounters:
    """What a worker has done since it started (for logs, tests and benchmarks)."""

    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    cancelled: int = 0
    released: int = 0
    snoozed: int = 0  #: snoozes written (a snooze past its bound counts as failed instead)
    refused: int = 0  #: outcomes refused because the lease was lost
    rejected: int = 0  #: outcomes whose values the store refused (each logged)
    dropped: int = 0  #: outcomes given up because their lease expired while the store was down
    commands: int = 0


@dataclass(frozen=True)
class WorkerLoad:
    """What a worker holds at one moment (``Worker.load``; its metrics' gauges)."""

    buffered: int  #: claimed leases waiting in the buffer for a free handler
    busy: int  #: handlers running an attempt
    unwritten: int  #: finished attempts whose outcome is not yet written
    store_up: bool  #: False during an outage (the worker claims nothing then)


def about(lease: Lease) -> dict[str, object]:
    """The structured fields of a log line about one execution (``--log-format json``)."""
    return {
        "execution_id": lease.execution_id,
        "epoch": lease.epoch,
        "owner": lease.owner,
        "job": lease.job,
        "attempt": lease.attempt,
    }


def inputs_of(lease: Lease) -> dict[str, Any]:
    """The keyword arguments a handler is called with (inputs that are not an object: none)."""
    return dict(lease.inputs) if isinstance(lease.inputs, dict) else {}


#: The error prefix of an execution whose inputs its job's schema refuses at its claim.
INPUTS_INVALID = "inputs_invalid"


def inputs_refused(run: Run) -> RunOutcome | None:
    """The outcome of an execution whose inputs were never checked and do not fit, or None.

    An execution submitted before its job was published is not pinned to a version,
    and its inputs were not checked at submit: they are checked here, against the
    spec that is about to run them, before its handler starts. A mismatch fails the
    execution with ``inputs_invalid`` naming the field, without a retry (no retry can
    mend inputs). Pinned executions were checked at submit and pass untouched, and
    so does a handler whose schema is its hints': binding them at the run refuses
    the same inputs, as a permanent failure.
    """
    if run.lease.job_version is not None or run.spec.binds_its_schema:
        # Pinned: checked at submit. A schema derived from the handler's hints: the
        # run's own binding refuses what it would (without loading jsonschema).
        return None
    try:
        run.spec.check_inputs(run.lease.inputs)
    except ValidationError as exc:
        error = sanitize_text(f"{INPUTS_INVALID}: {exc}", max_len=MAX_ERROR_CHARS)
        return RunOutcome(run, "fail", error=error, retryable=False, exc=exc)
    return None


def completion(run: Run, result: Any) -> RunOutcome:
    """What ``result``, returned by ``run``'s handler, makes of the attempt.

    The result as the job's spec stores it (a model dumped to JSON, checked
    against the job's output schema). One that does not match fails the
    execution with ``result_invalid`` naming the field, without a retry, as the
    store fails a result that is not JSON: retrying cannot mend a result.
    """
    try:
        value = run.spec.check_result(result)
    except ValidationError as exc:
        error = sanitize_text(f"{RESULT_INVALID}: {exc}", max_len=MAX_ERROR_CHARS)
        return RunOutcome(run, "fail", error=error, retryable=False, exc=exc)
    return RunOutcome(run, "complete", result=value)


def failure(run: Run, exc: BaseException) -> RunOutcome:
    """What ``exc``, raised by ``run``'s handler, makes of the attempt.

    :class:`Cancelled` is sorted out when collected (release, abort or fail);
    :class:`Snooze` snoozes (the attempt does not count); :class:`Retry` fails,
    retryable, due again after its ``after`` instead of the backoff;
    :class:`PermanentFailure` fails without a retry; anything else fails with the
    traceback's last lines, retryable.
    """
    if isinstance(exc, Cancelled):
        return RunOutcome(run, "cancelled", error=str(exc), retryable=True, exc=exc)
    if isinstance(exc, Snooze):
        return RunOutcome(run, "snooze", error=exc.reason or "", snooze=exc.seconds, exc=exc)
    if isinstance(exc, Retry):
        error = f"{type(exc).__name__}: {exc}"
        return RunOutcome(run, "fail", error=error, retry_in=exc.after, exc=exc)
    if isinstance(exc, PermanentFailure):
        error = f"{type(exc).__name__}: {exc}"
        return RunOutcome(run, "fail", error=error, retryable=False, exc=exc)
    lines = traceback.format_exception(exc)
    error = f"{type(exc).__name__}: {exc}\n{''.join(lines[-6:])}"
    return RunOutcome(run, "fail", error=error, exc=exc)


def first_line(error: str) -> str:
    """An error's first line (its type and message), for a one-line log message."""
    return error.partition("\n")[0]

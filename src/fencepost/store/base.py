"""The store contract: the domain verbs every backend implements.

Each public method's docstring is its behavioural specification; the contract
suite in :mod:`fencepost.testing.contract` checks it against every backend.
Public verbs validate their arguments here, once, and hand typed values to the
backend's protected hooks (``_insert``, ``_claim``, ...), so backends never
re-implement validation and every backend rejects bad input the same way.

Conventions that hold for every verb:

* **Now is the store's now.** Backends read time only from their clock; no
  verb takes a "now" argument.
* A lease is **live** while ``now < lease_until``. At ``now == lease_until`` it
  has expired: fenced calls are refused and the execution may be claimed again.
* Every state change writes one audit :class:`Transition` in the same
  transaction. Refused fenced calls write a ``STALE_REFUSED`` record and change
  nothing else.
* Bad arguments raise :class:`ValidationError` naming the field, before anything
  is written.
"""

from __future__ import annotations

import os
import random
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self, overload

from fencepost.domain import payloads
from fencepost.domain import schedules as plans
from fencepost.domain.buckets import DEFAULT_NUM_BUCKETS
from fencepost.domain.checks import (
    INT32_MAX,
    MAX_ERROR_CHARS,
    require_int,
    require_name,
    require_text,
    storable,
)
from fencepost.domain.errors import ResultInvalid, StaleLease, ValidationError
from fencepost.domain.events import (
    ExecutionAborted,
    ExecutionCancelled,
    ExecutionEvent,
    ExecutionFailed,
    ExecutionReleased,
    ExecutionReplayed,
    ExecutionRescheduled,
    ExecutionTimedOut,
)
from fencepost.domain.ids import IdGenerator
from fencepost.domain.machine import attempts_from_transitions
from fencepost.domain.models import (
    JSON,
    Attempt,
    Command,
    Execution,
    Fence,
    Lease,
    LiveFence,
    Occurrence,
    Page,
    Schedule,
    SchedulePage,
    Transition,
)
from fencepost.domain.nodes import BucketReport, Node, ownership
from fencepost.domain.reports import SloReport, Stats
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.schedules import NewOccurrence, ScheduleSpec
from fencepost.domain.states import CommandKind, State
from fencepost.domain.submission import (
    DEFAULT_MAX_ATTEMPTS,
    SUBMIT_ARGUMENTS,
    NewExecution,
    canonical,
    check_arguments,
    prepare,
)
from fencepost.timing.clock import Clock, SystemClock
from fencepost.timing.durations import as_aware_utc, as_duration
from fencepost.timing.policies import DstFold, DstGap, Misfire, Overlap

#: The longest pause prune takes between batches, in seconds.
_PRUNE_YIELD_CAP = 0.1

#: Default lease duration in seconds.
DEFAULT_TTL = 30.0
#: Default duration of a command claim in seconds: short, so that a command taken by
#: a worker that does not hold the execution soon reaches the one that does.
DEFAULT_COMMAND_TTL = 5.0
#: The error text recorded when a completion's result is not acceptable JSON.
RESULT_INVALID = "result_invalid"
#: The error prefix of an execution a claim set aside: its stored inputs cannot be delivered.
PAYLOAD_UNREADABLE = payloads.PAYLOAD_UNREADABLE
#: Default window of :meth:`Store.stats`: the last hour.
DEFAULT_STATS_WINDOW = timedelta(hours=1)
#: Default window of :meth:`Store.slo`: the last 30 days.
DEFAULT_SLO_WINDOW = timedelta(days=30)
#: The states :meth:`Store.bucket_counts` counts by default: work not finished yet.
UNFINISHED_STATES = (State.SCHEDULED, State.RETRY_WAIT, State.RUNNING)
_MAX_LIMIT = 10_000
_MAX_PRUNE_BATCH = 100_000
_MAX_ERROR_CHARS = MAX_ERROR_CHARS
#: The longest name a filter or fence may carry (ids, job names, owners). Longer
#: than any stored name, so a filter never refuses what a store could hold.
_MAX_NAME_IN_FILTER = 1024


#: How a fenced verb decides its event: from the execution as this transaction holds
#: it, at the store's now (see :meth:`Store._fenced_change`).
Decide = Callable[[Execution, datetime], ExecutionEvent]


def always(event: ExecutionEvent) -> Decide:
    """A decision that does not depend on the row: ``event`` whatever it holds."""
    return lambda _current, _now: event


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Settings shared by every backend."""

    clock: Clock = field(default_factory=SystemClock)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    #: Source of retry jitter; inject a seeded ``random.Random`` for reproducible tests.
    rng: random.Random = field(default_factory=random.Random)
    max_payload_bytes: int = payloads.DEFAULT_MAX_PAYLOAD_BYTES
    num_buckets: int = DEFAULT_NUM_BUCKETS

    def __post_init__(self) -> None:
        if self.max_payload_bytes < 1:
            raise ValidationError(
                "max_payload_bytes", f"must be >= 1, got {self.max_payload_bytes}"
            )
        if self.num_buckets < 1:
            raise ValidationError("num_buckets", f"must be >= 1, got {self.num_buckets}")


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionFilter:
    """Validated filters of :meth:`Store.query`."""

    states: tuple[State, ...] | None
    job: str | None
    schedule: str | None
    bucket: int | None
    buckets: tuple[int, ...] | None  #: any of these (``bucket`` and ``buckets`` never both)
    due_after: datetime | None
    due_before: datetime | None
    limit: int
    after: str | None
    newest_first: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimRequest:
    """The validated arguments of :meth:`Store.claim`."""

    owner: str
    limit: int
    ttl: timedelta
    jobs: tuple[str, ...] | None
    buckets: tuple[int, ...] | None
    max_per_bucket: int | None
    versions: tuple[tuple[str, int], ...] | None
    ids: tuple[str, ...] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Materialization:
    """One validated item of :meth:`Store.materialize`."""

    schedule: Schedule  #: as acquired: its id, materializer and lease_until are the fence
    #: One per requested occurrence, in the caller's order; a repeated slot repeats the
    #: same object (it names one execution).
    occurrences: tuple[NewOccurrence, ...]
    watermark: datetime
    next_due: datetime

    def unique(self) -> list[NewOccurrence]:
        """The distinct occurrences, first appearance first."""
        return list({o.idempotency_key: o for o in self.occurrences}.values())

    def results(self, found: Mapping[str, Execution]) -> list[Execution]:
        """The executions by idempotency key, in occurrence order."""
        return [found[o.idempotency_key] for o in self.occurrences]


def stale_schedule(schedule: Schedule) -> StaleLease:
    """The answer of :meth:`Store.materialize` for a schedule whose lease no longer holds."""
    return StaleLease(schedule.id, schedule.materializer or "", 0, subject="schedule")


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """A completion prepared for a backend: the encoded result, or why it is invalid."""

    lease: Fence
    result: JSON
    result_json: str | None  #: None when the result was refused
    invalid: str | None  #: the ``result_invalid: ...`` error when refused


class Store(ABC):
    """A durable home for executions and schedules, each handed out under a fenced lease."""

    #: Whether writes from several threads of one process proceed at once (so a worker
    #: writes outcomes on a thread of their own, beside its claims). False for SQLite:
    #: one writer per file, a second would only wait for the lock.
    parallel_writes = False

    #: Where the data lives, for log lines and messages: a URL without credentials.
    location = "memory://"

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.clock = config.clock
        self._ids = IdGenerator()
        #: Migration versions this store applied when it opened (empty: already current).
        self.migrations_applied: list[int] = []
        #: The schema version the store runs on (0 for stores without a schema).
        self.schema_version = 0

    # -- submitting ------------------------------------------------------------------

    def submit(
        self,
        job: str,
        inputs: JSON = None,
        *,
        version: int | None = None,
        execute_at: datetime | None = None,
        delay: float | timedelta | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        timeout: float | timedelta | None = None,
        bucket_key: str | None = None,
        priority: int = 0,
        **deprecated: Any,
    ) -> Execution:
        """Store a new execution of ``job`` and return it (state SCHEDULED, epoch 0).

        ``execute_at`` (timezone-aware; naive is refused) or ``delay`` (seconds or
        timedelta from the store's now) set ``due_at``; neither means now.
        ``inputs`` must be JSON within ``max_payload_bytes`` (``None`` means ``{}``).
        ``version`` pins the execution to a version of its job (its ``job_version``);
        ``job_version=`` is its deprecated name (a :class:`DeprecationWarning`).

        With an ``idempotency_key``: if an execution with that key exists and was
        submitted with the same arguments, it is returned unchanged (whatever its
        state); with different arguments, :class:`IdempotencyConflict` is raised.
        """
        arguments = {
            "inputs": inputs,
            "version": version,
            "execute_at": execute_at,
            "delay": delay,
            "idempotency_key": idempotency_key,
            "max_attempts": max_attempts,
            "timeout": timeout,
            "bucket_key": bucket_key,
            "priority": priority,
        }
        if deprecated:
            unknown = sorted(set(deprecated) - {"job_version"})
            if unknown:
                raise TypeError(f"submit() got an unexpected keyword argument {unknown[0]!r}")
            if version is None:
                del arguments["version"]
            arguments = canonical(arguments | deprecated, stacklevel=2)
        return self._submit_or_find(job, arguments)[0]

    def submit_or_find(self, job: str, **arguments: Any) -> tuple[Execution, bool]:
        """:meth:`submit` (with its arguments), also saying whether this call created it.

        Returns ``(execution, created)``: ``created`` is False when an execution
        with the same ``idempotency_key`` (and the same arguments) already existed,
        including one stored by a concurrent submit an instant earlier, so of many
        racing submits with one key exactly one is told it created it.
        """
        unknown = set(arguments) - SUBMIT_ARGUMENTS
        if unknown:
            raise TypeError(f"submit_or_find() got an unexpected argument {sorted(unknown)[0]!r}")
        return self._submit_or_find(job, canonical(arguments))

    def _submit_or_find(self, job: str, arguments: Mapping[str, Any]) -> tuple[Execution, bool]:
        now = self.clock.now()
        new = self._prepare(now, _unix_ms(now), job, **arguments)
        execution = self._insert([new])[0]
        return execution, execution.id == new.id

    def submit_many(self, requests: Iterable[Mapping[str, Any]]) -> list[Execution]:
        """Submit a batch in one transaction; each mapping holds ``submit``'s arguments.

        Either every request is stored (or matched to an existing idempotent
        twin) or none is: a bad item raises :class:`ValidationError` with a field
        such as ``[3].inputs`` and nothing is written. Returns executions in
        request order. The batch is stored at one instant of the store's clock:
        it is every item's ``created_at`` and the origin of every ``delay``.
        """
        now = self.clock.now()
        unix_ms = _unix_ms(now)
        batch: list[NewExecution] = []
        for index, request in enumerate(requests):
            check_arguments(request, index=index)
            try:
                batch.append(self._prepare(now, unix_ms, **canonical(request)))
            except ValidationError as exc:
                raise ValidationError(f"[{index}].{exc.field}", exc.message) from None
        return self._insert(batch) if batch else []

    def _prepare(self, now: datetime, unix_ms: int, job: object, **arguments: Any) -> NewExecution:
        """Validate one request made at ``now`` (``unix_ms``: the same instant, for its id)."""
        return prepare(
            job,
            new_id=self._ids.new(unix_ms),
            now=now,
            max_payload_bytes=self.config.max_payload_bytes,
            num_buckets=self.config.num_buckets,
            **arguments,
        )

    @abstractmethod
    def _insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        """Insert validated executions in one transaction, each with a SUBMITTED transition.

        Idempotency: a new execution whose key already exists (in the store or
        earlier in ``batch``) is replaced by the existing one if ``request_hash``
        matches, else :class:`IdempotencyConflict` is raised and nothing of the
        batch is written.
        """

    # -- reading ---------------------------------------------------------------------

    @abstractmethod
    def get(self, execution_id: str) -> Execution:
        """The execution with this id, or :class:`NotFound`."""

    def query(
        self,
        *,
        state: State | str | Iterable[State | str] | None = None,
        job: str | None = None,
        schedule: str | None = None,
        bucket: int | None = None,
        due_after: datetime | None = None,
        due_before: datetime | None = None,
        limit: int = 100,
        after: str | None = None,
        buckets: Iterable[int] | None = None,
        newest_first: bool = False,
    ) -> Page:
        """Executions matching every given filter, ordered by id (creation order).

        ``state`` is one state or several; ``bucket`` one bucket, ``buckets`` any of
        several (each in ``[0, num_buckets)``; an empty collection matches nothing;
        giving both is a :class:`ValidationError` on ``buckets``);
        ``due_after <= due_at < due_before``;
        ``after`` is the ``next_cursor`` of the previous page (keyset pagination:
        ids strictly greater). ``next_cursor`` is None on the last page.
        ``newest_first`` orders by id descending instead (ids are time-ordered), and
        its cursor then means ids strictly smaller.
        """
        if bucket is not None and buckets is not None:
            raise ValidationError("buckets", "give bucket or buckets, not both")
        for name, value in (("job", job), ("schedule", schedule), ("after", after)):
            if value is not None and not isinstance(value, str):
                raise ValidationError(name, f"must be a string, got {value!r}")
        if not _cursor_storable(after):
            raise ValidationError("after", "must be a cursor from a previous page")
        if not all(v is None or storable(v) for v in (job, schedule)):
            return Page(items=[], next_cursor=None)  # no stored name holds such text
        return self._query(
            ExecutionFilter(
                states=_states(state),
                job=job,
                schedule=schedule,
                bucket=None
                if bucket is None
                else require_int(bucket, "bucket", low=0, high=self.config.num_buckets - 1),
                buckets=None if buckets is None else tuple(sorted(set(self._buckets(buckets)))),
                due_after=None if due_after is None else as_aware_utc(due_after, field="due_after"),
                due_before=None
                if due_before is None
                else as_aware_utc(due_before, field="due_before"),
                limit=require_int(limit, "limit", low=1, high=_MAX_LIMIT),
                after=after,
                newest_first=bool(newest_first),
            )
        )

    @abstractmethod
    def _query(self, filters: ExecutionFilter) -> Page:
        """Run a validated query: at most ``limit`` items, ``next_cursor`` if more exist."""

    def find(self, idempotency_key: str) -> Execution | None:
        """The execution submitted (or materialized) under ``idempotency_key``, or None.

        A materialized occurrence's key is ``schedule_id:slot``
        (:func:`fencepost.domain.schedules.occurrence_key`).
        """
        # Longer than a submit's key may be: occurrence keys carry a schedule id and a slot.
        key = require_name(idempotency_key, "idempotency_key", max_len=1024)
        return self._find(key)

    @abstractmethod
    def _find(self, idempotency_key: str) -> Execution | None:
        """Look up a validated key (see :meth:`find`)."""

    @abstractmethod
    def transitions(self, execution_id: str) -> list[Transition]:
        """The audit trail of one execution, oldest first; :class:`NotFound` if unknown."""

    def attempts(self, execution_id: str) -> list[Attempt]:
        """The attempts of one execution, oldest first (derived from its audit trail)."""
        return attempts_from_transitions(self.transitions(execution_id))

    # -- leasing ---------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        *,
        limit: int = 1,
        ttl: float | timedelta = DEFAULT_TTL,
        jobs: Iterable[str] | None = None,
        buckets: Iterable[int] | None = None,
        max_per_bucket: int | None = None,
        versions: Iterable[tuple[str, int]] | None = None,
        ids: Iterable[str] | None = None,
    ) -> list[Lease]:
        """Atomically lease up to ``limit`` claimable executions to ``owner`` for ``ttl``.

        Claimable, by the store's clock ``now``:

        * SCHEDULED or RETRY_WAIT with ``due_at <= now``;
        * RUNNING with ``lease_until <= now`` (expired) and ``attempt < max_attempts``
          (a takeover; the old attempt ends TIMED_OUT). Expired ones without
          attempts left are for :meth:`reap_expired` to fail.

        Restricted to ``jobs``, ``buckets`` and execution ``ids`` when given (``ids``
        serves a claim of one known execution, such as one occurrence of a schedule;
        it is not meant for long lists). With ``versions`` — the
        ``(job, job_version)`` pairs the claimer can run — an execution pinned to a
        version (``job_version`` not None) is claimable only if its pair is listed;
        unpinned executions run on any version and are not affected. Highest ``priority``
        first, then oldest ``due_at``, then id. Each claimed execution gets
        ``epoch + 1``, ``attempt + 1``, ``lease_owner = owner`` and
        ``lease_until = now + ttl``, and a CLAIMED transition. Executions locked
        by a concurrent claim are skipped, never waited for or taken twice.

        ``max_per_bucket`` caps RUNNING executions per bucket across every claimer
        that passes it (so one tenant's backlog cannot take every worker): a
        waiting execution is claimed only while its bucket has fewer RUNNING
        ones. Takeovers do not add to a bucket's count (the expired execution is
        already RUNNING). Claimers that pass no cap are not held to it.
        """
        return self._claim(
            ClaimRequest(
                owner=require_name(owner, "owner"),
                limit=require_int(limit, "limit", low=1, high=_MAX_LIMIT),
                ttl=as_duration(ttl, field="ttl"),
                jobs=None if jobs is None else _names(jobs, "jobs"),
                buckets=None if buckets is None else self._buckets(buckets),
                max_per_bucket=None
                if max_per_bucket is None
                else require_int(max_per_bucket, "max_per_bucket", low=1, high=INT32_MAX),
                versions=None if versions is None else _versions(versions),
                ids=None if ids is None else _names(ids, "ids"),
            )
        )

    @abstractmethod
    def _claim(self, request: ClaimRequest) -> list[Lease]:
        """Claim with validated arguments (see :meth:`claim`)."""

    @overload
    def heartbeat(
        self, fence: Lease, *, ttl: float | timedelta = ..., progress: JSON = ...
    ) -> Lease: ...

    @overload
    def heartbeat(
        self, fence: Fence, *, ttl: float | timedelta = ..., progress: JSON = ...
    ) -> LiveFence: ...

    def heartbeat(
        self, fence: Fence, *, ttl: float | timedelta = DEFAULT_TTL, progress: JSON = None
    ) -> LiveFence:
        """Extend a live lease to ``now + ttl`` and return the renewed lease.

        A heartbeat never shortens a lease: ``lease_until`` becomes the later of
        its current value and ``now + ttl``. Given a :class:`Lease`, the answer is
        that lease with its new ``lease_until``; given a bare :class:`Fence`, a
        :class:`LiveFence`.

        Fenced: only if the row is RUNNING with this owner and epoch and
        ``now < lease_until``; otherwise :class:`StaleLease` (audited, nothing
        else changes). ``progress`` (JSON), when given, replaces the stored progress.
        """
        outcome = self.heartbeat_many([(fence, progress)], ttl=ttl)[0]
        if isinstance(outcome, StaleLease):
            raise outcome
        return outcome

    @overload
    def heartbeat_many(
        self, beats: Sequence[tuple[Lease, JSON]], *, ttl: float | timedelta = ...
    ) -> list[Lease | StaleLease]: ...

    @overload
    def heartbeat_many(
        self, beats: Sequence[tuple[Fence, JSON]], *, ttl: float | timedelta = ...
    ) -> list[LiveFence | StaleLease]: ...

    def heartbeat_many(
        self,
        beats: Sequence[tuple[Fence, JSON]],
        *,
        ttl: float | timedelta = DEFAULT_TTL,
    ) -> Sequence[LiveFence | StaleLease]:
        """Renew many leases in one transaction; ``beats`` pairs a fence with its progress.

        Returns, in order, the renewed lease (as :meth:`heartbeat` answers) or the
        :class:`StaleLease` that refused it (each refusal audited). One stale
        lease does not stop the others.
        """
        duration = as_duration(ttl, field="ttl")
        _check_fences(fence for fence, _ in beats)
        encoded = [
            (fence, None if p is None else self._encode(p, "progress")) for fence, p in beats
        ]
        return [
            renewed(fence, outcome) if isinstance(outcome, datetime) else outcome
            for (fence, _), outcome in zip(
                beats, self._heartbeat(encoded, ttl=duration), strict=True
            )
        ]

    @abstractmethod
    def _heartbeat(
        self, beats: Sequence[tuple[Fence, str | None]], *, ttl: timedelta
    ) -> list[datetime | StaleLease]:
        """Renew validated fences (progress already encoded) in one transaction.

        Returns, per beat, the new ``lease_until`` or the (audited) refusal.
        """

    def complete(self, fence: Fence, result: JSON = None) -> Execution:
        """Record success: RUNNING -> SUCCEEDED with ``result``, if the lease is live.

        Fenced like :meth:`heartbeat`: a stale lease raises :class:`StaleLease` and
        changes nothing. A result that is not JSON (or exceeds the payload limit)
        fails the execution permanently with error ``result_invalid: ...`` and
        raises :class:`ResultInvalid`. Returns the finished execution.
        """
        _check_fences((fence,))
        outcome = self._outcome(fence, result)
        refused = self._complete([outcome])[0]
        if refused is not None:
            raise refused
        if outcome.invalid is not None:
            raise ResultInvalid(fence.execution_id, outcome.invalid)
        return self.get(fence.execution_id)

    def complete_many(self, results: Sequence[tuple[Fence, JSON]]) -> list[StaleLease | None]:
        """Complete many leases in one transaction; see :meth:`complete`.

        Returns, in order, ``None`` where the completion was accepted (the
        execution is SUCCEEDED, or FAILED with ``result_invalid``) or the
        :class:`StaleLease` that refused it. One stale lease does not stop the others.
        """
        _check_fences(fence for fence, _ in results)
        return self._complete([self._outcome(fence, result) for fence, result in results])

    def _outcome(self, fence: Fence, result: JSON) -> Outcome:
        try:
            text = payloads.encode(result, field="result", limit=self.config.max_payload_bytes)
        except ValidationError as exc:
            return Outcome(
                lease=fence, result=None, result_json=None, invalid=f"{RESULT_INVALID}: {exc}"
            )
        return Outcome(lease=fence, result=result, result_json=text, invalid=None)

    @abstractmethod
    def _complete(self, outcomes: Sequence[Outcome]) -> list[StaleLease | None]:
        """Apply prepared completions in one transaction (see :meth:`complete_many`)."""

    def fail(
        self,
        fence: Fence,
        error: str,
        *,
        retryable: bool = True,
        retry_in: float | timedelta | None = None,
        timed_out: bool = False,
    ) -> Execution:
        """Record a failed attempt, if the lease is live (else :class:`StaleLease`).

        Retryable with attempts left: RUNNING -> RETRY_WAIT, due after
        ``retry_in`` or the store's backoff (full jitter) for the attempt the
        stored row carries, read in the fenced transaction. Otherwise RUNNING ->
        FAILED, a dead letter. ``error`` is kept (truncated to 8,192 characters).

        ``timed_out=True`` says the worker stopped the attempt because it ran past
        the job's ``timeout``: the transition is TIMED_OUT instead of FAILED and the
        attempt ends TIMED_OUT (with ``error``); retries and dead letters as above.
        A stale lease is refused and audited (``STALE_REFUSED``) either way.
        """
        _check_fences((fence,))
        error = require_text(error, "error", max_len=_MAX_ERROR_CHARS)
        delay = (
            None if retry_in is None else as_duration(retry_in, field="retry_in", allow_zero=True)
        )
        retryable, timed_out = bool(retryable), bool(timed_out)

        def decide(current: Execution, now: datetime) -> ExecutionEvent:
            # The backoff grows with the stored attempt, read under the fence: the
            # caller need not know it (an HTTP worker sends only owner and epoch).
            wait = self.retry_delay(current.attempt) if delay is None else delay
            return failure(
                fence, error, retryable=retryable, timed_out=timed_out, retry_at=now + wait
            )

        return self._fenced_change(fence, "fail", decide)

    def release(self, fence: Fence, *, reason: str = "released") -> Execution:
        """Give a live lease back unfinished: RUNNING -> SCHEDULED, claimable at once.

        For a worker that stops (graceful shutdown) or cannot run the execution.
        The attempt ends ABANDONED and does not count against ``max_attempts``;
        the epoch keeps its value (the next claim raises it). Fenced like
        :meth:`complete`: a stale lease raises :class:`StaleLease`.
        """
        _check_fences((fence,))
        event = ExecutionReleased(
            owner=fence.owner, reason=require_name(reason, "reason", max_len=_MAX_ERROR_CHARS)
        )
        return self._fenced_change(fence, "release", always(event))

    def abort(self, fence: Fence, *, reason: str = "cancel requested") -> Execution:
        """Stop a running execution to honour a cancel: RUNNING -> CANCELLED, if the lease is live.

        For the worker holding the execution, once it has stopped the handler. The
        attempt ends CANCELLED; the lease is cleared; the audit records the lease
        owner as actor and ``reason``. Fenced like :meth:`complete`: a stale lease
        raises :class:`StaleLease` (audited ``STALE_REFUSED``) and changes nothing.

        Afterwards the lease no longer holds the execution, so a worker honouring a
        cancel *command* completes it (:meth:`complete_command`) before aborting.
        A client cancels an execution that has not started with :meth:`cancel`.
        """
        _check_fences((fence,))
        event = ExecutionAborted(
            owner=fence.owner, reason=require_name(reason, "reason", max_len=_MAX_ERROR_CHARS)
        )
        return self._fenced_change(fence, "abort", always(event))

    @abstractmethod
    def _fenced_change(self, fence: Fence, verb: str, decide: Decide) -> Execution:
        """Apply ``decide(current, now)`` under the fence in one transaction, or raise.

        Read (and hold) the execution; if ``fence`` does not hold it
        (:func:`fencepost.domain.machine.holds`) audit a ``STALE_REFUSED`` for
        ``verb`` and raise :class:`StaleLease`; else apply the decided event
        through :func:`fencepost.domain.machine.apply` and return the result.
        """

    def retry_delay(self, attempt: int) -> timedelta:
        """The backoff before retrying after failed attempt ``attempt`` (jittered)."""
        return self.config.retry.delay(attempt, self.config.rng)

    @abstractmethod
    def reap_expired(self, *, limit: int = 1000) -> int:
        """Time out up to ``limit`` RUNNING executions whose lease expired (``lease_until <= now``).

        Each one's attempt ends TIMED_OUT (a LEASE_EXPIRED transition); it moves
        to RETRY_WAIT with backoff if attempts remain, else to FAILED. Returns
        how many were reaped; call again while it returns ``limit``.
        """

    def wait_for_work(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for new work; True if woken early.

        Backends that can be told about new work (PostgreSQL's LISTEN/NOTIFY)
        return as soon as it is submitted; the others just wait out the timeout.
        Either way a worker polls again afterwards: claim decides, not this.
        """
        time.sleep(max(0.0, timeout))
        return False

    # -- commands --------------------------------------------------------------------------

    def request(
        self, execution_id: str, kind: CommandKind | str, *, actor: str = "client"
    ) -> Command:
        """Ask a running execution to ``kind`` (cancel, pause, resume); return the command.

        ``kind`` is a :class:`CommandKind` or its value (``"cancel"``); anything else
        raises :class:`ValidationError` on ``kind``. Unknown ids raise :class:`NotFound`.
        By the execution's state, in one transaction:

        * RUNNING: a PENDING command is stored, for the worker holding the
          execution to claim (:meth:`claim_commands`) and complete.
        * SCHEDULED or RETRY_WAIT, and ``kind`` is cancel: the execution is
          cancelled at once (the transition :meth:`cancel` makes, by ``actor``)
          and the command is stored DONE (``done_at = now``, no ``owner`` or ``epoch``).
        * Otherwise — finished, or pause/resume of an execution that is not
          running — :class:`NotRunning` is raised and nothing is stored.
        """
        try:
            command_kind = CommandKind(kind)
        except ValueError:
            known = ", ".join(k.value for k in CommandKind)
            raise ValidationError("kind", f"unknown command {kind!r} (one of {known})") from None
        return self._request(
            execution_id,
            command_kind,
            actor=require_name(actor, "actor"),
            command_id=self._ids.new(int(self.clock.now().timestamp() * 1000)),
        )

    @abstractmethod
    def _request(
        self, execution_id: str, kind: CommandKind, *, actor: str, command_id: str
    ) -> Command:
        """Store a validated request under ``command_id`` (see :meth:`request`).

        Decide with :func:`fencepost.domain.commands.on_request` on the execution
        as locked by this transaction.
        """

    def claim_commands(
        self,
        owner: str,
        execution_ids: Iterable[str],
        *,
        ttl: float | timedelta = DEFAULT_COMMAND_TTL,
        limit: int = 100,
    ) -> list[Command]:
        """Atomically claim up to ``limit`` open commands of ``execution_ids`` for ``owner``.

        Claimable, by the store's clock ``now``: PENDING commands, and CLAIMED ones
        whose claim has expired (``claim_until <= now``). Oldest request first
        (``requested_at``, then id). Each becomes CLAIMED with ``owner`` and
        ``claim_until = now + ttl``. Commands locked by a concurrent claim are
        skipped. This does not check that ``owner`` holds the executions:
        :meth:`complete_command` does. No ``execution_ids``: ``[]``, without a
        round trip to the database.
        """
        owner = require_name(owner, "owner")
        duration = as_duration(ttl, field="ttl")
        count = require_int(limit, "limit", low=1, high=_MAX_LIMIT)
        ids = _names(execution_ids, "execution_ids")
        if not ids:
            return []
        return self._claim_commands(owner, tuple(dict.fromkeys(ids)), ttl=duration, limit=count)

    @abstractmethod
    def _claim_commands(
        self, owner: str, execution_ids: tuple[str, ...], *, ttl: timedelta, limit: int
    ) -> list[Command]:
        """Claim with validated arguments (see :meth:`claim_commands`), in request order."""

    def complete_command(self, command: Command, lease: Fence) -> Command:
        """Mark a claimed command delivered: CLAIMED -> DONE, fenced on both sides.

        Only if, by the store's clock ``now``, the stored command is still CLAIMED
        by ``command.owner`` with ``now < claim_until``; ``lease`` belongs to that
        owner and to the command's execution; and the lease holds the execution
        (RUNNING, same owner, same epoch, ``now < lease_until``). Then ``done_at =
        now`` and ``epoch = lease.epoch``, and the DONE command is returned.
        Otherwise :class:`StaleLease` is raised and nothing changes.
        """
        _check_fences((lease,))
        if command.owner is None or command.owner != lease.owner:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        if command.execution_id != lease.execution_id:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        done = self._complete_command(command, lease)
        if done is None:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        return done

    @abstractmethod
    def _complete_command(self, command: Command, lease: Fence) -> Command | None:
        """Apply the fence of :meth:`complete_command`; the DONE command, or None if refused.

        ``command.owner == lease.owner`` and the execution ids already match.
        """

    def release_command(self, command: Command) -> None:
        """Give a claimed command back: CLAIMED by ``command.owner`` -> PENDING, claim cleared.

        For a worker that claimed a command and found it does not hold the
        execution: the holder can then claim it. A command no longer CLAIMED by
        ``command.owner`` (completed, or claimed by another) is left as it is.
        """
        if command.owner is not None:
            self._release_command(command)

    @abstractmethod
    def _release_command(self, command: Command) -> None:
        """Release a command claimed by ``command.owner`` (not None); else do nothing."""

    @abstractmethod
    def commands(self, execution_id: str) -> list[Command]:
        """Every command of one execution, oldest first; :class:`NotFound` if unknown."""

    # -- nodes -----------------------------------------------------------------------------

    def register_node(
        self,
        node_id: str | None = None,
        *,
        kind: str = "worker",
        buckets: Iterable[int] | None = None,
        ttl: float | timedelta = DEFAULT_TTL,
    ) -> Node:
        """Register (or renew) a live node; call again before ``ttl`` runs out to stay live.

        ``node_id`` defaults to ``host:pid``. ``buckets`` are the buckets the node
        claims from (None: any). A renewal keeps ``started_at`` and replaces the
        declared buckets. The node is live while ``now < expires_at = now + ttl``.
        """
        return self._register_node(
            require_name(node_id if node_id is not None else default_node_id(), "node_id"),
            kind=require_name(kind, "kind"),
            buckets=None if buckets is None else self._buckets(buckets),
            ttl=as_duration(ttl, field="ttl"),
        )

    @abstractmethod
    def _register_node(
        self, node_id: str, *, kind: str, buckets: tuple[int, ...] | None, ttl: timedelta
    ) -> Node:
        """Upsert a validated registration (see :meth:`register_node`)."""

    @abstractmethod
    def deregister_node(self, node_id: str) -> None:
        """Forget a node at once (a clean shutdown); unknown ids are ignored."""

    def clock_offset(self, written_at: datetime) -> float | None:
        """How far this process's clock is from the store's own record of a write, in seconds.

        ``written_at`` is the time this store's clock gave to a write that this
        process has just committed (a node registration's ``heartbeat_at``).
        Positive: this process's clock is ahead. None where this process's clock
        does not arbitrate leases: PostgreSQL uses the server's clock, and the
        memory store lives in one process. Workers refuse to reap or take over
        leases while the offset exceeds a lease length (see the README's clock rule).
        """
        return None

    @abstractmethod
    def nodes(self, *, live_only: bool = True) -> list[Node]:
        """Registered nodes by id: the live ones (by the store's clock) unless told otherwise."""

    def bucket_report(
        self, *, orphaned_after: float | timedelta = 300, limit: int = 1000
    ) -> BucketReport:
        """Buckets declared by two live nodes, buckets no live node covers, and orphans.

        Orphans are unfinished executions (SCHEDULED, RUNNING, RETRY_WAIT) in an
        unowned bucket whose row has not changed for ``orphaned_after``: work that
        nobody will pick up. At most ``limit`` of them, oldest change first.
        """
        report = ownership(self.nodes(live_only=True), self.config.num_buckets)
        if not report.unowned:
            return report
        orphans = self._orphans(
            tuple(report.unowned),
            older_than=as_duration(orphaned_after, field="orphaned_after", allow_zero=True),
            limit=require_int(limit, "limit", low=1, high=_MAX_LIMIT),
        )
        return replace(report, orphans=orphans)

    @abstractmethod
    def _orphans(
        self, buckets: tuple[int, ...], *, older_than: timedelta, limit: int
    ) -> list[Execution]:
        """Unfinished executions in ``buckets`` with ``updated_at <= now - older_than``."""

    # -- reports ---------------------------------------------------------------------

    def bucket_counts(
        self, *, states: State | str | Iterable[State | str] | None = None
    ) -> dict[int, int]:
        """How many executions each bucket holds, in one aggregate query.

        Restricted to ``states`` (one state or several; default: the unfinished
        ones, SCHEDULED, RETRY_WAIT and RUNNING). Only buckets holding at least one
        such execution appear, in bucket order. No states: ``{}``.
        """
        chosen = UNFINISHED_STATES if states is None else (_states(states, "states") or ())
        if not chosen:
            return {}
        return dict(sorted(self._bucket_counts(tuple(sorted(set(chosen)))).items()))

    @abstractmethod
    def _bucket_counts(self, states: tuple[State, ...]) -> dict[int, int]:
        """Executions per bucket in ``states`` (non-empty): one GROUP BY, zero counts left out."""

    def stats(self, *, window: float | timedelta = DEFAULT_STATS_WINDOW) -> Stats:
        """Operating figures at the store's now ``at``, and over ``(at - window, at]``.

        * ``by_state`` and ``by_job``: executions by state (every state listed,
          zeros included), in total and per job.
        * ``due_backlog``: SCHEDULED and RETRY_WAIT executions with ``due_at <= at``
          (``due_at == at`` counts), not counting occurrences held by an overlap
          policy (``due_at >= fencepost.timing.planning.HELD``).
        * From the audit trail, transitions with ``at - window < t.at <= at``:
          ``claim_lateness`` over CLAIMED transitions (``t.at - due_at``, clamped at
          zero, against the execution's *current* ``due_at``: for a retried
          execution that is the latest attempt's due time, so earlier claims count
          as on time; a takeover is late by the time since the execution fell due);
          ``stale_refused`` (STALE_REFUSED transitions); ``lease_expiries``
          (LEASE_EXPIRED transitions plus takeovers: CLAIMED from RUNNING).

        Percentiles are nearest-rank (see :class:`~fencepost.domain.reports.Lateness`).
        Transitions of pruned executions are gone and not counted. ``window`` is
        seconds or a timedelta, > 0.
        """
        return self._stats(as_duration(window, field="window"))

    @abstractmethod
    def _stats(self, window: timedelta) -> Stats:
        """Compute :meth:`stats` for a validated ``window``, all figures at one store now."""

    def slo(
        self,
        *,
        window: float | timedelta = DEFAULT_SLO_WINDOW,
        claim_within: float | timedelta = 10.0,
        finish_within: float | timedelta = 300.0,
        worst: int = 10,
    ) -> SloReport:
        """The scheduler's own service-level report, computed from stored timestamps.

        At the store's now ``at``, over the *due executions*: ``due_at`` in
        ``(at - window, at]``, excluding SKIPPED ones and CANCELLED ones that were
        never claimed (they were not meant to run). ``due_at`` is the execution's
        current one: after a retry or a replay, the due time of its latest attempt.

        * ``claimed``: an execution counts in ``total`` once it was claimed or
          ``at - due_at > claim_within``; it is ``met`` if its first CLAIMED
          transition came at most ``claim_within`` after ``due_at`` (``<=``).
        * ``finished``: in ``total`` once it is SUCCEEDED or FAILED, or ``at -
          due_at > finish_within``; ``met`` if it reached SUCCEEDED or FAILED (its
          terminal transition, at ``updated_at``) at most ``finish_within`` after
          ``due_at``.
        * ``share = met / total``, None when ``total`` is 0.
        * ``worst``: up to ``worst`` due executions by claim lateness, largest first
          (then ``due_at``, then id): ``first claim - due_at`` (at least zero), or
          ``at - due_at`` for those never claimed.

        ``window`` > 0, ``claim_within`` and ``finish_within`` >= 0 (seconds or
        timedeltas), ``0 <= worst <= 10000``; else :class:`ValidationError`.
        """
        return self._slo(
            window=as_duration(window, field="window"),
            claim_within=as_duration(claim_within, field="claim_within", allow_zero=True),
            finish_within=as_duration(finish_within, field="finish_within", allow_zero=True),
            worst=require_int(worst, "worst", low=0, high=_MAX_LIMIT),
        )

    @abstractmethod
    def _slo(
        self,
        *,
        window: timedelta,
        claim_within: timedelta,
        finish_within: timedelta,
        worst: int,
    ) -> SloReport:
        """Compute :meth:`slo` with validated arguments, at one store now."""

    # -- housekeeping ----------------------------------------------------------------

    def prune(
        self,
        *,
        older_than: float | timedelta,
        batch: int = 1000,
        dry_run: bool = False,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Delete finished executions last changed at least ``older_than`` ago; return how many.

        Eligible: SUCCEEDED, FAILED, CANCELLED or SKIPPED executions with
        ``updated_at <= cutoff``, where ``cutoff`` is the store's now when the call
        starts minus ``older_than`` (fixed for the whole call, so a prune ends even
        while workers keep finishing executions). Each goes with its audit trail,
        its payload row and its commands; afterwards :meth:`get`,
        :meth:`transitions` and :meth:`commands` raise :class:`NotFound` for it.

        Deleted oldest first (by ``updated_at``; on SQLite by creation, walking the
        time-ordered ids), in batches of at most ``batch``, each
        batch its own short transaction: claims and completions carry on between
        (and, on PostgreSQL, beside) them. After each full batch the call pauses
        as long as the batch took (at most 0.1 s), so that writers waiting for
        SQLite's lock get it. On PostgreSQL, rows a concurrent
        transaction holds (a replay) are skipped and left for a later prune; a
        replay that comes second finds the execution gone (:class:`NotFound`).
        ``on_batch(deleted_so_far)`` is called after each batch that deleted
        something; if it raises, the batches already done stay done. The call ends
        after a batch deletes fewer than ``batch``.

        ``dry_run=True`` deletes nothing and returns how many are eligible (one
        count; ``on_batch`` is not called). ``older_than`` is seconds or a
        timedelta, >= 0; ``1 <= batch <= 100000``; else :class:`ValidationError`.
        """
        age = as_duration(older_than, field="older_than", allow_zero=True)
        size = require_int(batch, "batch", low=1, high=_MAX_PRUNE_BATCH)
        if on_batch is not None and not callable(on_batch):
            raise ValidationError("on_batch", f"must be callable, got {on_batch!r}")
        cutoff = self._store_now() - age
        if dry_run:
            return self._count_prunable(cutoff)
        total = 0
        while True:
            started = time.monotonic()
            deleted = self._prune_batch(cutoff, size)
            total += deleted
            if deleted and on_batch is not None:
                on_batch(total)
            if deleted < size:
                return total
            # Step aside as long as the batch took: a claim waiting for SQLite's write
            # lock polls with growing sleeps and would otherwise find the next batch
            # holding it again and again. bench/prune_under_load.py: claim p99 during
            # a 1,000,000-execution prune 130 ms without the pause, 21 ms with it.
            time.sleep(min(_PRUNE_YIELD_CAP, time.monotonic() - started))

    @abstractmethod
    def _store_now(self) -> datetime:
        """The store's now (on PostgreSQL the server's clock unless a test pins it)."""

    @abstractmethod
    def _count_prunable(self, cutoff: datetime) -> int:
        """How many finished executions have ``updated_at <= cutoff``."""

    @abstractmethod
    def _prune_batch(self, cutoff: datetime, batch: int) -> int:
        """Delete up to ``batch`` prunable executions (oldest first) in one transaction.

        With each: its transitions, its ``execution_data`` row and its commands.
        Returns how many executions were deleted.
        """

    # -- operator verbs --------------------------------------------------------------

    def cancel(self, execution_id: str, *, actor: str = "client") -> Execution:
        """Cancel an execution that has not started: SCHEDULED/RETRY_WAIT -> CANCELLED.

        Raises :class:`NotFound`, or :class:`InvalidTransition` in any other state.
        """
        return self._transition(
            execution_id, ExecutionCancelled(actor=require_name(actor, "actor"))
        )

    def replay(self, execution_id: str, *, actor: str = "operator") -> Execution:
        """Revive a dead letter: FAILED -> SCHEDULED, due now, with a fresh attempt budget.

        Same execution id; the epoch keeps increasing. The audit records ``actor``.
        Raises :class:`NotFound`, or :class:`InvalidTransition` if not FAILED.
        """
        event = ExecutionReplayed(actor=require_name(actor, "actor"))
        return self._transition(execution_id, event)

    def reschedule(
        self,
        execution_id: str,
        due_at: datetime,
        *,
        actor: str = "scheduler",
        reason: str = "rescheduled",
    ) -> Execution:
        """Move a SCHEDULED execution's ``due_at`` (audited as RESCHEDULED with ``reason``).

        What an overlap policy uses to release a held occurrence. Raises
        :class:`NotFound`, or :class:`InvalidTransition` in any other state.
        """
        return self._transition(
            execution_id,
            ExecutionRescheduled(
                due_at=as_aware_utc(due_at, field="due_at"),
                actor=require_name(actor, "actor"),
                reason=require_name(reason, "reason", max_len=_MAX_ERROR_CHARS),
            ),
        )

    @abstractmethod
    def _transition(self, execution_id: str, event: ExecutionEvent) -> Execution:
        """Apply a caller's event (cancel, replay, reschedule) to one execution, in one
        transaction, through :func:`fencepost.domain.machine.apply` (which refuses what
        the state machine does not allow)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- schedules -------------------------------------------------------------------------

    def add_schedule(
        self,
        job: str,
        *,
        cron: str | None = None,
        every: float | timedelta | None = None,
        timezone: str = "UTC",
        inputs: JSON = None,
        job_version: int | None = None,
        misfire: Misfire | str = "coalesce",
        misfire_grace: float | timedelta = plans.DEFAULT_MISFIRE_GRACE,
        max_catch_up: int = plans.DEFAULT_MAX_CATCH_UP,
        overlap: Overlap | str = "allow",
        dst_gap: DstGap | str = "shift",
        dst_fold: DstFold | str = "once",
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        priority: int = 0,
        id: str | None = None,
        paused: bool = False,
    ) -> Schedule:
        """Store a schedule of ``job`` and return it.

        The rule is exactly one of ``cron`` (5 fields, or 6 with leading seconds,
        evaluated in the IANA ``timezone``) or ``every`` (seconds or a timedelta,
        > 0, on the UTC timeline: ``timezone`` must stay ``"UTC"``). Policies are
        given by name or enum member: ``misfire`` (``catch_up``, ``coalesce``,
        ``skip``) with ``misfire_grace`` (>= 0 s) and ``max_catch_up`` (>= 1);
        ``overlap`` (``allow``, ``skip``, ``buffer_one``, ``buffer_all``,
        ``replace``); ``dst_gap`` (``shift``, ``skip``), ``dst_fold`` (``once``,
        ``twice``). ``start_at`` and ``end_at`` are aware instants, ``end_at >
        start_at``. ``inputs`` must be JSON (``None`` means ``{}``); every
        materialized execution gets them, with ``max_attempts`` and ``priority``.
        Bad arguments raise :class:`ValidationError` naming the field; nothing is
        written.

        The new schedule's ``watermark`` is one microsecond before ``start_at``
        when that is in the future, else the store's now (slots strictly after
        the watermark are still to come); ``next_due`` is now, so a materializer
        looks at it at once; no materializer holds it.

        ``id`` (at most 200 characters) defaults to a new UUIDv7. If a schedule
        with that id exists and was added with the same arguments (after
        normalization: ``60`` and ``timedelta(seconds=60)`` are the same), it is
        returned unchanged, whatever happened to it since (updates, pauses);
        with different arguments :class:`IdempotencyConflict` is raised.
        """
        spec = plans.define(
            job,
            max_payload_bytes=self.config.max_payload_bytes,
            cron=cron,
            every=every,
            timezone=timezone,
            inputs=inputs,
            job_version=job_version,
            misfire=misfire,
            misfire_grace=misfire_grace,
            max_catch_up=max_catch_up,
            overlap=overlap,
            dst_gap=dst_gap,
            dst_fold=dst_fold,
            start_at=start_at,
            end_at=end_at,
            max_attempts=max_attempts,
            priority=priority,
            paused=paused,
        )
        if id is None:
            return self._add_schedule(spec, self._ids.new(int(self.clock.now().timestamp() * 1000)))
        return self._add_schedule(spec, plans.check_schedule_id(id))

    @abstractmethod
    def _add_schedule(self, spec: ScheduleSpec, schedule_id: str) -> Schedule:
        """Insert ``plans.new_schedule(spec, id=schedule_id, now=<the store's now>)``.

        Store ``spec.fingerprint()`` with it. If ``schedule_id`` exists, return the
        stored schedule when its fingerprint equals ``spec.fingerprint()``, else raise
        ``IdempotencyConflict(schedule_id, schedule_id, subject="schedule")``.
        """

    @abstractmethod
    def get_schedule(self, schedule_id: str) -> Schedule:
        """The schedule with this id, or :class:`NotFound` (``subject="schedule"``)."""

    def schedules(
        self,
        *,
        job: str | None = None,
        paused: bool | None = None,
        limit: int = 100,
        after: str | None = None,
        due_before: datetime | None = None,
    ) -> SchedulePage:
        """Schedules matching every given filter, ordered by id (code point order).

        ``due_before`` keeps only schedules with ``next_due <= due_before`` (an
        aware instant): those a materializer would take up by then, lease or not.
        ``after`` is the ``next_cursor`` of the previous page (ids strictly
        greater); ``next_cursor`` is None on the last page.
        """
        if paused is not None and not isinstance(paused, bool):
            raise ValidationError("paused", f"must be True, False or None, got {paused!r}")
        if after is not None and not isinstance(after, str):
            raise ValidationError("after", f"must be a cursor string, got {after!r}")
        if not _cursor_storable(after):
            raise ValidationError("after", "must be a cursor from a previous page")
        return self._list_schedules(
            job=None if job is None else require_name(job, "job"),
            paused=paused,
            limit=require_int(limit, "limit", low=1, high=_MAX_LIMIT),
            after=after,
            due_before=None if due_before is None else as_aware_utc(due_before, field="due_before"),
        )

    @abstractmethod
    def _list_schedules(
        self,
        *,
        job: str | None,
        paused: bool | None,
        limit: int,
        after: str | None,
        due_before: datetime | None,
    ) -> SchedulePage:
        """List with validated filters: at most ``limit`` items, ``next_cursor`` if more exist."""

    def update_schedule(self, schedule_id: str, /, **changes: Any) -> Schedule:
        """Change any of ``add_schedule``'s arguments except ``id``; return the schedule.

        The schedule after the change is validated as ``add_schedule`` would
        validate it (so a cron schedule switches to an interval with ``every=...,
        cron=None``; ``timezone`` then becomes ``"UTC"`` unless given). It takes
        effect for slots not yet materialized: the watermark is unchanged. Then
        ``next_due = now`` and the materializer lease is cleared, so a plan made
        from the old definition is refused (:meth:`materialize` answers it with
        :class:`StaleLease`) and a materializer plans again at once. The
        fingerprint that makes ``add_schedule`` idempotent stays that of the
        original arguments. Raises :class:`NotFound`, or :class:`ValidationError`
        (nothing written).
        """
        plans.check_changes(changes)
        limit = self.config.max_payload_bytes

        def decide(current: Schedule, now: datetime) -> Schedule:
            return plans.amend(current, changes, now=now, max_payload_bytes=limit)

        return self._change_schedule(schedule_id, decide)

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Pause a schedule: its slots are recorded SKIPPED ("paused") until it is resumed.

        ``next_due = now`` and the materializer lease is cleared (as for
        :meth:`update_schedule`). Pausing a paused schedule returns it unchanged.
        Raises :class:`NotFound`.
        """
        return self._change_schedule(
            schedule_id, lambda current, now: plans.pause(current, now=now)
        )

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Resume a paused schedule; ``next_due = now``, the materializer lease is cleared.

        Resuming a schedule that is not paused returns it unchanged. Raises :class:`NotFound`.
        """
        return self._change_schedule(
            schedule_id, lambda current, now: plans.resume(current, now=now)
        )

    @abstractmethod
    def _change_schedule(
        self, schedule_id: str, decide: Callable[[Schedule, datetime], Schedule | None]
    ) -> Schedule:
        """Read-decide-write one schedule in one transaction.

        Read it (:class:`NotFound`) and hold it; ``decide(current, now)`` returns the
        schedule to store, or None to leave it unchanged (then return ``current``). A
        ValidationError from ``decide`` writes nothing. Store every field of the
        decided schedule except ``id``, ``watermark`` and ``created_at``.
        """

    @abstractmethod
    def delete_schedule(self, schedule_id: str) -> None:
        """Remove a schedule and cancel its executions that have not started, in one transaction.

        Its SCHEDULED and RETRY_WAIT executions become CANCELLED (actor ``"schedule
        deleted"``); RUNNING and finished ones are left alone. A materializer holding
        it is refused afterwards (:class:`StaleLease`). Raises :class:`NotFound`.
        """

    def acquire_schedules(
        self, owner: str, *, limit: int = 100, ttl: float | timedelta = DEFAULT_TTL
    ) -> list[Schedule]:
        """Atomically lease up to ``limit`` due schedules to the materializer ``owner``.

        Eligible, by the store's clock ``now``: ``next_due <= now``, and no live
        materializer lease (``lease_until`` is None, or ``lease_until <= now``:
        at that instant a lease has expired). Paused schedules are eligible too
        (their slots are recorded SKIPPED). Oldest ``next_due`` first, then id.
        Each gets ``materializer = owner`` and ``lease_until = now + ttl``.
        Schedules locked by a concurrent acquire are skipped: two callers never
        get the same schedule. Returned in that order, as stored after the change.
        """
        return self._acquire_schedules(
            require_name(owner, "owner"),
            limit=require_int(limit, "limit", low=1, high=_MAX_LIMIT),
            ttl=as_duration(ttl, field="ttl"),
        )

    @abstractmethod
    def _acquire_schedules(self, owner: str, *, limit: int, ttl: timedelta) -> list[Schedule]:
        """Acquire with validated arguments (see :meth:`acquire_schedules`)."""

    def materialize(
        self, batch: Sequence[tuple[Schedule, Sequence[Occurrence], datetime, datetime]]
    ) -> list[list[Execution] | StaleLease]:
        """Store the plans of acquired schedules, in one transaction for the whole batch.

        Each item is ``(schedule as acquired, occurrences, new_watermark, next_due)``.
        Fenced per schedule: only if the stored schedule still has this
        ``materializer`` and ``lease_until`` and ``now < lease_until``. Otherwise
        (lease expired, taken again, cleared by an update, pause or resume, or the
        schedule deleted) that item's answer is ``StaleLease(schedule.id,
        materializer, 0)`` and nothing is written for it; the other items are.

        A fenced item inserts each occurrence as an execution of the schedule's
        job, job_version, inputs, max_attempts and priority (as stored: the fence
        guarantees they did not change since the acquire), with ``schedule_id``,
        ``slot = slot_text(occurrence.slot)``, ``due_at = occurrence.due_at`` and
        ``idempotency_key = "{schedule_id}:{slot}"``; its bucket comes from its
        execution id, as for a submit without ``bucket_key``. Insert-if-absent:
        an execution with that key is left exactly as it is and returned (never
        :class:`IdempotencyConflict`: two materializers may plan one slot
        differently). An occurrence with ``skipped`` is stored SUBMITTED, then
        SKIPPED with that reason (audited, queryable, never claimed). Then
        ``watermark = max(watermark, new_watermark)``, ``next_due`` as given, and
        the lease is cleared.

        Returns, per item, its executions in occurrence order (a repeated slot
        repeats its execution), or the :class:`StaleLease`. A schedule repeated in
        one batch is applied in order: the repeat finds its lease cleared.
        """
        now = self.clock.now()
        items: list[Materialization] = []
        for index, item in enumerate(batch):
            field = f"[{index}]"
            if not isinstance(item, tuple | list) or len(item) != 4:
                raise ValidationError(
                    field, f"must be (schedule, occurrences, watermark, next_due), got {item!r}"
                )
            schedule, occurrences, watermark, next_due = item
            if not isinstance(schedule, Schedule):
                raise ValidationError(f"{field}.schedule", f"must be a Schedule, got {schedule!r}")
            items.append(
                Materialization(
                    schedule=schedule,
                    occurrences=self._new_occurrences(
                        schedule.id, occurrences, f"{field}.occurrences", now
                    ),
                    watermark=as_aware_utc(watermark, field=f"{field}.watermark"),
                    next_due=as_aware_utc(next_due, field=f"{field}.next_due"),
                )
            )
        return self._materialize(items) if items else []

    @abstractmethod
    def _materialize(self, items: Sequence[Materialization]) -> list[list[Execution] | StaleLease]:
        """Apply validated items in one transaction (see :meth:`materialize`).

        Decide the fence with :func:`fencepost.domain.schedules.holds_lease` (or
        its SQL equivalent); answer a refused item with :func:`stale_schedule`.
        """

    def add_occurrences(
        self, schedule_id: str, occurrences: Sequence[Occurrence]
    ) -> list[Execution]:
        """Store occurrences of a schedule without a lease (e.g. a backfill).

        Inserted exactly as :meth:`materialize` inserts them (insert-if-absent,
        SKIPPED ones audited), in one transaction; the schedule itself (watermark,
        next_due, lease) is not changed. Returns the executions in occurrence
        order. Raises :class:`NotFound` if the schedule does not exist.
        """
        if not isinstance(schedule_id, str):
            raise ValidationError("schedule_id", f"must be a schedule id, got {schedule_id!r}")
        news = self._new_occurrences(schedule_id, occurrences, "occurrences", self.clock.now())
        return self._add_occurrences(schedule_id, news)

    @abstractmethod
    def _add_occurrences(
        self, schedule_id: str, occurrences: tuple[NewOccurrence, ...]
    ) -> list[Execution]:
        """Insert validated occurrences if absent (see :meth:`add_occurrences`)."""

    def release_schedules(self, schedules: Iterable[Schedule]) -> None:
        """Give materializer leases back unchanged (a materializer stopping).

        Each schedule, as acquired, whose stored row still carries its
        ``materializer`` and ``lease_until`` gets its lease cleared; nothing else
        changes (``next_due`` stays, so another materializer may take it at once).
        Schedules leased again by someone else, or not leased, are left alone.
        """
        held = []
        for index, schedule in enumerate(schedules):
            if not isinstance(schedule, Schedule):
                raise ValidationError(f"[{index}]", f"must be a Schedule, got {schedule!r}")
            if schedule.materializer is not None and schedule.lease_until is not None:
                held.append(schedule)
        if held:
            self._release_schedules(held)

    @abstractmethod
    def _release_schedules(self, schedules: Sequence[Schedule]) -> None:
        """Clear the leases still held by these (leased) schedules, in one transaction."""

    def _new_occurrences(
        self, schedule_id: str, occurrences: object, field: str, now: datetime
    ) -> tuple[NewOccurrence, ...]:
        if isinstance(occurrences, str | bytes) or not isinstance(occurrences, Iterable):
            raise ValidationError(field, f"must be a sequence of Occurrence, got {occurrences!r}")
        by_key: dict[str, NewOccurrence] = {}
        out = []
        unix_ms = int(now.timestamp() * 1000)
        for index, value in enumerate(occurrences):
            occurrence = plans.check_occurrence(value, f"{field}[{index}]")
            new = plans.new_occurrence(
                schedule_id,
                occurrence,
                new_id=self._ids.new(unix_ms),
                num_buckets=self.config.num_buckets,
            )
            out.append(by_key.setdefault(new.idempotency_key, new))
        return tuple(out)

    # -- helpers shared by backends ------------------------------------------------------

    def _encode(self, value: JSON, field: str) -> str:
        return payloads.encode(value, field=field, limit=self.config.max_payload_bytes)

    def _buckets(self, buckets: Iterable[int]) -> tuple[int, ...]:
        if not isinstance(buckets, Iterable):
            raise ValidationError("buckets", f"must be a collection of buckets, got {buckets!r}")
        values = tuple(buckets)
        n = self.config.num_buckets
        for b in values:
            require_int(b, "buckets", low=0, high=n - 1)
        return values


def failure(
    lease: Fence,
    error: str,
    *,
    retryable: bool,
    timed_out: bool,
    retry_at: datetime,
) -> ExecutionFailed | ExecutionTimedOut:
    """The event of a validated :meth:`Store.fail`, decided at the store's now."""
    if timed_out:
        return ExecutionTimedOut(
            owner=lease.owner, error=error, retryable=retryable, retry_at=retry_at
        )
    return ExecutionFailed(owner=lease.owner, error=error, retryable=retryable, retry_at=retry_at)


def claimed_inputs(texts: Sequence[str]) -> tuple[list[JSON], dict[int, str]]:
    """Decode the stored inputs of claimed rows, inside the claim's transaction.

    Returns the values and, by index, why a row's inputs cannot be delivered: a
    row stored before the payload rule (or by another tool) may be nested too deep
    for a response to encode, or not even decode. The claim sets those aside with
    :func:`set_aside` before it commits, so it never leases what it cannot deliver
    and one such row does not take its batch with it.
    """
    problems: dict[int, str] = {}
    try:
        values = payloads.decode_all(list(texts))
    except (ValueError, RecursionError):  # one bad text spoils the joined parse
        values = []
        for index, text in enumerate(texts):
            try:
                values.append(payloads.decode(text))
            except (ValueError, RecursionError) as exc:
                values.append(None)
                problems[index] = f"do not decode ({type(exc).__name__})"
    for index, (value, text) in enumerate(zip(values, texts, strict=True)):
        if index not in problems:
            problem = payloads.check_stored(value, text)
            if problem is not None:
                problems[index] = problem
    return values, problems


def set_aside(lease: Fence, problem: str, now: datetime) -> ExecutionFailed:
    """The event that fails a claimed execution whose stored inputs cannot be delivered.

    A permanent failure (retrying cannot mend stored inputs), recorded as
    ``payload_unreadable: inputs ...`` in the execution's error and audit trail.
    """
    return ExecutionFailed(
        owner=lease.owner,
        error=f"{PAYLOAD_UNREADABLE}: inputs {problem}",
        retryable=False,
        retry_at=now,
    )


def renewed(fence: Fence, lease_until: datetime) -> LiveFence:
    """What a heartbeat answers: the lease (or a bare fence) with its new ``lease_until``."""
    if isinstance(fence, LiveFence):
        return replace(fence, lease_until=lease_until)
    return LiveFence(
        execution_id=fence.execution_id,
        owner=fence.owner,
        epoch=fence.epoch,
        lease_until=lease_until,
    )


def _unix_ms(now: datetime) -> int:
    """``now`` in milliseconds since the epoch: the time part of the ids made at ``now``."""
    return int(now.timestamp() * 1000)


def default_node_id() -> str:
    """``host:pid``: unique per live process, recognisable in an operator's listing."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _states(
    value: State | str | Iterable[State | str] | None, field: str = "state"
) -> tuple[State, ...] | None:
    if value is None:
        return None
    if not isinstance(value, str) and not isinstance(value, Iterable):
        raise ValidationError(field, f"must be a state or several, got {value!r}")
    items = [value] if isinstance(value, str) else list(value)
    states = []
    for item in items:
        try:
            states.append(State(item))
        except ValueError:
            known = ", ".join(s.value for s in State)
            raise ValidationError(field, f"unknown state {item!r} (one of {known})") from None
    return tuple(states)


def _names(values: Iterable[str], field: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise ValidationError(field, f"must be a collection of names, not the string {values!r}")
    names = tuple(values)
    for name in names:
        require_name(name, field, max_len=_MAX_NAME_IN_FILTER)
    return names


def _cursor_storable(after: str | None) -> bool:
    """A cursor without lone surrogates (no id holds one; U+0000 sorts like its prefix)."""
    return after is None or after.isascii() or storable(after.replace("\x00", ""))


def _check_fences(leases: Iterable[Fence]) -> None:
    """Refuse a fence whose owner no store can hold (a claim never leases to one).

    A caller may build a lease by hand (the HTTP API does, from a request); its
    owner is checked like a claim's, so U+0000 is a ValidationError on every
    backend rather than a database error on one.
    """
    for lease in leases:
        require_name(lease.owner, "owner", max_len=_MAX_NAME_IN_FILTER)


def _versions(values: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    if isinstance(values, str):
        raise ValidationError(
            "versions", f"must be (job, version) pairs, not the string {values!r}"
        )
    pairs = []
    for pair in values:
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise ValidationError("versions", f"must hold (job, version) pairs, got {pair!r}")
        job, version = pair
        require_name(job, "versions")
        require_int(version, "versions", low=1, high=INT32_MAX)
        pairs.append((job, version))
    return tuple(pairs)

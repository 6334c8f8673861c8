"""The frozen domain model: what the store keeps and hands out.

All datetimes are timezone-aware UTC. JSON payloads (``inputs``, ``result``,
``progress``) are plain Python values that round-trip through :mod:`json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from fencepost.domain.checks import DEFAULT_QUEUE
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.domain.slots import slot_builder
from fencepost.domain.states import AttemptOutcome, CommandKind, CommandState, Event, State

#: A JSON value as Python holds it (dict, list, str, int, float, bool or None).
JSON = Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Execution:
    """One run a client asked for, or that a schedule materialized."""

    id: str  #: time-ordered UUIDv7 text; stable across retries and replays
    job: str
    job_version: int | None
    inputs: JSON  #: frozen at submit
    state: State
    due_at: datetime  #: claimable once this has passed (also the retry time in RETRY_WAIT)
    priority: int  #: higher is claimed first
    queue: str  #: the named queue it waits in; workers may claim from some queues only
    attempt: int  #: attempts started since submit (or since the last replay)
    max_attempts: int
    epoch: int  #: fencing token; +1 on every claim, never decreases
    lease_owner: str | None
    lease_until: datetime | None
    timeout: timedelta | None  #: how long one attempt may run (enforced by workers)
    idempotency_key: str | None
    schedule_id: str | None
    slot: str | None  #: the occurrence's nominal UTC instant, for materialized executions
    bucket: int
    bucket_key: str | None
    result: JSON  #: set when SUCCEEDED
    error: str | None  #: the latest failure, if any
    progress: JSON  #: the latest checkpoint a worker reported
    created_at: datetime
    updated_at: datetime
    #: The key its limits count it under, in a per-key scope (a tenant, a customer,
    #: a downstream host); None shares the scope's keyless allowance.
    limit_key: str | None = None
    #: Its planned time, which nothing moves (retries, takeovers and replays move
    #: ``due_at``): the slot of a schedule's occurrence, the requested time of a
    #: submit. The service-level report measures from it. None only in an Execution
    #: built by hand.
    planned_at: datetime | None = None


class Runs(Protocol):
    """What a new execution runs: a submission, or the schedule an occurrence belongs to."""

    @property
    def job(self) -> str: ...
    @property
    def job_version(self) -> int | None: ...
    @property
    def inputs(self) -> JSON: ...
    @property
    def priority(self) -> int: ...
    @property
    def queue(self) -> str: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def limit_key(self) -> str | None: ...


class Placed(Protocol):
    """Where a new execution stands: its id, when it is due, its key and its bucket."""

    @property
    def id(self) -> str: ...
    @property
    def due_at(self) -> datetime: ...
    @property
    def idempotency_key(self) -> str | None: ...
    @property
    def bucket(self) -> int: ...


#: ``Execution(**fields)`` at a half of the cost (see :func:`slot_builder`): the store
#: builds one per submitted item.
_build_execution = slot_builder(Execution)


def scheduled_execution(
    runs: Runs,
    placed: Placed,
    *,
    created_at: datetime,
    due_at: datetime | None = None,
    timeout: timedelta | None = None,
    bucket_key: str | None = None,
    schedule_id: str | None = None,
    slot: str | None = None,
) -> Execution:
    """A new execution as it stands right after insertion: SCHEDULED, never claimed.

    The one place that spells out what "not started yet" means (attempt and epoch
    0, no lease, no result, error or progress); a submission and a schedule's
    occurrence both become an execution through it. ``due_at`` is the time a
    backend resolved on its own clock, when it is not ``placed.due_at``.
    """
    return _build_execution(
        # what it runs
        job=runs.job,
        job_version=runs.job_version,
        inputs=runs.inputs,
        priority=runs.priority,
        queue=runs.queue,
        max_attempts=runs.max_attempts,
        timeout=timeout,
        # where it stands
        id=placed.id,
        due_at=placed.due_at if due_at is None else due_at,
        idempotency_key=placed.idempotency_key,
        bucket=placed.bucket,
        bucket_key=bucket_key,
        schedule_id=schedule_id,
        slot=slot,
        created_at=created_at,
        updated_at=created_at,
        # not started yet
        state=State.SCHEDULED,
        attempt=0,
        epoch=0,
        lease_owner=None,
        lease_until=None,
        result=None,
        error=None,
        progress=None,
        limit_key=runs.limit_key,
        # An occurrence's planned time is its slot even when an overlap policy holds
        # it (due_at far ahead until the run before it ends); a submit's, its due time.
        planned_at=(placed.due_at if due_at is None else due_at)
        if slot is None
        else datetime.fromisoformat(slot),
    )


# Fence and LiveFence have no __slots__ of their own, so that Lease's slots name every
# one of its fields (code that lists a lease's fields by its __slots__ keeps working).
@dataclass(frozen=True, kw_only=True)
class Fence:
    """What a fenced write names: ``owner`` holding ``execution_id`` at ``epoch``.

    Pass it to ``heartbeat``, ``complete``, ``fail``, ``release``, ``abort`` and
    ``complete_command``: they succeed only while the stored row still carries this
    owner and epoch and the lease is live (the store's clock decides). Everything
    else such a write needs (the attempt number for the backoff) is read inside
    its own transaction.
    """

    execution_id: str
    owner: str
    epoch: int


@dataclass(frozen=True, kw_only=True)
class LiveFence(Fence):
    """A fence with the ``lease_until`` the store last gave it (what a heartbeat returns)."""

    lease_until: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Lease(LiveFence):
    """A fence plus what the claim delivered: proof of holding until ``lease_until``.

    A lease is a :class:`Fence`: pass it back to ``complete``, ``fail`` and
    ``heartbeat`` as it is.
    """

    #: The execution's ``due_at`` when it was claimed (for a takeover, its current one):
    #: claim lateness is measured from it. Heartbeats carry it unchanged.
    due_at: datetime
    attempt: int
    max_attempts: int
    job: str
    job_version: int | None
    inputs: JSON
    timeout: timedelta | None
    schedule_id: str | None
    slot: str | None
    #: The execution's queue (a worker counts its per-queue concurrency by it).
    queue: str = DEFAULT_QUEUE
    #: The W3C trace context its submitter stored (a JSON object of ``traceparent`` and
    #: ``tracestate``; see :mod:`fencepost.tracing`), or None: submitted untraced.
    trace_context: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Transition:
    """One line of the append-only audit trail.

    ``epoch`` is the execution's epoch after the change; for ``STALE_REFUSED``
    it is the epoch the refused caller presented, and ``actor`` is that caller.
    """

    execution_id: str
    seq: int  #: order of transitions within the store
    event: Event
    from_state: State | None  #: None for the SUBMITTED transition that created the row
    to_state: State
    epoch: int
    actor: str | None
    reason: str | None
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    """One try by one worker: the span of one lease (one epoch)."""

    execution_id: str
    attempt: int
    epoch: int
    owner: str
    started_at: datetime
    ended_at: datetime | None  #: None while it is still running
    outcome: AttemptOutcome | None
    error: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """A control request (cancel, pause, resume) addressed to a running execution.

    The worker holding the execution claims it under a short lease (``owner``,
    ``claim_until``) and completes it with its execution lease; a worker that finds
    it does not hold the execution releases it for the holder instead.
    """

    id: str  #: time-ordered UUIDv7 text
    execution_id: str
    kind: CommandKind
    state: CommandState
    requested_by: str  #: the actor who asked
    requested_at: datetime
    owner: str | None  #: the worker that claimed it last (kept once DONE)
    claim_until: datetime | None  #: the claim is live strictly before this (None unless CLAIMED)
    epoch: int | None  #: the execution epoch it was delivered to; set on completion
    done_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Page:
    """One page of a keyset-paginated query; pass ``next_cursor`` as ``after``."""

    items: list[Execution]
    next_cursor: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Schedule:
    """A recurring job: a rule (``cron`` in ``timezone``, or ``every``) and its policies.

    A materializer turns its occurrences into executions ahead of time: it leases
    the schedule (``materializer``, ``lease_until``) when ``next_due`` has passed,
    inserts the occurrences after ``watermark`` and moves both on.
    """

    id: str  #: given by the user, or a UUIDv7
    job: str
    job_version: int | None
    inputs: JSON  #: every materialized execution gets a copy
    cron: str | None  #: normalized cron expression; exactly one of cron / every is set
    every: timedelta | None  #: a fixed interval on the UTC timeline
    timezone: str  #: IANA name the cron runs in ("UTC" for intervals)
    dst_gap: DstGap
    dst_fold: DstFold
    misfire: Misfire
    misfire_grace: timedelta
    max_catch_up: int
    overlap: Overlap
    start_at: datetime | None  #: no slot before this
    end_at: datetime | None  #: no slot after this (a slot at end_at fires)
    max_attempts: int
    priority: int
    queue: str  #: every materialized execution waits in this queue
    paused: bool
    watermark: datetime  #: every slot <= watermark has been materialized or recorded
    next_due: datetime  #: when a materializer should next look at it
    materializer: str | None  #: the materializer holding it (a short lease)
    lease_until: datetime | None  #: the materializer's lease is live strictly before this
    created_at: datetime
    #: When a client last changed it (update, pause, resume); materializing does not count.
    updated_at: datetime
    #: The limit key every materialized execution carries (see Execution.limit_key).
    limit_key: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Occurrence:
    """One slot of a schedule, as a materializer planned it.

    ``skipped`` is the reason policy decided not to run it (``"misfire: ..."``,
    ``"overlap: ..."``, ``"paused"``): it is stored SKIPPED, with that reason.
    """

    slot: datetime  #: the nominal fire instant (aware; stored as UTC text, see slot_text)
    due_at: datetime  #: when the execution becomes claimable
    skipped: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SchedulePage:
    """One page of schedules, ordered by id; pass ``next_cursor`` as ``after``."""

    items: list[Schedule]
    next_cursor: str | None

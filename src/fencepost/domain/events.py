"""What can happen to an execution, as past-tense frozen values.

Each event names its :class:`~fencepost.domain.states.Event` kind; the state
machine (:mod:`fencepost.domain.machine`) decides what it does to an execution.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from fencepost.domain.models import JSON
from fencepost.domain.states import Event


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionClaimed:
    """A worker took the lease; epoch and attempt go up by one."""

    kind: ClassVar[Event] = Event.CLAIMED
    owner: str
    lease_until: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionCompleted:
    """The lease holder reported success with a (valid JSON) result."""

    kind: ClassVar[Event] = Event.COMPLETED
    owner: str
    result: JSON


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionFailed:
    """The lease holder reported a failure.

    ``retry_at`` is when a retry becomes due if the failure is retryable and
    attempts remain; otherwise the execution becomes a dead letter.
    """

    kind: ClassVar[Event] = Event.FAILED
    owner: str
    error: str
    retryable: bool
    retry_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionTimedOut:
    """The lease holder stopped an attempt that ran past the job's ``timeout``.

    Like a failure: a retry at ``retry_at`` if ``retryable`` and attempts remain,
    otherwise a dead letter. The attempt ends TIMED_OUT with ``error`` kept.
    """

    kind: ClassVar[Event] = Event.TIMED_OUT
    owner: str
    error: str
    retry_at: datetime
    retryable: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaseExpired:
    """The reaper found the lease expired: the attempt TIMED_OUT."""

    kind: ClassVar[Event] = Event.LEASE_EXPIRED
    retry_at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionReleased:
    """The lease holder gave the execution back unfinished (e.g. on shutdown).

    The attempt ends ABANDONED and does not count against ``max_attempts``.
    """

    kind: ClassVar[Event] = Event.RELEASED
    owner: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionSnoozed:
    """The lease holder gave the execution back until ``due_at`` (its handler snoozed).

    Like a release, the attempt (ending SNOOZED) does not count against
    ``max_attempts``; unlike one, the execution is due only at ``due_at``.
    ``reason`` is the audit's, and says for how long.
    """

    kind: ClassVar[Event] = Event.SNOOZED
    owner: str
    due_at: datetime
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionCancelled:
    """A client cancelled an execution that had not started."""

    kind: ClassVar[Event] = Event.CANCELLED
    actor: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionAborted:
    """The lease holder honoured a cancel command and stopped the running execution.

    A CANCELLED event like :class:`ExecutionCancelled`, but from RUNNING only and
    fenced by the lease; the attempt ends CANCELLED.
    """

    kind: ClassVar[Event] = Event.CANCELLED
    owner: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionSkipped:
    """Policy decided not to run a materialized occurrence, or its schedule was paused."""

    kind: ClassVar[Event] = Event.SKIPPED
    reason: str
    #: Who decided: the one who paused the schedule; None for a materializer's policy.
    actor: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionReplayed:
    """An operator revived a dead letter; it gets a fresh attempt budget."""

    kind: ClassVar[Event] = Event.REPLAYED
    actor: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionRescheduled:
    """A waiting execution was given a new due time (a held occurrence released)."""

    kind: ClassVar[Event] = Event.RESCHEDULED
    due_at: datetime
    actor: str
    reason: str


ExecutionEvent = (
    ExecutionClaimed
    | ExecutionCompleted
    | ExecutionFailed
    | ExecutionTimedOut
    | LeaseExpired
    | ExecutionReleased
    | ExecutionSnoozed
    | ExecutionCancelled
    | ExecutionAborted
    | ExecutionSkipped
    | ExecutionReplayed
    | ExecutionRescheduled
)

"""States, events and attempt outcomes: each named once, here."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """Lifecycle state of an execution. Values equal names (they are stored as text)."""

    #: Waiting for ``due_at``; claimable once it has passed.
    SCHEDULED = "SCHEDULED"
    #: Held by a worker under a lease (``lease_owner``, ``epoch``, ``lease_until``).
    RUNNING = "RUNNING"
    #: Failed retryably; claimable again once the backoff (``due_at``) has passed.
    RETRY_WAIT = "RETRY_WAIT"
    #: Terminal: one completion was accepted and its result stored.
    SUCCEEDED = "SUCCEEDED"
    #: Terminal dead letter: permanent failure or attempts exhausted. ``replay`` revives it.
    FAILED = "FAILED"
    #: Terminal: cancelled before it ran, or a cancel command was honoured.
    CANCELLED = "CANCELLED"
    #: Terminal: a materialized occurrence that policy chose not to run (reason recorded).
    SKIPPED = "SKIPPED"

    @property
    def is_terminal(self) -> bool:
        """True for states no event leaves except an operator's ``replay``."""
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED, State.SKIPPED})

#: States whose executions a claim may take once ``due_at`` has passed.
WAITING_STATES = (State.SCHEDULED, State.RETRY_WAIT)


class Event(StrEnum):
    """What happened to an execution; recorded on every audit transition."""

    #: The execution was created by a submit (from-state is empty).
    SUBMITTED = "SUBMITTED"
    #: A worker took a lease; the epoch went up by one.
    CLAIMED = "CLAIMED"
    #: The holder renewed its lease (recorded only in counters, not as a transition).
    HEARTBEAT = "HEARTBEAT"
    #: The previous lease ran out; its attempt ended TIMED_OUT.
    LEASE_EXPIRED = "LEASE_EXPIRED"
    #: The holder reported success and the result was stored.
    COMPLETED = "COMPLETED"
    #: The holder reported a failure (retryable or not).
    FAILED = "FAILED"
    #: A worker stopped an attempt that ran past its job's timeout.
    TIMED_OUT = "TIMED_OUT"
    #: The holder gave the lease back unfinished (e.g. graceful shutdown).
    RELEASED = "RELEASED"
    #: The holder gave the execution back until a time its handler chose (``snooze``);
    #: the attempt does not count. The reason says for how long.
    SNOOZED = "SNOOZED"
    #: A client stopped an execution before it started, or its lease holder honoured
    #: a cancel command (``abort``).
    CANCELLED = "CANCELLED"
    #: Policy (misfire, overlap) decided not to run a materialized occurrence.
    SKIPPED = "SKIPPED"
    #: An operator revived a dead letter.
    REPLAYED = "REPLAYED"
    #: A waiting execution's due time moved (an overlap policy released a held run).
    RESCHEDULED = "RESCHEDULED"
    #: A complete/fail/heartbeat with a stale owner or epoch was refused; nothing changed.
    STALE_REFUSED = "STALE_REFUSED"


class AttemptOutcome(StrEnum):
    """How one attempt (one lease) ended."""

    #: Its completion was accepted.
    SUCCEEDED = "SUCCEEDED"
    #: The handler failed (retryably or not), or returned an invalid result.
    FAILED = "FAILED"
    #: The lease expired before the holder reported anything, or the holder stopped it
    #: for running past the job's timeout.
    TIMED_OUT = "TIMED_OUT"
    #: The holder released the lease unfinished.
    ABANDONED = "ABANDONED"
    #: The handler snoozed: given back until a later time; it does not count either.
    SNOOZED = "SNOOZED"
    #: A cancel command was honoured while it ran.
    CANCELLED = "CANCELLED"


class CommandKind(StrEnum):
    """What a :class:`~fencepost.domain.models.Command` asks of a running execution."""

    #: Stop the execution: its holder aborts it (RUNNING -> CANCELLED).
    CANCEL = "cancel"
    #: Suspend the handler where it can be suspended (delivered; the worker decides how).
    PAUSE = "pause"
    #: Continue a paused handler.
    RESUME = "resume"


class CommandState(StrEnum):
    """Where a command is in its delivery. Values equal names (they are stored as text)."""

    #: Requested, not yet taken by a worker (or given back by one that did not hold it).
    PENDING = "PENDING"
    #: Taken by ``owner`` until ``claim_until``; claimable again once that has passed.
    CLAIMED = "CLAIMED"
    #: Delivered to the lease holder at ``epoch`` (or, for a cancel of an execution
    #: that had not started, carried out at once by the store).
    DONE = "DONE"


#: An attempt's outcome as a metric label (``fencepost_attempts_total``,
#: ``fencepost_attempt_duration_seconds``): the service and the worker count the same ones.
ATTEMPT_OUTCOMES = (
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "released",
    "snoozed",
    "result_invalid",
)

"""The fencepost error hierarchy.

Every error fencepost raises on purpose derives from :class:`FencepostError`::

    FencepostError
     ├── ValidationError          bad input; ``field`` names the offending argument
     │    ├── ResultInvalid       a handler's result is not JSON (the execution is FAILED)
     │    └── StoreRefused        the database refused a value of this call (a data error)
     ├── NotFound                 no execution (or schedule) with that id
     ├── StaleLease               owner/epoch do not match, or the lease expired (HTTP 409)
     ├── InvalidTransition        the state machine forbids the requested change
     ├── NotRunning               a command was requested for an execution that is not running
     ├── IdempotencyConflict      same idempotency key (or schedule id), different request
     └── StoreUnavailable         the backend cannot be reached (driver errors, translated)

Driver exceptions never leak through the store boundary: backends translate them with
``raise ... from exc``. Only a failure to reach the database is :class:`StoreUnavailable`
(an outage: workers stop claiming and hold their outcomes); a value the database
refuses is :class:`StoreRefused`, the problem of the one call that carried it.
"""

from __future__ import annotations


class FencepostError(Exception):
    """Root of every error fencepost raises on purpose."""


class ValidationError(FencepostError, ValueError):
    """An argument is malformed. ``field`` names it; nothing was written.

    Also a :class:`ValueError`, so callers that validate generically keep working.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class ResultInvalid(ValidationError):
    """A completion carried a result that is not JSON (or is too large).

    Unlike other validation errors this one is *recorded*: the execution has been
    moved to FAILED with reason ``result_invalid`` before this is raised, because
    retrying a handler that returns garbage would only return garbage again.
    """

    def __init__(self, execution_id: str, message: str) -> None:
        self.execution_id = execution_id
        super().__init__("result", message)


class StoreRefused(ValidationError):
    """The database refused a value of this call (a driver data error); nothing was written.

    The store's own checks refuse whatever no backend can hold, so this means a value
    slipped past them: it is still that call's problem, never an outage.
    """

    def __init__(self, message: str) -> None:
        super().__init__("value", message)


class NotFound(FencepostError, LookupError):
    """No execution (or, with ``subject="schedule"``, schedule) with the given id exists.

    Executions may have been pruned, schedules deleted. ``id`` names what was looked
    up; ``execution_id`` is the same value, kept for callers of the execution verbs.
    """

    def __init__(self, execution_id: str, *, subject: str = "execution") -> None:
        self.id = execution_id
        self.execution_id = execution_id
        self.subject = subject
        super().__init__(f"{subject} {execution_id} not found")


class StaleLease(FencepostError):
    """A fenced call carried an owner/epoch that no longer holds a live lease.

    Raised by ``complete``, ``fail``, ``heartbeat``, ``release`` and ``abort`` when
    the row's owner or epoch differ from the caller's, or the lease has expired by
    the store's clock: nothing changed except an audit record of the refusal. Also
    raised by ``complete_command`` when the command's claim or the lease no longer
    holds (nothing is audited there: the execution did not change).

    ``materialize`` returns one with ``subject="schedule"`` (the schedule's id, the
    materializer, epoch 0) for a schedule whose materializer lease no longer holds.
    """

    def __init__(
        self, execution_id: str, owner: str, epoch: int, *, subject: str = "execution"
    ) -> None:
        self.execution_id = execution_id
        self.owner = owner
        self.epoch = epoch
        self.subject = subject
        super().__init__(
            f"{subject} {execution_id}: lease of owner {owner!r} at epoch {epoch} "
            "is no longer valid"
        )


class InvalidTransition(FencepostError):
    """The state machine has no edge for this event from the execution's state."""

    def __init__(self, execution_id: str, state: str, event: str) -> None:
        self.execution_id = execution_id
        self.state = state
        self.event = event
        why = _WHY_NOT.get(event)
        if why is not None:
            super().__init__(f"execution {execution_id} is {state}: {why}")
        else:
            super().__init__(f"execution {execution_id}: cannot apply {event} in state {state}")


#: What an operator's verb needs, for the refusals people meet most (a second replay).
_WHY_NOT = {
    "REPLAYED": "only a FAILED execution (a dead letter) can be replayed; "
    "one replayed already is waiting to run or has run",
    "CANCELLED": "only a waiting or running execution can be cancelled",
}


class NotRunning(FencepostError):
    """A command was requested for an execution that cannot receive it.

    Commands are delivered to the worker holding a RUNNING execution. A cancel of
    one that has not started is carried out at once instead; anything else — any
    command to a finished execution, a pause or resume of one that is not running —
    is refused with this error and nothing is stored.
    """

    def __init__(self, execution_id: str, state: str, kind: str) -> None:
        self.execution_id = execution_id
        self.state = state
        self.kind = kind
        super().__init__(
            f"execution {execution_id} is {state}, not RUNNING: cannot deliver a {kind} command"
        )


class IdempotencyConflict(FencepostError):
    """An idempotency key was reused for a request that differs from the first one.

    Also raised by ``add_schedule`` when the given schedule ``id`` exists and was
    added with different arguments (``subject="schedule"``; ``key`` is that id).
    """

    def __init__(self, key: str, existing_id: str, *, subject: str = "execution") -> None:
        self.key = key
        self.existing_id = existing_id
        self.subject = subject
        field = "idempotency_key" if subject == "execution" else f"{subject} id"
        super().__init__(
            f"{field} {key!r} already names {subject} {existing_id} with a different request"
        )


class NotDue(FencepostError):
    """An occurrence of a schedule was asked for before its time (or while held or paused)."""

    def __init__(self, schedule_id: str, slot: str, why: str) -> None:
        self.schedule_id = schedule_id
        self.slot = slot
        super().__init__(f"schedule {schedule_id} slot {slot}: {why}")


class StoreUnavailable(FencepostError):
    """The storage backend could not be reached or failed; safe to retry later."""


class NotMigrated(FencepostError):
    """The database lacks fencepost's schema (or has an older one), and the caller
    opened it without migrating (``connect(url, migrate=False)``: the read-only
    commands). ``fencepost db migrate`` creates or upgrades it."""

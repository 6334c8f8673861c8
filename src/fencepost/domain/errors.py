"""Every error fencepost raises on purpose, in one module.

Every one derives from :class:`FencepostError`; several are also a builtin
(``ValueError``, ``LookupError``) so that generic callers keep working::

    FencepostError
     ├── ValidationError          bad input; ``field`` names the offending argument (a ValueError)
     │    ├── ResultInvalid       a handler's result is not JSON (the execution is FAILED)
     │    ├── StoreRefused        the database refused a value of this call (a data error)
     │    └── DefinitionError     a job definition file was refused; names the file too
     ├── NotFound                 no execution (or schedule) with that id (a LookupError)
     ├── StaleLease               owner/epoch do not match, or the lease expired (HTTP 409)
     ├── InvalidTransition        the state machine forbids the requested change
     ├── NotRunning               a command was requested for an execution that is not running
     ├── IdempotencyConflict      same idempotency key (or schedule id), different request
     │    └── CatalogueConflict   a published job version, published again differently
     ├── NotDue                   a schedule's occurrence asked for before its time
     ├── StoreUnavailable         the backend cannot be reached (driver errors, translated)
     ├── NotMigrated              the database lacks fencepost's schema, and may not create it
     ├── Cancelled                raised by ctx.checkpoint(): stop now (cancel, timeout, lost lease)
     ├── PermanentFailure         raised by a handler: fail without retrying
     ├── Retry                    raised by a handler: fail, and retry after exactly ``after`` s
     ├── Snooze                   raised by a handler (ctx.snooze): run again later, no attempt used
     ├── CommandFailed            a command job exited non-zero or was killed (retryable)
     ├── HttpFailed               an HTTP job met a 5xx, 408, 429, timeout or network error
     └── ApiError                 the HTTP service answered with a problem (RFC 9457)
          ├── Unauthorized                 401: no token, or an unknown one
          ├── Forbidden                    403: the token lacks the scope
          ├── RemoteValidationError        422: also a ValidationError
          ├── RemoteNotFound               404: also a NotFound
          ├── RemoteStaleLease             409: also a StaleLease
          ├── RemoteInvalidTransition      409: also an InvalidTransition
          ├── RemoteNotRunning             409: also a NotRunning
          ├── RemoteIdempotencyConflict    409: also an IdempotencyConflict
          ├── RemoteCatalogueConflict      409: also a CatalogueConflict
          ├── RemoteNotDue                 409: also a NotDue
          └── RemoteStoreUnavailable       5xx: also a StoreUnavailable

Driver exceptions never leak through the store boundary: backends translate them with
``raise ... from exc``. Only a failure to reach the database is :class:`StoreUnavailable`
(an outage: workers stop claiming and hold their outcomes); a value the database
refuses is :class:`StoreRefused`, the problem of the one call that carried it.

The client raises each problem the service answers with as the ``Remote*`` class that
is also the store's own error (:func:`fencepost.client.errors.error_of` picks it), so
code written against a store (``except StaleLease``) works unchanged against the
service. They live here, not in ``client``, because they are plain exceptions that
every layer may name, and one tree is easier to read than three.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = [
    "ApiError",
    "Cancelled",
    "CatalogueConflict",
    "CommandFailed",
    "DefinitionError",
    "FencepostError",
    "Forbidden",
    "HttpFailed",
    "IdempotencyConflict",
    "InvalidTransition",
    "NotDue",
    "NotFound",
    "NotMigrated",
    "NotRunning",
    "PermanentFailure",
    "RemoteCatalogueConflict",
    "RemoteIdempotencyConflict",
    "RemoteInvalidTransition",
    "RemoteNotDue",
    "RemoteNotFound",
    "RemoteNotRunning",
    "RemoteStaleLease",
    "RemoteStoreUnavailable",
    "RemoteValidationError",
    "ResultInvalid",
    "Retry",
    "Snooze",
    "StaleLease",
    "StoreRefused",
    "StoreUnavailable",
    "Unauthorized",
    "ValidationError",
]


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
    "DELETED": "only a finished execution (SUCCEEDED, FAILED, CANCELLED, SKIPPED) can be deleted",
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


class CatalogueConflict(IdempotencyConflict):
    """A job version already in the catalogue was published with a different definition.

    An entry is immutable once published (its digest is its identity): a changed
    definition needs a new version. ``job``, ``version``, ``stored_digest`` and
    ``digest`` (the refused definition's) say which; nothing of the publish was written.
    """

    def __init__(self, job: str, version: int, stored_digest: str, digest: str) -> None:
        super().__init__(f"{job}@{version}", f"{job}@{version}", subject="job")
        self.job = job
        self.version = version
        self.stored_digest = stored_digest
        self.digest = digest
        self.args = (
            f"job {job!r} version {version} is already published with digest "
            f"{stored_digest}; this definition has digest {digest} "
            "(publish a changed definition as a new version)",
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


# -- raised by handlers, and by the worker to its handlers ------------------------------


class Cancelled(FencepostError):
    """The handler was asked to stop; ``reason`` says why.

    Raised by :meth:`~fencepost.jobs.context.Context.checkpoint` when a cancel
    was requested, the attempt ran past its timeout, the lease was lost, or the
    worker is stopping for good. A handler may catch it to clean up, and should
    then return or re-raise.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"cancelled: {reason}")
        self.reason = reason


class PermanentFailure(FencepostError):
    """Raise from a handler to fail the execution without retrying (a dead letter at once)."""


class Retry(FencepostError):
    """Raise from a handler to fail this attempt and retry after exactly ``after`` seconds.

    The attempt counts, as any failure's: with attempts left the execution waits
    (RETRY_WAIT) until the failure's time plus ``after`` instead of the job's backoff;
    on the last attempt it is a dead letter as usual. ``after`` is seconds (int or
    float) or a ``timedelta``, >= 0 and at most 100 years; anything else raises
    :class:`ValidationError` naming ``after`` where the ``Retry`` is made. The HTTP
    job runner raises one for a 429 or 503 answer with a ``Retry-After`` header.
    """

    def __init__(self, message: str = "retry requested", *, after: object) -> None:
        # Imported here: the durations module imports this one.
        from fencepost.domain.durations import as_duration

        self.delay = as_duration(after, field="after", allow_zero=True)
        #: The wait before the retry, in seconds.
        self.after = self.delay.total_seconds()
        self.message = str(message)
        super().__init__(f"{self.message} (retry after {self.after:g} s)")


class Snooze(FencepostError):
    """Raise from a handler (or call ``ctx.snooze``) to run the execution again later.

    The execution goes back to SCHEDULED, due ``seconds`` from the store's now, and
    the attempt does not count against ``max_attempts`` (it ends SNOOZED). One
    execution may snooze at most 100 times (``Store.snooze``'s ``max_snoozes``); a
    snooze past that fails the attempt with ``snoozed too often``, retried as any
    failure. ``seconds`` (int or float, or a ``timedelta``) must be > 0 and at most
    30 days, else :class:`ValidationError` naming ``seconds`` where it is made;
    ``reason`` (optional) joins the audit record.
    """

    def __init__(self, seconds: object, reason: object = None) -> None:
        # Imported here: the machine imports this module.
        from fencepost.domain.machine import snooze_delay

        self.delay = snooze_delay(seconds)
        #: How long to snooze, in seconds.
        self.seconds = self.delay.total_seconds()
        self.reason = None if reason is None else str(reason)
        text = f"snooze for {self.seconds:g} s"
        super().__init__(text if not self.reason else f"{text}: {self.reason}")


# -- the job catalogue: definition files and the runners of their jobs ------------------


class DefinitionError(ValidationError):
    """A definition file (or directory of them) was refused.

    ``str()`` is ``"<file>: <field>: <reason>"``; ``path``, ``field`` and
    ``reason`` hold the parts (``message`` is ``reason`` too, as for every
    :class:`ValidationError`).
    """

    def __init__(self, path: str | os.PathLike[str], field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.path = Path(path)
        self.reason = reason
        self.args = (f"{self.path}: {field}: {reason}",)


class CommandFailed(FencepostError):
    """A command exited with a non-zero status or was killed by a signal (retryable).

    ``returncode`` is the exit status, or minus the signal number; ``stderr`` is
    the tail of its standard error.
    """

    def __init__(self, message: str, *, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


class HttpFailed(FencepostError):
    """The request failed in a way worth retrying: 5xx, 408, 429, network error or timeout.

    ``status`` is the response status, or None when no response arrived.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- the HTTP service's problems, as the client raises them ---------------------------


class ApiError(FencepostError):
    """A problem the service answered with (RFC 9457): ``status``, ``type``, ``detail``."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.type = str(problem.get("type", "about:blank"))
        self.title = str(problem.get("title", ""))
        self.detail = str(problem.get("detail", ""))
        self.problem = problem
        Exception.__init__(self, self.detail or self.title or f"HTTP {status}")


class Unauthorized(ApiError):
    """401: no token, or a token the service does not know."""


class Forbidden(ApiError):
    """403: the token lacks the scope this call needs."""


class RemoteValidationError(ApiError, ValidationError):
    """422: a :class:`ValidationError`; ``field`` names the offending input."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(status, problem)
        self.field = str(problem.get("field") or "body")
        self.message = self.detail


class RemoteNotFound(ApiError, NotFound):
    """404: a :class:`NotFound`."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(status, problem)
        self.id = self.execution_id = ""
        self.subject = "execution"


class RemoteInvalidTransition(ApiError, InvalidTransition):
    """409: an :class:`InvalidTransition` (not allowed in the execution's state)."""


class RemoteNotRunning(ApiError, NotRunning):
    """409: a :class:`NotRunning` (a command for an execution that is not running)."""


class RemoteIdempotencyConflict(ApiError, IdempotencyConflict):
    """409: an :class:`IdempotencyConflict` (a key reused with a different request)."""


class RemoteCatalogueConflict(ApiError, CatalogueConflict):
    """409: a :class:`CatalogueConflict` (a published job version, published differently)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        ApiError.__init__(self, status, problem)
        self.key = self.existing_id = ""
        self.subject = "job"
        self.job = str(problem.get("job", ""))
        version = problem.get("version")
        self.version = version if isinstance(version, int) else 0
        self.stored_digest = str(problem.get("stored_digest", ""))
        self.digest = str(problem.get("digest", ""))


class RemoteNotDue(ApiError, NotDue):
    """409: a :class:`NotDue` (an occurrence asked for before its time, held or paused)."""


class RemoteStaleLease(ApiError, StaleLease):
    """409: a :class:`StaleLease` (the lease was replaced or ran out)."""


class RemoteStoreUnavailable(ApiError, StoreUnavailable):
    """503 (or any 5xx): the service or its database is unavailable; retry later."""

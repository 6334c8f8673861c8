"""The service's problem details, raised as the errors the store itself raises.

A problem of type ``.../not-found`` is raised as a :class:`NotFound`, one of type
``.../validation`` as a :class:`ValidationError` naming the same field, and so
on, so code written against a store (``except StaleLease``) works unchanged
against the service. The message is the server's ``detail``.
"""

from __future__ import annotations

from typing import Any

from fencepost.domain.errors import (
    FencepostError,
    IdempotencyConflict,
    InvalidTransition,
    NotDue,
    NotFound,
    NotRunning,
    StaleLease,
    StoreUnavailable,
    ValidationError,
)

_BASE = "https://fencepost.dev/problems/"


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


class RemoteNotDue(ApiError, NotDue):
    """409: a :class:`NotDue` (an occurrence asked for before its time, held or paused)."""


class RemoteStaleLease(ApiError, StaleLease):
    """409: a :class:`StaleLease` (the lease was replaced or ran out)."""


class RemoteStoreUnavailable(ApiError, StoreUnavailable):
    """503 (or any 5xx): the service or its database is unavailable; retry later."""


_BY_TYPE: dict[str, type[ApiError]] = {
    _BASE + "validation": RemoteValidationError,
    _BASE + "body-too-large": RemoteValidationError,
    _BASE + "not-found": RemoteNotFound,
    _BASE + "invalid-transition": RemoteInvalidTransition,
    _BASE + "not-running": RemoteNotRunning,
    _BASE + "not-due": RemoteNotDue,
    _BASE + "idempotency-conflict": RemoteIdempotencyConflict,
    _BASE + "stale-lease": RemoteStaleLease,
    _BASE + "store-unavailable": RemoteStoreUnavailable,
    _BASE + "unauthorized": Unauthorized,
    _BASE + "forbidden": Forbidden,
    _BASE + "csrf": Forbidden,
}


def error_of(status: int, problem: dict[str, Any]) -> ApiError:
    """The exception for one problem response."""
    cls = _BY_TYPE.get(str(problem.get("type")))
    if cls is None:
        # 408 (too slow to send), 429 (this address is held back after failed
        # authentications, perhaps by another process on this host) and 5xx pass:
        # a remote worker treats them as an outage, keeps its outcomes and retries.
        transient = status >= 500 or status in _TRANSIENT
        cls = RemoteStoreUnavailable if transient else ApiError
    return cls(status, problem)


_TRANSIENT = frozenset({408, 429})

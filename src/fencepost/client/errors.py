"""How the client reads a problem response: the error to raise for each problem type.

A problem of type ``.../not-found`` is raised as a :class:`RemoteNotFound` (a
:class:`NotFound`), one of type ``.../validation`` as a :class:`RemoteValidationError`
naming the same field, and so on, so code written against a store
(``except StaleLease``) works unchanged against the service. The message is the
server's ``detail``. The classes themselves live in :mod:`fencepost.domain.errors`,
with every other error.
"""

from __future__ import annotations

from typing import Any

from fencepost.domain import errors

_BASE = "https://fencepost.dev/problems/"


_BY_TYPE: dict[str, type[errors.ApiError]] = {
    _BASE + "validation": errors.RemoteValidationError,
    _BASE + "body-too-large": errors.RemoteValidationError,
    _BASE + "not-found": errors.RemoteNotFound,
    _BASE + "invalid-transition": errors.RemoteInvalidTransition,
    _BASE + "not-running": errors.RemoteNotRunning,
    _BASE + "not-due": errors.RemoteNotDue,
    _BASE + "idempotency-conflict": errors.RemoteIdempotencyConflict,
    _BASE + "catalogue-conflict": errors.RemoteCatalogueConflict,
    _BASE + "stale-lease": errors.RemoteStaleLease,
    _BASE + "store-unavailable": errors.RemoteStoreUnavailable,
    _BASE + "unauthorized": errors.Unauthorized,
    _BASE + "forbidden": errors.Forbidden,
    _BASE + "csrf": errors.Forbidden,
}


def error_of(status: int, problem: dict[str, Any]) -> errors.ApiError:
    """The exception for one problem response."""
    cls = _BY_TYPE.get(str(problem.get("type")))
    if cls is None:
        # 408 (too slow to send), 429 (this address is held back after failed
        # authentications, perhaps by another process on this host) and 5xx pass:
        # a remote worker treats them as an outage, keeps its outcomes and retries.
        transient = status >= 500 or status in _TRANSIENT
        cls = errors.RemoteStoreUnavailable if transient else errors.ApiError
    return cls(status, problem)


_TRANSIENT = frozenset({408, 429})

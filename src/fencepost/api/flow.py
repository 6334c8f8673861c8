"""Routes for flow control: limits, paused queues, what they held back, and their audit.

* ``GET /limits`` lists every limit and paused queue; ``PUT /limits/{scope}`` sets
  (replaces) the limit of ``job:NAME`` or ``queue:NAME``; ``DELETE /limits/{scope}``
  removes it (404 when it has none).
* ``GET /queues`` lists the queues known (those holding executions, those with a
  limit or a pause); ``POST /queues/{name}/pause`` and ``/resume`` answer the queue.
* ``GET /throttled?window=`` counts the claims each scope held back in the window;
  ``GET /flow/changes`` is the audit of changes to limits and queues, newest first
  (not ``/limits/changes``, which reads as the path of a scope named ``changes``).

Reads need the ``read`` scope, changes ``admin`` (as pausing a schedule does); the
audit names the token's name. A scope or a queue name is the rest of the path,
percent-encoded: it may hold ``/``, ``:`` and anything but U+0000 (and the path must
be UTF-8: a lone surrogate cannot be sent). Every refusal names its field
(``scope``, ``name``, ``rate``, ``burst``, ``concurrency``, ``per_key``).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Path, Query, Request, Response, status
from pydantic import WithJsonSchema
from starlette.convertors import Convertor, register_url_convertor

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import ActorDep, StoreDep, guarded
from fencepost.api.reports import Window
from fencepost.domain.checks import MAX_QUEUE
from fencepost.domain.errors import ValidationError
from fencepost.domain.queueviews import queue_view, queue_views
from fencepost.store.base import Store
from fencepost.wire.fields import NAME_PATTERN
from fencepost.wire.flow import SCOPE_SCHEMA, FlowChange, Limit, LimitRequest, QueueState
from fencepost.wire.flow import ThrottleCount as ThrottleCountBody


class _Text(Convertor[str]):
    """A path parameter that is the rest of the path, line breaks included.

    Starlette's ``path`` convertor is ``.*``, which stops at a line break: a queue
    named ``"a\\nb"`` (a valid name) would answer 404. Registered as ``text``.
    """

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("text", _Text())

router = APIRouter(tags=["flow control"])

#: The most audit entries one ``GET /flow/changes`` returns (``Store.flow_changes``'s bound).
MAX_CHANGES = 10_000
#: The window of the counts ``GET /queues`` reads with its executions (the counts by
#: state are of now; a short window keeps the rest of the stats it reads cheap).
_COUNTS_WINDOW = 1.0

ScopePath = Annotated[
    str,
    Path(description="job:NAME or queue:NAME, percent-encoded"),
    WithJsonSchema(SCOPE_SCHEMA),
]
QueuePath = Annotated[
    str,
    Path(
        description="the queue's name, percent-encoded",
        min_length=1,
        max_length=MAX_QUEUE,
        pattern=NAME_PATTERN,
    ),
]


def _utf8_path(request: Request, field: str) -> None:
    """Refuse a path whose percent-encoded bytes are not UTF-8, naming ``field``.

    The server decodes such bytes (a lone surrogate encoded as UTF-8 would be) to
    U+FFFD, a valid name: without this check, a queue named by a bad encoding would
    be stored under another name than the one the client meant.
    """
    raw = request.scope.get("raw_path")
    if raw is None:
        return
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(field, "must be UTF-8 text (without lone surrogates)") from None


# -- limits --------------------------------------------------------------------------------


@router.get(
    "/limits",
    response_model=list[Limit],
    **guarded(Scope.READ, p.STORE_UNAVAILABLE),
)
def list_limits(store: StoreDep) -> list[Limit]:
    """Every limit and paused queue, by scope (a queue that is only paused has no
    ``rate`` nor ``concurrency``)."""
    return [Limit.from_domain(limit) for limit in store.limits()]


@router.put(
    "/limits/{scope:text}",
    response_model=Limit,
    **guarded(Scope.ADMIN, p.VALIDATION, p.BODY_TOO_LARGE, p.STORE_UNAVAILABLE),
)
def set_limit(
    scope: ScopePath, body: LimitRequest, request: Request, store: StoreDep, actor: ActorDep
) -> Limit:
    """Set (or replace) the limit of ``scope``; the stored limit.

    A rate (starts a period, ``"50/s"``), a concurrency (executions leased at once)
    or both; ``burst`` is the rate's bucket; with ``per_key`` each ``limit_key`` has
    its own allowance. A paused queue stays paused. It holds for every worker within
    a second, and replaces a limit declared with the job. Audited as the token's name.
    """
    _utf8_path(request, "scope")
    return Limit.from_domain(store.set_limit(scope, **body.arguments(), actor=actor))


@router.delete(
    "/limits/{scope:text}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def remove_limit(scope: ScopePath, request: Request, store: StoreDep, actor: ActorDep) -> Response:
    """Remove the limit of ``scope`` (204); 404 when it has none.

    A paused queue stays paused (only its rate and concurrency go). A limit declared
    with a job comes back when a worker next publishes the job.
    """
    _utf8_path(request, "scope")
    store.remove_limit(scope, actor=actor)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# -- queues --------------------------------------------------------------------------------


@router.get(
    "/queues",
    response_model=list[QueueState],
    **guarded(Scope.READ, p.STORE_UNAVAILABLE),
)
def list_queues(store: StoreDep) -> list[QueueState]:
    """Every queue known, by name: those holding executions and those with a limit or
    a pause; each with its executions by state."""
    counts = store.stats(window=_COUNTS_WINDOW).by_queue
    return [QueueState.from_domain(view) for view in queue_views(store.limits(), counts)]


def _queue(store: Store, name: str, *, paused: bool, actor: str) -> QueueState:
    verb = store.pause_queue if paused else store.resume_queue
    stored = verb(name, actor=actor)
    return QueueState.from_domain(queue_view(name, stored))


@router.post(
    "/queues/{name:text}/pause",
    response_model=QueueState,
    **guarded(Scope.ADMIN, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def pause_queue(name: QueuePath, request: Request, store: StoreDep, actor: ActorDep) -> QueueState:
    """Pause a queue (idempotent): nothing in it is claimed until it is resumed.

    Running executions finish; waiting ones stay due. Any queue name may be paused,
    one that holds nothing yet too. Audited as the token's name; ``counts`` is null.
    """
    _utf8_path(request, "name")
    return _queue(store, name, paused=True, actor=actor)


@router.post(
    "/queues/{name:text}/resume",
    response_model=QueueState,
    **guarded(Scope.ADMIN, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def resume_queue(name: QueuePath, request: Request, store: StoreDep, actor: ActorDep) -> QueueState:
    """Resume a paused queue (idempotent); its waiting executions start again under its
    limits, and the time the pause held each past its due time is recorded as
    throttled. ``counts`` is null."""
    _utf8_path(request, "name")
    return _queue(store, name, paused=False, actor=actor)


# -- what was held back, and the audit ----------------------------------------------------


@router.get(
    "/throttled",
    response_model=list[ThrottleCountBody],
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def throttled(store: StoreDep, window: Window = 3600.0) -> list[ThrottleCountBody]:
    """Claims that waited on a limit or a paused queue in the last ``window`` seconds,
    per scope, with the seconds they were held in all."""
    return [ThrottleCountBody.from_domain(count) for count in store.throttled(window=window)]


@router.get(
    "/flow/changes",
    response_model=list[FlowChange],
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def flow_changes(
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=MAX_CHANGES, description="at most this many")] = 100,
) -> list[FlowChange]:
    """The latest changes to limits and queues (set, remove, pause, resume, declare),
    newest first, each with who made it."""
    return [FlowChange.from_domain(change) for change in store.flow_changes(limit=limit)]

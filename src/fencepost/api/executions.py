"""Routes for executions, dead letters and health checks.

Every endpoint but one is a plain ``def``: the store is synchronous and may block
on I/O, so FastAPI runs these in its thread pool rather than on the event loop.
``GET /executions/{id}`` is a coroutine: its long-poll (``wait``) awaits the store's
shared watcher instead of holding a pool thread per waiting request.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response, status
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from fencepost import tracing
from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import ActorDep, Cursor, Limit, Order, StoreDep, guarded
from fencepost.domain import models
from fencepost.domain.checks import INT32_MAX, MAX_ERROR_FILTER
from fencepost.domain.errors import FencepostError, ValidationError
from fencepost.domain.states import CommandKind, State
from fencepost.domain.submission import MAX_KEY
from fencepost.wire import executions as schemas
from fencepost.wire.executions import MAX_WAIT_HEADER
from fencepost.wire.fields import (
    BUCKET_EXTENSION,
    NAME_PATTERN,
    OUTCOME_PATTERN,
    PATTERN_MEANINGS,
    Instant,
)

router = APIRouter()


class ExecutionFilterQuery(BaseModel):
    """The filters of ``GET /executions`` and ``GET /executions/counts``, declared once:
    a query parameter each, the keys of :class:`~fencepost.domain.filters.ExecutionFilters`
    (tests/api hold them equal), checked again by the store, which names the field as
    these do."""

    state: list[State] | None = None
    job: str | None = None
    schedule: str | None = None
    bucket: int | None = Field(None, ge=0, le=INT32_MAX, json_schema_extra={BUCKET_EXTENSION: True})
    queue: str | None = None
    due_after: Instant | None = Field(
        None, description="only due_at >= this (ISO 8601 with offset)"
    )
    due_before: Instant | None = Field(
        None, description="only due_at < this (ISO 8601 with offset)"
    )
    outcome: str | None = Field(
        None, pattern=OUTCOME_PATTERN, description=PATTERN_MEANINGS[OUTCOME_PATTERN]
    )
    limit_key: str | None = Field(None, description="only executions under this limit key")
    owner: str | None = Field(
        None, description="only RUNNING executions whose lease this owner holds"
    )
    created_after: Instant | None = Field(
        None, description="only created_at >= this (ISO 8601 with offset)"
    )
    created_before: Instant | None = Field(
        None, description="only created_at < this (ISO 8601 with offset)"
    )
    finished_after: Instant | None = Field(
        None, description="only finished executions, finished at or after this (ISO 8601)"
    )
    finished_before: Instant | None = Field(
        None, description="only finished executions, finished before this (ISO 8601)"
    )
    error: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_ERROR_FILTER,
        description="only executions whose latest error contains this text (ASCII letters "
        "in any case; % and _ literal)",
    )

    def filters(self) -> dict[str, Any]:
        """The store's keyword arguments (``Store.query``'s filters)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The header a single submit takes its idempotency key from (a batch: each item's field).
_KEY_HEADER = "Idempotency-Key"


def etag(execution: models.Execution) -> str:
    """``"<epoch>-<updated_at in microseconds since 1970>"``: changes with every write."""
    micros = (execution.updated_at - _EPOCH) // timedelta(microseconds=1)
    return f'"{execution.epoch}-{micros}"'


def _matches(if_none_match: str, tag: str) -> bool:
    candidates = [c.strip().removeprefix("W/") for c in if_none_match.split(",")]
    return "*" in candidates or tag in candidates


@router.post(
    "/executions",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.Execution,
    **guarded(
        Scope.SUBMIT,
        p.VALIDATION,
        p.IDEMPOTENCY_CONFLICT,
        p.BODY_TOO_LARGE,
        p.STORE_UNAVAILABLE,
        **{"200": {"model": schemas.Execution, "description": "Replay of an idempotent submit"}},
    ),
)
def submit(
    body: schemas.SubmitRequest,
    store: StoreDep,
    actor: ActorDep,
    request: Request,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(alias="Idempotency-Key", min_length=1, max_length=MAX_KEY, pattern=NAME_PATTERN),
    ] = None,
) -> schemas.Execution:
    """Submit an execution; with ``Idempotency-Key``, a repeat returns the first (200)."""
    # 201 or 200 as the store decided inside its transaction: of many first requests
    # racing with one key, exactly one created the execution.
    arguments = _submit_arguments(body, idempotency_key)
    try:
        # A caller's W3C traceparent: the submit's span, and so the attempts, continue
        # its trace (when this service traces; read from the headers, not declared, as
        # any traced HTTP call carries it).
        with tracing.remote_parent(request.headers):
            execution, created = store.submit_or_find(**arguments, actor=actor)
    except ValidationError as exc:
        field = _KEY_HEADER if exc.field == "idempotency_key" else body.api_field(exc.field)
        raise ValidationError(field, exc.message) from None
    if not created:
        response.status_code = status.HTTP_200_OK
    response.headers["ETag"] = etag(execution)
    return schemas.Execution.from_domain(execution)


def _submit_arguments(body: schemas.SubmitRequest, idempotency_key: str | None) -> dict[str, Any]:
    """``Store.submit``'s arguments for one request: the store's job catalogue decides
    the version, the defaults and the input check, as for every other submitter."""
    return {**body.arguments(), "idempotency_key": idempotency_key}


@router.post(
    "/executions/batch",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.SubmitBatchResult,
    **guarded(
        Scope.SUBMIT,
        p.VALIDATION,
        p.IDEMPOTENCY_CONFLICT,
        p.BODY_TOO_LARGE,
        p.STORE_UNAVAILABLE,
    ),
)
def submit_batch(
    body: schemas.SubmitBatch, store: StoreDep, actor: ActorDep, request: Request
) -> schemas.SubmitBatchResult:
    """Submit many executions in one transaction: all are stored, or none (the field says why).

    Each item is a ``POST /executions`` body plus its own ``idempotency_key``; an
    item whose key was seen before (with the same body) returns the existing
    execution. A bad item is a 422 naming it (``items.3.inputs``), as pydantic names
    fields elsewhere.
    """
    requests = []
    for index, item in enumerate(body.items):
        try:
            requests.append(_submit_arguments(item, item.idempotency_key))
        except ValidationError as exc:
            raise ValidationError(f"items.{index}.{exc.field}", exc.message) from None
    try:
        with tracing.remote_parent(request.headers):  # as a single submit's
            executions = store.submit_many(requests, actor=actor)
    except ValidationError as exc:  # the store names "[3].inputs"
        position, _, field = exc.field.removeprefix("[").partition("].")
        name = schemas.SubmitItem.api_field(field)
        raise ValidationError(f"items.{position}.{name}", exc.message) from None
    return schemas.SubmitBatchResult(items=[schemas.Execution.from_domain(e) for e in executions])


@router.get(
    "/executions",
    response_model=schemas.Page,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def list_executions(
    store: StoreDep,
    filters: Annotated[ExecutionFilterQuery, Query()],
    cursor: Cursor = None,
    limit: Limit = 100,
    order: Order = "asc",
) -> schemas.Page:
    """Executions matching every filter, oldest first (``order=desc``: newest first).

    ``state`` may repeat. ``due_after <= due_at < due_before``. ``outcome``: those any
    of whose attempts ended with it (``timed_out`` includes a lease that expired).
    ``limit_key``: under that limit key. ``owner``: RUNNING under that owner's lease.
    ``created_after <= created_at < created_before``. ``finished_after <= finish time
    < finished_before``: finished executions only (SUCCEEDED, FAILED, CANCELLED,
    SKIPPED). ``error``: 1 to 200 characters the latest error contains (ASCII letters
    in any case; ``%`` and ``_`` literal). Pass ``next_cursor`` as ``cursor`` with the
    same ``order`` and filters.
    """
    page = store.query(after=cursor, limit=limit, newest_first=order == "desc", **filters.filters())
    return schemas.Page.from_domain(page)


@router.get(
    "/executions/counts",
    response_model=schemas.StateCounts,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def count_executions(
    store: StoreDep, filters: Annotated[ExecutionFilterQuery, Query()]
) -> schemas.StateCounts:
    """How many executions ``GET /executions`` with these filters lists, by state.

    The filters are the listing's (no ``cursor``, ``limit`` or ``order``); every
    state is in ``counts`` (0 when none match), and ``total`` is their sum.
    """
    counts = store.count_by_state(**filters.filters())
    return schemas.StateCounts.from_domain(counts)


@router.get(
    "/executions/{execution_id}",
    response_model=schemas.Execution,
    **guarded(
        Scope.READ,
        p.VALIDATION,
        p.NOT_FOUND,
        p.STORE_UNAVAILABLE,
        **{"304": {"description": "Not modified (If-None-Match)"}},
    ),
)
async def get_execution(
    execution_id: str,
    store: StoreDep,
    request: Request,
    response: Response,
    if_none_match: Annotated[str | None, Header()] = None,
    wait: Annotated[
        float | None,
        Query(
            ge=0,
            allow_inf_nan=False,
            description="Long-poll: answer once the execution is terminal, or after this "
            "many seconds (at most the service's max_wait, also in the Fencepost-Max-Wait "
            "header) with its current state; 200 either way.",
        ),
    ] = None,
) -> schemas.Execution | Response:
    """One execution, with an ``ETag``; ``If-None-Match`` answers 304 when unchanged.

    With ``wait`` (seconds), a long-poll: the answer comes as soon as the execution
    is terminal (SUCCEEDED, FAILED, CANCELLED, SKIPPED), or after ``wait`` seconds
    with the execution as it is then; 200 either way (the ``state`` tells which).
    ``wait`` above the service's bound (``Fencepost-Max-Wait``, on every answer),
    negative, NaN or not a number is a 422 naming ``wait``. The ETag and
    ``If-None-Match`` apply to the execution answered, after the wait. A waiting
    request holds no thread: it awaits the store's shared watcher.
    """
    bound: float = request.app.state.max_wait
    seconds = wait_seconds(wait, bound)
    execution: models.Execution | None = None
    if seconds:
        # Out of time: answered with the execution as it is now.
        with contextlib.suppress(TimeoutError):
            execution = await store._wait_async(execution_id, timeout=seconds)
    if execution is None:
        execution = await run_in_threadpool(store.get, execution_id)
    tag = etag(execution)
    headers = {"ETag": tag, MAX_WAIT_HEADER: f"{bound:g}"}
    if if_none_match is not None and _matches(if_none_match, tag):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers=headers)
    response.headers.update(headers)
    return schemas.Execution.from_domain(execution)


def wait_seconds(value: float | None, bound: float) -> float | None:
    """The ``wait`` of a long-poll (None: none asked), at most ``bound``; else 422 on ``wait``.

    FastAPI has refused what is not a finite number >= 0 already (the spec says so).
    """
    if value is not None and value > bound:
        raise ValidationError("wait", f"must be at most {bound:g} seconds here, got {value:g}")
    return value


@router.get(
    "/executions/{execution_id}/attempts",
    response_model=list[schemas.Attempt],
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_attempts(execution_id: str, store: StoreDep) -> list[schemas.Attempt]:
    """The attempts of one execution, oldest first."""
    return [schemas.Attempt.from_domain(a) for a in store.attempts(execution_id)]


@router.get(
    "/executions/{execution_id}/transitions",
    response_model=list[schemas.Transition],
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_transitions(execution_id: str, store: StoreDep) -> list[schemas.Transition]:
    """The audit trail of one execution, oldest first."""
    return [schemas.Transition.from_domain(t) for t in store.transitions(execution_id)]


@router.get(
    "/executions/{execution_id}/commands",
    response_model=list[schemas.Command],
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_commands(execution_id: str, store: StoreDep) -> list[schemas.Command]:
    """The cancel, pause and resume commands of one execution, oldest first.

    Whether a running execution is paused is the kind of its latest pause or resume
    (the dashboard offers Pause or Resume by it).
    """
    return [schemas.Command.from_domain(c) for c in store.commands(execution_id)]


@router.delete(
    "/executions/{execution_id}",
    response_model=schemas.Execution,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.INVALID_TRANSITION, p.STORE_UNAVAILABLE),
)
def cancel_execution(execution_id: str, store: StoreDep, actor: ActorDep) -> schemas.Execution:
    """Cancel an execution that has not started; one that has is a 409 (use POST .../cancel).

    The execution is not removed: it stays, CANCELLED, with its audit trail.
    """
    return schemas.Execution.from_domain(store.cancel(execution_id, actor=actor))


def _command_route(kind: CommandKind) -> None:
    def request_command(execution_id: str, store: StoreDep, actor: ActorDep) -> schemas.Command:
        return schemas.Command.from_domain(store.request(execution_id, kind, actor=actor))

    request_command.__name__ = f"request_{kind.value}"
    request_command.__doc__ = (
        f"Ask the worker running this execution to {kind.value} it (202 with the command)."
    )
    router.post(
        f"/executions/{{execution_id}}/{kind.value}",
        status_code=status.HTTP_202_ACCEPTED,
        response_model=schemas.Command,
        **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.NOT_RUNNING, p.STORE_UNAVAILABLE),
    )(request_command)


for _kind in CommandKind:
    _command_route(_kind)


@router.post(
    "/executions/{execution_id}/replay",
    response_model=schemas.Execution,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.INVALID_TRANSITION, p.STORE_UNAVAILABLE),
)
def replay_execution(execution_id: str, store: StoreDep, actor: ActorDep) -> schemas.Execution:
    """Revive a dead letter (FAILED -> SCHEDULED, due now, fresh attempts)."""
    return schemas.Execution.from_domain(store.replay(execution_id, actor=actor))


@router.get(
    "/dead-letters",
    response_model=schemas.Page,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def dead_letters(
    store: StoreDep,
    job: str | None = None,
    cursor: Cursor = None,
    limit: Limit = 100,
    order: Order = "asc",
) -> schemas.Page:
    """FAILED executions, oldest first (``order=desc``: newest first)."""
    page = store.query(
        state=State.FAILED, job=job, after=cursor, limit=limit, newest_first=order == "desc"
    )
    return schemas.Page.from_domain(page)


@router.get("/healthz", response_model=schemas.Health)
def healthz() -> schemas.Health:
    """Liveness: the process answers. Never touches the store."""
    return schemas.Health(status="ok")


@router.get(
    "/readyz",
    response_model=schemas.Health,
    responses=p.responses(p.STORE_UNAVAILABLE),
)
def readyz(store: StoreDep) -> schemas.Health | Response:
    """Readiness: a one-row query succeeds, else 503."""
    try:
        store.query(limit=1)
    except FencepostError as exc:
        return p.problem(p.STORE_UNAVAILABLE, str(exc))
    return schemas.Health(status="ok")

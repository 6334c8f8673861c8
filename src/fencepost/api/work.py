"""The worker protocol: leases over HTTP, for workers that cannot reach the database.

A remote worker claims (``POST /claims``), renews (``.../heartbeat``), and reports
(``.../complete``, ``.../fail``, ``.../release``, ``.../snooze``, ``.../abort``) exactly as a
worker with a database URL does, and the store applies the same fence: every
report names the ``owner`` and ``epoch`` of the lease it was given, and a stale
one is refused with a 409 ``stale-lease`` problem and audited. Batch forms
(``/completions``, ``/heartbeats``) keep a busy worker to one round trip per
batch, as the store's ``*_many`` verbs do.

A report carries what the fence reads, the execution id, owner and epoch: the
server passes them to the store as a :class:`~fencepost.domain.models.Fence`, and
the store reads anything else it needs (the attempt for a failure's backoff)
inside the fenced transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Response, status
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import StoreDep, guarded
from fencepost.domain import models
from fencepost.domain.errors import (
    FencepostError,
    InvalidTransition,
    NotDue,
    NotFound,
    ResultInvalid,
    StaleLease,
    ValidationError,
)
from fencepost.domain.models import Lease as DomainLease
from fencepost.domain.models import Occurrence, Schedule
from fencepost.domain.schedules import occurrence_key, slot_text
from fencepost.domain.states import CommandKind, CommandState, State
from fencepost.store.base import Store
from fencepost.timing.rules import rule_of
from fencepost.wire import executions as schemas
from fencepost.wire import fields
from fencepost.wire.reports import Node
from fencepost.wire.work import (
    ClaimedCommand,
    ClaimedCommands,
    ClaimRequest,
    CommandClaimRequest,
    CommandDelivery,
    CommandReport,
    CompleteRequest,
    CompletionBatch,
    CompletionResults,
    FailRequest,
    HeartbeatBatch,
    HeartbeatRequest,
    HeartbeatResults,
    Lease,
    Leases,
    NodeRegistration,
    OccurrenceClaim,
    ReasonRequest,
    Refusal,
    SnoozeRequest,
)

router = APIRouter(tags=["worker protocol"])

#: The reason a claim's leases are released with when its answer could not be encoded.
UNDELIVERED = "claimed but not delivered"

_NEUTRAL_TIME = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def fence_of(execution_id: str, owner: str, epoch: int) -> models.Fence:
    """The fence a report names (see the module doc)."""
    return models.Fence(execution_id=execution_id, owner=owner, epoch=epoch)


def _renewal(renewed: models.LiveFence) -> Lease:
    """The answer to a heartbeat: the wire's lease, as far as a renewal knows it.

    A heartbeat learns the fence and its new ``lease_until``; the wire's lease shape
    also has the claim's fields, which keep the placeholder values they have always
    had in this answer (a worker keeps the lease its claim delivered).
    """
    return Lease(
        execution_id=renewed.execution_id,
        owner=renewed.owner,
        epoch=renewed.epoch,
        lease_until=renewed.lease_until,
        attempt=0,
        max_attempts=0,
        job="",
        version=None,
        inputs=None,
        timeout_seconds=None,
        schedule_id=None,
        slot=None,
        due_at=_NEUTRAL_TIME,
        queue="",
    )


def _command_of(command_id: str, report: CommandReport) -> models.Command:
    # Like leases, the command fence reads only the id, execution id and owner.
    return models.Command(
        id=command_id,
        execution_id=report.execution_id,
        kind=CommandKind.CANCEL,
        state=CommandState.CLAIMED,
        requested_by="",
        requested_at=_NEUTRAL_TIME,
        owner=report.owner,
        claim_until=None,
        epoch=None,
        done_at=None,
    )


def _refusal(exc: Exception) -> Refusal:
    assert isinstance(exc, StaleLease)
    return Refusal(type=p.STALE_LEASE.type, detail=str(exc))


# -- routes ----------------------------------------------------------------------------------

ExecutionId = Annotated[str, Path(min_length=1)]
Slot = Annotated[
    str,
    Path(
        description="the occurrence's instant, ISO 8601 with an offset",
        json_schema_extra={"format": "date-time", "pattern": fields.YEAR_PATTERN},
    ),
]
NodeId = Annotated[str, Path(min_length=1, max_length=fields.MAX_NAME, pattern=fields.NAME_PATTERN)]
_REPORT = (p.VALIDATION, p.NOT_FOUND, p.STALE_LEASE, p.STORE_UNAVAILABLE)


@router.post(
    "/claims",
    response_model=Leases,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def claim(body: ClaimRequest, store: StoreDep) -> Response:
    """Lease up to ``limit`` due executions to ``owner`` for ``ttl_seconds`` (maybe none)."""
    leases = store.claim(
        body.owner,
        limit=body.limit,
        ttl=body.ttl_seconds,
        jobs=body.jobs,
        versions=None if body.versions is None else [(v.job, v.version) for v in body.versions],
        buckets=body.buckets,
        max_per_bucket=body.max_per_bucket,
        queues=body.queues,
    )
    # Read at once after this claim: the hint of the store's last claim (with claims of
    # several workers racing through this service, possibly another's: a hint only).
    held = store.next_start_in()
    return _delivered(
        store,
        leases,
        lambda: Leases(leases=[Lease.from_domain(lease) for lease in leases], next_start_in=held),
    )


def _delivered(store: Store, leases: list[DomainLease], build: Callable[[], BaseModel]) -> Response:
    """The claim's answer, encoded here, before it is sent: or its leases given back.

    The store checks every payload it delivers, so encoding cannot fail on what it
    stored; should it fail all the same, the leases are released (claimable at once,
    their attempts not counted) rather than left with a worker that never gets them.
    """
    try:
        content = build().model_dump_json()
    except Exception:
        for lease in leases:
            with contextlib.suppress(FencepostError):
                store.release(lease, reason=UNDELIVERED)
        raise
    return Response(content, media_type="application/json")


#: A slot path segment is read as every other instant of the API is (an RFC 3339 date-time).
_INSTANT: TypeAdapter[datetime] = TypeAdapter(fields.Instant)


def _instant(slot: str) -> datetime:
    """The aware UTC instant a ``slot`` path segment names (422 if it names none)."""
    try:
        return _INSTANT.validate_python(slot)
    except PydanticValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise ValidationError(
            "slot", f"must be an ISO 8601 instant ({reason}), got {slot!r}"
        ) from None


def _occurrence(store: Store, task: str, slot: str) -> tuple[Schedule, datetime]:
    """The schedule ``task`` and the instant of ``slot``, if the rule fires then (else 404)."""
    schedule = store.get_schedule(task)
    instant = _instant(slot)
    fired = next(iter(rule_of(schedule).slots(instant - _MICROSECOND, instant)), None)
    if fired != instant:
        raise NotFound(f"{task}/{slot_text(instant)}", subject="occurrence")
    return schedule, instant


@router.post(
    "/jobs/{task}/{slot}/claim",
    response_model=Lease,
    **guarded(
        Scope.WORK, p.VALIDATION, p.NOT_FOUND, p.NOT_DUE, p.INVALID_TRANSITION, p.STORE_UNAVAILABLE
    ),
)
def claim_occurrence(
    task: Annotated[str, Path(min_length=1, description="the schedule id")],
    slot: Slot,
    body: OccurrenceClaim,
    store: StoreDep,
) -> Response:
    """Claim the occurrence of schedule ``task`` at ``slot``, if it is due.

    The slot must be one the schedule's rule fires at (404 otherwise) and not
    in the future (409 ``not-due``). Its execution is created if no materializer
    has stored it yet (the same insert-if-absent under ``task:slot``, so the two
    never make two), then leased like any claim. An occurrence that is already
    leased, finished or skipped is a 409 ``invalid-transition``; one held back by
    the overlap policy, or of a paused schedule, is ``not-due``.
    """
    schedule, instant = _occurrence(store, task, slot)
    text = slot_text(instant)
    if instant > store.clock.now():
        raise NotDue(task, text, "its time has not come")
    existing = store.find(occurrence_key(task, instant))
    if existing is None:
        if schedule.paused:
            raise NotDue(task, text, "the schedule is paused")
        [existing] = store.add_occurrences(task, [Occurrence(slot=instant, due_at=instant)])
    leases = store.claim(body.owner, ttl=body.ttl_seconds, ids=[existing.id])
    if leases:
        return _delivered(store, leases, lambda: Lease.from_domain(leases[0]))
    current = store.get(existing.id)
    if current.state in (State.SCHEDULED, State.RETRY_WAIT):
        raise NotDue(task, text, f"{current.state.value} until {current.due_at.isoformat()}")
    raise InvalidTransition(current.id, current.state.value, "CLAIMED")


@router.post(
    "/jobs/{task}/{slot}/complete",
    response_model=schemas.Execution,
    **guarded(Scope.WORK, *_REPORT),
)
def complete_occurrence(
    task: Annotated[str, Path(min_length=1, description="the schedule id")],
    slot: Slot,
    body: CompleteRequest,
    store: StoreDep,
) -> Any:
    """Record the success of an occurrence under its lease; 409 ``stale-lease`` if stale.

    The occurrence is found by its key alone: a lease taken before the schedule
    changed (or was deleted) can still report.
    """
    instant = _instant(slot)
    execution = store.find(occurrence_key(task, instant))
    if execution is None:
        raise NotFound(f"{task}/{slot_text(instant)}", subject="occurrence")
    return complete(execution.id, body, store)


@router.post(
    "/executions/{execution_id}/heartbeat",
    response_model=Lease,
    **guarded(Scope.WORK, *_REPORT),
)
def heartbeat(execution_id: ExecutionId, body: HeartbeatRequest, store: StoreDep) -> Lease:
    """Renew a live lease (never shortening it); 409 ``stale-lease`` if it is not held."""
    fence = fence_of(execution_id, body.owner, body.epoch)
    return _renewal(store.heartbeat(fence, ttl=body.ttl_seconds, progress=body.progress))


@router.post(
    "/executions/{execution_id}/complete",
    response_model=schemas.Execution,
    **guarded(Scope.WORK, *_REPORT),
)
def complete(execution_id: ExecutionId, body: CompleteRequest, store: StoreDep) -> Any:
    """Record success; 409 ``stale-lease`` if the lease was replaced or ran out."""
    fence = fence_of(execution_id, body.owner, body.epoch)
    try:
        return schemas.Execution.from_domain(store.complete(fence, body.result))
    except ResultInvalid as exc:  # recorded as FAILED result_invalid; say so with the field
        return p.problem(p.VALIDATION, str(exc), field="result")


@router.post(
    "/executions/{execution_id}/fail",
    response_model=schemas.Execution,
    **guarded(Scope.WORK, *_REPORT),
)
def fail(execution_id: ExecutionId, body: FailRequest, store: StoreDep) -> schemas.Execution:
    """Record a failed attempt (retry with backoff, or dead letter); 409 if stale."""
    # The backoff grows with the attempt number: the store reads it under the fence.
    try:
        failed = store.fail(
            fence_of(execution_id, body.owner, body.epoch),
            body.error,
            retryable=body.retryable,
            retry_in=body.retry_in_seconds,
            timed_out=body.timed_out,
        )
    except StaleLease:
        # An unknown execution has always been a 404 here (the other reports answer
        # 409): looked up on the refusal path only, off the accepted report's way.
        store.get(execution_id)
        raise
    return schemas.Execution.from_domain(failed)


@router.post(
    "/executions/{execution_id}/release",
    response_model=schemas.Execution,
    **guarded(Scope.WORK, *_REPORT),
)
def release(execution_id: ExecutionId, body: ReasonRequest, store: StoreDep) -> schemas.Execution:
    """Give a live lease back unfinished (claimable again at once); 409 if stale."""
    return _with_reason(store.release, execution_id, body)


@router.post(
    "/executions/{execution_id}/snooze",
    response_model=schemas.Execution,
    **guarded(Scope.WORK, *_REPORT),
)
def snooze(execution_id: ExecutionId, body: SnoozeRequest, store: StoreDep) -> schemas.Execution:
    """Give a live lease back until ``seconds`` from now, the attempt not counted
    (SCHEDULED; a snooze past the execution's bound fails the attempt); 409 if stale."""
    fence = fence_of(execution_id, body.owner, body.epoch)
    return schemas.Execution.from_domain(store.snooze(fence, body.seconds, reason=body.reason))


@router.post(
    "/executions/{execution_id}/abort",
    response_model=schemas.Execution,
    **guarded(Scope.WORK, *_REPORT),
)
def abort(execution_id: ExecutionId, body: ReasonRequest, store: StoreDep) -> schemas.Execution:
    """Stop a running execution to honour a cancel command (CANCELLED); 409 if stale."""
    return _with_reason(store.abort, execution_id, body)


def _with_reason(
    verb: Callable[..., models.Execution], execution_id: str, body: ReasonRequest
) -> schemas.Execution:
    """``verb`` (release or abort) on the body's fence, with its reason or the store's default."""
    fence = fence_of(execution_id, body.owner, body.epoch)
    reason = {"reason": body.reason} if body.reason is not None else {}
    return schemas.Execution.from_domain(verb(fence, **reason))


@router.post(
    "/completions",
    response_model=CompletionResults,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def complete_many(body: CompletionBatch, store: StoreDep) -> CompletionResults:
    """Complete many leases in one transaction; per item, null or the refusal."""
    outcomes = store.complete_many(
        [(fence_of(i.execution_id, i.owner, i.epoch), i.result) for i in body.items]
    )
    return CompletionResults(results=[None if o is None else _refusal(o) for o in outcomes])


@router.post(
    "/heartbeats",
    response_model=HeartbeatResults,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def heartbeat_many(body: HeartbeatBatch, store: StoreDep) -> HeartbeatResults:
    """Renew many leases in one transaction; per item, the renewed lease or the refusal."""
    outcomes = store.heartbeat_many(
        [(fence_of(i.execution_id, i.owner, i.epoch), i.progress) for i in body.items],
        ttl=body.ttl_seconds,
    )
    return HeartbeatResults(
        results=[_refusal(o) if isinstance(o, StaleLease) else _renewal(o) for o in outcomes]
    )


@router.post(
    "/commands/claims",
    response_model=ClaimedCommands,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def claim_commands(body: CommandClaimRequest, store: StoreDep) -> ClaimedCommands:
    """Claim open commands (cancel, pause, resume) addressed to these executions."""
    commands = store.claim_commands(
        body.owner, body.execution_ids, ttl=body.ttl_seconds, limit=body.limit
    )
    return ClaimedCommands(commands=[ClaimedCommand.from_domain(c) for c in commands])


@router.post(
    "/commands/{command_id}/complete",
    response_model=ClaimedCommand,
    **guarded(Scope.WORK, p.VALIDATION, p.STALE_LEASE, p.STORE_UNAVAILABLE),
)
def complete_command(
    command_id: Annotated[str, Path(min_length=1)], body: CommandDelivery, store: StoreDep
) -> ClaimedCommand:
    """Mark a claimed command delivered, under the execution lease ``owner``/``epoch``."""
    fence = fence_of(body.execution_id, body.owner, body.epoch)
    return ClaimedCommand.from_domain(store.complete_command(_command_of(command_id, body), fence))


@router.post(
    "/commands/{command_id}/release",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def release_command(
    command_id: Annotated[str, Path(min_length=1)], body: CommandReport, store: StoreDep
) -> Response:
    """Give a claimed command back for the execution's holder to claim."""
    store.release_command(_command_of(command_id, body))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put(
    "/nodes/{node_id}",
    response_model=Node,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def register_node(
    node_id: NodeId,
    body: NodeRegistration,
    store: StoreDep,
) -> Node:
    """Register or renew a live node (a remote worker) for ``ttl_seconds``."""
    node = store.register_node(
        node_id,
        kind=body.kind,
        buckets=body.buckets,
        ttl=timedelta(seconds=body.ttl_seconds),
        jobs=[(served.job, served.version) for served in body.jobs],
    )
    return Node.from_domain(node)


@router.delete(
    "/nodes/{node_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    **guarded(Scope.WORK, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def deregister_node(node_id: NodeId, store: StoreDep) -> Response:
    """Forget a node at once (a clean shutdown); unknown ids are ignored."""
    store.deregister_node(node_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)

"""Routes for schedules: add, list, read, change, pause, resume, delete, run now and preview.

Every endpoint is a plain ``def`` (the store is synchronous; FastAPI runs these in
its thread pool). Errors raised by the store name its fields; they are renamed to
the API's (``every`` -> ``every_seconds``, see :mod:`fencepost.wire.mapping`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from itertools import islice
from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import ActorDep, Cursor, Limit, StoreDep, guarded
from fencepost.api.executions import etag
from fencepost.domain import models
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.scheduler.handle import ScheduleHandle
from fencepost.scheduler.materializer import scheduler_warning
from fencepost.store.base import Store
from fencepost.timing.rules import make_rule
from fencepost.wire import executions as executions_wire
from fencepost.wire import schedules as schemas
from fencepost.wire.fields import MAX_NAME, NAME_PATTERN, Instant

router = APIRouter(tags=["schedules"])

#: The most fire times one preview returns.
MAX_PREVIEW = schemas.MAX_PREVIEW

_ONE_RULE = "give exactly one of cron or every_seconds"


#: The schedule verbs' name for a schedule's version (the API's too).
_VERSION = "version"


@contextmanager
def _api_names(**extra: str) -> Iterator[None]:
    """Rename the field of a store's ValidationError to the API's name for it."""
    try:
        yield
    except ValidationError as exc:
        field = extra.get(exc.field) or schemas.ScheduleCreate.api_field(exc.field)
        raise ValidationError(field, exc.message) from None


def _next_fire(store: Store, schedule: models.Schedule, now: datetime) -> datetime | None:
    if schedule.paused:
        return None
    fires = ScheduleHandle(store, schedule).preview(1, after=now)
    return fires[0] if fires else None


def _view(store: Store, schedule: models.Schedule) -> schemas.Schedule:
    next_fire_at = _next_fire(store, schedule, store.clock.now())
    return schemas.Schedule.from_domain(schedule, next_fire_at=next_fire_at)


def _exists(store: Store, schedule_id: str) -> bool:
    try:
        store.get_schedule(schedule_id)
    except NotFound:
        return False
    return True


@router.post(
    "/schedules",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.ScheduleAdded,
    **guarded(
        Scope.ADMIN,
        p.VALIDATION,
        p.IDEMPOTENCY_CONFLICT,
        p.BODY_TOO_LARGE,
        p.STORE_UNAVAILABLE,
        **{"200": {"model": schemas.ScheduleAdded, "description": "Replay of an idempotent add"}},
    ),
)
def add_schedule(
    body: schemas.ScheduleCreate, store: StoreDep, response: Response
) -> schemas.ScheduleAdded:
    """Store a schedule (201); with ``id``, the same body again returns it (200).

    ``warnings`` says what would keep it from firing: that no scheduler is running
    (no live materializer, as with ``fencepost serve --no-scheduler`` and none elsewhere).
    """
    if (body.cron is None) == (body.every_seconds is None):
        raise ValidationError("cron", _ONE_RULE + (", not both" if body.cron is not None else ""))
    arguments = body.arguments()  # the store's job catalogue decides version and defaults
    # The store returns an existing schedule for a repeated id without saying so.
    # Looking first tells 200 from 201, except for two racing first requests with
    # one id, which may both answer 201 (with the same schedule).
    existed = body.id is not None and _exists(store, body.id)
    with _api_names():
        schedule = store.add_schedule(arguments.pop("job"), **arguments)
    if existed:
        response.status_code = status.HTTP_200_OK
    warning = scheduler_warning(store, schedules=not schedule.paused)
    return schemas.ScheduleAdded.from_domain(
        schedule,
        next_fire_at=_next_fire(store, schedule, store.clock.now()),
        warnings=[] if warning is None else [warning],
    )


@router.get(
    "/schedules",
    response_model=schemas.SchedulePage,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def list_schedules(
    store: StoreDep,
    job: Annotated[
        str | None, Query(min_length=1, max_length=MAX_NAME, pattern=NAME_PATTERN)
    ] = None,
    paused: bool | None = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> schemas.SchedulePage:
    """Schedules matching every filter, ordered by id."""
    with _api_names(after="cursor"):
        page = store.schedules(job=job, paused=paused, limit=limit, after=cursor)
    now = store.clock.now()
    items = [
        schemas.Schedule.from_domain(s, next_fire_at=_next_fire(store, s, now)) for s in page.items
    ]
    return schemas.SchedulePage(items=items, next_cursor=page.next_cursor)


# Before /schedules/{schedule_id}: a path is routed to the first route it matches, and
# a 405's Allow header lists the methods of that route.
@router.post(
    "/schedules/preview",
    response_model=schemas.FireTimes,
    **guarded(Scope.READ, p.VALIDATION, p.BODY_TOO_LARGE, p.CSRF, p.STORE_UNAVAILABLE),
)
def preview_rule(body: schemas.RulePreview, store: StoreDep) -> schemas.FireTimes:
    """The next ``count`` fire times after ``after`` of a rule that is stored nowhere.

    What a schedule with these rule fields would fire (as ``GET
    /schedules/{id}/preview`` answers for a stored one): the console previews an
    edit with it before saving. Reads only: the read scope is enough. A bad rule is
    a 422 naming its field (``cron``, ``every_seconds``, ``timezone``, ``end_at``).
    """
    if (body.cron is None) == (body.every_seconds is None):
        raise ValidationError("cron", _ONE_RULE + (", not both" if body.cron is not None else ""))
    arguments = body.arguments()
    count, after = arguments.pop("count"), arguments.pop("after", None)
    with _api_names():
        rule = make_rule(**arguments)
    start = store.clock.now() if after is None else after
    return schemas.FireTimes(fire_times=list(islice(rule.slots(start), count)))


@router.get(
    "/schedules/{schedule_id}",
    response_model=schemas.Schedule,
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_schedule(schedule_id: str, store: StoreDep) -> schemas.Schedule:
    """One schedule."""
    return _view(store, store.get_schedule(schedule_id))


@router.patch(
    "/schedules/{schedule_id}",
    response_model=schemas.Schedule,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.BODY_TOO_LARGE, p.STORE_UNAVAILABLE),
)
def update_schedule(
    schedule_id: str, body: schemas.ScheduleUpdate, store: StoreDep, actor: ActorDep
) -> schemas.Schedule:
    """Change the given fields; the change applies to slots not materialized yet."""
    changes = body.arguments()
    if not changes:
        raise ValidationError("body", "give at least one field to change")
    current = store.get_schedule(schedule_id)
    # One rule given replaces the other kind, so {"every_seconds": 60} turns a cron
    # schedule into an interval one without the client also sending "cron": null.
    for rule, other in (("cron", "every"), ("every", "cron")):
        if changes.get(rule) is not None and other not in changes:
            changes[other] = None
    if (changes.get("cron", current.cron) is None) == (changes.get("every", current.every) is None):
        given = changes.get("cron") is not None
        raise ValidationError("cron", _ONE_RULE + (", not both" if given else ""))
    with _api_names():
        updated = store.update_schedule(schedule_id, actor=actor, **changes)
    return _view(store, updated)


@router.delete(
    "/schedules/{schedule_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def delete_schedule(schedule_id: str, store: StoreDep) -> Response:
    """Remove a schedule; its executions that have not started are cancelled."""
    store.delete_schedule(schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/schedules/{schedule_id}/pause",
    response_model=schemas.Schedule,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def pause_schedule(schedule_id: str, store: StoreDep, actor: ActorDep) -> schemas.Schedule:
    """Pause a schedule (idempotent): nothing of it starts until it is resumed.

    Its occurrences not yet started become SKIPPED (reason ``paused``, audited as the
    token's name), and so does each slot that passes while it is paused.
    ``next_fire_at`` is null while it is paused.
    """
    return _view(store, store.pause_schedule(schedule_id, actor=actor))


@router.post(
    "/schedules/{schedule_id}/resume",
    response_model=schemas.Schedule,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def resume_schedule(schedule_id: str, store: StoreDep) -> schemas.Schedule:
    """Resume a paused schedule from its next slot (idempotent)."""
    return _view(store, store.resume_schedule(schedule_id))


@router.post(
    "/schedules/{schedule_id}/run",
    status_code=status.HTTP_201_CREATED,
    response_model=executions_wire.Execution,
    **guarded(Scope.ADMIN, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def run_schedule(
    schedule_id: str, store: StoreDep, actor: ActorDep, response: Response
) -> executions_wire.Execution:
    """Run a schedule once now, besides its slots: 201 with the new execution.

    It runs the schedule's job, version and inputs in its queue, due now, audited as
    the token's name. It is no slot of the rule: ``slot`` is null and
    ``idempotency_key`` is ``{schedule_id}:run:{execution id}``, so the slot of the same
    instant still runs. Each request runs it once more (not idempotent). A paused
    schedule runs too. 404 when no schedule has the id.
    """
    execution = store.run_schedule(schedule_id, actor=actor)
    response.headers["ETag"] = etag(execution)
    return executions_wire.Execution.from_domain(execution)


@router.get(
    "/schedules/{schedule_id}/preview",
    response_model=schemas.FireTimes,
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def preview_schedule(
    schedule_id: str,
    store: StoreDep,
    count: Annotated[int, Query(ge=1, le=MAX_PREVIEW)] = 10,
    after: Annotated[
        Instant | None, Query(description="ISO 8601 with offset; default: now")
    ] = None,
) -> schemas.FireTimes:
    """The next ``count`` fire times after ``after``, per the rule, time zone and DST policy.

    Paused or not: this is what the rule says, not what will run.
    """
    handle = ScheduleHandle(store, store.get_schedule(schedule_id))
    return schemas.FireTimes(fire_times=handle.preview(count, after=after))

"""The bodies of the schedules routes (see :mod:`fencepost.api.schedules`).

A schedule's durations travel in seconds: ``every_seconds`` is ``every`` and
``misfire_grace_seconds`` is ``misfire_grace`` (see :mod:`fencepost.wire.mapping`).
Times are ISO 8601 strings with a UTC offset (UTC on output).
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    field_validator,
)

from fencepost.domain import models
from fencepost.domain import schedules as plans
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.domain.submission import PRIORITY_RANGE
from fencepost.timing.zones import iana_names
from fencepost.wire.fields import (
    MAX_DURATION_SECONDS,
    MIN_SECONDS,
    WHOLE,
    Count,
    Inputs,
    Instant,
    LimitKey,
    Name,
    QueueName,
    name_pattern,
)
from fencepost.wire.mapping import RequestModel, WireModel

_Priority = Annotated[StrictInt, Field(ge=PRIORITY_RANGE[0], le=PRIORITY_RANGE[1]), WHOLE]
# The store keeps durations to the microsecond: a shorter interval would round to zero.
_Interval = Annotated[float, Field(ge=MIN_SECONDS, le=MAX_DURATION_SECONDS, strict=True)]
_Grace = Annotated[float, Field(ge=0, le=MAX_DURATION_SECONDS, strict=True)]
#: A schedule id given by a client: a name (see :data:`~fencepost.wire.fields.NAME_PATTERN`)
#: without "/".
ScheduleId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=plans.MAX_SCHEDULE_ID,
        pattern=name_pattern("/"),
    ),
]
#: A cron expression: 5 fields, or 6 with leading seconds, that fires at least once.
#: No JSON Schema states that grammar; ``format: cron`` names it.
Cron = Annotated[str, Field(min_length=1, json_schema_extra={"format": "cron"})]


def _known_zone(value: str) -> str:
    # Only names the time zone database lists reach ZoneInfo: it answers some other
    # strings (a directory such as "America", an overlong name) with an OSError.
    if value not in _ZONES:
        raise ValueError(f"unknown time zone {value!r} (an IANA name such as Europe/Paris)")
    return value


#: The zones a schedule may name (fencepost.timing.zones: IANA names and UTC, no localtime).
_ZONES = iana_names() | {"UTC"}
#: An IANA time zone name, as this host's time zone database lists them.
TimeZone = Annotated[
    str,
    AfterValidator(_known_zone),
    WithJsonSchema({"type": "string", "enum": sorted(_ZONES)}),
]


def _one_rule(schema: dict[str, Any]) -> None:
    """State "exactly one rule, and an interval keeps UTC" as two kinds of schedule.

    One object schema per rule, each allowing the other rule only as null, is a
    ``oneOf`` that generators and validators read alike (constraints beside the
    properties, as ``oneOf`` of ``required`` lists, are read by too few of them).
    """
    cron, every = copy.deepcopy(schema), copy.deepcopy(schema)
    cron["properties"]["cron"] = _non_null(cron["properties"]["cron"])
    cron["properties"]["every_seconds"] = {"type": "null"}
    cron["required"] = [*schema.get("required", []), "cron"]
    every["properties"]["every_seconds"] = _non_null(every["properties"]["every_seconds"])
    every["properties"]["cron"] = {"type": "null"}
    every["properties"]["timezone"] = {"const": "UTC", "default": "UTC"}
    every["required"] = [*schema.get("required", []), "every_seconds"]
    for variant, title in ((cron, "CronSchedule"), (every, "IntervalSchedule")):
        variant["title"] = title
        variant.pop("description", None)
    kept: dict[str, Any] = {k: schema[k] for k in ("title", "description") if k in schema}
    schema.clear()
    schema.update(kept, oneOf=[cron, every])


def _non_null(declared: dict[str, Any]) -> dict[str, Any]:
    """A property's schema without its ``null`` branch and ``null`` default."""
    declared = {key: value for key, value in declared.items() if key != "default"}
    [value] = [b for b in declared.pop("anyOf") if b.get("type") != "null"]
    return {**declared, **value}


#: At most one rule; an interval given with a time zone keeps UTC.
_AT_MOST_ONE_RULE: dict[str, Any] = {
    "not": {
        "anyOf": [
            {
                "required": ["cron", "every_seconds"],
                "properties": {"cron": {"type": "string"}, "every_seconds": {"type": "number"}},
            },
            {
                "required": ["every_seconds", "timezone"],
                "properties": {
                    "every_seconds": {"type": "number"},
                    "timezone": {"not": {"const": "UTC"}},
                },
            },
        ]
    }
}
#: The fields every schedule has a value for: a PATCH may change them, never clear them.
_NEVER_NULL = (
    "job",
    "timezone",
    "misfire",
    "misfire_grace_seconds",
    "max_catch_up",
    "overlap",
    "dst_gap",
    "dst_fold",
    "max_attempts",
    "priority",
    "paused",
)


def _update_schema(schema: dict[str, Any]) -> None:
    schema.update(_AT_MOST_ONE_RULE, minProperties=1)  # an empty PATCH changes nothing
    for field in _NEVER_NULL:
        schema["properties"][field] = _non_null(schema["properties"][field])


class ScheduleCreate(RequestModel):
    """The body of ``POST /schedules``; unknown fields are refused.

    Exactly one rule: ``cron`` (5 fields, or 6 with leading seconds, evaluated in
    ``timezone``) or ``every_seconds`` (a fixed interval on the UTC timeline).
    """

    model_config = ConfigDict(json_schema_extra=_one_rule)

    job: Name
    #: None: the latest registered version (with a job registry), else unpinned.
    version: Count | None = None
    inputs: Inputs = None
    cron: Cron | None = None
    every_seconds: _Interval | None = None
    #: The IANA zone ``cron`` runs in; an interval schedule must keep "UTC".
    timezone: TimeZone = "UTC"
    misfire: Misfire = Misfire.COALESCE
    misfire_grace_seconds: _Grace = plans.DEFAULT_MISFIRE_GRACE
    max_catch_up: Count = plans.DEFAULT_MAX_CATCH_UP
    overlap: Overlap = Overlap.ALLOW
    dst_gap: DstGap = DstGap.SHIFT
    dst_fold: DstFold = DstFold.ONCE
    #: No slot before this instant (inclusive).
    start_at: Instant | None = None
    #: No slot after this instant (inclusive).
    end_at: Instant | None = None
    #: None: the job's own (with a registry), else the store's default.
    max_attempts: Count | None = None
    priority: _Priority | None = None
    #: The queue its executions wait in; None: the job's own (from the job catalogue),
    #: else "default".
    queue: QueueName | None = None
    #: Store it paused (its slots are recorded SKIPPED until it is resumed).
    paused: StrictBool = False
    #: The key a per-key limit counts each of its executions under; None: none.
    limit_key: LimitKey | None = None
    #: Makes the request idempotent: the same id and body again return the schedule.
    #: It becomes a path segment (/schedules/{id}), so it holds no "/": that would make
    #: the schedule unreachable through this API.
    id: ScheduleId | None = None


class ScheduleUpdate(RequestModel):
    """The body of ``PATCH /schedules/{id}``: the fields to change; unknown ones are refused.

    A field sent as ``null`` is cleared (``end_at``, ``version``), or refused where
    a schedule must have a value. Giving one rule (``cron`` or ``every_seconds``)
    replaces the other kind; switching to an interval resets ``timezone`` to
    "UTC" unless it is given too.
    """

    model_config = ConfigDict(json_schema_extra=_update_schema)

    null_clears: ClassVar[bool] = True

    job: Name | None = None
    version: Count | None = None
    inputs: Inputs = None
    cron: Cron | None = None
    every_seconds: _Interval | None = None
    timezone: TimeZone | None = None
    misfire: Misfire | None = None
    misfire_grace_seconds: _Grace | None = None
    max_catch_up: Count | None = None
    overlap: Overlap | None = None
    dst_gap: DstGap | None = None
    dst_fold: DstFold | None = None
    start_at: Instant | None = None
    end_at: Instant | None = None
    max_attempts: Count | None = None
    priority: _Priority | None = None
    #: null: back to "default".
    queue: QueueName | None = None
    paused: StrictBool | None = None
    #: null: no limit key for its later executions.
    limit_key: LimitKey | None = None

    @field_validator(*_NEVER_NULL, mode="before")
    @classmethod
    def _not_cleared(cls, value: object) -> object:
        if value is None:
            raise ValueError("cannot be null: every schedule has one")
        return value


class Schedule(WireModel[models.Schedule]):
    """One schedule as the store holds it, with its next fire time."""

    #: The materializer's lease on a schedule is the scheduler's business, not the API's.
    not_on_the_wire: ClassVar[dict[str, Any]] = {"materializer": None, "lease_until": None}
    readable: ClassVar[tuple[str, ...]] = ("inputs",)

    id: str
    job: str
    version: int | None
    inputs: Any
    cron: str | None
    every_seconds: float | None
    timezone: str
    dst_gap: DstGap
    dst_fold: DstFold
    misfire: Misfire
    misfire_grace_seconds: float
    max_catch_up: int
    overlap: Overlap
    start_at: datetime | None
    end_at: datetime | None
    max_attempts: int
    priority: int
    queue: str
    paused: bool
    #: Every slot at or before this instant has been materialized or recorded.
    watermark: datetime
    #: When a materializer next looks at the schedule.
    next_due: datetime
    created_at: datetime
    updated_at: datetime
    #: The next slot after the store's now; null when paused or when none is left.
    next_fire_at: datetime | None
    #: The key a per-key limit counts its executions under; null: none. (Absent from
    #: an older service's answers: read as null.)
    limit_key: str | None = None


class ScheduleAdded(Schedule):
    """The schedule ``POST /schedules`` stored (or found), and what it should know."""

    #: What would keep the schedule from firing, e.g. that no scheduler is running
    #: (no ``fencepost serve`` or ``fencepost worker --with-scheduler`` is alive).
    warnings: list[str] = Field(default_factory=list)


class SchedulePage(WireModel[models.SchedulePage]):
    """One page of schedules by id; pass ``next_cursor`` as ``cursor`` for the next one."""

    items: list[Schedule]
    next_cursor: str | None


#: The most fire times one preview returns.
MAX_PREVIEW = 1000


class RulePreview(RequestModel):
    """The body of ``POST /schedules/preview``: a schedule's rule, stored nowhere.

    The rule fields as ``POST /schedules`` takes them (exactly one of ``cron`` and
    ``every_seconds``), with where to start (``after``, default now) and how many
    fire times to give (``count``). ``anchor`` is an interval's phase (its slots are
    ``anchor + k * every``): default ``start_at``, else the Unix epoch; a stored
    schedule's is its ``start_at`` or, without one, its ``created_at``. A cron rule
    ignores it.
    """

    model_config = ConfigDict(json_schema_extra=_one_rule)

    cron: Cron | None = None
    every_seconds: _Interval | None = None
    timezone: TimeZone = "UTC"
    dst_gap: DstGap = DstGap.SHIFT
    dst_fold: DstFold = DstFold.ONCE
    start_at: Instant | None = None
    end_at: Instant | None = None
    anchor: Instant | None = None
    after: Instant | None = None
    count: Annotated[StrictInt, Field(ge=1, le=MAX_PREVIEW), WHOLE] = 10


class FireTimes(BaseModel):
    """The next fire instants of a schedule, in UTC, oldest first."""

    fire_times: list[datetime]

"""Schedules: a validated definition, slot texts, and the executions of occurrences (pure; no I/O).

Every backend goes through these functions. A definition is checked by
:func:`fencepost.timing.specs.define` (and, merged with the stored schedule, by
:func:`~fencepost.timing.specs.amend`), which parse its rule and zone and so live
in ``timing``; they return the :class:`ScheduleSpec` defined here.
:func:`new_schedule`, :func:`pause` and :func:`resume` decide what a verb writes;
:func:`new_occurrence` and :meth:`NewOccurrence.to_execution` turn a planned
occurrence into the execution a backend inserts (if its key is new);
:func:`run_now` is the extra occurrence an operator asks for (``run_schedule``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from fencepost.domain import payloads
from fencepost.domain.buckets import bucket_for
from fencepost.domain.checks import DEFAULT_QUEUE, require_name
from fencepost.domain.durations import as_aware_utc
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import (
    JSON,
    Execution,
    Occurrence,
    Schedule,
    scheduled_execution,
)
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.domain.states import State

#: The fields ``add_schedule`` takes besides ``id``, which ``update_schedule`` may change.
SCHEDULE_FIELDS = (
    "job",
    "job_version",
    "inputs",
    "cron",
    "every",
    "timezone",
    "dst_gap",
    "dst_fold",
    "misfire",
    "misfire_grace",
    "max_catch_up",
    "overlap",
    "start_at",
    "end_at",
    "max_attempts",
    "priority",
    "queue",
    "paused",
    "limit_key",
)


class ScheduleOptions(TypedDict, total=False):
    """``add_schedule``'s options beside ``job``, declared once.

    ``Store``, ``AsyncStore``, ``App.schedule``, ``Client`` and ``AsyncClient`` take
    them as keywords typed by this (``**options: Unpack[ScheduleOptions]``), and the
    body of ``POST /schedules`` carries each (tests/unit/test_argument_names.py holds
    them equal). What each means is :meth:`Store.add_schedule
    <fencepost.store.scheduling.ScheduleVerbs.add_schedule>`'s; one left out takes the
    default :func:`fencepost.timing.specs.define` gives it (the one place defaults are).
    """

    cron: str | None
    every: float | timedelta | None
    timezone: str  #: default ``"UTC"``
    inputs: JSON
    version: int | None
    misfire: Misfire | str  #: default ``coalesce``
    misfire_grace: float | timedelta  #: default :data:`DEFAULT_MISFIRE_GRACE` seconds
    max_catch_up: int  #: default :data:`DEFAULT_MAX_CATCH_UP`
    overlap: Overlap | str  #: default ``allow``
    dst_gap: DstGap | str  #: default ``shift``
    dst_fold: DstFold | str  #: default ``once``
    start_at: datetime | None
    end_at: datetime | None
    max_attempts: int | None
    priority: int | None
    id: str | None
    paused: bool  #: default False
    queue: str | None
    limit_key: str | None
    #: The deprecated name of ``version`` (a :class:`DeprecationWarning`).
    job_version: int | None


#: Seconds by which a slot may be late before the misfire policy applies.
DEFAULT_MISFIRE_GRACE = 60
#: The most missed slots a ``catch_up`` schedule runs after downtime.
DEFAULT_MAX_CATCH_UP = 100
#: The actor recorded on executions cancelled because their schedule was deleted.
SCHEDULE_DELETED = "schedule deleted"
#: The longest schedule id: leaves room for ``:slot`` in a 255-character idempotency key.
MAX_SCHEDULE_ID = 200

_US = timedelta(microseconds=1)
_MAX_REASON = 8_192


# -- slots -----------------------------------------------------------------------------


def slot_text(instant: datetime) -> str:
    """The stored text of a slot: ISO 8601 in UTC with ``Z``, e.g. ``2026-11-29T02:00:00Z``.

    Seconds are always present; a fraction only when the instant has microseconds
    (then all six digits: ``2026-11-29T02:00:00.250000Z``). Naive instants are refused.
    """
    utc = as_aware_utc(instant, field="slot").replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds") + "Z"


def parse_slot(text: str) -> datetime:
    """The aware UTC instant of a text written by :func:`slot_text`; ValueError otherwise."""
    try:
        instant = datetime.fromisoformat(text).astimezone(UTC) if text.endswith("Z") else None
    except ValueError:
        instant = None
    if instant is None or slot_text(instant) != text:
        raise ValueError(f"not a slot text: {text!r} (expected e.g. 2026-11-29T02:00:00Z)")
    return instant


def occurrence_key(schedule_id: str, slot: datetime) -> str:
    """The idempotency key of a schedule's occurrence: ``schedule_id:slot``."""
    return f"{schedule_id}:{slot_text(slot)}"


#: The mark between a schedule's id and an execution id in the key of a run asked for
#: now (:func:`run_now_key`).
RUN_NOW = "run"


def run_now_key(schedule_id: str, execution_id: str) -> str:
    """The idempotency key of an extra run of a schedule: ``schedule_id:run:execution_id``.

    It never equals an occurrence's key (:func:`occurrence_key`), nor another run's:
    what follows the last ``:`` is the run's execution id (a UUID, without ``:``),
    where an occurrence key ends in its slot's seconds and ``Z`` (``00Z``,
    ``05.250000Z``); and the execution id is new, so no two runs share a key.
    """
    return f"{schedule_id}:{RUN_NOW}:{execution_id}"


# -- definitions -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleSpec:
    """A validated schedule definition: the fields of ``add_schedule`` besides ``id``."""

    job: str
    job_version: int | None
    inputs: JSON
    inputs_json: str
    cron: str | None
    every: timedelta | None
    timezone: str
    dst_gap: DstGap
    dst_fold: DstFold
    misfire: Misfire
    misfire_grace: timedelta
    max_catch_up: int
    overlap: Overlap
    start_at: datetime | None
    end_at: datetime | None
    max_attempts: int
    priority: int
    queue: str
    paused: bool
    #: The limit key every materialized execution carries (None: none).
    limit_key: str | None = None

    def fields(self) -> dict[str, Any]:
        """The values of the :class:`Schedule` fields this definition sets."""
        return {name: getattr(self, name) for name in SCHEDULE_FIELDS}

    def derived_id(self) -> str:
        """A stable id for a schedule added without one: its job, rule, zone and inputs
        (and limit key, when it has one).

        ``fencepost schedule add JOB --cron EXPR`` run twice names the same schedule,
        so the second returns the first (as ``app.schedule(id=...)`` does) instead of
        storing a twin; with ``--limit-key``, each key names its own schedule. The
        job's name is kept readable, cut to a path-safe prefix.
        """
        digest = payloads.fingerprint(
            {
                "job": self.job,
                "cron": self.cron,
                "every_us": None if self.every is None else self.every // _US,
                "timezone": self.timezone,
                "inputs": self.inputs,
            }
            # A limit key (a tenant's) names another schedule; without one, the ids
            # derived before limit keys existed stay as they were.
            | ({} if self.limit_key is None else {"limit_key": self.limit_key})
        )[:16]
        readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.job).strip("-.")[:80]
        return f"{readable or 'schedule'}-{digest}"

    def fingerprint(self) -> str:
        """A digest of the definition, to tell a retried ``add_schedule`` from a different one."""
        return payloads.fingerprint(
            {
                "job": self.job,
                "job_version": self.job_version,
                "inputs": self.inputs,
                "cron": self.cron,
                "every_us": None if self.every is None else self.every // _US,
                "timezone": self.timezone,
                "dst_gap": self.dst_gap.value,
                "dst_fold": self.dst_fold.value,
                "misfire": self.misfire.value,
                "misfire_grace_us": self.misfire_grace // _US,
                "max_catch_up": self.max_catch_up,
                "overlap": self.overlap.value,
                "start_at": None if self.start_at is None else self.start_at.isoformat(),
                "end_at": None if self.end_at is None else self.end_at.isoformat(),
                "max_attempts": self.max_attempts,
                "priority": self.priority,
                "paused": self.paused,
            }
            # Only a named queue is fingerprinted: schedules added before queues
            # existed (all in the default queue) keep matching their re-adds.
            | ({} if self.queue == DEFAULT_QUEUE else {"queue": self.queue})
            # Likewise a limit key: schedules added before limit keys keep matching.
            | ({} if self.limit_key is None else {"limit_key": self.limit_key})
        )


def check_schedule_id(value: object) -> str:
    """A user-given schedule id: a non-blank string of at most 200 characters.

    Without ``/`` and other than ``.`` and ``..``: the HTTP API addresses a schedule
    by its id as one path segment (``/schedules/{id}``), and clients resolve dot
    segments before they send a request.
    """
    name = require_name(value, "id", max_len=MAX_SCHEDULE_ID)
    if "/" in name or name in (".", ".."):
        raise ValidationError(
            "id", f"must be one URL path segment (no '/', not '.' or '..'), got {name!r}"
        )
    return name


def new_schedule(spec: ScheduleSpec, *, id: str, now: datetime) -> Schedule:
    """The schedule ``add_schedule`` stores at the store's ``now``.

    Slots strictly after the watermark are the ones still to come: the watermark
    is one microsecond before ``start_at`` when that is in the future (so a slot
    at ``start_at`` runs), else ``now``. ``next_due = now``: a materializer looks
    at a new schedule at once.
    """
    start = spec.start_at
    watermark = start - _US if start is not None and start > now else now
    return Schedule(
        id=id,
        **spec.fields(),
        watermark=watermark,
        next_due=now,
        materializer=None,
        lease_until=None,
        created_at=now,
        updated_at=now,
    )


def arguments(schedule: Schedule) -> dict[str, Any]:
    """A stored schedule's definition as ``add_schedule`` arguments (without ``id``)."""
    return {name: getattr(schedule, name) for name in SCHEDULE_FIELDS}


def check_changes(changes: Mapping[str, object]) -> None:
    """Refuse ``update_schedule`` changes that name no changeable field."""
    for name in changes:
        if name == "id":
            raise ValidationError("id", "a schedule's id cannot be changed")
        if name not in SCHEDULE_FIELDS:
            raise ValidationError(name, "is not a field of a schedule")


#: The reason recorded on an occurrence SKIPPED because its schedule is paused: those
#: stored before the pause, and the slots that pass while it lasts.
PAUSED = "paused"


def pauses(current: Schedule, changed: Schedule) -> bool:
    """Whether storing ``changed`` over ``current`` pauses the schedule (not paused before)."""
    return changed.paused and not current.paused


def skipped_by_pause(execution: Execution) -> bool:
    """Whether pausing its schedule skips ``execution``: an occurrence that has not started.

    SCHEDULED and never claimed (``epoch == 0``, since every claim raises the epoch and
    nothing lowers it). One that started once is left to finish its attempts: a
    retry waiting (RETRY_WAIT), one a worker gave back, a replayed dead letter.
    """
    return execution.state is State.SCHEDULED and execution.epoch == 0


def pause(current: Schedule, *, now: datetime) -> Schedule | None:
    """``current`` paused (re-planned at once, lease cleared), or None if it already is."""
    if current.paused:
        return None
    return _replanned(current, now, paused=True)


def resume(current: Schedule, *, now: datetime) -> Schedule | None:
    """``current`` resumed (re-planned at once, lease cleared), or None if it is not paused."""
    if not current.paused:
        return None
    return _replanned(current, now, paused=False)


def _replanned(current: Schedule, now: datetime, *, paused: bool) -> Schedule:
    return replace(
        current, paused=paused, next_due=now, materializer=None, lease_until=None, updated_at=now
    )


def holds_lease(stored: Schedule, presented: Schedule, now: datetime) -> bool:
    """The fence of ``materialize``: ``presented`` (as acquired) still holds ``stored``.

    Same materializer, same ``lease_until`` (so a lease taken again, or cleared
    by an update, pause or resume, does not pass), and the lease is live:
    ``now < lease_until``.
    """
    return (
        presented.materializer is not None
        and presented.lease_until is not None
        and stored.materializer == presented.materializer
        and stored.lease_until == presented.lease_until
        and now < presented.lease_until
    )


# -- occurrences -----------------------------------------------------------------------


def check_occurrence(value: object, field: str) -> Occurrence:
    """An :class:`Occurrence` with its instants in UTC, or a ValidationError on ``field``."""
    if not isinstance(value, Occurrence):
        raise ValidationError(field, f"must be an Occurrence, got {value!r}")
    slot = as_aware_utc(value.slot, field=f"{field}.slot")
    due_at = as_aware_utc(value.due_at, field=f"{field}.due_at")
    if value.skipped is not None:
        require_name(value.skipped, f"{field}.skipped", max_len=_MAX_REASON)
    return Occurrence(slot=slot, due_at=due_at, skipped=value.skipped)


@dataclass(frozen=True, kw_only=True, slots=True)
class NewOccurrence:
    """A validated occurrence, ready for a backend to insert as an execution (if its key is new)."""

    id: str  #: the execution's id, if it is inserted
    schedule_id: str
    #: :func:`slot_text` of the occurrence's slot; None for a run asked for now
    #: (:func:`run_now`), which is no slot of the rule.
    slot: str | None
    idempotency_key: str  #: ``schedule_id:slot`` (a run asked for now: :func:`run_now_key`)
    due_at: datetime
    skipped: str | None  #: the reason it is stored SKIPPED, if policy skipped it
    bucket: int
    #: Who asked for it, for its SUBMITTED audit record: None for what a materializer
    #: or a backfill stores (the schedule asked), the caller of ``run_schedule`` else.
    actor: str | None = None

    def to_execution(self, schedule: Schedule, now: datetime) -> Execution:
        """The execution as inserted (SCHEDULED; a skipped one moves on to SKIPPED).

        It runs the schedule's job, version, inputs, attempts and priority, in its queue.
        """
        return scheduled_execution(
            schedule, self, created_at=now, schedule_id=self.schedule_id, slot=self.slot
        )


def new_occurrence(
    schedule_id: str, occurrence: Occurrence, *, new_id: str, num_buckets: int
) -> NewOccurrence:
    """The insertable form of a validated occurrence; its bucket comes from its execution id."""
    slot = slot_text(occurrence.slot)
    return NewOccurrence(
        id=new_id,
        schedule_id=schedule_id,
        slot=slot,
        idempotency_key=f"{schedule_id}:{slot}",
        due_at=occurrence.due_at,
        skipped=occurrence.skipped,
        bucket=bucket_for(new_id, num_buckets),
    )


def run_now(
    schedule_id: str, *, new_id: str, due_at: datetime, num_buckets: int, actor: str
) -> NewOccurrence:
    """The extra occurrence ``run_schedule`` stores: due at ``due_at`` (the store's now).

    It is an execution of the schedule like its occurrences (its job, version, inputs,
    attempts, priority and queue; ``schedule_id`` set), but no slot of its rule:
    ``slot`` is None and its key is :func:`run_now_key`, so it never takes the place of
    a slot, and a slot never takes its place. Its planned time is ``due_at``. Its
    bucket comes from its execution id, and ``actor`` is audited as its submitter.
    """
    return NewOccurrence(
        id=new_id,
        schedule_id=schedule_id,
        slot=None,
        idempotency_key=run_now_key(schedule_id, new_id),
        due_at=due_at,
        skipped=None,
        bucket=bucket_for(new_id, num_buckets),
        actor=actor,
    )

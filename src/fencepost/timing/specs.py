"""Schedule definitions: the arguments of ``add_schedule`` and ``update_schedule``, validated.

:func:`define` checks a whole definition — its job and inputs as a submission
would, its rule (a cron expression in a time zone, or an interval), its DST,
misfire and overlap policies and its bounds — and returns the
:class:`~fencepost.domain.schedules.ScheduleSpec` a backend stores;
:func:`amend` does the same for a stored schedule with some fields changed.
Every error names its field; nothing is guessed.

They live in ``timing`` rather than beside ``ScheduleSpec`` in the domain
because a rule is checked by parsing it (:func:`~fencepost.timing.cron.parse_cron`)
and loading its zone (:func:`~fencepost.timing.zones.zone`), and the domain
imports nothing outside itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from fencepost.domain import payloads
from fencepost.domain.checks import INT32_MAX, require_int, require_name, require_queue
from fencepost.domain.durations import as_aware_utc, as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.limits import require_limit_key
from fencepost.domain.models import Schedule
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap, parse_policy
from fencepost.domain.schedules import (
    DEFAULT_MAX_CATCH_UP,
    DEFAULT_MISFIRE_GRACE,
    ScheduleSpec,
    arguments,
    check_changes,
)
from fencepost.domain.submission import DEFAULT_MAX_ATTEMPTS, PRIORITY_RANGE
from fencepost.timing.cron import parse_cron
from fencepost.timing.zones import zone


def define(
    job: object,
    *,
    max_payload_bytes: int,
    cron: object = None,
    every: object = None,
    timezone: object = "UTC",
    inputs: object = None,
    job_version: object = None,
    misfire: object = Misfire.COALESCE,
    misfire_grace: object = DEFAULT_MISFIRE_GRACE,
    max_catch_up: object = DEFAULT_MAX_CATCH_UP,
    overlap: object = Overlap.ALLOW,
    dst_gap: object = DstGap.SHIFT,
    dst_fold: object = DstFold.ONCE,
    start_at: object = None,
    end_at: object = None,
    max_attempts: object = DEFAULT_MAX_ATTEMPTS,
    priority: object = 0,
    queue: object = None,
    paused: object = False,
    limit_key: object = None,
) -> ScheduleSpec:
    """Validate a schedule definition; every error names its field, nothing is guessed."""
    name = require_name(job, "job")
    version = (
        None
        if job_version is None
        else require_int(job_version, "job_version", low=1, high=INT32_MAX)
    )
    inputs = payloads.as_inputs(inputs)
    inputs_json = payloads.encode(inputs, field="inputs", limit=max_payload_bytes)
    if (cron is None) == (every is None):
        raise ValidationError(
            "cron", "give exactly one of cron or every" + (", not both" if cron is not None else "")
        )
    rule = None if cron is None else parse_cron(cron, field="cron")
    interval = None if every is None else as_duration(every, field="every")
    zone(timezone)  # raises on "timezone"
    assert isinstance(timezone, str)
    if interval is not None and timezone != "UTC":
        raise ValidationError(
            "timezone",
            f"an every= schedule runs on the UTC timeline; timezone applies to cron only, "
            f"got {timezone!r}",
        )
    gap = parse_policy(DstGap, dst_gap, "dst_gap")
    fold = parse_policy(DstFold, dst_fold, "dst_fold")
    mis = parse_policy(Misfire, misfire, "misfire")
    grace = as_duration(misfire_grace, field="misfire_grace", allow_zero=True)
    catch_up = require_int(max_catch_up, "max_catch_up", low=1, high=INT32_MAX)
    lap = parse_policy(Overlap, overlap, "overlap")
    start = None if start_at is None else as_aware_utc(start_at, field="start_at")
    end = None if end_at is None else as_aware_utc(end_at, field="end_at")
    if start is not None and end is not None and end <= start:
        raise ValidationError(
            "end_at", f"must be after start_at ({start.isoformat()}), got {end.isoformat()}"
        )
    attempts = require_int(max_attempts, "max_attempts", low=1, high=INT32_MAX)
    prio = require_int(priority, "priority", low=PRIORITY_RANGE[0], high=PRIORITY_RANGE[1])
    if not isinstance(paused, bool):
        raise ValidationError("paused", f"must be True or False, got {paused!r}")
    return ScheduleSpec(
        job=name,
        job_version=version,
        inputs=payloads.decode(inputs_json),  # what a serializing backend would give back
        inputs_json=inputs_json,
        cron=rule,
        every=interval,
        timezone=timezone,
        dst_gap=gap,
        dst_fold=fold,
        misfire=mis,
        misfire_grace=grace,
        max_catch_up=catch_up,
        overlap=lap,
        start_at=start,
        end_at=end,
        max_attempts=attempts,
        priority=prio,
        queue=require_queue(queue),
        paused=paused,
        limit_key=require_limit_key(limit_key),
    )


def amend(
    current: Schedule, changes: Mapping[str, object], *, now: datetime, max_payload_bytes: int
) -> Schedule:
    """``current`` with ``changes``, validated as the combination they make.

    The watermark stays: the change applies to slots not materialized yet.
    ``next_due = now`` so a materializer plans again at once, and the
    materializer's lease is cleared, so a plan made from the old definition is
    refused (``materialize`` answers it with :class:`StaleLease`). Switching to
    ``every`` without naming a ``timezone`` resets it to ``UTC``.
    """
    check_changes(changes)
    merged = arguments(current) | dict(changes)
    if changes.get("every") is not None and "timezone" not in changes:
        merged["timezone"] = "UTC"
    spec = define(max_payload_bytes=max_payload_bytes, **merged)
    return replace(
        current, **spec.fields(), next_due=now, materializer=None, lease_until=None, updated_at=now
    )

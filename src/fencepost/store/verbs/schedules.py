"""Schedules: the validation of ``schedules``."""

from __future__ import annotations

from datetime import datetime

from fencepost.domain.checks import require_int, require_name
from fencepost.domain.durations import as_aware_utc
from fencepost.domain.errors import ValidationError
from fencepost.store.values import MAX_LIMIT, ScheduleFilter
from fencepost.store.verbs.reading import cursor_storable


def schedule_filter(
    *,
    job: str | None,
    paused: bool | None,
    limit: int,
    after: str | None,
    due_before: datetime | None,
) -> ScheduleFilter:
    """``Store.schedules``'s arguments validated; refusals are :class:`ValidationError`
    naming the argument."""
    if paused is not None and not isinstance(paused, bool):
        raise ValidationError("paused", f"must be True, False or None, got {paused!r}")
    if after is not None and not isinstance(after, str):
        raise ValidationError("after", f"must be a cursor string, got {after!r}")
    if not cursor_storable(after):
        raise ValidationError("after", "must be a cursor from a previous page")
    return ScheduleFilter(
        job=None if job is None else require_name(job, "job"),
        paused=paused,
        limit=require_int(limit, "limit", low=1, high=MAX_LIMIT),
        after=after,
        due_before=None if due_before is None else as_aware_utc(due_before, field="due_before"),
    )

"""``ScheduleHandle``: one stored schedule and the verbs that act on it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.durations import as_aware_utc
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Execution, Occurrence, Page, Schedule
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.timing.rules import rule_of

_MICROSECOND = timedelta(microseconds=1)

#: The most slots one backfill stores (a larger range is an error, not a flood).
MAX_BACKFILL = 100_000


class ScheduleHandle:
    """A schedule in a store: read it, change it, preview and backfill it.

    Attribute access falls through to the stored :class:`Schedule` as last read
    (``handle.cron``, ``handle.watermark``); :meth:`refresh` reads it again.
    """

    def __init__(self, store: Store, schedule: Schedule) -> None:
        self.store = store
        self.schedule = schedule

    def __getattr__(self, name: str) -> Any:
        return getattr(self.schedule, name)

    def __repr__(self) -> str:
        return f"ScheduleHandle({self.schedule!r})"

    def refresh(self) -> ScheduleHandle:
        """Read the schedule again."""
        self.schedule = self.store.get_schedule(self.schedule.id)
        return self

    def update(self, **changes: Any) -> ScheduleHandle:
        """Change fields; takes effect for slots not yet materialized."""
        self.schedule = self.store.update_schedule(self.schedule.id, **changes)
        return self

    def pause(self) -> ScheduleHandle:
        """Stop running it; slots that pass while paused are recorded SKIPPED ("paused")."""
        self.schedule = self.store.pause_schedule(self.schedule.id)
        return self

    def resume(self) -> ScheduleHandle:
        """Run it again from the next slot."""
        self.schedule = self.store.resume_schedule(self.schedule.id)
        return self

    def delete(self) -> None:
        """Remove it; its stored executions that have not started are cancelled."""
        self.store.delete_schedule(self.schedule.id)

    def preview(self, count: int = 10, *, after: datetime | None = None) -> list[datetime]:
        """The next ``count`` fire instants after ``after`` (default: now), aware UTC."""
        start = self.store.clock.now() if after is None else as_aware_utc(after, field="after")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 10_000:
            raise ValidationError("count", f"must be an integer from 1 to 10000, got {count!r}")
        slots = rule_of(self.schedule).slots(start)
        return [slot for slot, _ in zip(slots, range(count), strict=False)]

    def backfill(
        self, start: datetime, end: datetime, *, overlap: str = "allow"
    ) -> list[Execution]:
        """Store every slot in ``[start, end]`` that is not stored yet, to run now.

        Idempotent: slots that already have an execution (run, SKIPPED, anything)
        are left alone. ``overlap`` is ``allow``: the backfilled runs may run side
        by side (give the job's workers a low ``--concurrency`` to pace them).
        """
        begin = as_aware_utc(start, field="start")
        finish = as_aware_utc(end, field="end")
        if finish < begin:
            raise ValidationError("end", f"must not be before start ({begin.isoformat()})")
        if overlap != "allow":
            raise ValidationError(
                "overlap", f"backfill runs slots side by side: only 'allow', got {overlap!r}"
            )
        # The rule's slots are strictly after their start; step back one microsecond
        # so a slot exactly at ``start`` is included.
        occurrences: list[Occurrence] = []
        for slot in rule_of(self.schedule).slots(begin - _MICROSECOND, finish):
            occurrences.append(Occurrence(slot=slot, due_at=slot))
            if len(occurrences) > MAX_BACKFILL:
                raise ValidationError(
                    "end", f"the range holds more than {MAX_BACKFILL} slots; backfill in parts"
                )
        return self.store.add_occurrences(self.schedule.id, occurrences)

    def executions(
        self, *, state: State | str | None = None, limit: int = 100, after: str | None = None
    ) -> Page:
        """The schedule's executions (run and SKIPPED), by id."""
        return self.store.query(schedule=self.schedule.id, state=state, limit=limit, after=after)

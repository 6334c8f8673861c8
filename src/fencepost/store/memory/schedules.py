"""The memory store's schedules and their materializing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from fencepost.domain import schedules as plans
from fencepost.domain.errors import (
    IdempotencyConflict,
    NotFound,
    StaleLease,
)
from fencepost.domain.events import (
    ExecutionCancelled,
    ExecutionSkipped,
)
from fencepost.domain.machine import (
    lease_is_live,
)
from fencepost.domain.models import (
    Execution,
    Schedule,
    SchedulePage,
)
from fencepost.domain.schedules import NewOccurrence, ScheduleSpec
from fencepost.domain.states import (
    WAITING_STATES,
)
from fencepost.store.memory.core import MemoryCore
from fencepost.store.values import (
    Materialization,
    ScheduleFilter,
    stale_schedule,
)


class MemorySchedules(MemoryCore):
    """Schedules and their materializing."""

    def _add_schedule(self, spec: ScheduleSpec, schedule_id: str) -> Schedule:
        with self._lock:
            existing = self._schedules.get(schedule_id)
            fingerprint = spec.fingerprint()
            if existing is not None:
                if self._schedule_hashes[schedule_id] != fingerprint:
                    raise IdempotencyConflict(schedule_id, schedule_id, subject="schedule")
                return existing
            schedule = plans.new_schedule(spec, id=schedule_id, now=self.clock.now())
            self._schedules[schedule_id] = schedule
            self._schedule_hashes[schedule_id] = fingerprint
            return schedule

    def get_schedule(self, schedule_id: str) -> Schedule:
        with self._lock:
            return self._schedule(schedule_id)

    def _schedule(self, schedule_id: str) -> Schedule:
        try:
            return self._schedules[schedule_id]
        except KeyError:
            raise NotFound(schedule_id, subject="schedule") from None

    def _list_schedules(self, filters: ScheduleFilter) -> SchedulePage:
        after, job, paused, due_before = (
            filters.after,
            filters.job,
            filters.paused,
            filters.due_before,
        )
        with self._lock:
            found = sorted(
                (
                    s
                    for s in self._schedules.values()
                    if (after is None or s.id > after)
                    and (job is None or s.job == job)
                    and (paused is None or s.paused == paused)
                    and (due_before is None or s.next_due <= due_before)
                ),
                key=lambda s: s.id,
            )
        items = found[: filters.limit]
        more = len(found) > filters.limit
        return SchedulePage(items=items, next_cursor=items[-1].id if more else None)

    def _change_schedule(
        self,
        schedule_id: str,
        decide: Callable[[Schedule, datetime], Schedule | None],
        *,
        actor: str = "client",
    ) -> Schedule:
        with self._lock:
            current = self._schedule(schedule_id)
            now = self.clock.now()
            changed = decide(current, now)
            if changed is None:
                return current
            self._schedules[schedule_id] = changed
            if plans.pauses(current, changed):
                skipped = ExecutionSkipped(reason=plans.PAUSED, actor=actor)
                unstarted = sorted(
                    e.id
                    for e in self._rows.values()
                    if e.schedule_id == schedule_id and plans.skipped_by_pause(e)
                )
                for execution_id in unstarted:
                    self._apply(execution_id, skipped, now)
            return changed

    def delete_schedule(self, schedule_id: str) -> None:
        with self._lock:
            self._schedule(schedule_id)
            now = self.clock.now()
            waiting = sorted(
                e.id
                for e in self._rows.values()
                if e.schedule_id == schedule_id and e.state in WAITING_STATES
            )
            for execution_id in waiting:
                self._apply(execution_id, ExecutionCancelled(actor=plans.SCHEDULE_DELETED), now)
            del self._schedules[schedule_id]
            self._schedule_unset.pop(schedule_id, None)
            del self._schedule_hashes[schedule_id]

    def _acquire_schedules(self, owner: str, *, limit: int, ttl: timedelta) -> list[Schedule]:
        with self._lock:
            now = self.clock.now()
            due = sorted(
                (
                    s
                    for s in self._schedules.values()
                    if s.next_due <= now and not lease_is_live(s.lease_until, now)
                ),
                key=lambda s: (s.next_due, s.id),
            )[:limit]
            acquired = []
            for s in due:
                leased = replace(s, materializer=owner, lease_until=now + ttl)
                self._schedules[s.id] = leased
                acquired.append(leased)
            return acquired

    def _materialize(self, items: Sequence[Materialization]) -> list[list[Execution] | StaleLease]:
        with self._lock:
            now = self.clock.now()
            out: list[list[Execution] | StaleLease] = []
            for item in items:
                stored = self._schedules.get(item.schedule.id)
                if stored is None or not plans.holds_lease(stored, item.schedule, now):
                    out.append(stale_schedule(item.schedule))
                    continue
                found = self._insert_occurrences(stored, item.unique(), now)
                self._schedules[stored.id] = replace(
                    stored,
                    watermark=max(stored.watermark, item.watermark),
                    next_due=item.next_due,
                    materializer=None,
                    lease_until=None,
                )
                out.append(item.results(found))
            return out

    def _add_occurrences(
        self, schedule_id: str, occurrences: tuple[NewOccurrence, ...]
    ) -> list[Execution]:
        with self._lock:
            schedule = self._schedule(schedule_id)
            found = self._insert_occurrences(
                schedule, occurrences, self.clock.now(), by_caller=True
            )
            return [found[o.idempotency_key] for o in occurrences]

    def _insert_occurrences(
        self,
        schedule: Schedule,
        occurrences: Sequence[NewOccurrence],
        now: datetime,
        *,
        by_caller: bool = False,
    ) -> dict[str, Execution]:
        """Insert the occurrences whose key is new; every one's execution by key.

        ``by_caller``: a caller's (a backfill, a run now), not the materializer's own:
        one planned in the past is a backfill for the SLO.
        """
        found: dict[str, Execution] = {}
        for o in occurrences:
            existing_id = self._by_key.get(o.idempotency_key)
            if existing_id is not None:
                found[o.idempotency_key] = self._rows[existing_id]
                continue
            execution = o.to_execution(schedule, now)
            self._rows[o.id] = execution
            self._request_hashes[o.id] = None
            self._by_key[o.idempotency_key] = o.id
            self._record_submitted(o.id, now, o.actor)
            if by_caller and o.slot is not None:  # a run now has no slot: never a backfill
                self._mark_backfill(execution, now)
            if o.skipped is not None:
                execution = self._apply(o.id, ExecutionSkipped(reason=o.skipped), now)
            found[o.idempotency_key] = execution
        return found

    def _release_schedules(self, schedules: Sequence[Schedule]) -> None:
        with self._lock:
            for s in schedules:
                stored = self._schedules.get(s.id)
                if (
                    stored is not None
                    and stored.materializer == s.materializer
                    and stored.lease_until == s.lease_until
                ):
                    self._schedules[s.id] = replace(stored, materializer=None, lease_until=None)

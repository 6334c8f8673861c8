"""The schedule verbs of the SQL stores as plans, written once for both dialects over
their named blocks (``*_schedule*`` in each ``queries.sql``): adding, reading, listing,
changing (a pause skips what has not started) and deleting a schedule, and a
materializer's acquiring and releasing of schedules (materializing itself is still
written per dialect).

Each plan decides; the store it is given (:class:`~fencepost.store.sqlstore.SqlStore`)
gives the statements' text, binds times and durations, and maps rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain import schedules as plans
from fencepost.domain.errors import IdempotencyConflict, NotFound, StoreUnavailable
from fencepost.domain.events import ExecutionCancelled, ExecutionSkipped
from fencepost.domain.machine import apply
from fencepost.domain.models import Schedule, SchedulePage
from fencepost.domain.schedules import ScheduleSpec
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import ScheduleFilter
from fencepost.store.verbs import sql_changes

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


def get_schedule_plan(store: SqlStore, schedule_id: str) -> Plan[Schedule]:
    """``Store.get_schedule`` as a plan."""
    return Plan(schedule_steps(store, schedule_id), atomic=False)


def schedule_steps(store: SqlStore, schedule_id: str, *, lock: bool = False) -> Steps[Schedule]:
    """The schedule (held by this transaction with ``lock``), or :class:`NotFound`."""
    if not store._storable(schedule_id):
        raise NotFound(schedule_id, subject="schedule")
    query = store._q("lock_schedule" if lock else "get_schedule")
    row = yield Statement(query, {"id": schedule_id}, "one")
    if row is None:
        raise NotFound(schedule_id, subject="schedule")
    return store.rows.schedule(row)


def list_schedules_plan(store: SqlStore, filters: ScheduleFilter) -> Plan[SchedulePage]:
    """``Store.schedules`` as a plan (the listing, one more than ``limit`` read)."""
    params = {
        "job": filters.job,
        "paused": filters.paused,
        "after": store._schedule_cursor(filters.after),
        "due_before": store._t_opt(filters.due_before),
        "limit": filters.limit + 1,
    }

    def steps() -> Steps[SchedulePage]:
        found = yield Statement(store._q("list_schedules"), params, "all")
        items = [store.rows.schedule(r) for r in found]
        more = len(items) > filters.limit
        items = items[: filters.limit]
        return SchedulePage(items=items, next_cursor=items[-1].id if more else None)

    return Plan(steps(), atomic=False)


def schedule_params(store: SqlStore, s: Schedule, inputs_json: str) -> dict[str, Any]:
    """The parameters of ``insert_schedule`` and ``write_schedule`` for ``s``."""
    return {
        "id": s.id,
        "job": s.job,
        "job_version": s.job_version,
        "inputs": inputs_json,
        "cron": s.cron,
        "every": None if s.every is None else store._d(s.every),
        "timezone": s.timezone,
        "dst_gap": s.dst_gap.value,
        "dst_fold": s.dst_fold.value,
        "misfire": s.misfire.value,
        "misfire_grace": store._d(s.misfire_grace),
        "max_catch_up": s.max_catch_up,
        "overlap": s.overlap.value,
        "start_at": store._t_opt(s.start_at),
        "end_at": store._t_opt(s.end_at),
        "max_attempts": s.max_attempts,
        "priority": s.priority,
        "queue": s.queue,
        "limit_key": s.limit_key,
        "paused": s.paused,
        "watermark": store._t(s.watermark),
        "next_due": store._t(s.next_due),
        "materializer": s.materializer,
        "lease_until": store._t_opt(s.lease_until),
        "created_at": store._t(s.created_at),
        "updated_at": store._t(s.updated_at),
    }


def change_schedule_plan(
    store: SqlStore,
    schedule_id: str,
    decide: Callable[[Schedule, datetime], Schedule | None],
    *,
    actor: str = "client",
) -> Plan[Schedule]:
    """``ScheduleVerbs._change_schedule`` as a plan: the schedule held, decided, written."""

    def steps() -> Steps[Schedule]:
        current = yield from schedule_steps(store, schedule_id, lock=True)
        now = yield from store._now_steps()
        changed = decide(current, now)
        if changed is None:
            return current
        params = schedule_params(store, changed, store._encode(changed.inputs, "inputs"))
        yield Statement(store._q("write_schedule"), params)
        if plans.pauses(current, changed):
            yield from skip_paused_steps(store, schedule_id, actor, now)
        return changed

    return Plan(steps())


def skip_paused_steps(store: SqlStore, schedule_id: str, actor: str, now: datetime) -> Steps[None]:
    """A pause's skips: the schedule's occurrences that have not started, SKIPPED.

    The block holds the rows it returns (PostgreSQL: ``FOR UPDATE``, so a claim
    that got one first makes it drop out, and a later claim passes it by; SQLite:
    the write transaction), and reads them all before the writes change its index.
    """
    event = ExecutionSkipped(reason=plans.PAUSED, actor=actor)
    unstarted = yield Statement(
        store._q("unstarted_schedule_executions"), {"id": schedule_id}, "all"
    )
    for row in unstarted:
        execution = store.rows.execution(row)
        if plans.skipped_by_pause(execution):  # the block's rule, said once more
            yield from sql_changes.persist_steps(store, apply(execution, event, now), now)


def delete_schedule_plan(store: SqlStore, schedule_id: str) -> Plan[None]:
    """``Store.delete_schedule`` as a plan."""
    if not store._storable(schedule_id):
        raise NotFound(schedule_id, subject="schedule")

    def steps() -> Steps[None]:
        deleted = yield Statement(store._q("delete_schedule"), {"id": schedule_id}, "one")
        if deleted is None:
            raise NotFound(schedule_id, subject="schedule")
        now = yield from store._now_steps()
        event = ExecutionCancelled(actor=plans.SCHEDULE_DELETED)
        # Read them all first: the writes change the index the select walks.
        waiting = yield Statement(
            store._q("waiting_schedule_executions"), {"id": schedule_id}, "all"
        )
        for row in waiting:
            yield from sql_changes.persist_steps(
                store, apply(store.rows.execution(row), event, now), now
            )

    return Plan(steps())


def acquire_schedules_plan(
    store: SqlStore, owner: str, *, limit: int, ttl: timedelta
) -> Plan[list[Schedule]]:
    """``ScheduleVerbs._acquire_schedules``: lease up to ``limit`` due schedules without
    a live materializer lease to ``owner`` for ``ttl``, in one statement; soonest due
    first (RETURNING has no order)."""
    params = {"owner": owner, "limit": limit, "ttl": store._d(ttl)}

    def steps() -> Steps[list[Schedule]]:
        now = store._now_param()  # read as the statement runs (see SqlStore._now_after_lock)
        found = yield Statement(store._q("acquire_schedules"), params | {"now": now}, "all")
        return sorted((store.rows.schedule(r) for r in found), key=lambda s: (s.next_due, s.id))

    return Plan(steps(), atomic=store._now_after_lock)


def release_schedules_plan(store: SqlStore, schedules: Sequence[Schedule]) -> Plan[None]:
    """``ScheduleVerbs._release_schedules``: give back each lease still held as it was
    acquired (same materializer, same ``lease_until``), in id order (PostgreSQL locks
    the rows in that order)."""
    held = sorted(schedules, key=lambda s: s.id)
    params = {
        "ids": store._array([s.id for s in held]),
        "materializers": store._array([s.materializer for s in held]),
        "lease_untils": store._array([store._t_opt(s.lease_until) for s in held]),
    }

    def steps() -> Steps[None]:
        yield Statement(store._q("release_schedules"), params)

    return Plan(steps(), atomic=False)


def add_schedule_plan(store: SqlStore, spec: ScheduleSpec, schedule_id: str) -> Plan[Schedule]:
    """``ScheduleVerbs._add_schedule``: the new schedule, or the one stored under
    ``schedule_id`` when its ``add_schedule`` arguments were the same (else
    :class:`IdempotencyConflict`)."""
    fingerprint = spec.fingerprint()

    def steps() -> Steps[Schedule]:
        now = yield from store._now_steps()
        schedule = plans.new_schedule(spec, id=schedule_id, now=now)
        params = schedule_params(store, schedule, spec.inputs_json) | {"request_hash": fingerprint}
        # An insert that conflicts, then finds no row, lost a race with a delete: again.
        # (SQLite's write transaction holds the file: there, no race and one round.)
        for _ in range(3):
            if (yield Statement(store._q("insert_schedule"), params, "one")) is not None:
                return schedule
            row = yield Statement(store._q("get_schedule"), {"id": schedule_id}, "one")
            if row is not None:
                if row[-1] != fingerprint:
                    raise IdempotencyConflict(schedule_id, schedule_id, subject="schedule")
                return store.rows.schedule(row)
        raise StoreUnavailable(f"schedule {schedule_id!r} kept being added and deleted; try again")

    return Plan(steps())

"""Materializing schedules in the SQL stores as plans: a materializer's batch of
occurrences stored under its schedules' fences (``ScheduleVerbs._materialize``), and
occurrences a caller adds (``_add_occurrences``: ``add_occurrences``, ``run_schedule``).

An occurrence is stored once per idempotency key: one whose key is already taken
answers with the execution that holds it. Where one statement may write several
tables (``SqlDialect._writes_many_tables``: PostgreSQL's ``insert_occurrences``, a CTE
that inserts the executions, their inputs, SUBMITTED and SKIPPED transitions and
wakes the workers), that statement is the insert; else the plan reads the keys
already taken, builds the new executions through the state machine and writes each
table with a statement of its own (SQLite, inside the write transaction that holds
the file, so no key can appear between the read and the inserts).

The dialect binds the schedules' fences (``SqlDialect._schedule_fence_params``) and a
one-statement insert's columns (``_occurrence_params``), and is told the ids about to
be inserted before the plan runs (``_cover``: PostgreSQL's partitions) and how many
rows a committed plan inserted (``_count_inserts``: its planner's statistics).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import NotFound, StaleLease, StoreUnavailable
from fencepost.domain.events import ExecutionSkipped
from fencepost.domain.machine import Change, apply
from fencepost.domain.models import Execution, Schedule
from fencepost.domain.schedules import NewOccurrence
from fencepost.domain.slo import SloMark, is_backfill
from fencepost.store.batching import rounds_of
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import Materialization, stale_schedule
from fencepost.store.verbs import sql_changes

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

#: Each item's stored executions, or the :class:`StaleLease` that refused its plan;
#: and how many executions were inserted.
Materialized = tuple[list[list[Execution] | StaleLease], int]
#: An occurrence to store, paired with its schedule's row as the fence returned it
#: (where the plan builds the executions itself; else the row is unused).
Planned = tuple[Any, NewOccurrence]

#: The SLO mark of an occurrence a caller adds for a slot already past (see
#: ``domain.slo.is_backfill``).
_BACKFILL = int(SloMark.BACKFILL)


def materialize_plan(store: SqlStore, items: Sequence[Materialization]) -> Plan[Materialized]:
    """``_materialize`` as a plan: each item's schedule fenced (same materializer, same
    lease as acquired, still live) and advanced, round by round of distinct schedules,
    and the occurrences of those it accepted stored."""
    store._cover([o.id for item in items for o in item.unique()])
    return Plan(_materialize_steps(store, items))


def _materialize_steps(store: SqlStore, items: Sequence[Materialization]) -> Steps[Materialized]:
    out: list[list[Execution] | StaleLease] = [stale_schedule(i.schedule) for i in items]
    now = store._now_param()  # in the write transaction, its lock held
    inserted = 0
    for round_ in rounds_of([item.schedule.id for item in items]):
        # In id order: concurrent batches lock their schedules in one order.
        chosen = [items[i] for _, i in sorted(round_.items())]
        params = {"now": now} | store._schedule_fence_params(chosen)
        found = yield Statement(store._q("materialize_fenced"), params, "all")
        accepted = [(items[round_[row[0]]], row) for row in found]
        planned = [(row, o) for item, row in accepted for o in item.unique()]
        by_key, fresh = yield from insert_occurrences_steps(store, planned, now, by_caller=False)
        inserted += fresh
        for item, _ in accepted:
            out[round_[item.schedule.id]] = item.results(by_key)
    return out, inserted


def add_occurrences_plan(
    store: SqlStore, schedule_id: str, occurrences: Sequence[NewOccurrence]
) -> Plan[tuple[list[Execution], int]]:
    """``_add_occurrences`` as a plan: the schedule held against a delete (PostgreSQL:
    ``FOR KEY SHARE``, which does not block its materializers), then its occurrences
    stored, each one's execution in the order given; and how many were inserted."""
    store._cover([o.id for o in occurrences])

    def steps() -> Steps[tuple[list[Execution], int]]:
        row = yield Statement(store._q("share_schedule"), {"id": schedule_id}, "one")
        if row is None:
            raise NotFound(schedule_id, subject="schedule")
        now = store._now_param()
        planned = [(row, o) for o in occurrences]
        by_key, fresh = yield from insert_occurrences_steps(store, planned, now, by_caller=True)
        return [by_key[o.idempotency_key] for o in occurrences], fresh

    return Plan(steps())


def insert_occurrences_steps(
    store: SqlStore, planned: Sequence[Planned], now: Any, *, by_caller: bool
) -> Steps[tuple[dict[str, Execution], int]]:
    """Store the occurrences whose key is new (keys are distinct), of schedules this
    transaction holds; every occurrence's execution by key, and how many were inserted.

    ``now``: as the dialect binds it (:meth:`SqlDialect._now_param`). ``by_caller``: a
    caller asked for them, not the materializer, so one of a slot already past is a
    backfill for the SLO (a run asked for now has no slot: never one).
    """
    if not planned:
        return {}, 0
    if not store._writes_many_tables:
        return (yield from _insert_built(store, planned, store.rows.instant(now), by_caller))
    occurrences = [o for _, o in planned]
    params = store._occurrence_params(occurrences, now, by_caller=by_caller)
    found = yield Statement(store._q("insert_occurrences"), params, "all")
    by_key = {e.idempotency_key: e for e in map(store.rows.execution, found)}
    absent = [o.idempotency_key for o in occurrences if o.idempotency_key not in by_key]
    if absent:
        # Existing executions, left as they are. A concurrent insert of one of these
        # keys made ours wait for its commit, so this statement sees it.
        existing = yield Statement(
            store._q("executions_by_keys"), {"keys": store._array(absent)}, "all"
        )
        by_key.update((e.idempotency_key, e) for e in map(store.rows.execution, existing))
    missing = [key for key in absent if key not in by_key]
    if missing:
        raise StoreUnavailable(f"executions {missing[:3]} vanished while being stored")
    return {k: e for k, e in by_key.items() if k is not None}, len(found)


def _insert_built(
    store: SqlStore, planned: Sequence[Planned], now: datetime, by_caller: bool
) -> Steps[tuple[dict[str, Execution], int]]:
    """The occurrences whose key is new, built here and written table by table.

    ``planned`` pairs each occurrence with its schedule's row (the schedule's columns,
    its inputs as stored JSON text). The write lock is held, so the keys found here
    cannot appear before the inserts.
    """
    keys = json.dumps([o.idempotency_key for _, o in planned])
    taken = yield Statement(store._q("executions_by_keys"), {"keys": keys}, "all")
    found = {
        e.idempotency_key: e
        for e in map(store.rows.execution, taken)
        if e.idempotency_key is not None
    }
    schedules: dict[str, Schedule] = {}
    fresh: list[tuple[Execution, str, Change | None]] = []  # (as stored, inputs, SKIPPED)
    for row, o in planned:
        if o.idempotency_key in found:
            continue
        if row[0] not in schedules:
            schedules[row[0]] = store.rows.schedule(row)
        execution = o.to_execution(schedules[row[0]], now)
        change = None
        if o.skipped is not None:
            change = apply(execution, ExecutionSkipped(reason=o.skipped), now)
            execution = change.execution
        found[o.idempotency_key] = execution
        fresh.append((execution, row[3], change))
    at = store._t(now)

    def backfill(e: Execution) -> int:
        planned_at = e.planned_at or e.due_at
        return _BACKFILL if by_caller and e.slot is not None and is_backfill(planned_at, now) else 0

    occurrences = [
        (
            e.id,
            e.job,
            e.job_version,
            e.state,
            store._t(e.due_at),
            e.priority,
            e.max_attempts,
            e.idempotency_key,
            e.schedule_id,
            e.slot,
            e.bucket,
            at,
            e.queue,
            e.limit_key,
            store._t(e.planned_at or e.due_at),
            backfill(e),
        )
        for e, _, _ in fresh
    ]
    yield Statement(store._q("insert_occurrence"), occurrences, "many")
    inputs = [(e.id, text) for e, text, _ in fresh]
    yield Statement(store._q("insert_execution_data"), inputs, "many")
    # One statement per submitter: None (the schedule) for what a materializer or a
    # backfill stores; run_schedule's caller for the run it asks for.
    actors = {o.id: o.actor for _, o in planned}
    by_actor: dict[str | None, list[str]] = {}
    for e, _, _ in fresh:
        by_actor.setdefault(actors[e.id], []).append(e.id)
    for actor, ids in by_actor.items():
        yield Statement(store._q("insert_submitted"), (json.dumps(ids), at, actor))
    skipped = [sql_changes.transition_params(store, c, now) for _, _, c in fresh if c is not None]
    if skipped:
        yield Statement(store._q("insert_transition"), skipped, "many")
    return found, len(fresh)

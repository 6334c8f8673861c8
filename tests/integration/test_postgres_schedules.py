"""Schedules on a real PostgreSQL server: concurrent materializers store each slot exactly once.

Four threads acquire and materialize 500 schedules through one store (one pooled
connection each) while a fifth backfills the same slots with ``add_occurrences``.
The verdict comes from the database: one execution per (schedule, slot), each
schedule acquired by exactly one materializer, every audit trail an edge of the
state machine.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

import fencepost
from fencepost import Event, Occurrence, Schedule, StaleLease, State
from fencepost.domain.ids import IdGenerator
from fencepost.domain.machine import is_edge
from fencepost.domain.schedules import slot_text
from fencepost.store.postgres.connection import QUERIES
from tests.integration import _pg
from tests.postgres import require_postgres

SCHEDULES = 500
MATERIALIZERS = 4
BATCH = 25


def _plan(base: datetime) -> list[Occurrence]:
    """Three hourly slots; the middle one skipped by policy."""
    return [
        Occurrence(slot=base + timedelta(hours=1), due_at=base + timedelta(hours=1)),
        Occurrence(
            slot=base + timedelta(hours=2),
            due_at=base + timedelta(hours=2),
            skipped="overlap: still running",
        ),
        Occurrence(slot=base + timedelta(hours=3), due_at=base + timedelta(hours=3)),
    ]


@pytest.mark.timeout(120)
def test_four_materializers_store_every_slot_exactly_once() -> None:
    require_postgres()
    base = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    plan = _plan(base)
    slots = {slot_text(o.slot) for o in plan}
    far = base + timedelta(days=365)
    with _pg.fresh_schema() as schema:
        url = _pg.url(schema, pool_min=MATERIALIZERS + 1, pool_max=MATERIALIZERS + 1)
        with fencepost.connect(url) as store:
            ids = [f"s{n:04}" for n in range(SCHEDULES)]
            for schedule_id in ids:
                store.add_schedule("tick", every=3600, id=schedule_id, inputs={"id": schedule_id})
            barrier = threading.Barrier(MATERIALIZERS + 1)
            acquired: dict[str, list[str]] = defaultdict(list)
            returned: dict[str, set[str]] = defaultdict(set)  # schedule -> execution ids
            errors: list[BaseException] = []
            lock = threading.Lock()

            def materializer(owner: str) -> None:
                try:
                    barrier.wait(timeout=30)
                    while True:
                        leased = store.acquire_schedules(owner, limit=BATCH, ttl=60)
                        if not leased:
                            return
                        results = store.materialize([(s, plan, plan[-1].slot, far) for s in leased])
                        with lock:
                            for s, made in zip(leased, results, strict=True):
                                acquired[s.id].append(owner)
                                assert not isinstance(made, StaleLease), (owner, s.id)
                                assert [e.slot for e in made] == [slot_text(o.slot) for o in plan]
                                returned[s.id].update(e.id for e in made)
                except BaseException as exc:  # surfaced below
                    errors.append(exc)

            def backfiller() -> None:
                rng = random.Random(7)
                try:
                    barrier.wait(timeout=30)
                    for schedule_id in rng.sample(ids, 200):
                        made = store.add_occurrences(schedule_id, plan[::-1])
                        with lock:
                            returned[schedule_id].update(e.id for e in made)
                except BaseException as exc:
                    errors.append(exc)

            threads = [
                threading.Thread(target=materializer, args=(f"materializer-{n}",))
                for n in range(MATERIALIZERS)
            ]
            threads.append(threading.Thread(target=backfiller))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=90)
            assert not errors, errors
            assert not any(thread.is_alive() for thread in threads)
            stored = {s.id: s for s in _all_schedules(store)}
        audit = _pg.load_audit(schema)
        executions = _pg.load_executions(schema)

    assert sorted(acquired) == ids, "every schedule was materialized"
    twice = {sid: owners for sid, owners in acquired.items() if len(owners) != 1}
    assert twice == {}, "a schedule went to two materializers"
    work = Counter(owner for owners in acquired.values() for owner in owners)
    assert len(work) > 1, f"the race was real: the materializers shared the work {work}"
    per_slot = Counter((e.schedule_id, e.slot) for e in executions.values())
    assert set(per_slot.values()) == {1}
    assert len(per_slot) == SCHEDULES * len(plan)
    assert {slot for _, slot in per_slot} == slots
    for schedule_id, seen in returned.items():
        assert seen == {e.id for e in executions.values() if e.schedule_id == schedule_id}
    for e in executions.values():
        assert e.idempotency_key == f"{e.schedule_id}:{e.slot}"
        assert e.inputs == {"id": e.schedule_id}
        expected = State.SKIPPED if e.slot == slot_text(plan[1].slot) else State.SCHEDULED
        assert e.state is expected, e
        trail = audit[e.id]
        assert [t.event for t in trail] == (
            [Event.SUBMITTED, Event.SKIPPED] if expected is State.SKIPPED else [Event.SUBMITTED]
        )
        assert all(is_edge(t.event, t.from_state, t.to_state) for t in trail)
    for schedule in stored.values():
        assert (schedule.watermark, schedule.next_due, schedule.materializer) == (
            plan[-1].slot,
            far,
            None,
        )


def _all_schedules(store: fencepost.Store) -> list[Schedule]:
    out: list[Schedule] = []
    cursor = None
    while True:
        page = store.schedules(limit=1000, after=cursor)
        out.extend(page.items)
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def test_schedule_lookups_read_their_indexes_even_in_generic_plans() -> None:
    """A schedule's executions, and due schedules, come from an index at any table size."""
    require_postgres()
    with _pg.fresh_schema() as schema:
        fencepost.connect(_pg.url(schema)).close()
        with _pg.connect() as conn:
            conn.execute(f"SET search_path TO {schema}")
            # Ids as the store makes them (UUIDv7, today): the history is partitioned
            # by the day an id was made (migration 10), and today's partition exists.
            ids = IdGenerator()
            made = int(time.time() * 1000)
            conn.execute(
                "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, created_at,"
                " updated_at, schedule_id, slot, idempotency_key, planned_at) "
                "SELECT i, 'j', CASE WHEN g %% 3 = 0 THEN 'SUCCEEDED' "
                "ELSE 'SCHEDULED' END, now(), 3, 0, now(), now(), 's' || (g %% 2000), g::text, "
                "'k' || g, now() FROM unnest(%s::uuid[]) WITH ORDINALITY AS t(i, g)",
                ([ids.new(made) for _ in range(40000)],),
            )
            conn.execute("INSERT INTO execution_data SELECT id, '{}' FROM executions")
            conn.execute("INSERT INTO execution_keys SELECT idempotency_key, id FROM executions")
            (hot,) = conn.execute(
                "SELECT tableoid::regclass::text FROM executions LIMIT 1"
            ).fetchone()
            conn.execute(
                "INSERT INTO schedules SELECT 's' || g, 'j', NULL, '{}', NULL, '1 hour', 'UTC', "
                "'shift', 'once', 'coalesce', '1 minute', 100, 'allow', NULL, NULL, 3, 0, false, "
                "now(), now() + g * interval '1 second', NULL, NULL, 'h', now(), now() "
                "FROM generate_series(1, 20000) AS g"
            )
            conn.execute("ANALYZE")
            conn.execute("SET plan_cache_mode = force_generic_plan")
            for block, index in (
                ("query_schedule_executions", "executions_schedule_state"),
                ("waiting_schedule_executions", "executions_schedule_state"),
                ("acquire_schedules", "schedules_due"),
                ("materialize_fenced", "schedules_pkey"),
                ("release_schedules", "schedules_pkey"),
                ("insert_occurrences", "schedules_pkey"),
                ("executions_by_keys", "execution_keys_pkey"),
            ):
                sql, names = _positional(QUERIES[block])
                conn.execute(f"PREPARE probe AS {sql}")
                args = ", ".join("NULL" for _ in names)
                plan = "\n".join(
                    row[0] for row in conn.execute(f"EXPLAIN EXECUTE probe({args})").fetchall()
                )
                conn.execute("DEALLOCATE probe")
                # A partition's index is named after its parent's: executions_p20261203_slot.
                named = re.sub(r"\b(executions|execution_data|transitions)_p\d{8}_", r"\1_", plan)
                assert index in named, f"{block}:\n{plan}"
                assert f"Seq Scan on {hot} " not in plan, f"{block}:\n{plan}"
                assert "Seq Scan on schedules" not in plan, f"{block}:\n{plan}"


def _positional(sql: str) -> tuple[str, list[str]]:
    """A psycopg ``%(name)s`` statement as a ``$n`` one (for PREPARE), with the names in order."""
    import re

    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"%\((\w+)\)[sb]", number, sql), names

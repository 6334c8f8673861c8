"""The SLO's facts on PostgreSQL rows: every write path sets them, read back in raw SQL.

Each execution keeps its planned time, first claim, first finish, held time and
``SloMark`` bits on its own row (migration 15, ``fencepost.domain.slo``), written by the
statement that changes it. These tests drive each write path of the PostgreSQL store
on a pinned clock and read the columns themselves, not the report built from them;
and they migrate a database of version 14 and read the facts it filled in.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost import StaleLease, Store
from fencepost.domain.ids import IdGenerator
from fencepost.domain.models import Occurrence
from fencepost.domain.slo import SloMark
from fencepost.store.postgres import history
from fencepost.store.postgres.connection import MIGRATIONS_PACKAGE, QUERIES
from fencepost.store.sql import latest_version, migration_files
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at
from tests import postgres
from tests.integration import _pg
from tests.postgres import require_postgres

#: The newest schema version (each release's migrations add to it).
LATEST = latest_version(MIGRATIONS_PACKAGE)

#: Where every test's clock starts: the first day of the ManualClock timeline, noon.
NOON = 12 * 3600.0


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(at(NOON))


@pytest.fixture
def store(schema: str, clock: ManualClock) -> Iterator[Store]:
    with fencepost.connect(_pg.url(schema), clock=clock) as opened:
        yield opened


class Facts:
    """One execution's row as raw SQL reads it."""

    def __init__(self, row: tuple[Any, ...]) -> None:
        (
            self.planned_at,
            self.first_claimed_at,
            self.first_finished_at,
            self.held,
            self.marks,
            self.due_at,
            self.state,
        ) = row
        self.marks = SloMark(self.marks)


def facts(schema: str, execution_id: str) -> Facts:
    with _pg.connect() as conn:
        row = conn.execute(
            "SELECT planned_at, first_claimed_at, first_finished_at, held, slo_marks, due_at,"
            f" state FROM {schema}.executions WHERE id = %s",
            [execution_id],
        ).fetchone()
    assert row is not None, execution_id
    return Facts(row)


def held_recorded(schema: str, execution_id: str) -> timedelta:
    """The throttle records' held time of one execution, summed."""
    with _pg.connect() as conn:
        row = conn.execute(
            f"SELECT coalesce(sum(held), '0') FROM {schema}.throttles WHERE execution_id = %s",
            [execution_id],
        ).fetchone()
    assert row is not None
    held: timedelta = row[0]
    return held


def test_submits_plan_at_their_due_time_and_mark_backfills(
    schema: str, store: Store, clock: ManualClock
) -> None:
    now = at(NOON)
    plain = store.submit("job")
    delayed = store.submit("job", delay=60)
    behind = store.submit("job", execute_at=now - timedelta(seconds=0.5))  # a clock behind
    edge = store.submit("job", execute_at=now - timedelta(seconds=1))  # exactly the slack
    past = store.submit("job", execute_at=now - timedelta(hours=1))
    assert (facts(schema, plain.id).planned_at, facts(schema, plain.id).marks) == (
        now,
        SloMark.NONE,
    )
    assert facts(schema, delayed.id).planned_at == now + timedelta(seconds=60)
    assert facts(schema, behind.id).marks == SloMark.NONE
    assert facts(schema, edge.id).marks == SloMark.NONE
    assert facts(schema, past.id).marks == SloMark.BACKFILL
    assert facts(schema, past.id).planned_at == now - timedelta(hours=1)
    assert store.get(past.id).planned_at == now - timedelta(hours=1)
    for e in (plain, past):
        f = facts(schema, e.id)
        assert (f.first_claimed_at, f.first_finished_at, f.held) == (None, None, timedelta(0))

    # submit_many: the unkeyed and the keyed rows take two INSERTs of one statement.
    batch = store.submit_many(
        [
            {"job": "job", "execute_at": now - timedelta(days=1)},
            {"job": "job", "execute_at": now - timedelta(days=1), "idempotency_key": "k-past"},
            {"job": "job", "idempotency_key": "k-now"},
        ]
    )
    assert [facts(schema, e.id).marks for e in batch] == [
        SloMark.BACKFILL,
        SloMark.BACKFILL,
        SloMark.NONE,
    ]
    assert [e.planned_at for e in batch] == [facts(schema, e.id).planned_at for e in batch]

    # An idempotent re-submit returns the stored execution and changes nothing of it.
    clock.set(NOON + 30)
    (lease,) = store.claim("w", ids=[batch[2].id])
    before = vars(facts(schema, batch[2].id))
    again = store.submit("job", idempotency_key="k-now")
    assert again.id == batch[2].id
    assert vars(facts(schema, batch[2].id)) == before
    assert before["first_claimed_at"] == at(NOON + 30)
    assert lease.execution_id == batch[2].id

    # In a caller's transaction: the same statement.
    with psycopg.connect(postgres.dsn()) as conn:
        mine = store.submit("job", execute_at=now - timedelta(minutes=5), connection=conn)
        conn.commit()
    assert facts(schema, mine.id).marks == SloMark.BACKFILL


def test_occurrences_plan_at_their_due_time_and_only_a_caller_s_are_backfills(
    schema: str, store: Store, clock: ManualClock
) -> None:
    now = at(NOON)
    clock.set(NOON - 5 * 3600)
    store.add_schedule("job", every=3600, id="s")
    clock.set(NOON)
    # A materializer's late occurrences are its own, not a backfill.
    (acquired,) = store.acquire_schedules("m")
    late = [
        Occurrence(slot=now - timedelta(hours=h), due_at=now - timedelta(hours=h)) for h in (3, 2)
    ]
    skipped = Occurrence(
        slot=now - timedelta(hours=1), due_at=now - timedelta(hours=1), skipped="misfire: late"
    )
    (made,) = store.materialize([(acquired, [*late, skipped], now, now + timedelta(hours=1))])
    assert not isinstance(made, StaleLease)
    for e, o in zip(made, [*late, skipped], strict=True):
        f = facts(schema, e.id)
        assert (f.planned_at, f.marks) == (o.due_at, SloMark.NONE)
        assert e.planned_at == o.due_at
    assert facts(schema, made[2].id).state == "SKIPPED"
    # A caller's occurrences of the past are backfills; of now or later, not.
    past = Occurrence(slot=now - timedelta(hours=4), due_at=now - timedelta(hours=4))
    soon = Occurrence(slot=now + timedelta(hours=1), due_at=now + timedelta(hours=1))
    old, new = store.add_occurrences("s", [past, soon])
    assert (facts(schema, old.id).planned_at, facts(schema, old.id).marks) == (
        past.due_at,
        SloMark.BACKFILL,
    )
    assert (facts(schema, new.id).planned_at, facts(schema, new.id).marks) == (
        soon.due_at,
        SloMark.NONE,
    )
    # A run now is planned at its caller's now: never a backfill, even from a clock behind.
    clock.set(NOON - 30)
    ran = store.run_schedule("s")
    assert facts(schema, ran.id).marks == SloMark.NONE
    assert facts(schema, ran.id).planned_at == ran.due_at == ran.planned_at


def test_the_first_claim_is_kept_and_a_takeover_marks_a_renewal_failed(
    schema: str, store: Store, clock: ManualClock
) -> None:
    e = store.submit("job")
    clock.set(NOON + 1)
    (lease,) = store.claim("w", ttl=60)
    assert facts(schema, e.id).first_claimed_at == at(NOON + 1)
    store.fail(lease, "boom", retry_in=10)
    f = facts(schema, e.id)
    assert (f.marks, f.state, f.due_at) == (SloMark.HANDLER_FAILED, "RETRY_WAIT", at(NOON + 11))
    clock.set(NOON + 20)
    (again,) = store.claim("w", ttl=5)
    f = facts(schema, e.id)
    assert (f.first_claimed_at, f.planned_at) == (at(NOON + 1), at(NOON))
    # Its lease runs out and another worker takes it over.
    clock.set(NOON + 100)
    (taken,) = store.claim("other", ttl=60)
    assert taken.execution_id == e.id
    f = facts(schema, e.id)
    assert f.marks == SloMark.HANDLER_FAILED | SloMark.RENEWAL_FAILED
    assert (f.first_claimed_at, f.planned_at) == (at(NOON + 1), at(NOON))
    assert again.epoch < taken.epoch


@pytest.mark.parametrize("how", ["capped", "queues", "capped-queues", "ids"])
def test_every_claim_block_sets_the_first_claim(
    schema: str, store: Store, clock: ManualClock, how: str
) -> None:
    e = store.submit("job", queue="q")
    clock.set(NOON + 3)
    choices: dict[str, dict[str, Any]] = {
        "capped": {"max_per_bucket": 5},
        "queues": {"queues": ["q"]},
        "capped-queues": {"max_per_bucket": 5, "queues": {"q": 2}},
        "ids": {"ids": [e.id]},
    }
    options = choices[how]
    (lease,) = store.claim("w", **options)
    assert lease.execution_id == e.id
    assert facts(schema, e.id).first_claimed_at == at(NOON + 3)


def test_a_limited_claim_adds_the_held_time_it_records(
    schema: str, store: Store, clock: ManualClock
) -> None:
    store.set_limit("job:held", concurrency=1)
    first, second = (store.submit("held", execute_at=at(NOON)).id for _ in range(2))
    (lease,) = store.claim("w", jobs=["held"], limit=2, ttl=10_000)
    assert lease.execution_id == first
    assert facts(schema, first).first_claimed_at == at(NOON)
    clock.set(NOON + 200)
    store.complete(lease, "ok")
    (again,) = store.claim("w", jobs=["held"], ttl=10_000)  # held back 200 s by the limit
    assert again.execution_id == second
    f = facts(schema, second)
    assert f.first_claimed_at == at(NOON + 200)
    assert f.held == held_recorded(schema, second) == timedelta(seconds=200)
    assert facts(schema, first).held == timedelta(0)


def test_resuming_a_paused_queue_adds_the_held_time_it_records(
    schema: str, store: Store, clock: ManualClock
) -> None:
    store.pause_queue("q")
    waiting = store.submit("job", queue="q")
    clock.set(NOON + 90)
    store.resume_queue("q")
    assert facts(schema, waiting.id).held == held_recorded(schema, waiting.id)
    assert facts(schema, waiting.id).held == timedelta(seconds=90)


def test_the_reaper_marks_a_renewal_failed_and_a_final_expiry_finishes(
    schema: str, store: Store, clock: ManualClock
) -> None:
    retried = store.submit("job")
    last = store.submit("last", max_attempts=1)
    store.claim("w", limit=2, ttl=5)
    clock.set(NOON + 10)
    assert store.reap_expired() == 2
    f = facts(schema, retried.id)
    assert (f.marks, f.state, f.first_finished_at) == (SloMark.RENEWAL_FAILED, "RETRY_WAIT", None)
    f = facts(schema, last.id)
    assert (f.marks, f.state, f.first_finished_at) == (
        SloMark.RENEWAL_FAILED,
        "FAILED",
        at(NOON + 10),
    )


def test_refused_calls_mark_their_class(schema: str, store: Store, clock: ManualClock) -> None:
    """A refused heartbeat is a renewal failed; a refused complete, fail or release a stale
    completion. The leases ran out, and nobody took them over (that would mark too)."""
    ids = {verb: store.submit(verb).id for verb in ("heartbeat", "complete", "fail", "release")}
    leases = {lease.job: lease for lease in store.claim("w", limit=4, ttl=5)}
    clock.set(NOON + 10)
    assert isinstance(store.heartbeat_many([(leases["heartbeat"], None)])[0], StaleLease)
    assert store.complete_many([(leases["complete"], "late")]) != [None]
    with pytest.raises(StaleLease):
        store.fail(leases["fail"], "late")
    with pytest.raises(StaleLease):
        store.release(leases["release"])
    assert {verb: facts(schema, i).marks for verb, i in ids.items()} == {
        "heartbeat": SloMark.RENEWAL_FAILED,
        "complete": SloMark.STALE_COMPLETION,
        "fail": SloMark.STALE_COMPLETION,
        "release": SloMark.STALE_COMPLETION,
    }
    assert all(facts(schema, i).state == "RUNNING" for i in ids.values())


def test_finishes_failures_timeouts_and_replays(
    schema: str, store: Store, clock: ManualClock
) -> None:
    done, many, timed, dead = (
        store.submit(job, max_attempts=1 if job == "dead" else 3).id
        for job in ("done", "many", "timed", "dead")
    )
    leases = {lease.job: lease for lease in store.claim("w", limit=4, ttl=600)}
    clock.set(NOON + 5)
    store.complete(leases["done"], "ok")
    assert store.complete_many([(leases["many"], "ok")]) == [None]
    store.fail(leases["timed"], "too slow", timed_out=True, retry_in=1)
    store.fail(leases["dead"], "boom")
    assert (facts(schema, done).first_finished_at, facts(schema, done).marks) == (
        at(NOON + 5),
        SloMark.NONE,
    )
    assert facts(schema, many).first_finished_at == at(NOON + 5)
    f = facts(schema, timed)
    assert (f.marks, f.first_finished_at) == (SloMark.TIMED_OUT, None)
    f = facts(schema, dead)
    assert (f.marks, f.state, f.first_finished_at) == (
        SloMark.HANDLER_FAILED,
        "FAILED",
        at(NOON + 5),
    )
    # A replay marks it, moves its due time, and keeps its planned time and first finish.
    clock.set(NOON + 50)
    store.replay(dead, actor="ops")
    store.reschedule(dead, at(NOON + 60))
    f = facts(schema, dead)
    assert f.marks == SloMark.HANDLER_FAILED | SloMark.REPLAYED
    assert (f.planned_at, f.due_at, f.first_finished_at) == (at(NOON), at(NOON + 60), at(NOON + 5))
    clock.set(NOON + 60)
    (lease,) = store.claim("w", jobs=["dead"])
    clock.set(NOON + 61)
    store.complete(lease, "ok")
    f = facts(schema, dead)
    assert (f.state, f.first_finished_at, f.first_claimed_at) == (
        "SUCCEEDED",
        at(NOON + 5),
        at(NOON),
    )


# -- migration 15 on a database of version 14 ------------------------------------------


def _made_by_release(schema: str, last: int) -> None:
    """The schema as a release whose last migration was ``last`` made it."""
    with _pg.connect() as conn, conn.transaction():
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(QUERIES["create_migrations_table"])
        for version, name, sql in migration_files(MIGRATIONS_PACKAGE):
            if version <= last:
                conn.execute(sql)
                conn.execute(QUERIES["record_migration"], {"version": version, "name": name})


def test_migration_15_fills_the_facts_of_the_rows_stored_before_it(schema: str) -> None:
    _made_by_release(schema, 14)
    t0 = at(NOON)
    ids = IdGenerator()
    made = int(t0.timestamp() * 1000)
    names = ["done", "slotted", "taken", "refused", "replayed", "throttled", "cancelled", "odd"]
    row_id = {name: ids.new(made + n) for n, name in enumerate(names)}

    def s(seconds: float) -> datetime:
        return t0 + timedelta(seconds=seconds)

    # name: (state, due_at, slot, updated_at)
    executions: dict[str, tuple[str, datetime, str | None, datetime]] = {
        "done": ("SUCCEEDED", s(0), None, s(9)),
        "slotted": ("FAILED", s(700), "2026-01-01T11:00:00Z", s(800)),  # retried: due moved
        "taken": ("RETRY_WAIT", s(400), None, s(300)),
        "refused": ("RUNNING", s(0), None, s(3)),
        "replayed": ("SUCCEEDED", s(500), None, s(510)),
        "throttled": ("RUNNING", s(0), None, s(60)),
        "cancelled": ("CANCELLED", s(0), None, s(1)),
        "odd": ("SCHEDULED", s(0), "not a slot", s(0)),
    }
    # name: [(event, from_state, to_state, reason, at)]
    audit: dict[str, list[tuple[str, str | None, str, str | None, datetime]]] = {
        "done": [("CLAIMED", "SCHEDULED", "RUNNING", None, s(2)),
                 ("COMPLETED", "RUNNING", "SUCCEEDED", None, s(9))],
        "slotted": [("CLAIMED", "SCHEDULED", "RUNNING", None, s(5)),
                    ("FAILED", "RUNNING", "RETRY_WAIT", "boom", s(6)),
                    ("CLAIMED", "RETRY_WAIT", "RUNNING", None, s(706)),
                    ("FAILED", "RUNNING", "FAILED", "boom", s(800))],
        "taken": [("CLAIMED", "SCHEDULED", "RUNNING", None, s(1)),
                  ("CLAIMED", "RUNNING", "RUNNING", "took over", s(100)),
                  ("TIMED_OUT", "RUNNING", "RETRY_WAIT", "slow", s(200)),
                  ("CLAIMED", "RETRY_WAIT", "RUNNING", None, s(250)),
                  ("LEASE_EXPIRED", "RUNNING", "RETRY_WAIT", None, s(300))],
        "refused": [("CLAIMED", "SCHEDULED", "RUNNING", None, s(1)),
                    ("STALE_REFUSED", "RUNNING", "RUNNING", "stale heartbeat refused", s(2)),
                    ("STALE_REFUSED", "RUNNING", "RUNNING", "stale complete refused", s(3))],
        "replayed": [("CLAIMED", "SCHEDULED", "RUNNING", None, s(1)),
                     ("FAILED", "RUNNING", "FAILED", "boom", s(2)),
                     ("REPLAYED", "FAILED", "SCHEDULED", None, s(500)),
                     ("CLAIMED", "SCHEDULED", "RUNNING", None, s(505)),
                     ("COMPLETED", "RUNNING", "SUCCEEDED", None, s(510))],
        "throttled": [("CLAIMED", "SCHEDULED", "RUNNING", None, s(60))],
        "cancelled": [("CANCELLED", "SCHEDULED", "CANCELLED", None, s(1))],
        "odd": [],
    }  # fmt: skip
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        history.ensure(conn, {history.day_of(row_id["done"])})
        for name, (state, due_at, slot, updated_at) in executions.items():
            conn.execute(
                "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, slot,"
                " created_at, updated_at) VALUES (%s, 'legacy', %s, %s, 3, 0, %s, %s, %s)",
                (row_id[name], state, due_at, slot, t0, updated_at),
            )
            conn.execute(
                "INSERT INTO execution_data (execution_id, inputs) VALUES (%s, '{}')",
                (row_id[name],),
            )
            conn.execute(
                "INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, at)"
                " VALUES (%s, 'SUBMITTED', NULL, 'SCHEDULED', 0, %s)",
                (row_id[name], t0),
            )
            for event, from_state, to_state, reason, when in audit[name]:
                conn.execute(
                    "INSERT INTO transitions (execution_id, event, from_state, to_state, epoch,"
                    " reason, at) VALUES (%s, %s, %s, %s, 1, %s, %s)",
                    (row_id[name], event, from_state, to_state, reason, when),
                )
        for held in (20, 25):
            conn.execute(
                "INSERT INTO throttles (execution_id, scope, held, at)"
                " VALUES (%s, 'job:legacy', %s, %s)",
                (row_id["throttled"], timedelta(seconds=held), s(60)),
            )
    with fencepost.connect(_pg.url(schema), clock=ManualClock(s(1000))) as store:
        # 16: stats' failure index; and every later one
        assert store.migrations_applied == list(range(15, LATEST + 1))
        assert store.get(row_id["slotted"]).planned_at == at(11 * 3600)
        found = {name: facts(schema, i) for name, i in row_id.items()}
        # A new row names its planned time (the migration's default is gone).
        assert store.submit("new").planned_at == s(1000)
    summary = {
        name: (f.planned_at, f.first_claimed_at, f.first_finished_at, f.held, f.marks)
        for name, f in found.items()
    }
    zero = timedelta(0)
    assert summary == {
        "done": (s(0), s(2), s(9), zero, SloMark.NONE),
        "slotted": (at(11 * 3600), s(5), s(800), zero, SloMark.HANDLER_FAILED),
        "taken": (s(400), s(1), None, zero, SloMark.RENEWAL_FAILED | SloMark.TIMED_OUT),
        "refused": (s(0), s(1), None, zero, SloMark.RENEWAL_FAILED | SloMark.STALE_COMPLETION),
        "replayed": (s(500), s(1), s(510), zero, SloMark.HANDLER_FAILED | SloMark.REPLAYED),
        "throttled": (s(0), s(60), None, timedelta(seconds=45), SloMark.NONE),
        "cancelled": (s(0), None, None, zero, SloMark.NONE),
        "odd": (s(0), None, None, zero, SloMark.NONE),
    }
    with _pg.connect() as conn:
        default = conn.execute(
            "SELECT column_default FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = 'executions'"
            " AND column_name = 'planned_at'",
            [schema],
        ).fetchone()
    assert default == (None,)

"""The SLO facts every SQLite write path keeps on the execution's row, the migration that
fills them in for rows already stored, and the rollups prune writes before deleting.

Facts are read back with raw SQL from a real SQLite file (``executions`` columns
planned_at, first_claimed_at, first_finished_at, held_us, slo_marks); the rules are
fencepost.domain.slo's and the list in migrations/0013_slo.sql.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

import fencepost
from fencepost.domain.errors import StaleLease, StoreUnavailable
from fencepost.domain.models import Lease, Occurrence
from fencepost.domain.slo import (
    BURN_WINDOWS,
    DEFAULT_CLAIM_TARGET,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_TARGET,
    DEFAULT_FINISH_WITHIN,
    SloFacts,
    SloMark,
    Tally,
    claim_verdict,
    counted,
    day_number,
    finish_verdict,
    objective,
    tally,
    window_start,
)
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.store.sql import migration_files
from fencepost.store.sqlite import rows
from fencepost.store.sqlite.connection import (
    MIGRATIONS_PACKAGE,
    QUERIES,
    migrate,
    open_connection,
    split_statements,
)
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at
from tests.sqlite_statements import statements, without_comments

HOUR = 3600
DAY = 86_400


@dataclass(frozen=True)
class Facts:
    """An execution's SLO columns, as the row holds them."""

    planned_at: datetime
    due_at: datetime
    first_claimed_at: datetime | None
    first_finished_at: datetime | None
    held: timedelta
    marks: SloMark


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "slo.db"


@pytest.fixture
def store(path: Path, clock: ManualClock) -> Iterator[Store]:
    with fencepost.connect(f"sqlite:///{path}", clock=clock) as opened:
        yield opened


def facts(path: Path, execution_id: str) -> Facts:
    with sqlite3.connect(path) as conn:
        row = conn.execute(
            "SELECT planned_at, due_at, first_claimed_at, first_finished_at, held_us, slo_marks"
            " FROM executions WHERE id = ?",
            (execution_id,),
        ).fetchone()
    conn.close()
    planned, due, claimed, finished, held, marks = row
    return Facts(
        planned_at=rows.from_us(planned),
        due_at=rows.from_us(due),
        first_claimed_at=None if claimed is None else rows.from_us(claimed),
        first_finished_at=None if finished is None else rows.from_us(finished),
        held=rows.us_duration(held),
        marks=SloMark(marks),
    )


def fresh(planned: datetime) -> Facts:
    """The facts of an execution inserted for ``planned`` and not touched since."""
    return Facts(planned, planned, None, None, timedelta(0), SloMark.NONE)


# -- inserts ------------------------------------------------------------------------------


def test_a_submit_is_planned_at_its_due_time(store: Store, path: Path) -> None:
    now = store.submit("j")
    later = store.submit("j", execute_at=at(90))
    assert facts(path, now.id) == fresh(at(0))
    assert facts(path, later.id) == fresh(at(90))
    assert store.get(later.id).planned_at == at(90)  # the row mapper reads it too


def test_a_submit_for_the_past_is_a_backfill_beyond_a_second(
    store: Store, path: Path, clock: ManualClock
) -> None:
    clock.set(100)
    slack = store.submit("j", execute_at=at(99))  # exactly the slack: not a backfill
    past = store.submit("j", execute_at=at(98.9))
    many = store.submit_many([{"job": "j", "execute_at": at(50)}, {"job": "j"}])
    assert facts(path, slack.id).marks == SloMark.NONE
    assert facts(path, past.id) == Facts(
        at(98.9), at(98.9), None, None, timedelta(0), SloMark.BACKFILL
    )
    assert [facts(path, e.id).marks for e in many] == [SloMark.BACKFILL, SloMark.NONE]


def test_an_idempotent_resubmit_changes_nothing(
    store: Store, path: Path, clock: ManualClock
) -> None:
    first = store.submit("j", idempotency_key="k")
    clock.set(500)
    again = store.submit("j", idempotency_key="k")
    assert again.id == first.id
    assert facts(path, first.id) == fresh(at(0))


def test_a_submit_in_the_callers_transaction_keeps_the_facts(
    store: Store, path: Path, clock: ManualClock
) -> None:
    clock.set(100)
    conn = sqlite3.connect(path)
    try:
        e = store.submit("j", execute_at=at(10), connection=conn)
        conn.commit()
    finally:
        conn.close()
    assert facts(path, e.id).marks == SloMark.BACKFILL
    assert facts(path, e.id).planned_at == at(10)


def test_occurrences_a_caller_adds_for_the_past_are_backfills(
    store: Store, path: Path, clock: ManualClock
) -> None:
    store.add_schedule("j", every=60, id="s")
    clock.set(600)
    past, coming = store.add_occurrences(
        "s", [Occurrence(slot=at(60), due_at=at(60)), Occurrence(slot=at(660), due_at=at(660))]
    )
    ran = store.run_schedule("s")
    assert facts(path, past.id) == Facts(at(60), at(60), None, None, timedelta(0), SloMark.BACKFILL)
    assert facts(path, coming.id) == fresh(at(660))
    assert facts(path, ran.id) == fresh(at(600))  # asked for now: never a backfill


def test_the_materializers_late_occurrences_are_no_backfill(
    store: Store, path: Path, clock: ManualClock
) -> None:
    store.add_schedule("j", every=60, id="s")
    clock.set(600)
    (leased,) = store.acquire_schedules("m", ttl=30)
    (made,) = store.materialize(
        [(leased, [Occurrence(slot=at(60), due_at=at(60))], at(60), at(660))]
    )
    assert isinstance(made, list)
    assert facts(path, made[0].id) == fresh(at(60))


# -- claims, completions, failures ----------------------------------------------------------


def test_a_retry_keeps_the_planned_time_and_the_first_claim(
    store: Store, path: Path, clock: ManualClock
) -> None:
    e = store.submit("j", max_attempts=3)
    clock.set(60)
    (lease,) = store.claim("w")
    assert facts(path, e.id) == Facts(at(0), at(0), at(60), None, timedelta(0), SloMark.NONE)
    clock.set(61)
    store.fail(lease, "boom", retry_in=5)
    clock.set(70)
    (again,) = store.claim("w")
    clock.set(72)
    store.complete(again)
    assert facts(path, e.id) == Facts(
        at(0), at(66), at(60), at(72), timedelta(0), SloMark.HANDLER_FAILED
    )


def test_a_timeout_and_a_dead_letter_are_marked_and_finish(
    store: Store, path: Path, clock: ManualClock
) -> None:
    timed = store.submit("j", max_attempts=1)
    dead = store.submit("j")
    first, second = store.claim("w", limit=2)
    clock.set(5)
    store.fail(first, "slow", timed_out=True)
    store.fail(second, "bad", retryable=False)
    assert facts(path, timed.id) == Facts(
        at(0), at(0), at(0), at(5), timedelta(0), SloMark.TIMED_OUT
    )
    assert facts(path, dead.id).marks == SloMark.HANDLER_FAILED
    assert facts(path, dead.id).first_finished_at == at(5)


def test_a_takeover_marks_the_renewal_failed(store: Store, path: Path, clock: ManualClock) -> None:
    e = store.submit("j", max_attempts=3)
    clock.set(1)
    (old,) = store.claim("a", ttl=10)
    clock.set(12)
    (new,) = store.claim("b", ttl=10)
    assert new.epoch == old.epoch + 1
    assert facts(path, e.id) == Facts(
        at(0), at(0), at(1), None, timedelta(0), SloMark.RENEWAL_FAILED
    )


def test_the_reaper_marks_the_renewal_failed_and_a_final_expiry_finishes(
    store: Store, path: Path, clock: ManualClock
) -> None:
    retried = store.submit("j", max_attempts=3)
    final = store.submit("j", max_attempts=1)
    store.claim("a", ttl=10, limit=2)
    clock.set(10)
    assert store.reap_expired() == 2
    assert facts(path, retried.id) == Facts(
        at(0), at(0), at(0), None, timedelta(0), SloMark.RENEWAL_FAILED
    )
    assert facts(path, final.id) == Facts(
        at(0), at(0), at(0), at(10), timedelta(0), SloMark.RENEWAL_FAILED
    )


@pytest.mark.parametrize(
    ("verb", "mark"),
    [
        ("heartbeat", SloMark.RENEWAL_FAILED),
        ("complete", SloMark.STALE_COMPLETION),
        ("fail", SloMark.STALE_COMPLETION),
        ("release", SloMark.STALE_COMPLETION),
    ],
)
def test_a_refused_call_marks_its_class(
    store: Store, path: Path, clock: ManualClock, verb: str, mark: SloMark
) -> None:
    e = store.submit("j", max_attempts=3)
    (old,) = store.claim("a", ttl=10)
    clock.set(10)
    (new,) = store.claim("b", ttl=60)  # marks RENEWAL_FAILED itself: look at what is added
    before = facts(path, e.id).marks
    calls: dict[str, Callable[[], object]] = {
        "heartbeat": lambda: store.heartbeat(old),
        "complete": lambda: store.complete(old),
        "fail": lambda: store.fail(old, "late"),
        "release": lambda: store.release(old),
    }
    with pytest.raises(StaleLease):
        calls[verb]()
    assert facts(path, e.id).marks == before | mark
    store.complete(new)
    assert facts(path, e.id).first_finished_at == at(10)


def test_a_refused_heartbeat_alone_marks_a_renewal_failed(
    store: Store, path: Path, clock: ManualClock
) -> None:
    e = store.submit("j")
    (lease,) = store.claim("a", ttl=10)
    clock.set(10)  # expired, not taken over
    with pytest.raises(StaleLease):
        store.heartbeat(lease)
    assert facts(path, e.id).marks == SloMark.RENEWAL_FAILED


def test_a_replay_is_marked_and_keeps_the_first_finish(
    store: Store, path: Path, clock: ManualClock
) -> None:
    e = store.submit("j")
    (lease,) = store.claim("w")
    clock.set(3)
    store.fail(lease, "bad", retryable=False)
    clock.set(100)
    store.replay(e.id)
    clock.set(101)
    (again,) = store.claim("w")
    clock.set(102)
    store.complete(again)
    assert facts(path, e.id) == Facts(
        at(0), at(100), at(0), at(3), timedelta(0), SloMark.HANDLER_FAILED | SloMark.REPLAYED
    )


def test_a_throttled_claim_adds_its_held_time(store: Store, path: Path, clock: ManualClock) -> None:
    store.set_limit("job:a", rate="1/s", burst=1)
    first, held = store.submit_many([{"job": "a"}, {"job": "a"}])
    assert [lease.execution_id for lease in store.claim("w", limit=10)] == [first.id]
    clock.set(1.5)
    (later,) = store.claim("w", limit=10)
    assert later.execution_id == held.id
    assert facts(path, held.id).held == timedelta(seconds=1.5)
    assert facts(path, held.id).first_claimed_at == at(1.5)
    assert facts(path, first.id).held == timedelta(0)
    with sqlite3.connect(path) as conn:  # what the throttle record says
        assert conn.execute("SELECT execution_id, held_us FROM throttles").fetchall() == [
            (held.id, 1_500_000)
        ]
    conn.close()


def test_a_paused_queue_adds_the_time_it_held(store: Store, path: Path, clock: ManualClock) -> None:
    store.pause_queue("q")
    clock.set(10)
    waiting = store.submit("j", queue="q")
    elsewhere = store.submit("j")
    clock.set(40)
    store.resume_queue("q")
    assert facts(path, waiting.id).held == timedelta(seconds=30)
    assert facts(path, elsewhere.id).held == timedelta(0)


def test_the_hot_path_writes_the_facts_on_statements_it_runs_anyway(
    store: Store, path: Path, clock: ManualClock
) -> None:
    """A claim and a completion each update the execution once: the facts ride on it."""
    store.submit("j")
    leases: list[Lease] = []
    claimed = statements(store, lambda: leases.extend(store.claim("w")))
    completed = statements(store, lambda: store.complete_many([(leases[0], None)]))
    for ran in (claimed, completed):
        code = [without_comments(s) for s in ran]
        updates = [s for s in code if s.startswith("UPDATE executions")]
        assert len(updates) == 1, code
        assert "first_" in updates[0]
        assert not any("slo_marks" in s or "first_" in s for s in code if s not in updates)


# -- the report from the facts --------------------------------------------------------------


class Generated(NamedTuple):
    """One execution's facts as a test writes them: times in seconds on the timeline."""

    id: str
    job: str
    state: State
    planned: float
    claimed: float | None
    finished: float | None
    held: float
    marks: int

    def facts(self) -> SloFacts:
        return SloFacts(
            state=self.state,
            planned_at=at(self.planned),
            first_claimed_at=None if self.claimed is None else at(self.claimed),
            first_finished_at=None if self.finished is None else at(self.finished),
            held=timedelta(seconds=self.held),
            marks=SloMark(self.marks),
        )


def _random_facts(rng: random.Random, now_s: float) -> list[Generated]:
    """Executions planned over the last 40 days, with every kind of fact and the
    boundaries (late by exactly 10 s, by exactly the held time, 5 min...)."""
    out = []
    for i in range(600):
        planned = now_s - rng.choice([rng.uniform(0, 40 * DAY), rng.uniform(0, 7 * HOUR), 5, 10])
        planned = round(planned, 6)  # whole microseconds, as stored
        late = rng.choice([0, 10, 10.000001, 11, 60, 299, 300, 300.000001, 400, None])
        claimed = None if late is None else min(planned + late, now_s)
        finished = None
        if claimed is not None and rng.random() < 0.8:
            finished = min(claimed + rng.choice([0, 1, 200, 290, 301, 1000]), now_s)
        if finished is not None:
            states = [State.SUCCEEDED, State.FAILED]
        elif claimed is not None:
            states = [State.RUNNING, State.RETRY_WAIT, State.CANCELLED]
        else:
            states = [State.SCHEDULED, State.SKIPPED, State.CANCELLED]
        out.append(
            Generated(
                id=f"00000000-0000-7000-8000-{i:012d}",
                job=rng.choice(["a", "b"]),
                state=rng.choice(states),
                planned=planned,
                claimed=claimed,
                finished=finished,
                held=rng.choice([0, 0, 0, 1, 50, 400]),
                marks=rng.choice([0, 0, 0, 1, 2, 4, 8, 16, 32, 5, 12, 48]),
            )
        )
    return out


def _insert_facts(path: Path, generated: list[Generated]) -> None:
    def us(seconds: float | None) -> int | None:
        return None if seconds is None else rows.to_us(at(seconds))

    with sqlite3.connect(path) as conn:
        for g in generated:
            planned = us(g.planned)
            conn.execute(
                "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, created_at,"
                " updated_at, planned_at, first_claimed_at, first_finished_at, held_us, slo_marks)"
                " VALUES (?, ?, ?, ?, 3, 0, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *(g.id, g.job, g.state, planned, planned, planned, planned),
                    *(us(g.claimed), us(g.finished), round(g.held * 1e6), g.marks),
                ),
            )
            conn.execute(
                "INSERT INTO execution_data (execution_id, inputs) VALUES (?, 'null')", (g.id,)
            )
    conn.close()


@pytest.mark.parametrize("window", [timedelta(days=30), timedelta(hours=2)])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_report_counts_what_the_domain_rules_decide(
    path: Path, clock: ManualClock, seed: int, window: timedelta
) -> None:
    """slo (the shared slo_verdicts in SQLite) against fencepost.domain.slo, row by row."""
    now_s = 45 * DAY + 0.5
    generated = _random_facts(random.Random(seed), now_s)
    with fencepost.connect(f"sqlite:///{path}", clock=clock) as store:
        _insert_facts(path, generated)
        clock.set(now_s)
        report = store.slo(window=window, worst=5)
    now = at(now_s)
    start = window_start(now, window)
    every = [f for f in (g.facts() for g in generated) if counted(f)]

    def tallies(since: datetime) -> tuple[Tally, Tally]:
        within = [f for f in every if since <= f.planned_at <= now]
        claims = tally(claim_verdict(f, now, DEFAULT_CLAIM_WITHIN) for f in within)
        finishes = tally(
            finish_verdict(f, now, DEFAULT_FINISH_WITHIN, DEFAULT_CLAIM_WITHIN) for f in within
        )
        return claims, finishes

    claims, finishes = tallies(start)
    recent = {w: tallies(now - w) for w in BURN_WINDOWS}
    claim_recent = {w: c for w, (c, _) in recent.items()}
    finish_recent = {w: f for w, (_, f) in recent.items()}
    assert report.claimed == objective(
        "claim", DEFAULT_CLAIM_WITHIN, DEFAULT_CLAIM_TARGET, claims, claim_recent
    )
    assert report.finished == objective(
        "finish", DEFAULT_FINISH_WITHIN, DEFAULT_FINISH_TARGET, finishes, finish_recent
    )
    assert report.claimed.total > 50
    assert report.rolled_up == 0
    # The worst: the latest first claims of the window (unclaimed: late until now).
    lateness = [
        (max((f.first_claimed_at or now) - f.planned_at, timedelta(0)), f.planned_at)
        for f in every
        if start <= f.planned_at <= now
    ]
    lateness.sort(key=lambda x: (-x[0], x[1]))
    assert [(o.lateness, o.planned_at) for o in report.worst] == lateness[:5]


# -- the migration ---------------------------------------------------------------------------


def _migrated_to(conn: sqlite3.Connection, version: int) -> None:
    conn.execute(QUERIES["create_migrations_table"])
    for number, name, sql in migration_files(MIGRATIONS_PACKAGE):
        if number > version:
            break
        for statement in split_statements(sql):
            conn.execute(statement)
        conn.execute(QUERIES["record_migration"], {"version": number, "name": name, "at": 0})


def test_the_migration_fills_the_facts_from_what_rows_kept(tmp_path: Path) -> None:
    path = tmp_path / "v12.db"
    conn = open_connection(str(path), busy_timeout=1)
    _migrated_to(conn, 12)
    us = rows.to_us

    def execution(id_: str, state: str, due: float, updated: float, slot: str | None) -> None:
        conn.execute(
            "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, created_at,"
            " updated_at, slot, schedule_id) VALUES (?, 'j', ?, ?, 3, 0, ?, ?, ?, ?)",
            (id_, state, us(at(due)), us(at(0)), us(at(updated)), slot, slot and "s"),
        )
        conn.execute("INSERT INTO execution_data (execution_id, inputs) VALUES (?, 'null')", (id_,))

    def audit(
        id_: str, event: str, t: float, frm: str | None = None, reason: str | None = None
    ) -> None:
        conn.execute(
            "INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor,"
            " reason, at) VALUES (?, ?, ?, 'RUNNING', 1, 'w', ?, ?)",
            (id_, event, frm, reason, us(at(t))),
        )

    # A submit retried once, then SUCCEEDED: its due_at is the retry's (all that is left).
    execution("a", "SUCCEEDED", 30, 50, None)
    audit("a", "SUBMITTED", 0)
    audit("a", "CLAIMED", 20, "SCHEDULED")
    audit("a", "FAILED", 25, "RUNNING")
    audit("a", "CLAIMED", 31, "RETRY_WAIT")
    audit("a", "COMPLETED", 50, "RUNNING")
    # An occurrence taken over, expired, timed out, refused stale, dead-lettered, replayed.
    execution("b", "FAILED", 500, 700, "2026-01-01T00:01:00Z")
    audit("b", "CLAIMED", 70, "SCHEDULED")
    audit("b", "CLAIMED", 100, "RUNNING", "took over from w (epoch 1): lease expired")
    audit("b", "STALE_REFUSED", 101, "RUNNING", "stale complete refused")
    audit("b", "LEASE_EXPIRED", 200, "RUNNING")
    audit("b", "TIMED_OUT", 300, "RUNNING")
    audit("b", "REPLAYED", 400, "FAILED")
    # An occurrence with a fractional slot, running, its heartbeat refused, throttled twice.
    execution("c", "RUNNING", 200, 200, "2026-01-01T00:02:00.250000Z")
    audit("c", "CLAIMED", 130, "SCHEDULED")
    audit("c", "STALE_REFUSED", 140, "RUNNING", "stale heartbeat refused")
    for held in (1_500_000, 2_000_000):
        conn.execute(
            "INSERT INTO throttles (execution_id, scope, held_us, at) VALUES ('c', 'job:j', ?, ?)",
            (held, us(at(130))),
        )
    # Never claimed.
    execution("d", "SCHEDULED", 900, 0, None)
    applied = migrate(conn)
    assert applied[0] == 13  # then every later version
    assert applied == sorted(applied)
    found = {
        id_: rest
        for id_, *rest in conn.execute(
            "SELECT id, planned_at, first_claimed_at, first_finished_at, held_us, slo_marks"
            " FROM executions ORDER BY id"
        )
    }
    assert found == {
        "a": [us(at(30)), us(at(20)), us(at(50)), 0, SloMark.HANDLER_FAILED],
        "b": [
            us(at(60)),
            us(at(70)),
            us(at(700)),
            0,
            SloMark.RENEWAL_FAILED
            | SloMark.STALE_COMPLETION
            | SloMark.TIMED_OUT
            | SloMark.REPLAYED,
        ],
        "c": [us(at(120.25)), us(at(130)), None, 3_500_000, SloMark.RENEWAL_FAILED],
        "d": [us(at(900)), None, None, 0, 0],
    }
    # The view hands the planned time to the row mapper, last.
    (row,) = conn.execute("SELECT * FROM execution_rows WHERE id = 'c'")
    assert rows.execution(row).planned_at == at(120.25)
    conn.close()


# -- rollups ----------------------------------------------------------------------------------


def _history(store: Store, clock: ManualClock, days: int) -> None:
    """``days`` days of work, each day one execution of every verdict (and the ones not
    counted): on time, claimed late, running long, dead letters, timeouts, takeovers,
    refused completions, backfills, replays, throttled, skipped and cancelled."""
    store.add_schedule("sched", every=DAY, id="s")
    store.set_limit("job:limited", rate="1/s", burst=1)
    for day in range(days):
        t0 = day * DAY + 100
        clock.set(t0)
        ok = store.submit_many([{"job": "ok"} for _ in range(3)])
        late, late_long = store.submit("late"), store.submit("late_long")
        long, dead = store.submit("long"), store.submit("dead", max_attempts=1)
        slow, taken = store.submit("slow", max_attempts=1), store.submit("taken", max_attempts=3)
        stale, back = store.submit("stale"), store.submit("back", execute_at=at(t0 - HOUR))
        replayed = store.submit("replayed", max_attempts=1)
        store.submit_many([{"job": "limited"}, {"job": "limited"}])
        store.cancel(store.submit("cancelled").id)
        store.add_occurrences("s", [Occurrence(slot=at(t0), due_at=at(t0), skipped="misfire")])
        clock.set(t0 + 1)
        on_time = [*ok, long, dead, slow, stale, back, replayed]
        leases = {
            lease.execution_id: lease
            for lease in store.claim("w", limit=20, ttl=1000, ids=[e.id for e in on_time])
        }
        (taken_lease,) = store.claim("w", ids=[taken.id], ttl=30)
        (first_limited,) = store.claim("w", limit=5, jobs=["limited"])
        store.complete(first_limited)
        for e in (*ok, back):
            store.complete(leases[e.id])
        store.fail(leases[replayed.id], "bad", retryable=False)
        store.release(leases[stale.id])
        with pytest.raises(StaleLease):
            store.complete(leases[stale.id])
        clock.set(t0 + 30)
        late_leases = store.claim("w", limit=2, ttl=1000, ids=[late.id, late_long.id])
        for lease in late_leases:
            if lease.execution_id == late.id:
                store.complete(lease)
        clock.set(t0 + 40)
        (second_limited,) = store.claim("w", limit=5, jobs=["limited"])  # held 40 s
        store.complete(second_limited)
        store.replay(replayed.id)
        (again,) = store.claim("w", ids=[replayed.id])
        store.complete(again)
        clock.set(t0 + 400)
        for lease in late_leases:
            if lease.execution_id == late_long.id:
                store.complete(lease)
        store.complete(leases[long.id])
        store.fail(leases[dead.id], "bad", retryable=False)
        store.fail(leases[slow.id], "slow", timed_out=True)
        (takeover,) = store.claim("x", ids=[taken.id])
        store.complete(takeover)
        (stale_again,) = store.claim("x", ids=[stale.id])
        store.complete(stale_again)
        assert taken_lease.epoch < takeover.epoch


FACT_COLUMNS = (
    "SELECT id, job, state, planned_at, first_claimed_at, first_finished_at, held_us, slo_marks"
    " FROM executions"
)


def _stored_facts(path: Path) -> dict[str, tuple[str, SloFacts]]:
    """Every execution's job and facts, as the domain's rules take them."""
    with sqlite3.connect(path) as conn:
        found = conn.execute(FACT_COLUMNS).fetchall()
    conn.close()
    return {
        id_: (
            job,
            SloFacts(
                state=State(state),
                planned_at=rows.from_us(planned),
                first_claimed_at=None if claimed is None else rows.from_us(claimed),
                first_finished_at=None if finished is None else rows.from_us(finished),
                held=rows.us_duration(held),
                marks=SloMark(marks),
            ),
        )
        for id_, job, state, planned, claimed, finished, held, marks in found
    }


def _rollups(path: Path) -> list[tuple[int, str, str, str, int]]:
    with sqlite3.connect(path) as conn:
        found = conn.execute("SELECT * FROM slo_rollups ORDER BY 1, 2, 3, 4").fetchall()
    conn.close()
    return found


def _expected_rollups(
    pruned: dict[str, tuple[str, SloFacts]], now: datetime
) -> list[tuple[int, str, str, str, int]]:
    counts: Counter[tuple[int, str, str, str]] = Counter()
    for job, f in pruned.values():
        if not counted(f):
            continue
        day = day_number(f.planned_at)
        verdicts = {
            "claim": claim_verdict(f, now, DEFAULT_CLAIM_WITHIN),
            "finish": finish_verdict(f, now, DEFAULT_FINISH_WITHIN, DEFAULT_CLAIM_WITHIN),
        }
        for name, verdict in verdicts.items():
            if verdict is not None:
                counts[day, job, name, verdict.value] += 1
    return sorted((*key, n) for key, n in counts.items())


def test_a_report_before_prune_equals_the_report_after(
    store: Store, path: Path, clock: ManualClock
) -> None:
    _history(store, clock, days=20)
    clock.set(20 * DAY + 5 * HOUR)
    before = store.slo()
    assert before.rolled_up == 0
    # Every class and every exclusion is in it (the history makes one of each a day).
    assert all(before.claimed.misses.values()), before.claimed
    assert all(before.claimed.excluded.values()), before.claimed
    assert all(before.finished.misses.values()), before.finished
    assert before.finished.excluded["backfill"] > 0
    assert before.finished.excluded["replay"] > 0
    stored = _stored_facts(path)
    assert store.prune(older_than=14 * DAY, dry_run=True) > 100
    assert _rollups(path) == []  # a dry run writes nothing
    assert store.prune(older_than=14 * DAY, batch=50) > 100
    after = store.slo()
    assert (after.claimed, after.finished) == (before.claimed, before.finished)
    assert after.start == before.start
    assert after.rolled_up > 0
    # The rollups hold the domain's verdicts of exactly the rows that went.
    left = _stored_facts(path)
    pruned = {id_: f for id_, f in stored.items() if id_ not in left}
    assert _rollups(path) == _expected_rollups(pruned, clock.now())
    assert after.rolled_up == sum(1 for _, f in pruned.values() if counted(f))
    # At other objectives, or over a window of less than a day, only stored rows count.
    assert store.slo(claim_within=11).rolled_up == 0
    assert store.slo(window=HOUR).rolled_up == 0


def test_a_failed_batch_leaves_neither_rollup_nor_deletion(
    store: Store, path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _history(store, clock, days=3)
    clock.set(20 * DAY)
    before = store.slo()
    stored = _stored_facts(path)
    # The batch's last statement fails, after its rollups were written.
    queries = store.queries  # type: ignore[attr-defined]  # the SQL the store's plans read
    monkeypatch.setitem(queries, "prune_executions", "DELETE FROM no_such_table")
    with pytest.raises(StoreUnavailable):
        store.prune(older_than=14 * DAY, batch=20)
    assert _rollups(path) == []
    assert _stored_facts(path) == stored
    monkeypatch.undo()
    # The same prune again (same cutoff): every row once, counted once.
    assert store.prune(older_than=14 * DAY, batch=20) == len(stored)
    assert _stored_facts(path) == {}
    assert _rollups(path) == _expected_rollups(stored, clock.now())
    after = store.slo()
    assert (after.claimed, after.finished) == (before.claimed, before.finished)

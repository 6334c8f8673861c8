"""Prune's SLO rollups on PostgreSQL: the 30-day report is the same after pruning 14 days.

Before prune deletes a batch of executions, or drops a day of history, it adds their
verdicts to ``slo_rollups`` in the same transaction (``prune_batch``; ``roll_up_day``
in the transaction that drops the day's executions partition, history.py). These
tests take the report over 30 days of history, prune it to 14 (whole days dropped,
or rows deleted by batch), and take it again; and they stop a prune between the
rollup and the drop, in this process and by SIGKILL, and check that the next prune
neither loses a day's verdicts nor counts them twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import Store
from fencepost.domain.reports import SloReport
from fencepost.domain.slo import day_number
from fencepost.store.postgres import history
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at
from tests.integration import _pg
from tests.integration.test_worker_processes import wait_until
from tests.postgres import require_postgres

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
DAY = 86_400.0
DAYS = 30
RETENTION = timedelta(days=14)
#: Executions each day of history_of holds that a report counts.
COUNTED_PER_DAY = 5


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


def counts(report: SloReport) -> tuple[Any, ...]:
    """Every figure of a report but its worst offenders and its instant."""
    return (report.window, report.start, report.claimed, report.finished)


def one_day(store: Store, clock: ManualClock, base: float) -> None:
    """A day of history from ``base`` (seconds on the ManualClock timeline): an execution
    met on both objectives, one claimed late, one that failed and finished late, one
    whose lease ran out and was reaped, a backfill, and one cancelled before its claim."""

    def claim(second: float, job: str, ttl: float = 10_000) -> Any:
        clock.set(second)
        (lease,) = store.claim("w", jobs=[job], ttl=ttl)
        return lease

    def done(lease: Any, second: float) -> None:
        clock.set(second)
        store.complete(lease, "ok")

    clock.set(base)
    ids = {job: store.submit(job).id for job in ("on-time", "late", "retried", "expired", "x")}
    done(claim(base + 1, "on-time"), base + 2)
    claim(base + 1, "expired", ttl=5)
    lease = claim(base + 1, "retried")
    clock.set(base + 2)
    store.fail(lease, "boom", retry_in=600)
    done(claim(base + 60, "late"), base + 61)
    clock.set(base + 400)
    assert store.reap_expired() == 1
    done(claim(base + 401, "expired"), base + 402)
    store.cancel(ids["x"])
    done(claim(base + 602, "retried"), base + 603)
    clock.set(base + 3600)
    store.submit("backfill", execute_at=at(base))
    done(claim(base + 3600, "backfill"), base + 3601)


def history_of(schema: str, *, keepers: bool = False) -> ManualClock:
    """30 days of one_day on the ManualClock timeline; ``keepers``: each day also holds an
    execution still waiting (planned far ahead: no report counts it), so that no day can
    be dropped whole and prune deletes by batch."""
    clock = ManualClock(at(0))
    with fencepost.connect(_pg.url(schema), clock=clock) as store:
        for day in range(DAYS):
            one_day(store, clock, day * DAY)
            if keepers:
                store.submit("keeper", execute_at=at(400 * DAY))
    clock.set(DAYS * DAY + 3600)
    return clock


def rollups(schema: str) -> dict[tuple[int, str, str, str], int]:
    with _pg.connect() as conn:
        found = conn.execute(
            f"SELECT day, job, objective, verdict, count FROM {schema}.slo_rollups"
        ).fetchall()
    return {(day, job, objective, verdict): n for day, job, objective, verdict, n in found}


def day_partitions(schema: str) -> set[int]:
    """The days (days since the epoch) that have an executions partition."""
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        return {
            p.lower_ms // history.DAY_MS for p in history.partitions(conn) if p.lower_ms is not None
        }


def pruned_days() -> set[int]:
    """The days of history_of that a prune at its end with RETENTION deletes: those
    before the cutoff's day (the cutoff is 01:00 of day 16, whose first hour goes by row)."""
    first = day_number(at(0))
    return set(range(first, first + 16))


@pytest.mark.parametrize("keepers", [False, True], ids=["whole-days", "by-batch"])
def test_the_report_after_prune_equals_the_report_before(schema: str, keepers: bool) -> None:
    clock = history_of(schema, keepers=keepers)
    with fencepost.connect(_pg.url(schema), clock=clock) as store:
        before = store.slo()
        assert before.rolled_up == 0
        assert before.claimed.total == DAYS * 4  # on time, late, retried, expired
        assert before.finished.excluded["backfill"] == DAYS
        assert store.prune(older_than=RETENTION, dry_run=True) > 0
        assert rollups(schema) == {}, "a dry run writes nothing"
        partitions = day_partitions(schema)
        assert pruned_days() <= partitions
        pruned = store.prune(older_than=RETENTION)
        after = store.slo()
        again = store.slo(worst=0)
    assert pruned == 16 * (COUNTED_PER_DAY + 1) + 5  # and day 16's first hour
    assert counts(after) == counts(before)
    assert counts(again) == counts(before)
    # Each execution a day dropped (or a batch deleted) held is counted once: its claim.
    assert after.rolled_up == sum(
        n for (_, _, objective, _), n in rollups(schema).items() if objective == "claim"
    )
    assert after.rolled_up == 16 * COUNTED_PER_DAY + 4  # day 16 until 01:00: 4 of 5
    remaining = day_partitions(schema)
    if keepers:
        assert remaining == partitions  # every day kept: rows deleted by batch
    else:
        assert not remaining & pruned_days()  # dropped whole
    # The report's worst offenders are the executions still stored.
    assert all(o.planned_at >= at(16 * DAY) for o in after.worst)
    assert {day for day, *_ in rollups(schema)} == {*pruned_days(), day_number(at(16 * DAY))}


class Stopped(Exception):
    """The prune stops here (its process died)."""


@pytest.mark.parametrize("where", ["before-commit", "after-commit"])
def test_a_prune_stopped_around_the_rollup_neither_loses_nor_doubles(
    schema: str, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The third day's drop stops: before its rollup and the drop of its executions commit
    (rolled back together: the day is left detached, marked as being dropped), or right
    after (its other tables left detached). The next prune finishes the day; the report
    is exact either way."""
    clock = history_of(schema)
    real_drop = history._drop
    calls: list[list[str]] = []

    def stop_third(conn: Any, p: history.Partition, tables: Any) -> None:
        names = sorted(tables)
        calls.append(names)
        days_begun = sum(1 for c in calls if c == ["executions"])
        if days_begun == 3 and (names == ["executions"]) == (where == "before-commit"):
            raise Stopped
        real_drop(conn, p, tables)

    first = day_number(at(0))
    third = store_id_of_day(schema, first + 2)
    with fencepost.connect(_pg.url(schema), clock=clock) as store:
        before = store.slo()
        monkeypatch.setattr(history, "_drop", stop_third)
        with pytest.raises(Stopped):
            store.prune(older_than=RETENTION)
        monkeypatch.undo()
        rolled = {day for day, *_ in rollups(schema)}
        if where == "before-commit":
            assert rolled == {first, first + 1}, "the third day's rollup went with its drop"
            with pytest.raises(fencepost.StoreUnavailable, match="being pruned"):
                store.get(third)  # its executions detached, not yet dropped
        else:
            assert rolled == {first, first + 1, first + 2}
            with pytest.raises(fencepost.NotFound):
                store.get(third)
        store.prune(older_than=RETENTION)
        after = store.slo()
    assert counts(after) == counts(before)
    assert after.rolled_up == 16 * COUNTED_PER_DAY + 4
    assert not day_partitions(schema) & pruned_days()


def store_id_of_day(schema: str, day: int) -> str:
    """An execution id of ``day`` (its executions partition, read directly)."""
    name = history.partition_name("executions", day)
    with _pg.connect() as conn:
        row = conn.execute(f"SELECT id::text FROM {schema}.{name} LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


# -- a prune process killed between its rollup and its drop ----------------------------


def old_noon() -> datetime:
    """Noon (UTC) ten days ago by the server's clock: a day a five-day prune drops."""
    ten_days_ago = (_pg.server_now() - timedelta(days=10)).astimezone(UTC)
    return datetime.combine(ten_days_ago.date(), time(12), tzinfo=UTC)


def blocked_by(holder: int) -> tuple[int, str] | None:
    """The session waiting for a lock ``holder`` holds, and its statement."""
    with _pg.connect() as conn:
        row = conn.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            [holder],
        ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def test_a_prune_killed_after_its_rollup_before_its_drop_counts_the_day_once(
    schema: str,
) -> None:
    """A real ``fencepost prune`` runs the day's rollup, then waits to drop the day's
    executions (a lock of this test holds it there) and is killed: its transaction,
    rollup included, is rolled back. The next prune rolls the day up once."""
    noon = old_noon()
    clock = ManualClock(noon)
    with fencepost.connect(_pg.url(schema), clock=clock) as old:
        base = (noon - at(0)).total_seconds()
        one_day(old, clock, base)
    day = history.partition_name("executions", history.day_of(store_id(schema)))
    with fencepost.connect(_pg.url(schema)) as store:
        before = store.slo()
    assert before.claimed.total == 4
    with _pg.connect() as rollup_lock, _pg.connect() as day_lock:
        # The prune's rollup waits for this lock, after the day is detached.
        rollup_lock.execute("BEGIN")
        rollup_lock.execute(f"LOCK TABLE {schema}.slo_rollups IN SHARE MODE")
        pruner = subprocess.Popen(
            [FENCEPOST, "prune", "--older-than", "5d", "--db", _pg.url(schema)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
        )  # fmt: skip
        try:
            pid, query = wait_until(
                lambda: blocked_by(rollup_lock.info.backend_pid), 30, "the rollup to wait"
            )
            assert query.startswith("-- Before prune drops a day of history"), query  # roll_up_day
            # Now the day is detached: hold it against its DROP, then let the rollup run.
            day_lock.execute("BEGIN")
            day_lock.execute(f"LOCK TABLE {schema}.{day} IN ACCESS SHARE MODE")
            rollup_lock.execute("COMMIT")
            waiting = wait_until(
                lambda: blocked_by(day_lock.info.backend_pid), 30, "the drop to wait"
            )
            assert waiting[0] == pid, waiting
            assert "DROP TABLE" in waiting[1], waiting
            assert pruner.poll() is None
        finally:
            os.killpg(pruner.pid, signal.SIGKILL)
            pruner.communicate(timeout=10)
        with _pg.connect() as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", [pid])
        day_lock.execute("COMMIT")
    assert rollups(schema) == {}, "the rollup went with the killed prune's transaction"
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.prune(older_than=timedelta(days=5)) == COUNTED_PER_DAY + 1
        after = store.slo()
    assert counts(after) == counts(before)
    assert after.rolled_up == COUNTED_PER_DAY
    assert sum(rollups(schema).values()) == 2 * COUNTED_PER_DAY  # both objectives


def store_id(schema: str) -> str:
    with _pg.connect() as conn:
        row = conn.execute(f"SELECT id::text FROM {schema}.executions LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])

"""The history charts on SQLite: the roll-up reads its index, prune deletes old minute
rows, and a watermark row deleted by hand is made again."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

import fencepost
from fencepost.domain.history import RETENTION
from fencepost.store.sqlite.connection import QUERIES, migrate, open_connection
from fencepost.testing import ManualClock

DAY = 86_400


@pytest.fixture
def migrated(tmp_path: Path) -> sqlite3.Connection:
    conn = open_connection(str(tmp_path / "x.db"), busy_timeout=1)
    migrate(conn)
    return conn


@pytest.mark.parametrize(
    ("block", "index"),
    [
        ("history_finished", "executions_finished"),
        ("history_throttled", "throttles_at"),
        ("history_points", "PRIMARY KEY"),
        ("history_points_job", "history_minutes_job"),
        ("history_points_queue", "history_minutes_queue"),
        ("history_by_job", "PRIMARY KEY"),
        ("history_prune", "PRIMARY KEY (span_minutes=? AND minute<?)"),
    ],
)
def test_each_read_searches_its_index(migrated: sqlite3.Connection, block: str, index: str) -> None:
    plan = migrated.execute(f"EXPLAIN QUERY PLAN {QUERIES[block]}", defaultdict(lambda: None))
    first = next(iter(plan))[-1]
    assert first.startswith("SEARCH"), first
    assert index in first, first


def stored_rows(path: Path) -> list[tuple[int, int]]:
    """``(span_minutes, minute)`` of every stored row."""
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT span_minutes, minute FROM history_minutes ORDER BY 2, 1"
        ).fetchall()


def test_prune_deletes_minute_rows_past_their_retention(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    clock = ManualClock(0)
    with fencepost.connect(f"sqlite:///{path}", clock=clock) as store:
        for day in (0, 1):
            clock.set(day * DAY)
            store.submit("job")
            (lease,) = store.claim("w")
            store.complete(lease, "ok")
            clock.set(day * DAY + 120)
            store.roll_up_history()
        kept = stored_rows(path)
        assert [span for span, _ in kept] == [1, 15, 60] * 2, "a row of each span, each day"
        clock.set(RETENTION.total_seconds() + 60)  # day 0's minute is past the retention
        store.prune(older_than=DAY * 30)
        assert stored_rows(path) == kept[3:]


def test_a_watermark_deleted_by_hand_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    clock = ManualClock(0)
    with fencepost.connect(f"sqlite:///{path}", clock=clock) as store:
        store.submit("job")
        (lease,) = store.claim("w")
        store.complete(lease, "ok")
        clock.set(120)
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM history_watermark")
        assert store.roll_up_history().executions == 1
        assert store.roll_up_history().executions == 0, "the watermark moved"
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM history_watermark").fetchone() == (1,)

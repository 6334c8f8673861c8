"""The SQLite schedule statements read their indexes, never scan a table."""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from fencepost.store.sqlite.connection import QUERIES, migrate, open_connection


@pytest.fixture
def migrated(tmp_path: Path) -> sqlite3.Connection:
    conn = open_connection(str(tmp_path / "x.db"), busy_timeout=1)
    migrate(conn)
    return conn


def plan(conn: sqlite3.Connection, block: str) -> str:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {QUERIES[block]}", defaultdict(lambda: None))
    return " | ".join(row[-1] for row in rows)


@pytest.mark.parametrize(
    ("block", "index"),
    [
        ("query_schedule_executions", "executions_schedule_state"),
        ("waiting_schedule_executions", "executions_schedule_state"),
        ("acquire_schedules", "schedules_due"),
    ],
)
def test_schedule_statements_read_their_index(
    migrated: sqlite3.Connection, block: str, index: str
) -> None:
    details = plan(migrated, block)
    assert index in details, details
    assert not re.search(r"SCAN (e|executions|schedules)\b(?! USING)", details), details


def test_fences_look_schedules_up_by_key(migrated: sqlite3.Connection) -> None:
    for block in ("materialize_fenced", "release_schedules"):
        details = plan(migrated, block)
        assert "SEARCH schedules USING PRIMARY KEY (id=?)" in details, details

"""The SQLite report and prune statements read their indexes.

Two reads scan on purpose: stats reads the audit trail's window without an index
of it by time (see migrations/0005_housekeeping.sql), and the SLO reads the
executions without an index on planned_at.
"""

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
        # A partial index is used only when the query repeats its WHERE clause.
        # Prune walks the primary key (ids are time-ordered): no index of its own.
        ("prunable", "USING PRIMARY KEY (id>? AND id<?)"),
        ("count_prunable", "USING PRIMARY KEY (id<?)"),
        ("bucket_counts_unfinished", "executions_active_bucket"),
        ("prune_transitions", "transitions_execution"),
        ("prune_commands", "commands_execution"),
    ],
)
def test_statements_read_their_index(migrated: sqlite3.Connection, block: str, index: str) -> None:
    details = plan(migrated, block)
    assert index in details, details
    assert not re.search(r"SCAN (t|e|executions|transitions|commands)\b(?! USING)", details), (
        details
    )


@pytest.mark.parametrize("block", ["slo", "slo_worst"])
def test_slo_reads_the_window_in_one_scan(migrated: sqlite3.Connection, block: str) -> None:
    # The facts are on the execution's own row: no audit trail, no lookup per row.
    details = plan(migrated, block)
    assert details.count("SCAN e") == 1, details
    assert "SUBQUERY" not in details, details
    assert "transitions" not in details, details


def test_stats_reads_each_figure_the_way_it_should(migrated: sqlite3.Connection) -> None:
    details = plan(migrated, "stats")
    # The counts by state scan the executions once, though two figures read them.
    assert len(re.findall(r"SCAN executions\b(?! USING)", details)) == 1, details
    # The backlog reads the claimable index; lateness looks claimed executions up by key.
    assert "SCAN executions USING INDEX executions_claimable" in details, details
    assert "SEARCH e USING PRIMARY KEY (id=?)" in details, details


def test_prune_deletes_by_key(migrated: sqlite3.Connection) -> None:
    for block in ("prune_execution_data", "prune_executions"):
        assert "USING PRIMARY KEY" in plan(migrated, block)

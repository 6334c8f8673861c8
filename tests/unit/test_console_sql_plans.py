"""The console's SQLite blocks read the index each is written for (migration 14), and
nothing else reads executions_state.

SQLite plans without statistics here, so a plan is a property of the text: each page
and count block must find its rows through its own index, never by scanning the
table. executions_state compares its state COLLATE NOCASE so that no other statement
(a claim, the reaper, a report) is tempted away from the index it was written for.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from fencepost.store.sqlite.connection import QUERIES, migrate, open_connection

#: Each console block and the index its plan must read.
READS = {
    "query_state_executions": "executions_state",
    "query_state_executions_newest_first": "executions_state",
    "query_key_executions": "executions_limit_key",
    "query_key_executions_newest_first": "executions_limit_key",
    "query_error_executions": "execution_data_errors",
    "query_error_executions_newest_first": "execution_data_errors",
    "query_finished_executions": "COVERING INDEX executions_finished",
    "query_finished_executions_newest_first": "COVERING INDEX executions_finished",
    "count_by_state": "COVERING INDEX executions_state",
    "count_states_by_state": "executions_state",
    "count_key_by_state": "executions_limit_key",
    "count_error_by_state": "execution_data_errors",
    "count_finished_by_state": "executions_finished",
    "count_finished_narrow_by_state": "COVERING INDEX executions_finished",
    "count_schedule_by_state": "executions_schedule_state",
}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> sqlite3.Connection:
    conn = open_connection(str(Path(tmp_path_factory.mktemp("plans")) / "s.db"), busy_timeout=1)
    migrate(conn)
    return conn


def _plan(conn: sqlite3.Connection, block: str) -> str:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {QUERIES[block]}", defaultdict(lambda: None))
    return " | ".join(row[-1] for row in rows)


@pytest.mark.parametrize(("block", "index"), READS.items(), ids=list(READS))
def test_each_console_block_reads_its_index(
    migrated: sqlite3.Connection, block: str, index: str
) -> None:
    plan = _plan(migrated, block)
    assert index in plan, plan
    assert not re.search(r"SCAN (e|executions|x)(?! USING)", plan), plan


def test_no_other_block_reads_the_state_index(migrated: sqlite3.Connection) -> None:
    readers = sorted(
        block
        for block in QUERIES
        if block not in ("pragmas", "begin_immediate", "commit", "rollback")
        and not block.startswith(("create_", "drop_"))
        and "executions_state " in _safe_plan(migrated, block) + " "
    )
    assert set(readers) <= {b for b, i in READS.items() if "executions_state" in i}, readers


def _safe_plan(conn: sqlite3.Connection, block: str) -> str:
    try:
        return _plan(conn, block)
    except sqlite3.Error:  # a statement EXPLAIN does not plan (DDL, pragmas)
        return ""

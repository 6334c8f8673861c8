"""The SQLite backend's SQL: every block parses and is used, migrations match the snapshot."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path

import pytest

import fencepost
from fencepost import State, StoreUnavailable
from fencepost.store.sqlite.connection import QUERIES, dump_schema, migrate, open_connection
from fencepost.testing import ManualClock

SQLITE_SOURCES = Path(fencepost.__file__).parent / "store" / "sqlite"
#: The SQL base: the shared verbs, flow control's and the history charts' plans, and the
#: verbs' plans by section (store/verbs/sql_*.py), run blocks by name.
SQL_BASE = [
    *(
        Path(fencepost.__file__).parent / "store" / name
        for name in ("sqlstore.py", "sqlflow.py", "sqlhistory.py")
    ),
    *sorted((Path(fencepost.__file__).parent / "store" / "verbs").glob("sql_*.py")),
]
REGENERATE = """.venv/bin/python - > src/fencepost/store/sqlite/schema.sql <<'EOF'
import tempfile
from fencepost.store.sqlite.connection import dump_schema, migrate, open_connection
with tempfile.TemporaryDirectory() as d:
    conn = open_connection(d + "/s.db", busy_timeout=1); migrate(conn)
    print(dump_schema(conn), end="")
EOF"""


@pytest.fixture
def migrated(tmp_path: Path) -> sqlite3.Connection:
    conn = open_connection(str(tmp_path / "x.db"), busy_timeout=1)
    migrate(conn)
    return conn


def test_every_block_compiles(migrated: sqlite3.Connection) -> None:
    skip = {"pragmas", "begin_immediate", "commit", "rollback"}
    for name, sql in QUERIES.items():
        if name in skip:
            continue
        # EXPLAIN compiles the statement against the real schema without running it.
        migrated.execute(f"EXPLAIN {sql}", defaultdict(lambda: None))


def test_every_block_is_used() -> None:
    # The dialect's own modules, and the SQL base whose shared verbs run blocks by name.
    code = "".join(p.read_text() for p in [*SQLITE_SOURCES.glob("*.py"), *SQL_BASE])
    unused = [name for name in QUERIES if f'"{name}"' not in code]
    assert unused == []


def test_migrations_equal_the_schema_snapshot(migrated: sqlite3.Connection) -> None:
    snapshot = resources.files("fencepost.store.sqlite").joinpath("schema.sql").read_text()
    assert dump_schema(migrated) == snapshot, f"schema.sql is stale; regenerate it:\n{REGENERATE}"


def test_migrate_is_idempotent(migrated: sqlite3.Connection) -> None:
    assert migrate(migrated) == []


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    fencepost.connect(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO fencepost_migrations VALUES (99, '0099_future.sql', 0)")
    with pytest.raises(StoreUnavailable, match="newer fencepost"):
        fencepost.connect(f"sqlite:///{path}")


def test_concurrent_first_opens_are_safe(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    code = f"import fencepost; fencepost.connect('sqlite:///{path}').submit('j')"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    with fencepost.connect(f"sqlite:///{path}") as store:
        assert len(store.query().items) == 4


@pytest.mark.parametrize("block", ["claim_candidates_queue", "claim_candidates_capped_queue"])
def test_a_claim_reads_one_queue_from_the_partial_indexes(
    migrated: sqlite3.Connection, block: str
) -> None:
    plan = migrated.execute(
        f"EXPLAIN QUERY PLAN {QUERIES[block]}", defaultdict(lambda: None)
    ).fetchall()
    details = " | ".join(row[-1] for row in plan)
    # One queue's claimable rows, found by the queue (not the whole claimable index).
    assert "SEARCH e USING INDEX executions_claimable (queue=?)" in details, details
    assert "executions_leased" in details  # takeovers, as in every claim
    assert not re.search(r"SCAN executions(?! USING)", details), details


def _steps(conn: sqlite3.Connection, sql: str, params: dict[str, object]) -> tuple[list, int]:
    """The rows of ``sql`` and how many virtual-machine steps (in thousands) it took."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(count, 1000)
    try:
        return conn.execute(sql, params).fetchall(), steps
    finally:
        conn.set_progress_handler(None, 0)


def test_the_live_queues_are_found_by_a_loose_scan(migrated: sqlite3.Connection) -> None:
    """A claim over every queue finds the queues to read with one index seek per
    queue: three queues of 60,000 waiting rows cost what three of one row do."""

    def fill(per_queue: int) -> None:
        migrated.execute("BEGIN")  # one transaction: the connection is in autocommit
        migrated.execute("DELETE FROM executions")
        migrated.executemany(
            "INSERT INTO executions (id, job, state, due_at, priority, attempt, max_attempts,"
            " epoch, bucket, created_at, updated_at, queue)"
            " VALUES (?, 'j', 'SCHEDULED', ?, 0, 0, 3, 0, 0, 0, 0, ?)",
            [(f"{q}-{i:06}", i, q) for q in ("a", "b", "default") for i in range(per_queue)],
        )
        migrated.execute("COMMIT")

    fill(1)
    small, small_steps = _steps(migrated, QUERIES["claim_live_queues"], {"now": 10**15})
    fill(60_000)
    large, large_steps = _steps(migrated, QUERIES["claim_live_queues"], {"now": 10**15})
    assert sorted(small) == sorted(large) == [("a",), ("b",), ("default",)]
    # A scan of the index would take hundreds of thousands of steps (180,000 rows).
    assert large_steps <= small_steps + 1, (small_steps, large_steps)


def test_executions_survive_reopening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'durable.db'}"
    clock = ManualClock(0)
    with fencepost.connect(url, clock=clock) as first:
        e = first.submit("job", inputs={"k": "v"})
        (lease,) = first.claim("w", ttl=10)
    with fencepost.connect(url, clock=clock) as second:
        assert second.get(e.id).state is State.RUNNING
        assert second.claim("other") == []
        assert second.complete(lease, "ok").result == "ok"
        assert second.get(e.id).inputs == {"k": "v"}


def test_a_failed_batch_leaves_nothing_behind(tmp_path: Path) -> None:
    """A driver error mid-transaction rolls the whole batch back."""
    url = f"sqlite:///{tmp_path / 'atomic.db'}"
    with fencepost.connect(url) as store:
        store.submit("job", idempotency_key="taken")
        with sqlite3.connect(tmp_path / "atomic.db") as raw:
            # Make the third insert of the next batch violate a constraint the
            # store does not check itself.
            raw.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON executions WHEN NEW.job = 'bad' "
                "BEGIN SELECT RAISE(ABORT, 'injected'); END"
            )
        with pytest.raises(StoreUnavailable, match="injected"):
            store.submit_many([{"job": "ok"}, {"job": "ok"}, {"job": "bad"}])
        assert [e.job for e in store.query().items] == ["job"]
        assert store.submit("ok").job == "ok", "the connection is usable afterwards"

"""``Store.delete`` leaves no row of the execution in any table, and one record of it.

Read from the database itself, table by table: every table with an ``execution_id``
column (PostgreSQL's partitions included, through their parents), ``executions`` by
id and PostgreSQL's ``execution_keys`` by key. A table added later that keeps rows by
execution id is checked without changing this test.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests import postgres

KEY = "nightly-2026-01-01"


@pytest.fixture(params=["sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, Any]]:
    """A store pinned to a ManualClock, and a function counting its rows by (table, column,
    value), over the database's own connection."""
    clock = ManualClock(0)
    if request.param == "sqlite":
        path = tmp_path / "rows.db"
        store = fencepost.connect(f"sqlite:///{path}", clock=clock)
        reader = sqlite3.connect(path)

        def tables() -> list[tuple[str, str]]:
            names = [
                r[0] for r in reader.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            return [
                (name, column)
                for name in names
                for (_, column, *_rest) in reader.execute(f"PRAGMA table_info({name})")
            ]

        def count(table: str, column: str, value: str) -> int:
            return int(
                reader.execute(
                    f"SELECT count(*) FROM {table} WHERE {column} = ?", (value,)
                ).fetchone()[0]
            )

        yield store, (clock, tables, count)
        store.close()
        reader.close()
        return
    postgres.require_postgres()
    schema = postgres.new_schema()
    store = fencepost.connect(postgres.store_url(schema), clock=clock)
    conn = psycopg.connect(postgres.dsn(), autocommit=True)

    def pg_tables() -> list[tuple[str, str]]:
        rows = conn.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns AS c"
            " JOIN pg_class AS t ON t.relname = c.table_name"
            " JOIN pg_namespace AS n ON n.oid = t.relnamespace AND n.nspname = c.table_schema"
            " WHERE c.table_schema = %s AND NOT t.relispartition AND t.relkind IN ('r', 'p')",
            (schema,),
        ).fetchall()
        return [(table, column) for table, column in rows]

    def pg_count(table: str, column: str, value: str) -> int:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}"."{table}" WHERE {column}::text = %s', (value,)
        ).fetchone()
        assert row is not None
        return int(row[0])

    yield store, (clock, pg_tables, pg_count)
    store.close()
    conn.close()
    postgres.drop_schema(schema)


def test_a_deleted_execution_leaves_no_row_and_one_record(opened: tuple[Store, Any]) -> None:
    store, (clock, tables, count) = opened
    # An execution with a row in every table there is: held back by a limit (a
    # throttle record), keyed, with commands, progress and an audit trail.
    store.set_limit("job:nightly", concurrency=1)
    first = store.submit("nightly")
    doomed = store.submit("nightly", {"day": "2026-01-01"}, idempotency_key=KEY)
    (lease,) = store.claim("w", limit=2)
    assert lease.execution_id == first.id, "the limit holds the second one back"
    store.complete(lease, "ok")
    clock.set(5)
    (held,) = store.claim("w")
    assert held.execution_id == doomed.id
    store.heartbeat(held, progress={"rows": 3})
    store.request(doomed.id, "pause", actor="ops")
    store.request(doomed.id, "cancel", actor="ops")
    store.abort(held)
    assert store.get(doomed.id).state is State.CANCELLED

    by_id = [(t, c) for t, c in tables() if c == "execution_id" and t != "deletions"]
    assert {"transitions", "execution_data", "commands", "throttles"} <= {t for t, _ in by_id}
    holding = {t for t, c in by_id if count(t, c, doomed.id)}
    assert holding >= {"transitions", "execution_data", "commands", "throttles"}, holding
    clock.set(9)

    record = store.delete(doomed.id, actor="ops")

    for table, column in by_id:
        assert count(table, column, doomed.id) == 0, table
    assert count("executions", "id", doomed.id) == 0
    if ("execution_keys", "key") in tables():
        assert count("execution_keys", "key", KEY) == 0
    assert count("deletions", "execution_id", doomed.id) == 1
    assert (record.state, record.actor, record.job) == (State.CANCELLED, "ops", "nightly")
    assert store.deletions().items == [record]
    # The other execution keeps every row of its own.
    assert count("executions", "id", first.id) == 1
    assert count("transitions", "execution_id", first.id) == 3
    assert store.submit("nightly", idempotency_key=KEY).id != doomed.id, "its key is free"

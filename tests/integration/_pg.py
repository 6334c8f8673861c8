"""Helpers of the PostgreSQL integration tests: direct SQL next to the store under test.

They talk to the test server (``tests.postgres.dsn()``) unless given the ``dsn`` of
another one, such as a private server of ``_pg_instance`` that a test stops and starts.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import psycopg

import fencepost
from fencepost import Event, Execution, State, Transition
from tests import postgres
from tests.integration import _audit


def url(schema: str, *, dsn: str | None = None, **options: Any) -> str:
    """The store URL of ``schema`` with extra query options (pool sizes, libpq params)."""
    if dsn is None:
        base = postgres.store_url(schema)
    else:
        base = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    return base + "".join(f"&{k}={v}" for k, v in options.items())


def connect(dsn: str | None = None) -> psycopg.Connection[tuple[Any, ...]]:
    """A plain autocommit connection to the test server, or to ``dsn`` (not through fencepost)."""
    return psycopg.connect(dsn or postgres.dsn(), autocommit=True, connect_timeout=5)


@contextlib.contextmanager
def fresh_schema(dsn: str | None = None) -> Iterator[str]:
    """A new, empty schema for one test, dropped afterwards."""
    if dsn is None:
        schema = postgres.new_schema()
    else:
        schema = f"fp_test_{uuid.uuid4().hex[:12]}"
        with connect(dsn) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        if dsn is None:
            postgres.drop_schema(schema)
        else:
            with connect(dsn) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def server_now() -> datetime:
    with connect() as conn:
        row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def server_is_local() -> bool:
    """Whether the server runs on this machine, so that it shares this machine's clock."""
    host = urlsplit(postgres.dsn()).hostname
    return host in (None, "", "localhost", "127.0.0.1", "::1")


def backend_pids(application_name: str) -> set[int]:
    """The server processes of the sessions that connected with ``application_name``."""
    with connect() as conn:
        found = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [application_name]
        ).fetchall()
    return {pid for (pid,) in found}


def analyze(schema: str, *, dsn: str | None = None) -> None:
    """Refresh the planner's statistics of a freshly filled schema.

    Right after a bulk submit, before autovacuum has analyzed the new rows, the
    planner misjudges the claimable backlog (dozens of rows instead of tens of
    thousands) and a claim sorts the whole backlog instead of reading the claim
    index in order: about 6x slower per claim here. Tests that submit tens of
    thousands of executions and then drain them do what autovacuum would soon do.
    """
    with connect(dsn) as conn:
        conn.execute(f"ANALYZE {schema}.executions")


def load_audit(schema: str, *, dsn: str | None = None) -> dict[str, list[Transition]]:
    """Every execution's audit trail, oldest first, read in one query."""
    audit: dict[str, list[Transition]] = defaultdict(list)
    with connect(dsn) as conn:
        cursor = conn.execute(
            "SELECT seq, execution_id::text, event, from_state, to_state, epoch, actor, reason, at"
            f" FROM {schema}.transitions ORDER BY seq"
        )
        for seq, id_, event, from_state, to_state, epoch, actor, reason, at in cursor:
            audit[id_].append(
                Transition(
                    execution_id=id_,
                    seq=seq,
                    event=Event(event),
                    from_state=None if from_state is None else State(from_state),
                    to_state=State(to_state),
                    epoch=epoch,
                    actor=actor,
                    reason=reason,
                    at=at,
                )
            )
    return dict(audit)


def count_succeeded(schema: str, *, dsn: str | None = None) -> int:
    """How many executions of ``schema`` are SUCCEEDED, counted in SQL."""
    with connect(dsn) as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {schema}.executions WHERE state = 'SUCCEEDED'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def load_executions(schema: str, *, dsn: str | None = None) -> dict[str, Execution]:
    with fencepost.connect(url(schema, dsn=dsn, pool_min=1, pool_max=1)) as store:
        return {e.id: e for e in _audit.all_executions(store)}

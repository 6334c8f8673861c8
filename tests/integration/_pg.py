"""Helpers of the PostgreSQL integration tests: direct SQL next to the store under test."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

import fencepost
from fencepost import Event, Execution, State, Transition
from tests import postgres
from tests.integration import _audit


def url(schema: str, **options: Any) -> str:
    """The store URL of ``schema`` with extra query options (pool sizes, libpq params)."""
    return postgres.store_url(schema) + "".join(f"&{k}={v}" for k, v in options.items())


def connect() -> psycopg.Connection[tuple[Any, ...]]:
    """A plain autocommit connection to the test server (not through fencepost)."""
    return psycopg.connect(postgres.dsn(), autocommit=True, connect_timeout=5)


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    """A new, empty schema for one test, dropped afterwards."""
    schema = postgres.new_schema()
    try:
        yield schema
    finally:
        postgres.drop_schema(schema)


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


def analyze(schema: str) -> None:
    """Refresh the planner's statistics of a freshly filled schema.

    Right after a bulk submit, before autovacuum has analyzed the new rows, the
    planner misjudges the claimable backlog (dozens of rows instead of tens of
    thousands) and a claim sorts the whole backlog instead of reading the claim
    index in order: about 6x slower per claim here. Tests that submit tens of
    thousands of executions and then drain them do what autovacuum would soon do.
    """
    with connect() as conn:
        conn.execute(f"ANALYZE {schema}.executions")


def load_audit(schema: str) -> dict[str, list[Transition]]:
    """Every execution's audit trail, oldest first, read in one query."""
    audit: dict[str, list[Transition]] = defaultdict(list)
    with connect() as conn:
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


def count_succeeded(schema: str) -> int:
    """How many executions of ``schema`` are SUCCEEDED, counted in SQL."""
    with connect() as conn:
        row = conn.execute(
            f"SELECT count(*) FROM {schema}.executions WHERE state = 'SUCCEEDED'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def load_executions(schema: str) -> dict[str, Execution]:
    with fencepost.connect(url(schema, pool_min=1, pool_max=1)) as store:
        return {e.id: e for e in _audit.all_executions(store)}


# -- controlling the local cluster (tests that stop and start the server) ------------


def local_cluster() -> list[str]:
    """``[version, name]`` of the local cluster serving the test DSN's port."""
    parts = urlsplit(postgres.dsn())
    port = str(parts.port or 5432)
    reason = None
    if not server_is_local():
        reason = f"the test server {parts.hostname} is not on this machine"
    elif shutil.which("pg_ctlcluster") is None or shutil.which("pg_isready") is None:
        reason = "pg_ctlcluster and pg_isready (postgresql-common) are needed to restart it"
    else:
        listing = subprocess.run(
            ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=False
        ).stdout
        for line in listing.splitlines():
            version, name, cluster_port, *_ = line.split()
            if cluster_port == port:
                return [version, name]
        reason = f"no local cluster listens on port {port}:\n{listing}"
    if os.environ.get("FENCEPOST_REQUIRE_POSTGRES"):
        pytest.fail(f"FENCEPOST_REQUIRE_POSTGRES is set but {reason}", pytrace=False)
    pytest.skip(reason)


def ctl(action: str, cluster: list[str]) -> None:
    run = subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", *cluster, action],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 0, f"pg_ctlcluster {action} failed: {run.stdout}{run.stderr}"


def ensure_running(cluster: list[str]) -> float:
    """Start the server unless it accepts connections; return when it does (wall time).

    ``pg_isready`` is polled while ``pg_ctlcluster start`` runs: that command returns
    a second or so after the server began to accept connections.
    """
    if ready():
        return time.time()
    starter = subprocess.Popen(
        ["pg_ctlcluster", "--skip-systemctl-redirect", *cluster, "start"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return wait_ready(timeout=60)
    finally:
        starter.wait(timeout=60)


def ready() -> bool:
    port = str(urlsplit(postgres.dsn()).port or 5432)
    return (
        subprocess.run(
            ["pg_isready", "-q", "-h", "127.0.0.1", "-p", port], check=False, timeout=10
        ).returncode
        == 0
    )


def wait_ready(timeout: float) -> float:
    """Poll until the server accepts connections; return the wall time of the poll that
    found it ready (when it started: the earliest the server can be said to be back)."""
    end = time.monotonic() + timeout
    while True:
        polled_at = time.time()
        if ready():
            return polled_at
        assert time.monotonic() < end, f"the server was not back within {timeout} s"
        time.sleep(0.05)

"""A job nobody serves is named, not counted as backlog: real processes, SQLite and PostgreSQL.

A ``fencepost worker`` runs only ``quick`` (version 1). The test then publishes
``report`` (as a worker that has since gone would have) and a version 2 of ``quick``
that no live worker runs, and submits one execution of each with the store, and one
of ``quick`` pinned to version 1, which the worker runs. The two it cannot run stay
SCHEDULED; ``fencepost stats`` (table and JSON), ``fencepost jobs``, the HTTP stats a
real ``fencepost serve`` gives its dashboard, the dashboard's page and script, and
``/metrics`` all name them, with the job (and the pinned version) that nobody serves.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest

import fencepost
from fencepost import State, Store
from fencepost.domain.catalogue import job_entry
from fencepost.store.postgres.connection import QUERIES
from fencepost.timing.planning import HELD, NEVER
from tests import postgres
from tests.acceptance.cli import fencepost as run_cli
from tests.integration.test_service_processes import (
    APP,
    Processes,
    free_port,
    processes,
    wait_ready,
)
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # fixtures


@pytest.fixture
def store(shared_db: str) -> Iterator[Store]:
    opened = fencepost.connect(shared_db)
    try:
        yield opened
    finally:
        opened.close()


def quick_version(store: Store) -> int | None:
    """The version of ``quick`` the live worker ``worker-a`` serves, once it registered."""
    for node in store.nodes():
        if node.id == "worker-a":
            return next((v for job, v in node.jobs if job == "quick"), None)
    return None


def test_a_job_nobody_serves_is_named_by_stats_jobs_the_dashboard_and_metrics(
    shared_db: str, store: Store, processes: Processes
) -> None:
    processes.start(
        "worker-a", "worker", APP, "--db", shared_db, "--owner", "worker-a", "--jobs", "quick"
    )
    served = wait_until(lambda: quick_version(store), 30, "the worker to register its job")
    # "report" as a worker that has since stopped left it; a "quick" no live worker runs.
    store.publish_jobs([job_entry("report", 1), job_entry("quick", served + 1)])
    store.submit("report", {})  # pinned to version 1
    store.submit("quick", {})  # pinned to the latest version, which nobody runs
    ran = store.submit("quick", {}, version=served)
    wait_until(lambda: store.get(ran.id).state is State.SUCCEEDED, 30, "the served one to run")
    quick_v = f"quick v{served + 1}"
    named = f"2 due executions of jobs no live worker serves: {quick_v} (1), report v1 (1)"

    stats = run_cli("stats", db=shared_db).ok()
    assert stats.row("due backlog") == ["due backlog", "2"]
    assert stats.row("unserved") == ["unserved", named]
    body = run_cli("stats", "--json", db=shared_db).ok().json()["unserved"]
    assert body["executions"] == [
        {"job": "quick", "version": served + 1, "count": 1},
        {"job": "report", "version": 1, "count": 1},
    ]
    assert body["due_unserved"] == 2

    jobs = run_cli("jobs", db=shared_db).ok()
    # job, latest, defaults, inputs, nodes, then workers and due
    assert jobs.row("report")[4:7] == ["-", "0 (no live worker)", "1 (1 unserved: v1)"]
    assert jobs.row("quick")[4:7] == ["worker-a", "1", f"1 (1 unserved: v{served + 1})"]

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = processes.start("serve", "serve", "--db", shared_db, "--port", str(port))
    wait_ready(url, service)
    unserved = httpx.get(f"{url}/stats", timeout=10).json()["unserved"]
    assert [(g["job"], g["count"]) for g in unserved["executions"]] == [
        ("quick", 1),
        ("report", 1),
    ]
    page = httpx.get(f"{url}/", timeout=10).text
    assert 'id="unserved"' in page
    assert 'id="unserved-list"' in page
    script = httpx.get(f"{url}/static/js/views/overview.js", timeout=10).text
    assert "renderUnserved(stats.unserved)" in script
    metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'fencepost_unserved_due_executions{job="report"} 1.0' in metrics
    assert 'fencepost_unserved_due_executions{job="quick"} 1.0' in metrics
    assert store.get(ran.id).state is State.SUCCEEDED  # the served one was never unserved


def test_postgres_counts_due_executions_through_a_partial_index(tmp_path: Path) -> None:
    """The grouped count reads the waiting rows of an index, not the day's whole partition."""
    postgres.require_postgres()
    schema = postgres.new_schema()
    try:
        with fencepost.connect(postgres.store_url(schema)) as store:
            store.submit_many([{"job": f"job-{i % 7}"} for i in range(5000)])
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            # Most rows finished, as in a store that has run for a while.
            conn.execute(
                "UPDATE executions SET state = 'SUCCEEDED' "
                "WHERE id IN (SELECT id FROM executions ORDER BY id LIMIT 4950)"
            )
            conn.execute("VACUUM ANALYZE executions")
            cursor = psycopg.ClientCursor(conn)
            params = {"now": datetime.now(UTC), "held": HELD, "never": NEVER}
            cursor.execute(f"EXPLAIN {QUERIES['due_groups']}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            (hot,) = conn.execute(
                "SELECT DISTINCT tableoid::regclass::text FROM executions"
            ).fetchone() or ("",)
    finally:
        postgres.drop_schema(schema)
    partition = str(hot).rpartition(".")[2]
    assert re.search(rf"Index.* Scan on {partition}_(claimable|active_bucket)", plan), plan
    assert f"Seq Scan on {partition} " not in plan, plan

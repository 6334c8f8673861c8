"""fencepost.contrib.django in a real Django project (tests/django_project), as processes.

Each scenario is a fresh ``python`` process running Django against a SQLite file or a
PostgreSQL schema of its own; this test then looks at the database itself (the
project's ``shop_order`` table, and fencepost's executions through a store of its
own) to see what was committed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import NotFound, State
from tests import postgres

ROOT = Path(__file__).resolve().parents[2]
MANAGE = ROOT / "tests" / "django_project" / "manage.py"


@dataclass
class Project:
    """The test project on one database: how to run it and where to look."""

    backend: str
    env: dict[str, str]
    url: str  # the fencepost store URL the app should derive from DATABASES
    target: str  # the SQLite file, or the PostgreSQL schema

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run(str(MANAGE), *args)
        assert done.returncode == 0, done.stderr
        return done

    def scenario(self, name: str) -> dict[str, Any]:
        done = self.run("-m", "tests.django_project.scenario", name)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def orders(self) -> dict[int, bool]:
        """The committed rows of ``shop_order``: id -> shipped."""
        if self.backend == "sqlite":
            with closing(sqlite3.connect(self.target)) as conn:
                rows = conn.execute("SELECT id, shipped FROM shop_order").fetchall()
        else:
            import psycopg

            with psycopg.connect(postgres.dsn()) as conn:
                rows = conn.execute(f"SELECT id, shipped FROM {self.target}.shop_order").fetchall()
        return {int(pk): bool(shipped) for pk, shipped in rows}

    def tables(self) -> set[str]:
        if self.backend == "sqlite":
            with closing(sqlite3.connect(self.target)) as conn:
                rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                return {name for (name,) in rows}
        import psycopg

        with psycopg.connect(postgres.dsn()) as conn:
            rows = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (self.target,),
            ).fetchall()
        return {name for (name,) in rows}

    def store(self) -> fencepost.Store:
        return fencepost.connect(self.url)


@pytest.fixture(params=["sqlite", "postgres"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    """The test project on a fresh SQLite file or PostgreSQL schema, Django's tables made."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "FENCEPOST_DB"))}
    env["PYTHONPATH"] = str(ROOT)
    schema = None
    if request.param == "sqlite":
        path = tmp_path / "site.db"
        env["DJANGO_TEST_SQLITE"] = str(path)
        made = Project("sqlite", env, f"sqlite:///{path}", str(path))
    else:
        postgres.require_postgres()
        schema = postgres.new_schema()
        env["DJANGO_TEST_PG_SCHEMA"] = schema
        made = Project("postgres", env, postgres.store_url(schema), schema)
    try:
        made.manage("migrate", "--verbosity", "0")  # Django's own tables (shop_order)
        yield made
    finally:
        if schema is not None:
            postgres.drop_schema(schema)


@pytest.fixture
def migrated(project: Project) -> Project:
    """The project with fencepost's tables too (``manage.py fencepost_migrate``)."""
    project.manage("fencepost_migrate")
    return project


def test_fencepost_migrate_creates_the_tables_in_the_django_database(project: Project) -> None:
    assert "shop_order" in project.tables()
    assert "executions" not in project.tables()  # Django's migrate leaves fencepost alone
    first = project.manage("fencepost_migrate")
    assert "migrated to version" in first.stdout
    assert {"executions", "job_catalogue", "nodes"} <= project.tables()
    again = project.manage("fencepost_migrate")
    assert "nothing to apply" in again.stdout


def test_order_and_execution_commit_together(migrated: Project) -> None:
    seen = migrated.scenario("commit")
    assert migrated.orders() == {seen["order"]: False}
    with migrated.store() as store:
        execution = store.get(seen["execution"])
        assert execution.state is State.SCHEDULED
        assert execution.inputs == {"order_id": seen["order"]}
        assert [lease.execution_id for lease in store.claim("w", limit=5)] == [seen["execution"]]


def test_an_exception_inside_atomic_leaves_neither(migrated: Project) -> None:
    seen = migrated.scenario("rollback")
    assert seen["error"] == "payment declined"
    assert "execution" in seen  # the submit ran, inside the transaction that rolled back
    assert migrated.orders() == {}
    with migrated.store() as store:
        with pytest.raises(NotFound):
            store.get(seen["execution"])
        assert store.query().items == []
        assert store.claim("w", limit=5) == []


def test_a_submit_outside_atomic_commits_by_itself(migrated: Project) -> None:
    seen = migrated.scenario("autocommit")
    with migrated.store() as store:
        assert store.get(seen["execution"]).idempotency_key == "k7"


def test_a_refused_submit_inside_atomic_undoes_only_itself(migrated: Project) -> None:
    seen = migrated.scenario("savepoint")
    assert seen["refused"] == "priority"
    assert migrated.orders() == {seen["order"]: False}
    with migrated.store() as store:
        assert [e.id for e in store.query().items] == [seen["execution"]]


def test_submit_many_commits_the_batch(migrated: Project) -> None:
    seen = migrated.scenario("many")
    with migrated.store() as store:
        stored = {e.id: e.inputs["order_id"] for e in store.query().items}
    assert stored == dict(zip(seen["executions"], (1, 2), strict=True))


@pytest.mark.slow
def test_fencepost_worker_runs_a_submitted_job_and_stops_on_sigterm(migrated: Project) -> None:
    seen = migrated.scenario("commit")
    worker = subprocess.Popen(
        [
            sys.executable,
            str(MANAGE),
            "fencepost_worker",
            "tests.django_project.shop.jobs:app",
            "--poll-interval",
            "0.05",
            "--grace",
            "5",
        ],
        cwd=ROOT,
        env=migrated.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with migrated.store() as store:
            deadline = time.monotonic() + 30
            while store.get(seen["execution"]).state is not State.SUCCEEDED:
                assert worker.poll() is None, worker.communicate()[0]
                assert time.monotonic() < deadline, "the worker did not run the job in 30 s"
                time.sleep(0.1)
            assert store.get(seen["execution"]).result == {"shipped": 1}
        assert migrated.orders() == {seen["order"]: True}  # the handler used the ORM
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=20)
        assert worker.returncode == 0, output
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.communicate()


def test_a_submit_before_fencepost_migrate_says_to_run_it(project: Project) -> None:
    done = project.run("-m", "tests.django_project.scenario", "commit")
    assert done.returncode != 0
    assert "NotMigrated" in done.stderr
    assert "python manage.py fencepost_migrate" in done.stderr
    assert project.orders() == {}  # the order's transaction rolled back with the error
    assert "executions" not in project.tables()  # and nothing created the tables


@pytest.mark.parametrize("project", ["postgres"], indirect=True)
def test_only_a_committed_submit_wakes_idle_workers(migrated: Project) -> None:
    with migrated.store() as listener:
        listener.wait_for_work(0)  # listening from now on
        migrated.scenario("rollback")
        assert listener.wait_for_work(1.0) is False  # NOTIFY went with the rollback
        migrated.scenario("commit")
        assert listener.wait_for_work(5.0) is True

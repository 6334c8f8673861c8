"""The read-only commands never write: a database without fencepost's schema is left as it was.

On PostgreSQL a fresh, empty database (created for this test and dropped after);
on SQLite a file that holds another application's table. Each command says, in one
line, that the schema is missing and what creates it; afterwards the database holds
exactly what it held before.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import postgres
from tests.integration import _pg
from tests.integration.test_worker_processes import FENCEPOST, ROOT

pytestmark = pytest.mark.slow

READ_ONLY = [
    ["ps"],
    ["ps", "--all"],
    ["stats"],
    ["jobs"],
    ["jobs", "report"],
    ["slo"],
    ["buckets"],
    ["dead-letters"],
    ["schedule", "ls"],
    ["schedule", "show", "nightly"],
    ["schedule", "preview", "nightly"],
    ["reconcile", "--dry-run"],
    ["prune", "--older-than", "14d", "--dry-run"],
]


def fencepost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FENCEPOST, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    """The URL of a new PostgreSQL database with nothing in it."""
    postgres.require_postgres()
    name = f"fp_empty_{uuid.uuid4().hex[:10]}"
    with _pg.connect() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base = postgres.dsn().rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with _pg.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _contents(url: str) -> list[tuple[str, str]]:
    """Every schema and relation of the database that is not PostgreSQL's own."""
    with _pg.connect(url) as conn:
        rows = conn.execute(
            "SELECT n.nspname, coalesce(c.relname, '') FROM pg_namespace n "
            "LEFT JOIN pg_class c ON c.relnamespace = n.oid "
            "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema' "
            "ORDER BY 1, 2"
        ).fetchall()
    return [(str(a), str(b)) for a, b in rows]


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_on_an_empty_postgresql_database_nothing_is_created(
    empty_database: str, command: list[str]
) -> None:
    before = _contents(empty_database)
    run = fencepost(*command, "--db", empty_database)
    assert run.returncode == 5, run.stderr  # the store cannot be used
    name = " ".join(command[:2] if command[0] == "schedule" else command[:1])
    target = empty_database.split("://", 1)[1]
    assert run.stderr.splitlines() == [
        # the schema the store would use: fencepost's own unless ?schema= names one
        f"fencepost {name}: no fencepost schema in postgresql://{target}?schema=fencepost "
        "(`fencepost db migrate --db URL` creates it; this command only reads)"
    ]
    assert _contents(empty_database) == before == [("public", "")]


def test_a_writer_still_migrates_the_empty_database(empty_database: str) -> None:
    run = fencepost("submit", "noop", "--db", empty_database)
    assert run.returncode == 0, run.stderr
    assert ("fencepost", "executions") in _contents(empty_database)
    assert fencepost("ps", "--db", empty_database).returncode == 0


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
def test_a_sqlite_file_of_another_application_is_left_byte_for_byte(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    run = fencepost(*command, "--db", f"sqlite:///{path}")
    assert run.returncode == 5, run.stderr  # the store cannot be used
    assert f"no fencepost schema in sqlite:///{path}" in run.stderr
    assert len(run.stderr.splitlines()) == 1
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.db"]  # no -wal, no -shm


@pytest.mark.parametrize("change", ["older", "newer"])
def test_a_schema_of_another_version_is_named_and_left_alone(tmp_path: Path, change: str) -> None:
    path = tmp_path / "jobs.db"
    assert fencepost("db", "migrate", "--db", f"sqlite:///{path}").returncode == 0
    with sqlite3.connect(path) as conn:
        latest = conn.execute("SELECT max(version) FROM fencepost_migrations").fetchone()[0]
        if change == "older":
            conn.execute("DELETE FROM fencepost_migrations WHERE version = ?", (latest,))
        else:
            conn.execute(
                "INSERT INTO fencepost_migrations (version, name, applied_at) VALUES (?, 'x', 0)",
                (latest + 1,),
            )
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    run = fencepost("ps", "--db", f"sqlite:///{path}")
    assert run.returncode == 5  # the store cannot be used
    if change == "older":
        assert run.stderr.strip() == (
            f"fencepost ps: the fencepost schema in sqlite:///{path} is at version "
            f"{latest - 1}, this fencepost needs {latest} (`fencepost db migrate --db URL` "
            "upgrades it)"
        )
    else:
        assert "the database was migrated by a newer fencepost" in run.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before

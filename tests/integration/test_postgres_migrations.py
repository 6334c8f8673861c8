"""PostgreSQL migrations: equal to the snapshot, safe to run concurrently, tuned for churn."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import psycopg
import psycopg.sql
import pytest

import fencepost
from fencepost.store.sql import latest_version
from tests import postgres

#: The newest version the migrations reach (each release's migrations add to it).
LATEST = latest_version("fencepost.store.postgres.migrations")

REGENERATE = (
    "regenerate: .venv/bin/python -c 'from tests.integration.test_postgres_migrations "
    "import print_snapshot; print_snapshot()' > src/fencepost/store/postgres/schema.sql"
)


@pytest.fixture
def schema() -> Iterator[str]:
    postgres.require_postgres()
    name = postgres.new_schema()
    yield name
    postgres.drop_schema(name)


def dump(schema: str) -> str:
    """The schema as pg_dump prints it, without the parts that vary per run."""
    out = subprocess.run(
        [
            "pg_dump",
            "--schema-only",
            "--no-owner",
            "--no-privileges",
            f"--schema={schema}",
            f"--exclude-table={schema}.fencepost_migrations",
            postgres.dsn(),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kept = []
    for line in out.splitlines():
        if (
            line.startswith(
                ("--", "SET ", "SELECT pg_catalog.set_config", "\\restrict", "\\unrestrict")
            )
            or not line.strip()
        ):
            continue
        if line.startswith("CREATE SCHEMA"):
            continue
        kept.append(re.sub(rf"\b{schema}\.", "", line))
    return _without_days("\n".join(kept) + "\n")


def _without_days(dump_text: str) -> str:
    """The dump without what depends on the day it ran: the day partitions the store
    made ahead (executions_p20261203, ...) and the first partition's day bound."""
    statements = dump_text.split(";\n")
    kept = [s for s in statements if not re.search(r"_p\d{8}(?!\d)", s)]
    text = ";\n".join(kept)
    return re.sub(r"'[0-9a-f]{8}-[0-9a-f]{4}-0000-0000-000000000000'", "'<day bound>'", text)


def print_snapshot() -> None:
    """Print the snapshot of a freshly migrated schema (see REGENERATE)."""
    name = postgres.new_schema()
    try:
        fencepost.connect(postgres.store_url(name)).close()
        print(dump(name), end="")
    finally:
        postgres.drop_schema(name)


def test_migrations_equal_the_snapshot(schema: str) -> None:
    with fencepost.connect(postgres.store_url(schema)) as store:
        assert store.migrations_applied == list(range(1, LATEST + 1))
        assert store.schema_version == LATEST
    snapshot = resources.files("fencepost.store.postgres").joinpath("schema.sql").read_text()
    assert dump(schema) == snapshot, REGENERATE


def test_concurrent_migrate_commands(schema: str, tmp_path: Path) -> None:
    url = postgres.store_url(schema)
    fencepost_cmd = Path(sys.executable).with_name("fencepost")
    procs = [
        subprocess.Popen(
            [str(fencepost_cmd), "db", "migrate", "--db", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], results
    outputs = sorted(out.strip() for out, _ in results)
    assert outputs.count(f"already at version {LATEST}; nothing to apply") == 3, outputs
    applied = ", ".join(map(str, range(1, LATEST + 1)))
    assert outputs[-1] == f"migrated to version {LATEST} (applied {applied})"
    with psycopg.connect(postgres.dsn()) as conn:
        versions = conn.execute(f"SELECT version FROM {schema}.fencepost_migrations").fetchall()
    assert sorted(v for (v,) in versions) == list(range(1, LATEST + 1))


def test_the_hot_table_is_tuned_for_churn(schema: str) -> None:
    fencepost.connect(postgres.store_url(schema)).close()
    # Every partition of the executions (a partitioned table holds no storage settings):
    # the days the store made (a new database keeps no first partition).
    with psycopg.connect(postgres.dsn()) as conn:
        found = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_inherits i ON i.inhrelid = c.oid "
            "WHERE n.nspname = %s AND i.inhparent = format('%%I.executions', n.nspname)::regclass",
            (schema,),
        ).fetchall()
    assert len(found) == 3, found  # today and two days ahead
    for name, options in found:
        assert options is not None, name
        assert "autovacuum_vacuum_scale_factor=0.01" in options, name
        assert "fillfactor=80" in options, name


def test_bad_migrate_arguments_exit_non_zero(tmp_path: Path) -> None:
    fencepost_cmd = Path(sys.executable).with_name("fencepost")
    run = subprocess.run(
        [str(fencepost_cmd), "db", "migrate", "--db", "nosuch://x"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 2  # a bad argument
    assert run.stderr.startswith("fencepost db migrate: --db: unsupported store URL")
    # Without --db or $FENCEPOST_DB: the default store of every command, ./fencepost.db.
    default = subprocess.run(
        [str(fencepost_cmd), "db", "migrate"], capture_output=True, text=True, env={}, cwd=tmp_path
    )
    assert default.returncode == 0, default.stderr
    assert default.stdout.startswith("migrated to version ")
    assert (tmp_path / "fencepost.db").exists()


def test_every_query_block_compiles_and_is_used(schema: str) -> None:
    from collections import defaultdict

    from fencepost.store.postgres.connection import QUERIES

    sources = Path(fencepost.__file__).parent / "store" / "postgres"
    # The dialect's own modules, and the SQL base whose shared verbs run blocks by name.
    shared = [sources.parent / name for name in ("sqlstore.py", "sqlflow.py", "sqlhistory.py")]
    shared += sorted((sources.parent / "verbs").glob("sql_*.py"))  # the verbs' plans
    code = "".join(p.read_text() for p in [*sources.glob("*.py"), *shared])
    assert [name for name in QUERIES if f'"{name}"' not in code] == []

    fencepost.connect(postgres.store_url(schema)).close()
    with psycopg.connect(postgres.dsn()) as conn:
        conn.execute(f"SET search_path TO {schema}")
        for name, sql in QUERIES.items():
            if name in (
                "create_migrations_table",
                "analyze_executions",
                "lock_executions_for_resize",
            ):
                conn.execute(sql)  # utility statements cannot be EXPLAINed; all are harmless
                continue
            if name == "caller_savepoint":  # savepoints cannot be EXPLAINed: run all three
                for step in ("caller_savepoint", "caller_rollback_to_savepoint"):
                    conn.execute(QUERIES[step])
                conn.execute(QUERIES["caller_release_savepoint"])
                continue
            if name in ("caller_release_savepoint", "caller_rollback_to_savepoint"):
                continue  # run with caller_savepoint
            if name == "listen":  # a template: LISTEN takes no parameters
                conn.execute(
                    psycopg.sql.SQL(sql).format(channel=psycopg.sql.Identifier("fp_probe"))
                )
                continue
            if name == "roll_up_day":  # a template: it names a detached day's partition
                sql = psycopg.sql.SQL(sql).format(day=psycopg.sql.Identifier("executions"))
                conn.execute(psycopg.sql.SQL("EXPLAIN ") + sql, defaultdict(lambda: None))
                continue
            # EXPLAIN plans the statement against the real schema without running it.
            conn.execute(f"EXPLAIN {sql}", defaultdict(lambda: None))

"""PostgreSQL: the store's own schema, ``fencepost``, when the URL names none.

Each test makes a database of its own (``fp_default_<hex>``) on the tests' server and
drops it afterwards: what a URL without ``?schema=`` does happens in the database's
``public`` schema and the role's search_path, which the shared ``test`` database's
other tests must not see.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import fencepost
from fencepost import NotMigrated, ValidationError
from fencepost.store.postgres import PostgresStore
from fencepost.store.postgres.schemas import MOVED_VERSION
from fencepost.store.sql import refuse_newer
from tests import postgres

FENCEPOST = Path(sys.executable).with_name("fencepost")
#: Every relation the test database's schemas hold: (schema, name).
RELATIONS = """
SELECT n.nspname, c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname IN ('public', 'fencepost', 'elsewhere') AND c.relkind IN ('r', 'p', 'v')
ORDER BY 1, 2
"""


def _with(dsn: str, *, database: str | None = None, user: str | None = None) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if user is not None:
        netloc = f"{user}@{netloc.rpartition('@')[2]}"
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


@pytest.fixture
def database() -> Iterator[str]:
    """The URL of a fresh, empty database (no ``schema`` option), dropped afterwards."""
    postgres.require_postgres()
    name = f"fp_default_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield _with(postgres.dsn(), database=name)
    finally:
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def role() -> Iterator[str]:
    """A login role of its own (no privilege beyond PUBLIC's), dropped afterwards."""
    postgres.require_postgres()
    name = f"fp_role_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN")
    try:
        yield name
    finally:
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {name}")


def _relations(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [(str(s), str(n)) for s, n in conn.execute(RELATIONS)]


def _open(url: str, **options: object) -> PostgresStore:
    store = fencepost.connect(url, **options)  # type: ignore[arg-type]
    assert isinstance(store, PostgresStore)
    return store


def _migrate(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FENCEPOST), "db", "migrate", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_url_without_schema_keeps_the_tables_in_fencepost_beside_a_users_schedules(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.schedules (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO public.schedules VALUES (1, 'the application''s own')")
    with caplog.at_level(logging.WARNING, logger="fencepost"), _open(database) as store:
        assert store._db.schema == "fencepost"
        assert store.location.endswith("?schema=fencepost")
        execution = store.submit("report", {"day": 1})
        store.add_schedule("report", every=60)
    assert caplog.records == [], "nothing to say about a fresh database"
    found = _relations(database)
    assert [r for r in found if r[0] == "public"] == [("public", "schedules")]
    fencepost_tables = {name for schema, name in found if schema == "fencepost"}
    assert {"executions", "schedules", "nodes", "commands", "transitions"} <= fencepost_tables
    # The day partitions, made by name, are in the store's schema too.
    assert any(name.startswith("executions_p2") for name in fencepost_tables)
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT * FROM public.schedules").fetchall() == [
            (1, "the application's own")
        ]
    with _open(database, migrate=False) as reader:
        assert reader.get(execution.id).job == "report"


def test_a_named_schema_is_created_when_missing_but_never_by_a_reader(database: str) -> None:
    with pytest.raises(NotMigrated):
        _open(f"{database}?schema=elsewhere", migrate=False)
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT to_regnamespace('elsewhere')").fetchone() == (None,)
    with _open(f"{database}?schema=Elsewhere") as store:
        assert store._db.schema == "elsewhere"  # as search_path resolves it, unquoted
        store.submit("report")
    assert ("elsewhere", "executions") in _relations(database)
    assert not [r for r in _relations(database) if r[0] != "elsewhere"]
    with pytest.raises(ValidationError, match=r"^url\.schema: must be a plain identifier"):
        fencepost.connect(f"{database}?schema=a-b")


def test_a_role_that_cannot_create_the_schema_is_told_in_one_line(database: str, role: str) -> None:
    url = _with(database, user=role)
    with pytest.raises(ValidationError) as refused:
        fencepost.connect(url)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("url.schema: cannot create schema 'fencepost': role ")
    assert f"GRANT CREATE ON DATABASE {urlsplit(database).path[1:]} TO {role}" in message
    assert "?schema=NAME" in message
    run = _migrate("--db", url)
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert "lacks the CREATE privilege" in run.stderr
    # A schema made for it by someone who may, but which it may not write in: told too.
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA fencepost")
        conn.execute(f"GRANT USAGE ON SCHEMA fencepost TO {role}")
    with pytest.raises(ValidationError, match=r"GRANT CREATE ON SCHEMA fencepost TO"):
        fencepost.connect(url)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"ALTER SCHEMA fencepost OWNER TO {role}")
    with _open(url) as store:  # the schema the role owns: it migrates there
        store.submit("report")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("DROP SCHEMA fencepost CASCADE")  # the role's, before it is dropped


def test_an_earlier_install_in_public_keeps_working_until_moved(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An earlier fencepost: its tables in the role's schema (public), with rows and a
    # day partition.
    with _open(f"{database}?schema=public") as earlier:
        kept = earlier.submit("report", {"day": 1})
        earlier.add_schedule("report", every=60)
    with caplog.at_level(logging.WARNING, logger="fencepost"), _open(database) as store:
        assert store._db.schema == "public"
        assert store._db.channel == "fencepost_work", "an earlier version's channel"
        assert store.get(kept.id).id == kept.id
        store.submit("report", {"day": 2})
        node = store.register_node("old-worker", ttl=300)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "in schema public" in warning
    assert "--move-to-schema fencepost" in warning
    assert "\n" not in warning
    assert not [r for r in _relations(database) if r[0] == "fencepost"], "nothing moved"

    # A live node still uses it: the move is refused, nothing changes.
    refused = _migrate("--db", database, "--move-to-schema", "fencepost")
    assert refused.returncode == 2, refused
    warned, error = refused.stderr.splitlines()  # the warning once, and the refusal
    assert "in schema public" in warned
    assert "1 live process(es) still use schema public (old-worker)" in error
    before = _relations(database)
    assert not [r for r in before if r[0] == "fencepost"]

    with _open(database) as store:
        store.deregister_node(node.id)
    moved = _migrate("--db", database, "--move-to-schema", "fencepost")
    assert moved.returncode == 0, moved.stderr
    assert "from schema public to fencepost" in moved.stdout
    after = _relations(database)
    assert [r for r in after if r[0] == "public"] == [("public", "fencepost_migrations")]
    assert sorted(n for s, n in after if s == "fencepost") == sorted(n for _, n in before)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fencepost"), _open(database) as store:
        assert store._db.schema == "fencepost"
        assert store.get(kept.id).inputs == {"day": 1}
        assert store.query(job="report").items
        assert len(store.schedules().items) == 1
        store.submit("report", {"day": 3})
    assert caplog.records == []
    # The old schema names the new one; an earlier fencepost (refuse_newer) refuses it.
    with pytest.raises(ValidationError, match=r"moved to schema fencepost: use \?schema"):
        fencepost.connect(f"{database}?schema=public")
    with psycopg.connect(database) as conn:
        marks = {v for (v,) in conn.execute("SELECT version FROM public.fencepost_migrations")}
    assert marks == {MOVED_VERSION}
    with pytest.raises(fencepost.StoreUnavailable, match="newer fencepost"):
        refuse_newer(marks, "fencepost.store.postgres.migrations")
    again = _migrate("--db", database, "--move-to-schema", "fencepost")
    assert again.returncode == 2
    assert "already in schema fencepost" in again.stderr


def test_a_store_moved_elsewhere_is_named_to_a_url_without_schema(database: str) -> None:
    with _open(f"{database}?schema=public") as earlier:
        earlier.submit("report")
    moved = _migrate("--db", database, "--move-to-schema", "elsewhere")
    assert moved.returncode == 0, moved.stderr
    with pytest.raises(ValidationError, match=r"moved from schema public to elsewhere: add"):
        fencepost.connect(database)
    with _open(f"{database}?schema=elsewhere") as store:
        assert len(store.query().items) == 1
    sqlite = _migrate("--db", "sqlite:///x.db", "--move-to-schema", "fencepost")
    assert sqlite.returncode == 2
    assert "only PostgreSQL has schemas" in sqlite.stderr


def test_the_default_schema_through_pgbouncer(
    database: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.integration._pgbouncer import pgbouncer

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.schedules (id int PRIMARY KEY)")
    monkeypatch.setenv("FENCEPOST_TEST_POSTGRES_DSN", database)  # the pooler's upstream
    with pgbouncer(tmp_path) as bouncer, _open(bouncer.dsn) as store:
        assert store._db.transaction_pooled
        assert store._db.schema == "fencepost"
        execution = store.submit("report")
        (lease,) = store.claim("w")
        store.complete(lease, {"ok": True})
        assert store.get(execution.id).state is fencepost.State.SUCCEEDED
    found = _relations(database)
    assert [r for r in found if r[0] == "public"] == [("public", "schedules")]
    assert ("fencepost", "executions") in found

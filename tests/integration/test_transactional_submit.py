"""Submits inside the caller's transaction (``connection=``), sync and async, and AsyncStore.

Real SQLite files and the real PostgreSQL (a schema per test): the execution exists
exactly when the caller commits, a rollback leaves nothing and wakes no worker, and
every refusal names ``connection`` and writes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

import fencepost
from fencepost import IdempotencyConflict, ValidationError
from fencepost.store.base import Store
from tests import postgres

# -- fixtures -------------------------------------------------------------------------


@pytest.fixture
def pg() -> Iterator[tuple[Store, str, str]]:
    """A PostgreSQL store in a schema of its own, its URL and the schema."""
    postgres.require_postgres()
    schema = postgres.new_schema()
    url = postgres.store_url(schema) + "&pool_min=1&pool_max=2"
    store = fencepost.connect(url)
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.business (note text)")
    try:
        yield store, url, schema
    finally:
        store.close()
        postgres.drop_schema(schema)


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[tuple[Store, str]]:
    path = str(tmp_path / "store.db")
    store = fencepost.connect(f"sqlite:///{path}")
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE business (note text)")
        conn.commit()
    yield store, path
    store.close()


def pg_count(schema: str, table: str = "executions") -> int:
    with psycopg.connect(postgres.dsn()) as conn:
        row = conn.execute(f"SELECT count(*) FROM {schema}.{table}").fetchone()
        assert row is not None
        return int(row[0])


def lite_count(path: str, table: str = "executions") -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# -- sync callers on PostgreSQL -----------------------------------------------------------


@contextmanager
def pg_caller(
    kind: str,
) -> Iterator[
    tuple[Any, Callable[[str], None], Callable[[], None], Callable[[], None], Callable[[], str]]
]:
    """(connection to pass, run business SQL, commit, rollback, read search_path)."""
    if kind == "psycopg":
        with psycopg.connect(postgres.dsn()) as conn:
            yield (
                conn,
                lambda sql: conn.execute(sql),
                conn.commit,
                conn.rollback,
                lambda: conn.execute("SHOW search_path").fetchone()[0],  # type: ignore[index]
            )
        return
    engine = sa.create_engine(postgres.dsn().replace("postgresql://", "postgresql+psycopg://"))
    try:
        if kind == "sqlalchemy":
            with engine.connect() as sconn:
                yield (
                    sconn,
                    lambda sql: sconn.exec_driver_sql(sql),
                    sconn.commit,
                    sconn.rollback,
                    lambda: sconn.exec_driver_sql("SHOW search_path").scalar_one(),
                )
        else:
            with Session(engine) as session:
                yield (
                    session,
                    lambda sql: session.execute(sa.text(sql)),
                    session.commit,
                    session.rollback,
                    lambda: session.execute(sa.text("SHOW search_path")).scalar_one(),
                )
    finally:
        engine.dispose()


PG_KINDS = ["psycopg", "sqlalchemy", "session"]


@pytest.mark.parametrize("kind", PG_KINDS)
def test_postgres_submit_commits_and_rolls_back_with_the_caller(
    pg: tuple[Store, str, str], kind: str
) -> None:
    store, url, schema = pg
    watcher = fencepost.connect(url)
    try:
        assert not watcher.wait_for_work(0.05)  # the listener is on, nothing pending
        with pg_caller(kind) as (conn, sql, commit, rollback, search_path):
            before = search_path()
            sql(f"INSERT INTO {schema}.business VALUES ('gone')")
            gone = store.submit("send-mail", {"to": "a"}, connection=conn)
            assert search_path() == before
            rollback()
            assert not watcher.wait_for_work(0.5), "a rolled-back submit woke a worker"
            assert pg_count(schema) == 0
            assert pg_count(schema, "business") == 0
            with pytest.raises(fencepost.NotFound):
                store.get(gone.id)

            sql(f"INSERT INTO {schema}.business VALUES ('kept')")
            kept = store.submit("send-mail", {"to": "b"}, connection=conn)
            assert pg_count(schema) == 0  # not before the caller commits
            commit()
            assert search_path() == before
        assert watcher.wait_for_work(0.5)
        assert pg_count(schema, "business") == 1
        assert store.get(kept.id) == kept
        leases = store.claim("worker-1")
        assert [lease.execution_id for lease in leases] == [kept.id]
    finally:
        watcher.close()


@pytest.mark.parametrize("kind", PG_KINDS)
def test_postgres_idempotency_inside_the_callers_transaction(
    pg: tuple[Store, str, str], kind: str
) -> None:
    store, _, schema = pg
    twin = store.submit("job", {"n": 1}, idempotency_key="k1")
    with pg_caller(kind) as (conn, sql, commit, _, _path):
        sql(f"INSERT INTO {schema}.business VALUES ('x')")
        found, created = store.submit_or_find(
            "job", inputs={"n": 1}, idempotency_key="k1", connection=conn
        )
        assert (found, created) == (twin, False)
        with pytest.raises(IdempotencyConflict):
            store.submit("job", {"n": 2}, idempotency_key="k1", connection=conn)
        # The caller's transaction is still usable: its own row and a new submit commit.
        fresh = store.submit_many(
            [{"job": "job", "idempotency_key": "k2"}, {"job": "job", "idempotency_key": "k2"}],
            connection=conn,
        )
        assert fresh[0] == fresh[1]
        with pytest.raises(ValidationError) as bad:
            store.submit_many([{"job": "job"}, {"job": "job", "priority": "high"}], connection=conn)
        assert bad.value.field == "[1].priority"
        commit()
    assert pg_count(schema, "business") == 1
    assert pg_count(schema) == 2  # the twin and k2: nothing of the conflict or the bad batch


def test_postgres_refusals_name_the_connection_and_write_nothing(
    pg: tuple[Store, str, str], tmp_path: Path
) -> None:
    store, _, schema = pg
    other = postgres.dsn().rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(other) as conn:
        with pytest.raises(ValidationError, match="not to the store's") as exc:
            store.submit("job", connection=conn)
        assert exc.value.field == "connection"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        with pytest.raises(ValidationError, match="autocommit") as exc:
            store.submit("job", connection=conn)
        assert exc.value.field == "connection"
    conn = psycopg.connect(postgres.dsn())
    conn.close()
    with pytest.raises(ValidationError, match="closed") as exc:
        store.submit("job", connection=conn)
    assert exc.value.field == "connection"
    with closing(sqlite3.connect(str(tmp_path / "x.db"))) as lite_conn:
        with pytest.raises(ValidationError, match=r"sqlite3\.Connection") as exc:
            store.submit_many([{"job": "job"}], connection=lite_conn)
        assert exc.value.field == "connection"
    with psycopg.connect(postgres.dsn()) as conn:
        with suppress(psycopg.Error):
            conn.execute("SELECT 1/0")
        with pytest.raises(ValidationError, match="failed") as exc:
            store.submit("job", connection=conn)
    assert pg_count(schema) == 0


# -- SQLite ------------------------------------------------------------------------------


@contextmanager
def lite_caller(
    kind: str, path: str
) -> Iterator[tuple[Any, Callable[[str], None], Callable[[], None], Callable[[], None]]]:
    if kind == "sqlite3":
        with closing(sqlite3.connect(path)) as conn:
            yield conn, lambda sql: conn.execute(sql), conn.commit, conn.rollback
        return
    engine = sa.create_engine(f"sqlite+pysqlite:///{path}")
    try:
        if kind == "sqlalchemy":
            with engine.connect() as sconn:
                yield sconn, lambda sql: sconn.exec_driver_sql(sql), sconn.commit, sconn.rollback
        else:
            with Session(engine) as session:
                yield (
                    session,
                    lambda sql: session.execute(sa.text(sql)),
                    session.commit,
                    session.rollback,
                )
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite3", "sqlalchemy", "session"])
def test_sqlite_submit_commits_and_rolls_back_with_the_caller(
    lite: tuple[Store, str], kind: str
) -> None:
    store, path = lite
    with lite_caller(kind, path) as (conn, sql, commit, rollback):
        gone = store.submit("job", {"n": 1}, connection=conn)  # first: it opens the transaction
        sql("INSERT INTO business VALUES ('gone')")
        rollback()
        assert lite_count(path) == 0
        assert lite_count(path, "business") == 0
        with pytest.raises(fencepost.NotFound):
            store.get(gone.id)
        sql("INSERT INTO business VALUES ('kept')")
        kept = store.submit("job", {"n": 2}, idempotency_key="a", connection=conn)
        assert store.submit("job", {"n": 2}, idempotency_key="a", connection=conn) == kept
        with pytest.raises(IdempotencyConflict):
            store.submit("job", {"n": 3}, idempotency_key="a", connection=conn)
        with pytest.raises(ValidationError) as bad:
            store.submit_many([{"job": "job"}, {"job": "job", "inputs": 5}], connection=conn)
        assert bad.value.field == "[1].inputs"
        commit()
    assert lite_count(path, "business") == 1
    assert lite_count(path) == 1
    assert store.get(kept.id) == kept
    assert [lease.execution_id for lease in store.claim("w")] == [kept.id]


def test_sqlite_refusals_name_the_connection_and_write_nothing(
    lite: tuple[Store, str], tmp_path: Path
) -> None:
    store, path = lite
    other = str(tmp_path / "other.db")
    cases: list[tuple[Any, str]] = []
    with closing(sqlite3.connect(other)) as conn:
        with pytest.raises(ValidationError, match="not to the store's file") as exc:
            store.submit("job", connection=conn)
        assert exc.value.field == "connection"
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        with pytest.raises(ValidationError, match="autocommit") as exc:
            store.submit("job", connection=conn)
        assert exc.value.field == "connection"
    conn = sqlite3.connect(path)
    conn.close()
    cases.append((conn, "closed"))
    with (
        psycopg.connect(postgres.dsn())
        if postgres.unavailable_reason() is None
        else closing(sqlite3.connect(":memory:")) as pconn
    ):
        if isinstance(pconn, psycopg.Connection):
            cases.append((pconn, "psycopg"))
        for connection, why in cases:
            with pytest.raises(ValidationError, match=why) as exc:
                store.submit("job", connection=connection)
            assert exc.value.field == "connection"
    memory = fencepost.connect("memory://")
    with closing(sqlite3.connect(path)) as conn:
        with pytest.raises(ValidationError, match="memory store") as exc:
            memory.submit("job", connection=conn)
        assert exc.value.field == "connection"
    assert lite_count(path) == 0


# -- async ---------------------------------------------------------------------------------


ASYNC_KINDS = ["psycopg", "sqlalchemy", "session"]


async def _async_round(url: str, schema: str, kind: str) -> None:
    async with fencepost.connect_async(url) as astore:
        watcher = fencepost.connect(url)
        try:
            assert not watcher.wait_for_work(0.05)
            engine = create_async_engine(
                postgres.dsn().replace("postgresql://", "postgresql+psycopg://")
            )
            try:
                for keep in (False, True):
                    if kind == "psycopg":
                        conn: Any = await psycopg.AsyncConnection.connect(postgres.dsn())
                        await conn.execute(f"INSERT INTO {schema}.business VALUES ('x')")
                        execution = await astore.submit("job", {"k": keep}, connection=conn)
                        await (conn.commit() if keep else conn.rollback())
                        await conn.close()
                    elif kind == "sqlalchemy":
                        async with engine.connect() as aconn:
                            await aconn.exec_driver_sql(
                                f"INSERT INTO {schema}.business VALUES ('x')"
                            )
                            execution = await astore.submit("job", {"k": keep}, connection=aconn)
                            await (aconn.commit() if keep else aconn.rollback())
                    else:
                        async with AsyncSession(engine) as session:
                            await session.execute(
                                sa.text(f"INSERT INTO {schema}.business VALUES ('x')")
                            )
                            execution = await astore.submit("job", {"k": keep}, connection=session)
                            await (session.commit() if keep else session.rollback())
                    woken = await asyncio.to_thread(watcher.wait_for_work, 0.5)
                    assert woken is keep
                    assert pg_count(schema) == int(keep) == pg_count(schema, "business")
                assert watcher.get(execution.id) == execution
                assert [lease.execution_id for lease in watcher.claim("w")] == [execution.id]
            finally:
                await engine.dispose()
        finally:
            watcher.close()


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_submit_inside_the_callers_transaction(pg: tuple[Store, str, str], kind: str) -> None:
    _, url, schema = pg
    asyncio.run(_async_round(url, schema, kind))


def test_async_refusals(pg: tuple[Store, str, str]) -> None:
    _, url, schema = pg

    async def main() -> None:
        async with fencepost.connect_async(url) as astore:
            conn = await psycopg.AsyncConnection.connect(postgres.dsn(), autocommit=True)
            with pytest.raises(ValidationError, match="autocommit") as exc:
                await astore.submit("job", connection=conn)
            assert exc.value.field == "connection"
            await conn.close()
            with pytest.raises(ValidationError, match="closed"):
                await astore.submit("job", connection=conn)
            with psycopg.connect(postgres.dsn()) as sync_conn:
                with pytest.raises(ValidationError, match="AsyncConnection") as exc:
                    await astore.submit("job", connection=sync_conn)
                assert exc.value.field == "connection"

    asyncio.run(main())
    assert pg_count(schema) == 0


def _fields(execution: fencepost.Execution) -> dict[str, Any]:
    """What two submits of the same arguments share (not the id, the times, the bucket)."""
    skip = {"id", "due_at", "created_at", "updated_at", "bucket", "planned_at"}
    return {k: v for k, v in dataclasses.asdict(execution).items() if k not in skip}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_async_store_answers_as_the_sync_store(backend: str, tmp_path: Path) -> None:
    schema = None
    if backend == "postgres":
        postgres.require_postgres()
        schema = postgres.new_schema()
        url = postgres.store_url(schema) + "&pool_min=1&pool_max=2"
    else:
        url = f"sqlite:///{tmp_path / 'a.db'}"
    sync = fencepost.connect(url)

    async def main() -> None:
        async with fencepost.connect_async(url) as astore:
            calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
                ("submit", ("job", {"a": 1}), {"priority": 3, "queue": "q", "delay": 60}),
                ("submit", ("job",), {"idempotency_key": "K", "max_attempts": 5}),
            ]
            for verb, args, kwargs in calls:
                mine = await getattr(astore, verb)(*args, **kwargs)
                theirs = getattr(sync, verb)(
                    *args,
                    **{
                        **kwargs,
                        **({"idempotency_key": "S"} if "idempotency_key" in kwargs else {}),
                    },
                )
                assert _fields(mine) | {"idempotency_key": None} == _fields(theirs) | {
                    "idempotency_key": None
                }
            found, created = await astore.submit_or_find("job", idempotency_key="K", max_attempts=5)
            assert created is False
            assert found == await astore.submit("job", idempotency_key="K", max_attempts=5)
            many = await astore.submit_many([{"job": "m", "inputs": {"i": i}} for i in range(3)])
            assert [e.inputs for e in many] == [{"i": 0}, {"i": 1}, {"i": 2}]
            for bad in ({"priority": "x"}, {"inputs": [1]}, {"delay": -1}):
                with pytest.raises(ValidationError) as mine_error:
                    await astore.submit("job", **bad)
                with pytest.raises(ValidationError) as theirs_error:
                    sync.submit("job", **bad)
                assert mine_error.value.field == theirs_error.value.field
            with pytest.raises(ValidationError) as batch_error:
                await astore.submit_many([{"job": "m"}, {"job": "m", "priority": "x"}])
            assert batch_error.value.field == "[1].priority"
            with pytest.raises(IdempotencyConflict):
                await astore.submit("job", {"other": 1}, idempotency_key="K")
            with pytest.raises(IdempotencyConflict):
                sync.submit("job", {"other": 1}, idempotency_key="K")
            claimed = {
                lease.execution_id for lease in sync.claim("w", limit=50, queues=["default"])
            }
            assert {e.id for e in many} <= claimed

    try:
        asyncio.run(main())
    finally:
        sync.close()
        if schema is not None:
            postgres.drop_schema(schema)


# -- an exception inside the caller's transaction block ------------------------------------


class Boom(Exception):
    """Raised by the caller after its submit, before its block commits."""


def _raise_inside_sync_block(kind: str, store: Store, target: str, table: str) -> None:
    """Open the driver's transaction block, write a row, submit, then raise inside it."""
    dsn = postgres.dsn().replace("postgresql://", "postgresql+psycopg://")
    if kind == "pg-psycopg":
        with psycopg.connect(postgres.dsn()) as conn, conn.transaction():
            conn.execute(f"INSERT INTO {table} VALUES ('x')")
            store.submit("job", connection=conn)
            raise Boom
    if kind == "sqlite-sqlite3":
        with closing(sqlite3.connect(target)) as lconn, lconn:
            lconn.execute(f"INSERT INTO {table} VALUES ('x')")
            store.submit("job", connection=lconn)
            raise Boom
    engine = sa.create_engine(dsn if kind.startswith("pg-") else f"sqlite+pysqlite:///{target}")
    try:
        if kind.endswith("-sqlalchemy"):
            with engine.connect() as sconn, sconn.begin():
                sconn.exec_driver_sql(f"INSERT INTO {table} VALUES ('x')")
                store.submit("job", connection=sconn)
                raise Boom
        with Session(engine) as session, session.begin():
            session.execute(sa.text(f"INSERT INTO {table} VALUES ('x')"))
            store.submit_many([{"job": "job"}, {"job": "job"}], connection=session)
            raise Boom
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "kind",
    [
        "pg-psycopg",
        "pg-sqlalchemy",
        "pg-session",
        "sqlite-sqlite3",
        "sqlite-sqlalchemy",
        "sqlite-session",
    ],
)
def test_an_exception_inside_the_callers_transaction_block_leaves_nothing(
    kind: str, tmp_path: Path
) -> None:
    """``with conn.transaction():`` (and each driver's like of it) submit, then raise:
    the block rolls back the caller's row and the execution with it."""
    if kind.startswith("pg-"):
        postgres.require_postgres()
        schema = postgres.new_schema()
        store = fencepost.connect(postgres.store_url(schema) + "&pool_min=1&pool_max=2")
        watcher = fencepost.connect(postgres.store_url(schema))
        try:
            with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                conn.execute(f"CREATE TABLE {schema}.business (note text)")
            assert not watcher.wait_for_work(0.05)
            with pytest.raises(Boom):
                _raise_inside_sync_block(kind, store, postgres.dsn(), f"{schema}.business")
            assert not watcher.wait_for_work(0.5), "a rolled-back submit woke a worker"
            assert pg_count(schema) == 0 == pg_count(schema, "business")
            assert store.claim("w") == []
        finally:
            watcher.close()
            store.close()
            postgres.drop_schema(schema)
        return
    path = str(tmp_path / "store.db")
    store = fencepost.connect(f"sqlite:///{path}")
    try:
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE business (note text)")
            conn.commit()
        with pytest.raises(Boom):
            _raise_inside_sync_block(kind, store, path, "business")
        assert lite_count(path) == 0 == lite_count(path, "business")
        assert store.claim("w") == []
    finally:
        store.close()


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_an_exception_inside_an_async_transaction_block_leaves_nothing(
    pg: tuple[Store, str, str], kind: str
) -> None:
    """``async with conn.transaction():`` (psycopg), ``async with aconn.begin():`` and
    ``async with session.begin():`` (SQLAlchemy) around an AsyncStore submit that raises."""
    store, url, schema = pg
    table = f"{schema}.business"

    async def main() -> None:
        async with fencepost.connect_async(url) as astore:
            engine = create_async_engine(
                postgres.dsn().replace("postgresql://", "postgresql+psycopg://")
            )
            try:
                if kind == "psycopg":
                    conn = await psycopg.AsyncConnection.connect(postgres.dsn())
                    async with conn, conn.transaction():
                        await conn.execute(f"INSERT INTO {table} VALUES ('x')")
                        await astore.submit("job", connection=conn)
                        raise Boom
                elif kind == "sqlalchemy":
                    async with engine.connect() as aconn, aconn.begin():
                        await aconn.exec_driver_sql(f"INSERT INTO {table} VALUES ('x')")
                        await astore.submit("job", connection=aconn)
                        raise Boom
                else:
                    async with AsyncSession(engine) as session, session.begin():
                        await session.execute(sa.text(f"INSERT INTO {table} VALUES ('x')"))
                        await astore.submit_many([{"job": "job"}], connection=session)
                        raise Boom
            finally:
                await engine.dispose()

    watcher = fencepost.connect(url)
    try:
        assert not watcher.wait_for_work(0.05)
        with pytest.raises(Boom):
            asyncio.run(main())
        assert not watcher.wait_for_work(0.5), "a rolled-back submit woke a worker"
    finally:
        watcher.close()
    assert pg_count(schema) == 0 == pg_count(schema, "business")
    assert store.claim("w") == []


def test_async_store_refreshes_statistics_off_the_event_loop(
    pg: tuple[Store, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PostgreSQL store's periodic ANALYZE, due after an AsyncStore's submits, runs on
    a worker thread: the event loop never blocks on it."""
    _, url, _ = pg
    analyzed_on: list[threading.Thread] = []

    async def main() -> threading.Thread:
        async with fencepost.connect_async(url) as astore:
            store: Any = astore.store
            monkeypatch.setattr(store, "ANALYZE_AFTER_ROWS", 10)
            analyze = store._analyze

            def recording() -> None:
                analyzed_on.append(threading.current_thread())
                analyze()

            monkeypatch.setattr(store, "_analyze", recording)
            await astore.submit_many([{"job": "j"} for _ in range(6)])
            assert analyzed_on == []
            await astore.submit_many([{"job": "j"} for _ in range(6)])
            return threading.current_thread()

    loop_thread = asyncio.run(main())
    assert len(analyzed_on) == 1
    assert analyzed_on[0] is not loop_thread


@pytest.mark.parametrize("level", ["REPEATABLE_READ", "SERIALIZABLE"])
def test_a_twin_committed_after_the_callers_snapshot_asks_the_caller_to_retry(
    pg: tuple[Store, str, str], level: str
) -> None:
    """Under REPEATABLE READ or SERIALIZABLE, a submit whose idempotency key another
    transaction committed after the caller's snapshot raises the driver's
    ``SerializationFailure`` (what the caller's own writes would raise, so its retry
    loop retries); the retried transaction finds the twin."""
    store, url, schema = pg
    with psycopg.connect(postgres.dsn()) as conn:
        conn.isolation_level = psycopg.IsolationLevel[level]
        conn.execute("SELECT 1")  # the caller's snapshot is taken
        twin = store.submit("job", {"a": 1}, idempotency_key="K")
        with pytest.raises(psycopg.errors.SerializationFailure):
            store.submit("job", {"a": 1}, idempotency_key="K", connection=conn)
        conn.rollback()
        assert store.submit("job", {"a": 1}, idempotency_key="K", connection=conn) == twin
        conn.commit()

    async def main() -> None:
        async with fencepost.connect_async(url) as astore:
            aconn = await psycopg.AsyncConnection.connect(postgres.dsn())
            async with aconn:
                await aconn.set_isolation_level(psycopg.IsolationLevel[level])
                await aconn.execute("SELECT 1")
                await astore.submit("job", idempotency_key="A")
                with pytest.raises(psycopg.errors.SerializationFailure):
                    await astore.submit("job", idempotency_key="A", connection=aconn)

    asyncio.run(main())
    assert pg_count(schema) == 2

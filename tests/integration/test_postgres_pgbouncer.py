"""The PostgreSQL store behind PgBouncer in transaction pooling mode.

Each transaction of a client runs on whichever of PgBouncer's server connections
is free, so what a session would keep does not follow the client: a prepared
statement is missing (or already there, someone else's) on the next server
connection, and a ``SET search_path`` stays behind on the server connection for
the next client. The store finds the pooler by itself (the process id of the
connection's cancel key is PgBouncer's, not the server's ``pg_backend_pid()``),
prepares nothing, sets its schema and time zone in every transaction, and wakes
its workers and waiters through ``listen_url`` (straight to the server) or by
polling. The contract suite runs through the same PgBouncer
(``tests/contract/test_contract.py``, backend ``postgres-pgbouncer``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import quote

import psycopg
import pytest

import fencepost
from fencepost import State, ValidationError
from fencepost.store.asyncstore import AsyncStore
from fencepost.store.postgres import PostgresStore
from fencepost.store.postgres.connection import Database
from fencepost.store.postgres.waiting import NotifiedWatcher
from fencepost.store.waiting import PollingWatcher
from tests import postgres
from tests.integration import _pg
from tests.integration._pgbouncer import POOL_SIZE

#: More executions of one statement than psycopg's prepare_threshold (5).
ROUNDS = 12
#: The session settings the store sets, as a server connection reports them.
SETTINGS = "SELECT current_setting('search_path'), current_setting('jit')"


@pytest.fixture
def new_schema() -> Iterator[Callable[[], str]]:
    """Fresh schemas on the server (made directly), dropped after the test."""
    made: list[str] = []

    def make() -> str:
        made.append(postgres.new_schema())
        return made[-1]

    yield make
    for name in made:
        postgres.drop_schema(name)


def _open(url: str) -> PostgresStore:
    store = fencepost.connect(url)
    assert isinstance(store, PostgresStore)
    return store


def _listen_url() -> str:
    """The URL option naming a connection straight to the server, percent-encoded."""
    return quote(postgres.dsn(), safe="")


def test_the_store_finds_the_pooler_and_the_url_can_say_so(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    schema = new_schema()
    with _open(_pg.url(schema, dsn=pgbouncer_dsn)) as store:
        assert store._db.transaction_pooled, "detected: the cancel key's pid is PgBouncer's"
        assert store._db.listen_conninfo is None, "nothing to LISTEN on: wake-ups poll"
        assert isinstance(store._waits(), PollingWatcher)
    with _open(_pg.url(schema)) as store:
        assert not store._db.transaction_pooled, "the server itself"
        assert isinstance(store._waits(), NotifiedWatcher)
    # Told otherwise. (No schema, and no connection opened: a session's settings made
    # through the pooler would stay behind on its server connection for the other
    # tests' clients.)
    told = [
        (f"{pgbouncer_dsn}?pooler=session&pool_min=0", False),
        (f"{postgres.dsn()}?pooler=transaction", True),
    ]
    for url, pooled in told:
        db = Database(url)
        try:
            assert db.transaction_pooled is pooled, url
        finally:
            db.close()
    with _open(_pg.url(schema, dsn=pgbouncer_dsn, listen_url=_listen_url())) as store:
        assert store._db.listen_conninfo is not None
        assert isinstance(store._waits(), NotifiedWatcher)
    with pytest.raises(ValidationError, match=r"url\.pooler"):
        fencepost.connect(_pg.url(schema, pooler="statement"))
    with pytest.raises(ValidationError, match=r"url\.listen_url"):
        fencepost.connect(_pg.url(schema, listen_url="http%3A%2F%2Fexample"))
    through_pooler = quote(pgbouncer_dsn, safe="")
    with pytest.raises(ValidationError, match=r"url\.listen_url.*reaches a pooler"):
        fencepost.connect(_pg.url(schema, dsn=pgbouncer_dsn, listen_url=through_pooler))


def test_two_stores_run_each_statement_many_times_through_the_pooler(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    """A prepared statement would be another client's, or missing, on the server
    connection PgBouncer hands out next: nothing is prepared."""
    url = _pg.url(new_schema(), dsn=pgbouncer_dsn, pool_max=1)
    with _open(url) as first, _open(url) as second:
        for _ in range(ROUNDS):
            for store in (first, second):
                store.submit("job")
                (lease,) = store.claim("w", limit=1)
                store.complete(lease, {"ok": True})
        assert first.stats().by_state[State.SUCCEEDED] == 2 * ROUNDS


def test_stores_of_two_schemas_through_one_pooler_stay_apart(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    """Server connections pass from one store to the other between transactions; each
    store's statements still run in its own schema."""
    schemas = {"left": new_schema(), "right": new_schema()}
    stores = {side: _open(_pg.url(s, dsn=pgbouncer_dsn)) for side, s in schemas.items()}
    try:
        for _ in range(ROUNDS):
            for side, store in stores.items():
                store.submit(side)
                (lease,) = store.claim("w", limit=1)
                assert lease.job == side
                store.complete(lease, {"ok": True})
    finally:
        for store in stores.values():
            store.close()
    for side, schema in schemas.items():
        with _pg.connect() as conn:
            jobs = conn.execute(f"SELECT job, count(*) FROM {schema}.executions GROUP BY job")
            assert dict(jobs.fetchall()) == {side: ROUNDS}


def test_the_store_leaves_no_session_state_on_the_pooler_s_connections(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    """Other clients of the pooler get server connections as the server made them."""
    with _open(_pg.url(new_schema(), dsn=pgbouncer_dsn)) as store:
        for _ in range(3):
            store.submit("job")
        store.claim("w", limit=3)
        with _pg.connect() as direct:
            default = direct.execute(SETTINGS).fetchone()
        # As many transactions at once as PgBouncer has server connections: each one
        # the store used is handed to one of them.
        clients = [psycopg.connect(pgbouncer_dsn) for _ in range(POOL_SIZE)]
        try:
            paths = [c.execute(SETTINGS).fetchone() for c in clients]
        finally:
            for c in clients:
                c.close()
    assert default is not None
    assert default[1] == "on"  # the server's default, left as it was
    assert paths == [default] * POOL_SIZE


def test_the_store_s_statements_run_without_jit_direct_and_through_the_pooler(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    """JIT compiled a claim of 256 for 60-490 ms when its estimated cost passed
    jit_above_cost: fencepost turns it off for its own statements, in its sessions
    or, behind a transaction pooler, in each of its transactions."""
    schema = new_schema()
    for dsn in (postgres.dsn(), pgbouncer_dsn):
        with _open(_pg.url(schema, dsn=dsn)) as store:
            with store._db.transaction() as conn:
                assert conn.execute("SHOW jit").fetchone() == ("off",), dsn
            with store._db.connection() as conn:
                assert conn.execute("SHOW jit").fetchone() == ("off",), dsn


def test_a_worker_drains_through_the_pooler_and_waits_poll(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    app = fencepost.App(_pg.url(new_schema(), dsn=pgbouncer_dsn))
    try:

        @app.job("double")
        def double(n: int) -> int:
            return 2 * n

        store = cast(PostgresStore, app.store)
        started = time.monotonic()
        assert store.wait_for_work(0.2) is False, "nothing listens: it waits the time out"
        assert time.monotonic() - started >= 0.2
        submitted = store.submit_many([{"job": "double", "inputs": {"n": n}} for n in range(200)])
        worker = app.worker(concurrency=8)
        worker.start()
        try:
            last = store.wait(submitted[-1].id, timeout=30)
            assert last.state is State.SUCCEEDED
            assert last.result == 2 * 199
            for execution in submitted:
                done = store.wait(execution.id, timeout=30)
                assert done.state is State.SUCCEEDED, done
        finally:
            worker.stop()
            assert worker.join(15)
        assert isinstance(store._waits(), PollingWatcher)
    finally:
        app.close()


def test_listen_url_wakes_workers_and_waiters_straight_from_the_server(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    url = _pg.url(new_schema(), dsn=pgbouncer_dsn)
    with _open(f"{url}&listen_url={_listen_url()}") as waiter, _open(url) as client:
        assert waiter.wait_for_work(0.2) is False
        timer = threading.Timer(0.3, lambda: client.submit("job"))
        timer.start()
        started = time.monotonic()
        assert waiter.wait_for_work(30) is True, "woken by the submit's NOTIFY"
        assert time.monotonic() - started < 10
        timer.join()
        (lease,) = client.claim("w")
        watcher = waiter._waits()
        assert isinstance(watcher, NotifiedWatcher)
        assert NotifiedWatcher.RECHECK <= 2.0  # the fallback
        watcher.RECHECK = 30.0  # only the notification can wake it in time now
        done: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: done.update(e=waiter.wait(lease.execution_id)))
        thread.start()
        # Completed once the waiter waits and its watcher listens: what finishes now is
        # told at once (before, it would be found by the first look instead).
        deadline = time.monotonic() + 30
        while not (watcher.watched() == 1 and watcher.connections_opened == 1):
            assert time.monotonic() < deadline, "the waiter never listened"
            time.sleep(0.005)
        completed_at = time.monotonic()
        client.complete(lease, {"ok": True})
        thread.join(30)
        assert done["e"].state is State.SUCCEEDED
        woken = time.monotonic() - completed_at
        assert woken < watcher.RECHECK / 2, f"woken {woken:.1f} s after: the recheck, not told"
        assert watcher.connections_opened == 1


def test_async_stores_of_two_schemas_through_the_pooler(
    pgbouncer_dsn: str, new_schema: Callable[[], str]
) -> None:
    """AsyncStore's own pool follows the same rules: nothing prepared, settings per
    transaction."""
    schemas = {"left": new_schema(), "right": new_schema()}

    async def scenario() -> None:
        stores = {s: AsyncStore(_open(_pg.url(n, dsn=pgbouncer_dsn))) for s, n in schemas.items()}
        try:
            for _ in range(ROUNDS):
                for side, store in stores.items():
                    execution = await store.submit(side)
                    assert (await store.get(execution.id)).job == side
        finally:
            for store in stores.values():
                await store.close()

    asyncio.run(scenario())
    for side, schema in schemas.items():
        with _pg.connect() as conn:
            jobs = conn.execute(f"SELECT job, count(*) FROM {schema}.executions GROUP BY job")
            assert dict(jobs.fetchall()) == {side: ROUNDS}

"""Store.wait on PostgreSQL: the done channel, one listening connection, other processes.

Every statement that makes executions terminal notifies ``fencepost_done_<schema>``
with their ids; the store's one watcher listens on one connection for all waiters.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg.sql
import pytest

import fencepost
from fencepost.domain.events import ExecutionSkipped
from fencepost.domain.states import CommandKind, State
from fencepost.store.asyncstore import AsyncStore
from fencepost.store.postgres import PostgresStore
from fencepost.store.postgres.waiting import NotifiedWatcher
from tests import postgres


@pytest.fixture
def schema() -> Iterator[str]:
    postgres.require_postgres()
    name = postgres.new_schema()
    yield name
    postgres.drop_schema(name)


@pytest.fixture
def app_name() -> str:
    return f"fp_wait_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def store(schema: str, app_name: str) -> Iterator[PostgresStore]:
    url = postgres.store_url(schema) + f"&application_name={app_name}&pool_min=1&pool_max=4"
    with fencepost.connect(url) as opened:
        assert isinstance(opened, PostgresStore)
        yield opened


class Listening:
    """A connection of the test's own on the done channel: what was told, by payload."""

    def __init__(self, schema: str) -> None:
        self.conn = psycopg.connect(postgres.dsn(), autocommit=True)
        channel = f"fencepost_done_{schema}"
        self.conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))

    def told(self, wait: float = 0.5) -> list[str]:
        """The payloads that arrived (within ``wait`` seconds of the first one)."""
        return [n.payload for n in self.conn.notifies(timeout=wait)]

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def listening(schema: str) -> Iterator[Listening]:
    listener = Listening(schema)
    yield listener
    listener.close()


def test_every_terminal_path_tells_the_done_channel(
    store: PostgresStore, listening: Listening
) -> None:
    ended: dict[str, str] = {}
    (e,) = store.submit_many([{"job": "j"}])
    (lease,) = store.claim("w", ids=[e.id])
    store.complete(lease, 1)
    ended["complete"] = e.id

    e = store.submit("j", max_attempts=1)
    (lease,) = store.claim("w", ids=[e.id])
    store.fail(lease, "boom", retryable=False)
    ended["fail to dead letter"] = e.id

    e = store.submit("j", delay=3600)
    store.cancel(e.id)
    ended["cancel"] = e.id

    e = store.submit("j", delay=3600)
    store.request(e.id, CommandKind.CANCEL)
    ended["cancel command before it ran"] = e.id

    e = store.submit("j")
    (lease,) = store.claim("w", ids=[e.id])
    store.abort(lease)
    ended["abort"] = e.id

    e = store.submit("j", max_attempts=1)
    store.claim("w", ids=[e.id], ttl=0.05)
    time.sleep(0.2)
    assert store.reap_expired() == 1
    ended["reaper"] = e.id

    e = store.submit("j", delay=3600)
    store._transition(e.id, ExecutionSkipped(reason="overlap: skip"))
    ended["skip"] = e.id

    for path, execution_id in ended.items():
        assert store.get(execution_id).state.is_terminal, path
    told = listening.told()
    assert told == list(ended.values()), "one notification each, in commit order, ids only"


def test_changes_that_do_not_finish_tell_nothing(
    store: PostgresStore, listening: Listening
) -> None:
    e = store.submit("j", max_attempts=3)
    (lease,) = store.claim("w", ids=[e.id])
    store.heartbeat(lease)
    lease = store.fail(lease, "again", retryable=True, retry_in=0)
    (lease,) = store.claim("w", ids=[e.id])
    store.release(lease)
    assert store.get(e.id).state is State.SCHEDULED
    assert listening.told(0.5) == []


def test_a_batch_completion_is_told_in_chunks_under_the_payload_limit(
    store: PostgresStore, listening: Listening
) -> None:
    executions = store.submit_many([{"job": "j"} for _ in range(450)])
    leases = store.claim("w", limit=450)
    assert len(leases) == 450
    assert store.complete_many([(lease, None) for lease in leases]) == [None] * 450
    told = listening.told()
    assert len(told) == 3, "200 ids a notification: 200, 200 and 50"
    assert all(len(payload.encode()) < 8000 for payload in told)
    ids = [i for payload in told for i in payload.split(",")]
    assert sorted(ids) == sorted(e.id for e in executions)


def _backends(app_name: str) -> int:
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app_name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_thousand_async_waiters_share_one_connection(store: PostgresStore, app_name: str) -> None:
    """A thousand ``AsyncStore.wait`` calls on one AsyncStore: one listening connection
    besides the AsyncStore's pool (which a read opened first), not one per waiter."""
    executions = store.submit_many([{"job": "j"} for _ in range(1000)])
    before = _backends(app_name)
    during: list[int] = []
    astore = AsyncStore(store)

    async def main() -> list[Any]:
        assert await astore.get(executions[0].id) == executions[0]  # its pool is open
        waits = [asyncio.ensure_future(astore.wait(e.id, timeout=60)) for e in executions]
        await asyncio.sleep(0.5)
        assert not any(w.done() for w in waits)
        assert store._watcher.watched() == 1000
        during.append(_backends(app_name))

        def finish() -> None:
            for _ in range(10):
                leases = store.claim("w", limit=100)
                store.complete_many([(lease, None) for lease in leases])

        await asyncio.to_thread(finish)
        try:
            return await asyncio.gather(*waits)
        finally:
            await astore.close()

    started = time.monotonic()
    found = asyncio.run(main())
    assert [e.state for e in found] == [State.SUCCEEDED] * 1000
    assert sorted(e.id for e in found) == sorted(e.id for e in executions)
    assert time.monotonic() - started < 30
    assert during[0] - before <= 3, f"{before} backends before, {during[0]} while waiting"
    assert store._watcher.connections_opened == 1
    assert store._watcher.watched() == 0


def test_two_hundred_waiting_threads_share_the_pool_and_one_listener(
    store: PostgresStore, app_name: str
) -> None:
    executions = store.submit_many([{"job": "j"} for _ in range(200)])
    before = _backends(app_name)
    results: list[State] = []
    threads = [
        threading.Thread(target=lambda i=e.id: results.append(store.wait(i, timeout=60).state))
        for e in executions
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while store._watcher.watched() < 200:  # every thread waits, its first look done
        assert time.monotonic() < deadline, f"{store._watcher.watched()} of 200 waiting"
        time.sleep(0.01)
    during = _backends(app_name)
    leases = store.claim("w", limit=200)
    store.complete_many([(lease, None) for lease in leases])
    for t in threads:
        t.join(30)
    assert results == [State.SUCCEEDED] * 200
    # Each thread's first look borrows a pooled connection (pool_max=4): the pool and
    # the one listening connection, not a connection per waiter.
    assert during <= 4 + 1, f"{before} backends before, {during} while waiting"


COMPLETER = """
import sys, fencepost
with fencepost.connect(sys.argv[1]) as store:
    (lease,) = store.claim("other-process", ids=[sys.argv[2]])
    store.complete(lease, {"by": "another process"})
"""


def test_a_completion_in_another_process_wakes_the_waiter(
    store: PostgresStore, schema: str
) -> None:
    execution = store.submit("j")
    url = postgres.store_url(schema)

    def complete_elsewhere() -> None:
        time.sleep(0.3)
        subprocess.run([sys.executable, "-c", COMPLETER, url, execution.id], check=True, timeout=60)

    thread = threading.Thread(target=complete_elsewhere)
    thread.start()
    started = time.monotonic()
    found = store.wait(execution.id, timeout=60)
    woken = time.monotonic()
    thread.join()
    assert found.result == {"by": "another process"}
    assert woken - started < 30


def test_a_waiter_is_woken_by_the_notification_not_the_recheck(store: PostgresStore) -> None:
    assert NotifiedWatcher.RECHECK <= 2.0  # the fallback
    store._watcher.RECHECK = 30.0  # only the notification can wake it in time now
    execution = store.submit("j")
    (lease,) = store.claim("w", ids=[execution.id])
    threading.Timer(0.5, lambda: store.complete(lease, None)).start()
    started = time.monotonic()
    assert store.wait(execution.id, timeout=20).state is State.SUCCEEDED
    took = time.monotonic() - started
    assert took < store._watcher.RECHECK / 2, f"{took:.1f} s: the recheck, not the notification"


def test_the_watcher_listens_again_after_its_connection_is_killed(
    store: PostgresStore, app_name: str
) -> None:
    store._watcher.RECHECK = 30.0  # woken only by notifications, so only if it re-listened
    first = store.submit("j", delay=3600)

    def listening_pid() -> int:
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                " AND position('LISTEN' in query) > 0",
                (app_name,),
            ).fetchone()
        assert row is not None, "the watcher's listening connection"
        return int(row[0])

    def wait_out() -> None:
        with pytest.raises(TimeoutError):
            store.wait(first.id, timeout=1)

    waiter = threading.Thread(target=wait_out)
    waiter.start()
    deadline = time.monotonic() + 30
    while store._watcher.connections_opened < 1:  # the waiter's watcher listens
        assert time.monotonic() < deadline, "the watcher never listened"
        time.sleep(0.005)
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (listening_pid(),))
    waiter.join()
    second = store.submit("j")
    (lease,) = store.claim("w", ids=[second.id])
    threading.Timer(1.0, lambda: store.complete(lease, None)).start()
    started = time.monotonic()
    assert store.wait(second.id, timeout=20).state is State.SUCCEEDED
    took = time.monotonic() - started
    assert took < store._watcher.RECHECK / 2, f"{took:.1f} s: the recheck, not the notification"
    assert store._watcher.connections_opened == 2

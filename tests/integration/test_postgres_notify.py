"""LISTEN/NOTIFY wakes idle workers early; it is debounced and sent with the transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

import fencepost
from fencepost import IdempotencyConflict
from fencepost.store.postgres import PostgresStore
from tests import postgres


@pytest.fixture
def url() -> Iterator[str]:
    postgres.require_postgres()
    name = postgres.new_schema()
    yield postgres.store_url(name)
    postgres.drop_schema(name)


def _count_notifications(channel: str, during: float, ready: threading.Event) -> list[int]:
    """Start counting in the background; the list gets the count when ``during`` ends."""
    seen: list[int] = []

    def listen() -> None:
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(channel)))
            ready.set()
            seen.append(sum(1 for _ in conn.notifies(timeout=during)))

    threading.Thread(target=listen, daemon=True).start()
    assert ready.wait(10)
    return seen


def test_a_submit_wakes_a_waiting_worker(url: str) -> None:
    with fencepost.connect(url) as worker, fencepost.connect(url) as client:
        assert worker.wait_for_work(0.2) is False, "nothing submitted: waits out the timeout"
        timer = threading.Timer(0.3, lambda: client.submit("job"))
        timer.start()
        started = time.monotonic()
        assert worker.wait_for_work(30) is True
        assert time.monotonic() - started < 10, "woken by the notification, not the timeout"
        timer.join()
        assert len(worker.claim("w")) == 1


def test_notifications_are_debounced_and_batched(url: str) -> None:
    with fencepost.connect(url) as client:
        assert isinstance(client, PostgresStore)
        ready = threading.Event()
        seen = _count_notifications(client.notify_channel, 2.0, ready)
        started = time.monotonic()
        for _ in range(100):
            client.submit("job")
        elapsed = time.monotonic() - started
        time.sleep(0.1)
        client.submit_many([{"job": "job"} for _ in range(500)])
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
    assert seen, "listener did not finish"
    windows = int(elapsed / PostgresStore.NOTIFY_INTERVAL) + 1
    assert 2 <= seen[0] <= windows + 1, f"{seen[0]} notifications in {windows} debounce windows"
    assert seen[0] < 101, "one per transaction: not debounced"


def test_a_rolled_back_batch_wakes_nobody(url: str) -> None:
    with fencepost.connect(url) as client:
        assert isinstance(client, PostgresStore)
        client.submit("job", idempotency_key="k")
        time.sleep(0.1)  # past the debounce interval, so this batch would notify
        ready = threading.Event()
        seen = _count_notifications(client.notify_channel, 1.0, ready)
        with pytest.raises(IdempotencyConflict):
            client.submit_many([{"job": "new"}, {"job": "other", "idempotency_key": "k"}])
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen == [0]
        assert client.query(job="new").items == []

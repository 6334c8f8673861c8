"""Store.wait on a SQLite file: one poller thread, one query per poll, other processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost.domain.states import State
from fencepost.store.sqlite import SqliteStore
from fencepost.store.waiting import PollingWatcher


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'wait.db'}"


@pytest.fixture
def store(url: str) -> Iterator[SqliteStore]:
    with fencepost.connect(url) as opened:
        assert isinstance(opened, SqliteStore)
        yield opened


def test_a_thousand_async_waiters_one_query_per_poll(store: SqliteStore) -> None:
    executions = store.submit_many([{"job": "j"} for _ in range(1000)])
    statements: list[str] = []
    watcher = store._watcher
    fetch = watcher._fetch

    def counted(ids: Any, fresh: Any) -> Any:
        # Every statement the poll runs, on the poller thread's own connection.
        with store._read() as conn:
            conn.set_trace_callback(statements.append)
        try:
            return fetch(ids, fresh)
        finally:
            with store._read() as conn:
                conn.set_trace_callback(None)

    watcher._fetch = counted

    async def main() -> list[Any]:
        waits = [asyncio.ensure_future(store._wait_async(e.id, timeout=60)) for e in executions]
        await asyncio.sleep(0.5)
        assert not any(w.done() for w in waits)
        assert watcher.watched() == 1000

        def finish() -> None:
            for _ in range(10):
                leases = store.claim("w", limit=100)
                store.complete_many([(lease, None) for lease in leases])

        await asyncio.to_thread(finish)
        return await asyncio.gather(*waits)

    started = time.monotonic()
    found = asyncio.run(main())
    elapsed = time.monotonic() - started
    assert [e.state for e in found] == [State.SUCCEEDED] * 1000
    assert sorted(e.id for e in found) == sorted(e.id for e in executions)
    polls = watcher.lookups
    assert polls >= 2
    assert len(statements) == polls, "one query per poll, for every watched id at once"
    assert all("json_each" in s for s in statements)
    # Never faster than every 20 ms, whatever the number of waiters.
    assert polls <= elapsed / PollingWatcher.FIRST + 5
    assert watcher.watched() == 0


def test_the_poller_stops_polling_without_waiters(store: SqliteStore) -> None:
    execution = store.submit("j", delay=3600)
    with pytest.raises(TimeoutError):
        store.wait(execution.id, timeout=0.3)
    # A poll the thread began as the wait gave up may still be counted: at most that one.
    done = store._watcher.lookups + 1
    time.sleep(0.6)
    assert store._watcher.lookups <= done, "no waiters: no queries"
    store._watcher.LINGER = 0.0
    with pytest.raises(TimeoutError):
        store.wait(execution.id, timeout=0.1)
    thread = store._watcher._thread
    if thread is not None:
        thread.join(10)  # it ends at its next round (within a poll's 200 ms), not never
    assert thread is None or not thread.is_alive(), "the thread stops once nobody waits"


def test_polls_grow_from_20_to_200_ms(store: SqliteStore) -> None:
    execution = store.submit("j", delay=3600)
    with pytest.raises(TimeoutError):
        store.wait(execution.id, timeout=2.0)
    # 20 ms growing by half to 200 ms: about 15 polls in 2 s, not 100 (20 ms each), not 10.
    assert 8 <= store._watcher.lookups <= 25


COMPLETER = """
import sys, fencepost
with fencepost.connect(sys.argv[1]) as store:
    (lease,) = store.claim("other-process", ids=[sys.argv[2]])
    store.complete(lease, {"by": "another process"})
"""


def test_a_completion_in_another_process_wakes_the_waiter(store: SqliteStore, url: str) -> None:
    execution = store.submit("j")

    def complete_elsewhere() -> None:
        time.sleep(0.3)
        subprocess.run([sys.executable, "-c", COMPLETER, url, execution.id], check=True, timeout=60)

    thread = threading.Thread(target=complete_elsewhere)
    thread.start()
    found = asyncio.run(store._wait_async(execution.id, timeout=60))
    thread.join()
    assert found.result == {"by": "another process"}
    assert store.wait(execution.id, timeout=0).state is State.SUCCEEDED


def test_the_poll_query_reads_only_finished_rows_and_fresh_ones(store: SqliteStore) -> None:
    finished = store.submit("j")
    (lease,) = store.claim("w", ids=[finished.id])
    store.complete(lease, None)
    waiting = store.submit("j", delay=3600)
    found = store._watched([finished.id, waiting.id, "unknown"], [])
    assert set(found) == {finished.id}
    found = store._watched([finished.id, waiting.id, "unknown"], [waiting.id, "unknown"])
    assert set(found) == {finished.id, waiting.id}

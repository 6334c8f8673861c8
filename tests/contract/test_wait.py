"""Store.wait and Store._wait_async on every backend (memory, SQLite file, PostgreSQL).

Real time, not a ManualClock: a wait is measured in wall-clock seconds. Another
thread makes the execution terminal while the test's thread waits; the elapsed
times are bounded generously (the machine is shared).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.models import Execution
from fencepost.domain.states import State
from fencepost.store.base import Store

#: How late a woken waiter may return after the change, in seconds (a shared machine).
LATE = 1.5


@pytest.fixture
def store(store_factory: Callable[..., Store]) -> Store:
    return store_factory(None)  # the system clock: waits are in wall-clock time


def later(seconds: float, action: Callable[[], Any]) -> threading.Thread:
    """Run ``action`` on another thread after ``seconds``."""

    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def running(store: Store, **submit: Any) -> tuple[Execution, Any]:
    execution = store.submit("waited", **submit)
    (lease,) = store.claim("w", ids=[execution.id])
    return execution, lease


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    found = call()
    return found, time.monotonic() - start


def test_wait_returns_when_another_thread_completes(store: Store) -> None:
    execution, lease = running(store)
    later(0.3, lambda: store.complete(lease, {"answer": 42}))
    found, elapsed = timed(lambda: store.wait(execution.id, timeout=10))
    assert found.state is State.SUCCEEDED
    assert found.result == {"answer": 42}
    assert 0.25 <= elapsed < 0.3 + LATE


def test_wait_returns_when_a_batch_completes(store: Store) -> None:
    executions = store.submit_many([{"job": "waited"} for _ in range(3)])
    leases = store.claim("w", limit=3, ids=[e.id for e in executions])
    later(0.3, lambda: store.complete_many([(lease, None) for lease in leases]))
    found, elapsed = timed(lambda: store.wait(executions[-1].id, timeout=10))
    assert found.state is State.SUCCEEDED
    assert elapsed < 0.3 + LATE


def test_wait_returns_when_another_thread_fails_it_to_the_dead_letters(store: Store) -> None:
    execution, lease = running(store, max_attempts=1)
    later(0.3, lambda: store.fail(lease, "boom", retryable=False))
    found, elapsed = timed(lambda: store.wait(execution.id, timeout=timedelta(seconds=10)))
    assert found.state is State.FAILED
    assert found.error == "boom"
    assert elapsed < 0.3 + LATE


def test_a_retryable_failure_is_not_the_end(store: Store) -> None:
    execution, lease = running(store, max_attempts=3)
    later(0.2, lambda: store.fail(lease, "again", retryable=True, retry_in=60))
    with pytest.raises(TimeoutError):
        store.wait(execution.id, timeout=0.8)
    assert store.get(execution.id).state is State.RETRY_WAIT


def test_wait_returns_when_another_thread_cancels(store: Store) -> None:
    execution = store.submit("waited", delay=3600)
    later(0.3, lambda: store.cancel(execution.id))
    found, elapsed = timed(lambda: store.wait(execution.id, timeout=10))
    assert found.state is State.CANCELLED
    assert elapsed < 0.3 + LATE


def test_wait_returns_when_the_reaper_dead_letters_an_expired_lease(store: Store) -> None:
    execution = store.submit("waited", max_attempts=1)
    store.claim("w", ids=[execution.id], ttl=0.2)
    later(0.4, store.reap_expired)
    found, elapsed = timed(lambda: store.wait(execution.id, timeout=10))
    assert found.state is State.FAILED
    assert elapsed < 0.4 + LATE


def test_wait_times_out_when_nothing_happens(store: Store) -> None:
    execution = store.submit("waited", delay=3600)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=execution.id):
        store.wait(execution.id, timeout=0.5)
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 0.5 + LATE
    assert store.get(execution.id).state is State.SCHEDULED


def test_a_zero_timeout_looks_once(store: Store) -> None:
    execution = store.submit("waited", delay=3600)
    with pytest.raises(TimeoutError):
        store.wait(execution.id, timeout=0)


def test_an_execution_already_terminal_is_returned_at_once(store: Store) -> None:
    execution, lease = running(store)
    store.complete(lease, "done")
    found, elapsed = timed(lambda: store.wait(execution.id, timeout=0))
    assert (found.state, found.result) == (State.SUCCEEDED, "done")
    found, elapsed = timed(lambda: store.wait(execution.id))
    assert found.state is State.SUCCEEDED
    assert elapsed < 0.5


@pytest.mark.parametrize(
    "unknown", ["01a20000-0000-7000-8000-000000000000", "nope", "", "a\x00b", "\ud800", "x" * 5000]
)
def test_an_unknown_id_raises_not_found_at_once(store: Store, unknown: str) -> None:
    start = time.monotonic()
    with pytest.raises(NotFound):
        store.wait(unknown, timeout=30)
    with pytest.raises(NotFound):
        asyncio.run(store._wait_async(unknown, timeout=30))
    assert time.monotonic() - start < 5


BAD_TIMEOUTS: list[Any] = [
    -1,
    -0.001,
    timedelta(seconds=-1),
    math.nan,
    math.inf,
    -math.inf,
    10**400,
    1e300,
    "5",
    True,
    [1],
    object(),
]


def _timeout_id(value: object) -> str:
    """A test id that is the same in every process (pytest-xdist compares them)."""
    return "object()" if type(value) is object else repr(value)


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=_timeout_id)
def test_bad_timeouts_are_refused_naming_timeout(store: Store, timeout: Any) -> None:
    execution = store.submit("waited")
    with pytest.raises(ValidationError) as raised:
        store.wait(execution.id, timeout=timeout)
    assert raised.value.field == "timeout"
    with pytest.raises(ValidationError) as raised:
        asyncio.run(store._wait_async(execution.id, timeout=timeout))
    assert raised.value.field == "timeout"


@pytest.mark.parametrize("execution_id", [None, 5, b"id"], ids=repr)
def test_an_id_that_is_not_text_is_refused_naming_it(store: Store, execution_id: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        store.wait(execution_id, timeout=1)
    assert raised.value.field == "execution_id"


def test_async_waiters_are_released_by_completions(store: Store) -> None:
    executions = store.submit_many([{"job": "waited"} for _ in range(20)])
    leases = store.claim("w", limit=20, ids=[e.id for e in executions])
    waiting = executions[-1]
    (last,) = [lease for lease in leases if lease.execution_id == waiting.id]

    async def main() -> list[Execution]:
        later(
            0.3, lambda: store.complete_many([(lease, None) for lease in leases if lease != last])
        )
        later(0.6, lambda: store.fail(last, "bad", retryable=False))
        return await asyncio.gather(*(store._wait_async(e.id, timeout=10) for e in executions))

    found, elapsed = timed(lambda: asyncio.run(main()))
    states = [e.state for e in found]
    assert states == [State.SUCCEEDED] * 19 + [State.FAILED]
    assert elapsed < 0.6 + LATE


def test_an_async_wait_times_out(store: Store) -> None:
    execution = store.submit("waited", delay=3600)
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        asyncio.run(store._wait_async(execution.id, timeout=0.5))
    assert 0.5 <= time.monotonic() - start < 0.5 + LATE


def test_an_async_wait_on_a_finished_execution_returns_at_once(store: Store) -> None:
    execution, lease = running(store)
    store.complete(lease, 1)
    found = asyncio.run(store._wait_async(execution.id, timeout=0))
    assert found.state is State.SUCCEEDED
    found = asyncio.run(store._wait_async(execution.id, timeout=5))
    assert found.result == 1


def test_a_cancelled_coroutine_leaves_no_waiter(store: Store) -> None:
    execution = store.submit("waited", delay=3600)

    async def main() -> None:
        task = asyncio.create_task(store._wait_async(execution.id))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    watcher = store._waits()
    if watcher is not None:
        assert watcher.watched() == 0

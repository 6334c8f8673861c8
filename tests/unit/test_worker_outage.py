"""A worker's account of an outage, and its first claim after one (a store proxy in-process).

"Reachable again" is said once, and only after a real round trip succeeded: an idle
worker's other calls (commands of no held execution, an empty batch) can return
without reaching the store. And the executions claimed right after an outage are
not handed back as if they had waited in the buffer while the worker was still
waiting for the store to answer its first call.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from fencepost import App, AttemptOutcome, State
from fencepost.domain.errors import StoreUnavailable
from fencepost.store.base import Store
from fencepost.worker.runtime import Worker, WorkerOptions


class Outage:
    """A store proxy: every verb fails while ``down``; the first node registration after
    it answers ``slow`` seconds late, as a store reconnecting would."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.down = threading.Event()
        self.refused = 0
        self.slow = 0.0
        self.parallel_writes = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not callable(attribute) or name in ("get", "wait_for_work"):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down.is_set():
                self.refused += 1
                raise StoreUnavailable(f"{name}: connection refused (simulated)")
            if name == "register_node" and self.slow:
                slow, self.slow = self.slow, 0.0
                time.sleep(slow)
            return attribute(*args, **kwargs)

        return call


def wait_until(predicate: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.01)
    pytest.fail("timed out")


def lines(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


def test_reachable_again_is_said_once_after_a_round_trip_and_no_claim_goes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = App("memory://")

    @app.job("brief", lease_ttl=4)  # a buffered lease may wait 2 s for a handler
    def brief() -> str:
        time.sleep(0.005)
        return "ran"

    outage = Outage(app.store)
    options = WorkerOptions(max_backoff=0.2, concurrency=1)
    worker = Worker(outage, app.registry, options)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="fencepost.worker"):
        worker.start()
        try:
            # A run of quick jobs first: the finish rate makes claims buffer ahead.
            warm = [app.store.submit("brief").id for _ in range(200)]
            wait_until(lambda: app.store.get(warm[-1]).state is State.SUCCEEDED)
            outage.down.set()
            wait_until(lambda: outage.refused >= 10)  # several probes, all refused
            assert lines(caplog, "database unreachable") == 1
            assert lines(caplog, "reachable again") == 0  # idle calls prove nothing
            ids = [app.store.submit("brief").id for _ in range(200)]
            outage.slow = 2.5  # the first round trip after the outage, longer than 2 s
            outage.down.clear()
            for eid in ids:
                wait_until(lambda eid=eid: app.store.get(eid).state is State.SUCCEEDED)
        finally:
            worker.stop()
            worker.join(10)
    assert lines(caplog, "database reachable again") == 1
    assert lines(caplog, "handed back") == 0
    for eid in ids:
        assert [a.outcome for a in app.store.attempts(eid)] == [AttemptOutcome.SUCCEEDED]
    assert worker.counters.released == 0

"""The claim buffer under a real SIGTERM: buffered leases go back at once.

A real ``fencepost worker`` process on a real SQLite file, at its default
prefetch. While its only handler is held by one execution, the leases it claimed
ahead wait in its buffer; the first SIGTERM must release them at once (claimable
elsewhere, no attempt counted) while the running handler gets its grace.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from fencepost import AttemptOutcome, State, Store
from tests.integration.test_worker_processes import APP, Workers, db, wait_until, workers

pytestmark = pytest.mark.slow

__all__ = ["db", "workers"]  # fixtures


def test_sigterm_releases_buffered_leases_while_the_running_handler_finishes(
    tmp_path: Path, workers: Workers, db: tuple[str, Store]
) -> None:
    url, store = db
    gate = tmp_path / "open"
    # Claim order is priority first: quick ones (the worker measures its pace and
    # claims ahead), then one that holds the only handler, then the tail it strands.
    store.submit_many([{"job": "step", "priority": 2} for _ in range(300)])
    held = store.submit("step", inputs={"wait_for": str(gate)}, priority=1).id
    tail = [e.id for e in store.submit_many([{"job": "step"} for _ in range(20)])]
    proc = workers.start(url, "worker-a", APP, "--concurrency", "1", "--grace", "30")

    def buffered() -> list[str]:
        return [i for i in tail if store.get(i).state is State.RUNNING]

    wait_until(lambda: store.get(held).state is State.RUNNING, 30, "the gate job to start")
    waiting = wait_until(buffered, 10, "leases claimed ahead of the busy handler")
    assert all(store.get(i).lease_owner == "worker-a" for i in waiting)
    proc.send_signal(signal.SIGTERM)
    wait_until(lambda: not buffered(), 5, "the buffered leases to be released")
    for eid in waiting:
        released = store.get(eid)
        assert (released.state, released.attempt, released.result) == (State.SCHEDULED, 0, None)
        assert [a.outcome for a in store.attempts(eid)] == [AttemptOutcome.ABANDONED]
    assert store.get(held).state is State.RUNNING, "the running handler keeps its grace"
    assert proc.poll() is None
    gate.touch()
    assert proc.wait(30) == 0
    assert store.get(held).state is State.SUCCEEDED
    assert all(store.get(i).state is State.SCHEDULED for i in tail)

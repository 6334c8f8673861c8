"""Two real ``fencepost worker`` processes, each on its own queue with a concurrency limit.

Judged from the store's audit trail alone: neither ran another queue's executions,
neither ever held more than its limit of leases of its queue at once (the CLAIMED
transition to the end of that lease, per owner), and the whole backlog finished.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

import fencepost
from fencepost import Event, State, Store, Transition

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"
LIMIT = 2
BACKLOG = 24


@pytest.fixture
def store_url(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'queues.db'}"
    store = fencepost.connect(url)
    yield url, store
    store.close()


def lease_spans(trail: list[Transition]) -> list[tuple[str, datetime, datetime | None]]:
    """``(owner, claimed at, ended at)`` of every lease in one execution's trail.

    A lease ends at the first later transition that leaves RUNNING or takes the
    execution again (None: still held); refused calls (STALE_REFUSED) end nothing.
    """
    spans: list[tuple[str, datetime, datetime | None]] = []
    for i, t in enumerate(trail):
        if t.event is not Event.CLAIMED:
            continue
        assert t.actor is not None
        end = next(
            (
                later.at
                for later in trail[i + 1 :]
                if later.event is Event.CLAIMED
                or (later.event is not Event.STALE_REFUSED and later.to_state is not State.RUNNING)
            ),
            None,
        )
        spans.append((t.actor, t.at, end))
    return spans


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The largest number of spans open at one instant (one ending as another starts: not both)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    open_, most = 0, 0
    for _, step in events:  # at one instant, -1 sorts before +1
        open_ += step
        most = max(most, open_)
    return most


def test_two_workers_keep_to_their_queues_and_limits(
    store_url: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = store_url
    inputs = {"steps": 3, "pause": 0.01}  # about 30 ms a run: runs overlap if allowed to
    store.submit_many(
        [{"job": "spin", "inputs": inputs, "queue": q} for q in ("alpha", "beta") * BACKLOG]
    )
    other = store.submit("spin", inputs=inputs, queue="gamma")  # nobody's queue
    procs = []
    for owner, queue in (("w-alpha", "alpha"), ("w-beta", "beta")):
        with (tmp_path / f"{owner}.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [
                        FENCEPOST,
                        "worker",
                        APP,
                        "--db",
                        url,
                        "--owner",
                        owner,
                        "--concurrency",
                        "8",
                        "--queues",
                        queue,
                        "--queue-concurrency",
                        f"{queue}={LIMIT}",
                    ],
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = store.query(state=State.SUCCEEDED, limit=1000).items
            if len(done) == 2 * BACKLOG:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"only {len(done)} of {2 * BACKLOG} finished in 60 s")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    assert [proc.returncode for proc in procs] == [0, 0]
    executions = {e.id: e for e in store.query(limit=1000).items}
    assert executions.pop(other.id).state is State.SCHEDULED
    assert store.transitions(other.id)[-1].event is Event.SUBMITTED  # never claimed
    held: dict[str, list[tuple[datetime, datetime]]] = {"w-alpha": [], "w-beta": []}
    ran: Counter[tuple[str, str]] = Counter()
    for e in executions.values():
        assert e.state is State.SUCCEEDED, e
        for owner, start, end in lease_spans(store.transitions(e.id)):
            assert end is not None, e
            ran[owner, e.queue] += 1
            held[owner].append((start, end))
    assert set(ran) == {("w-alpha", "alpha"), ("w-beta", "beta")}, ran
    assert sum(ran.values()) >= 2 * BACKLOG
    # The limit held, and was reached: without it, 8 handlers would have run at once.
    assert {owner: most_at_once(spans) for owner, spans in held.items()} == {
        "w-alpha": LIMIT,
        "w-beta": LIMIT,
    }

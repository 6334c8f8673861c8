"""Limits hold across every worker: real ``fencepost worker`` processes (three on the
database, one remote through ``fencepost serve``), on SQLite and on PostgreSQL, read
back from the audit trail.

* A job limited to 100/s: 3,000 executions drain no faster than the limit allows, and
  in no window of any length do the starts exceed ``rate x W + burst``.
* A per-key concurrency of 2 over 200 keys is never exceeded, while the operator
  changes the rate and pauses and resumes the queue with the CLI mid-run.
"""

from __future__ import annotations

import subprocess
import time
from collections import defaultdict
from datetime import datetime

import pytest

import fencepost
from fencepost import State
from fencepost.domain.states import Event
from fencepost.store.base import Store
from tests.integration.test_service_processes import (
    FENCEPOST,
    ROOT,
    TOKEN,
    Processes,
    free_port,
    processes,
    wait_ready,
)
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # fixture

APP = "tests.integration._worker_app:app"


def start_workers(db: str, processes: Processes) -> None:
    """Three workers on the database and one remote worker through a service."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = processes.start(
        "serve", "serve", APP, "--db", db, "--port", str(port), "--workers", "0",
        env={"FENCEPOST_TOKENS": f"{TOKEN}=work,submit,read"},
    )  # fmt: skip
    wait_ready(url, service)
    for k in range(3):
        processes.start(f"worker-{k}", "worker", APP, "--db", db, "--owner", f"local-{k}")
    processes.start(
        "remote", "worker", APP, "--server", url, "--owner", "remote",
        env={"FENCEPOST_TOKEN": TOKEN},
    )  # fmt: skip


def claims(store: Store, ids: list[str]) -> list[tuple[float, str, str]]:
    """Every CLAIMED transition of ``ids``: (at as a timestamp, execution id, actor)."""
    out = []
    for i in ids:
        for t in store.transitions(i):
            if t.event is Event.CLAIMED:
                out.append((t.at.timestamp(), i, t.actor or ""))
    return sorted(out)


def worst_excess(times: list[float], rate: float, burst: int) -> float:
    """The most by which the starts in any window [t_i, t_j] exceed ``rate x W + burst``
    (<= 0 when the bound holds for every window).

    For starts i <= j: (j - i + 1) - rate * (t_j - t_i) = (j + 1 - rate * t_j) +
    (rate * t_i - i), so the worst window ending at j pairs it with the largest
    ``rate * t_i - i`` so far: one pass, not every pair.
    """
    worst = float("-inf")
    best_start = float("-inf")
    for j, t in enumerate(times):
        best_start = max(best_start, rate * t - j)
        worst = max(worst, (j + 1 - rate * t) + best_start - burst)
    return worst


def cli(db: str, *args: str) -> str:
    done = subprocess.run(
        [FENCEPOST, *args, "--db", db], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_rate_holds_across_every_worker(shared_db: str, processes: Processes) -> None:
    with fencepost.connect(shared_db) as store:
        limit = store.set_limit("job:quick", rate="100/s")
        assert limit.burst == 10
        ids = [e.id for e in store.submit_many([{"job": "quick"}] * 3000)]
        start_workers(shared_db, processes)
        wait_until(lambda: store.stats().by_state.get(State.SUCCEEDED, 0) >= 3000, 120, "the drain")
        done = [store.get(i) for i in ids]
        assert {e.state for e in done} == {State.SUCCEEDED}
        twice = [e.id for e in done if e.attempt != 1]
        assert twice == [], store.transitions(twice[0])  # none started twice
        started = claims(store, ids)
    times = [t for t, _, _ in started]
    assert len(times) == 3000
    # 1e-3: a start's stamp is the store's clock to the microsecond.
    assert worst_excess(times, 100.0, 10) <= 1e-3
    # Burst first, then 100 a second: no faster than (3,000 - 10) / 100 s.
    assert times[-1] - times[0] >= (3000 - 10) / 100 - 0.05
    owners = {actor for _, _, actor in started}
    assert {"local-0", "local-1", "local-2", "remote"} <= owners, owners


def test_per_key_concurrency_holds_through_operator_changes(
    shared_db: str, processes: Processes
) -> None:
    keys = [f"tenant-{k}" for k in range(200)]
    with fencepost.connect(shared_db) as store:
        # A rate for the queue, and each tenant's own concurrency on the job.
        store.set_limit("queue:tenants", rate="100/s")
        store.set_limit("job:hold", concurrency=2, per_key=True)
        items = [
            {"job": "hold", "inputs": {"seconds": 0.05}, "queue": "tenants", "limit_key": k}
            for k in (keys[i % 200] for i in range(1000))
        ]
        ids = [e.id for e in store.submit_many(items)]
        start_workers(shared_db, processes)

        def started() -> int:
            return len(claims(store, ids[::10])) * 10  # a sample: cheap enough to poll

        wait_until(lambda: started() >= 200, 60, "200 starts")
        cli(shared_db, "limits", "set", "queue:tenants", "--rate", "50/s")
        changed = time.time()
        wait_until(lambda: started() >= 400, 60, "400 starts")
        cli(shared_db, "queues", "pause", "tenants")
        paused = time.time()
        # Nothing starts while the queue is paused: look for a while (an absence has
        # no event to wait on), then resume.
        time.sleep(2.0)
        cli(shared_db, "queues", "resume", "tenants")
        resumed = time.time()
        wait_until(
            lambda: (
                all(store.get(i).state is State.SUCCEEDED for i in ids[-5:])
                and store.stats().by_state.get(State.SUCCEEDED, 0) >= 1000
            ),
            120,
            "the drain",
        )
        trail = {i: store.transitions(i) for i in ids}
        assert {store.get(i).state for i in ids} == {State.SUCCEEDED}
        # The pause and the resume as the store's audit has them (its clock, the
        # claims' clock), each by the CLI's user.
        changes = {
            c.action: c
            for c in store.flow_changes()
            if c.scope == "queue:tenants" and c.actor.startswith("cli:")
        }
        assert set(changes) == {"set", "pause", "resume"}, changes
        changed_at = changes["set"].at.timestamp()
        paused_at = changes["pause"].at.timestamp()
        resumed_at = changes["resume"].at.timestamp()
    assert changed <= paused <= resumed
    # Per key, the leases at any instant: +1 at each CLAIMED, -1 when it ends.
    events: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    starts: list[tuple[float, str | None]] = []
    for n, transitions in enumerate(trail.values()):
        key = keys[n % 200]
        for t in transitions:
            if t.event is Event.CLAIMED:
                events[key].append((t.at, 1))
                starts.append((t.at.timestamp(), t.actor))
            elif t.from_state is State.RUNNING:
                events[key].append((t.at, -1))
    for key, changes in events.items():
        leased = 0
        for _, step in sorted(changes, key=lambda c: (c[0], c[1])):  # ends before starts
            leased += step
            assert leased <= 2, f"{key} had {leased} leases at once"
    starts.sort()
    # A change holds for every claimer within a second (a claim that read the limits
    # just before the pause committed may stamp its starts just after it).
    during_pause = [(t, who) for t, who in starts if paused_at + 1.0 <= t < resumed_at]
    assert during_pause == [], f"{len(during_pause)} started while the queue was paused"
    after_change = [t for t, _ in starts if t >= changed_at + 1.0]
    assert worst_excess(after_change, 50.0, 5) <= 1e-3

"""On SQLite a worker whose clock disagrees with the store's record of its writes stays out.

SQLite leases are judged by each process's own clock. A worker whose clock is an
hour fast would, unchecked, see live leases as long expired and take them over; one
an hour slow would write leases that others see expired at once. Instead it logs an
error and neither claims nor reaps while its clock is off by more than a lease; it
keeps looking (its node renewed every second), and claims again once its clock agrees.

The wrong clocks are libfaketime's, faking the wall clock only (see
``tests.integration._tools.under_faketime``): under a faked monotonic clock Python's
timed waits never return, the worker's loop stops after its first look, and a test
would pass without the rule ever being asked again. So each test also checks that
the worker with the wrong clock went on looking while it was watched, and that it
runs only ``step``, a handler that does not sleep.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fencepost import Event, State, Store
from tests.integration._tools import Procs, set_faketime, under_faketime
from tests.integration.test_worker_processes import running_under, wait_until

pytestmark = pytest.mark.slow

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"
#: How long the worker with the wrong clock is watched at least (its lease length is 5 s,
#: the holder's leases too; a worker whose clock is off renews its node every second).
WATCH = 3.0
#: Node renewals seen while watching: the worker's loop went on, and asked again each time.
RENEWALS = 3


def worker(procs: Procs, url: str, owner: str, jobs: str, prefix: list[str]) -> None:
    procs.start(owner, [*prefix, FENCEPOST, "worker", APP, "--db", url, "--owner", owner,
                        "--jobs", jobs])  # fmt: skip


def held_spins(procs: Procs, url: str, store: Store, count: int) -> list[str]:
    """``count`` ``spin`` executions running under a heartbeating worker with the right clock."""
    spins = [
        store.submit("spin", inputs={"steps": 100_000, "pause": 0.02}).id for _ in range(count)
    ]
    worker(procs, url, "holder", "spin", [])
    wait_until(
        lambda: all(running_under(store, spin, "holder", 1) for spin in spins),
        20,
        "the holder's claims",
    )
    return spins


def heartbeat(store: Store, owner: str) -> datetime | None:
    """When ``owner`` last renewed its node, by its own clock (None: not registered)."""
    found = [n.heartbeat_at for n in store.nodes(live_only=False) if n.id == owner]
    return found[0] if found else None


def watch_out(store: Store, owner: str, *, spins: list[str], waiting: str) -> int:
    """For WATCH seconds, and until ``owner`` has renewed its node RENEWALS times (20 s at
    most), every one of ``spins`` stays RUNNING under ``holder`` at epoch 1 and ``waiting``
    stays SCHEDULED, claimed by nobody. Returns the renewals seen."""
    seen: set[datetime] = set()
    started = time.monotonic()
    while time.monotonic() < started + WATCH or len(seen) < RENEWALS:
        assert time.monotonic() < started + 20, (
            f"{owner} renewed its node {len(seen)} time(s) in 20 s: it stopped looking"
            " (a worker whose clock is off looks again every second)"
        )
        for spin in spins:
            assert running_under(store, spin, "holder", 1), store.transitions(spin)
        assert store.get(waiting).state is State.SCHEDULED, store.transitions(waiting)
        if (at := heartbeat(store, owner)) is not None:
            seen.add(at)
        time.sleep(0.1)
    return len(seen)


def test_a_worker_an_hour_fast_takes_over_no_live_lease(
    procs: Procs, clock_db: tuple[str, Store]
) -> None:
    url, store = clock_db
    spins = held_spins(procs, url, store, count=3)
    waiting = store.submit("step").id  # due: the fast worker would run it at once
    # It serves ``spin`` too: to it the holder's 5 s leases expired an hour ago.
    worker(procs, url, "fast", "spin,step", under_faketime("+1h"))
    wait_until(lambda: heartbeat(store, "fast"), 20, "the fast worker's start")

    watch_out(store, "fast", spins=spins, waiting=waiting)
    for spin in spins:  # nobody but the holder ever claimed them, and no attempt ended
        assert [(t.event, t.epoch, t.actor) for t in store.transitions(spin)[1:]] == [
            (Event.CLAIMED, 1, "holder")
        ], store.transitions(spin)
    assert [t.event for t in store.transitions(waiting)] == [Event.SUBMITTED]
    log = procs.log("fast")
    assert "clock is +3600" in log
    assert "not claiming or reaping until it agrees" in log
    assert log.count("clock is +") == 1  # logged once, not on every look


def test_a_worker_an_hour_slow_claims_nothing_until_its_clock_is_right(
    procs: Procs, clock_db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = clock_db
    # Due two hours ago: due by the slow worker's clock too, which would claim it at
    # once and write a lease that expired, to everyone else, before it was taken.
    waiting = store.submit("step", execute_at=datetime.now(UTC) - timedelta(hours=2)).id
    clock = tmp_path / "slow.faketime"
    set_faketime(clock, "-1h")
    worker(procs, url, "slow", "step", under_faketime(timestamp_file=clock))
    wait_until(lambda: heartbeat(store, "slow"), 20, "the slow worker's start")

    watch_out(store, "slow", spins=[], waiting=waiting)
    assert [t.event for t in store.transitions(waiting)] == [Event.SUBMITTED]
    assert "clock is -" in procs.log("slow")

    set_faketime(clock, "+0")  # put right, it claims at its next look (within a second)
    done = wait_until(
        lambda: (e := store.get(waiting)).state is State.SUCCEEDED and e, 10, "the slow worker"
    )
    assert done.result == "slow"  # ``step`` returns its owner
    log = procs.log("slow")
    assert "clock agrees with the store again; resuming claims" in log
    assert log.count("clock is -") == 1

"""On SQLite a worker whose clock disagrees with the store's record of its writes stays out.

SQLite leases are judged by each process's own clock. A worker run under libfaketime
(``faketime -f +1h`` or ``-1h``) would, unchecked, see live leases as long expired and
take them over, or write leases that others see expired at once. Instead it logs an
error and neither claims nor reaps while its clock is off by more than a lease.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencepost
from fencepost import State, Store
from tests.integration._tools import Procs, require_tool
from tests.integration.test_worker_processes import running_under, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"
#: How long the skewed worker is watched claiming nothing (its lease length is 5 s).
WATCH = 3.0


class Started(Procs):
    """``fencepost worker`` processes, some under faketime; none outlives the test."""

    def worker(self, url: str, owner: str, jobs: str, *, shift: str | None = None) -> None:
        # faketime runs the worker as its child: Procs kills each process's group whole.
        prefix = [] if shift is None else [require_tool("faketime"), "-f", shift]
        self.start(
            owner,
            [*prefix, FENCEPOST, "worker", APP, "--db", url, "--owner", owner, "--jobs", jobs],
        )


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    procs = Started(tmp_path)
    yield procs
    procs.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'clock.db'}"
    store = fencepost.connect(url)
    yield url, store
    store.close()


def watch_nothing_claimed(store: Store, skewed: str, ids: list[str]) -> None:
    """For WATCH seconds, no transition of ``ids`` names the skewed worker."""
    deadline = time.monotonic() + WATCH
    while time.monotonic() < deadline:
        for eid in ids:
            actors = {t.actor for t in store.transitions(eid)}
            assert skewed not in actors, f"{skewed} took {eid}: {store.transitions(eid)}"
        time.sleep(0.1)


def test_a_worker_an_hour_fast_takes_over_no_live_lease(
    started: Started, db: tuple[str, Store]
) -> None:
    url, store = db
    spin = store.submit("spin", inputs={"steps": 100_000, "pause": 0.02}).id
    started.worker(url, "holder", "spin")
    wait_until(lambda: running_under(store, spin, "holder", 1), 20, "the holder's claim")
    waiting = store.submit("quick").id

    started.worker(url, "fast", "spin,quick", shift="+1h")
    wait_until(lambda: "clock is +" in started.log("fast"), 20, "the fast worker's error")
    # To the fast worker the holder's 5 s lease expired an hour ago; it is still the holder's.
    watch_nothing_claimed(store, "fast", [spin, waiting])
    assert running_under(store, spin, "holder", 1)
    assert store.get(waiting).state is State.SCHEDULED
    log = started.log("fast")
    assert "not claiming or reaping until it agrees" in log
    assert log.count("clock is +") == 1  # logged once, not on every look


def test_a_worker_an_hour_slow_claims_nothing(started: Started, db: tuple[str, Store]) -> None:
    url, store = db
    waiting = store.submit("quick").id
    started.worker(url, "slow", "quick", shift="-1h")
    wait_until(lambda: "clock is -" in started.log("slow"), 20, "the slow worker's error")
    # Its leases would have expired an hour before it took them.
    watch_nothing_claimed(store, "slow", [waiting])
    assert store.get(waiting).state is State.SCHEDULED

    started.worker(url, "on-time", "quick")  # a worker with the right clock is not held back
    wait_until(lambda: store.get(waiting).state is State.SUCCEEDED, 20, "the on-time worker")
    assert store.get(waiting).lease_owner is None
    assert "clock is" not in started.log("on-time")  # (its start line names clock.db)

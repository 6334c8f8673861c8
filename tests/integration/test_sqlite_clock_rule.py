"""On SQLite no process whose clock is off the machine's judges a lease, at any moment.

Every process judges SQLite leases by its own clock, so the store checks that clock
against the kernel's at every claim and every reap (not only when a worker renews its
node): ``fencepost reconcile`` started an hour fast times out no live lease.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencepost
from fencepost import Store
from tests.integration._tools import Procs, require_tool
from tests.integration.test_worker_processes import running_under, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"
OFF = "s off the machine's"  # the store's error line


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    started = Procs(tmp_path)
    yield started
    started.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'clock.db'}"
    store = fencepost.connect(url)
    yield url, store
    store.close()


def held_spin(procs: Procs, url: str, store: Store) -> str:
    """A ``spin`` execution running under a heartbeating worker named ``holder``."""
    spin = store.submit("spin", inputs={"steps": 100_000, "pause": 0.02}).id
    procs.start("holder", [FENCEPOST, "worker", APP, "--db", url, "--owner", "holder",
                           "--jobs", "spin"])  # fmt: skip
    wait_until(lambda: running_under(store, spin, "holder", 1), 20, "the holder's claim")
    return spin


def test_reconcile_an_hour_fast_times_out_no_live_lease(
    procs: Procs, db: tuple[str, Store]
) -> None:
    url, store = db
    spin = held_spin(procs, url, store)
    faketime = require_tool("faketime")
    done = subprocess.run(
        [faketime, "-f", "+1h", FENCEPOST, "reconcile", "--db", url, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert OFF in done.stderr, done.stderr
    assert running_under(store, spin, "holder", 1), store.transitions(spin)

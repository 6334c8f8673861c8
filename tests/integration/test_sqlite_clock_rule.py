"""On SQLite no process whose clock is off the machine's judges a lease, at any moment.

Every process judges SQLite leases by its own clock, so the store checks that clock
against the kernel's at every claim and every reap (not only when a worker renews its
node). Each test has a worker with the right clock hold live, heartbeating leases on
slow handlers (``spin``, 5 s leases) while a process with a wrong clock looks at them:

* ``fencepost serve`` an hour fast, its reaper every second and its claim endpoint
  asked by a remote worker, times out and hands out none of them;
* ``fencepost reconcile`` an hour fast times out none of them;
* a worker whose clock steps an hour ahead while it runs notices at its next claim
  (it says so at once, not at its next node renewal) and takes over none of them.

The wrong clocks are libfaketime's (see ``tests.integration._tools.under_faketime``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import fencepost
from fencepost import State, Store
from tests.integration._tools import Procs, require_tool, set_faketime, under_faketime
from tests.integration.test_service_processes import free_port, wait_ready
from tests.integration.test_worker_processes import running_under, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"
OFF = "s off the machine's"  # the store's error line
AGAIN = "agrees with the machine's again"  # and its all-clear
#: How long a look at the holder's leases lasts: three passes of serve's reaper (1 s),
#: and 60 claims of a worker polling every 0.05 s; the leases last 5 s, heartbeats renew them.
WATCH = 3.0


def held_spins(procs: Procs, url: str, store: Store, count: int = 1) -> list[str]:
    """``count`` ``spin`` executions running under a heartbeating worker named ``holder``."""
    spins = [
        store.submit("spin", inputs={"steps": 100_000, "pause": 0.02}).id for _ in range(count)
    ]
    procs.start("holder", [FENCEPOST, "worker", APP, "--db", url, "--owner", "holder",
                           "--jobs", "spin"])  # fmt: skip
    wait_until(
        lambda: all(running_under(store, spin, "holder", 1) for spin in spins),
        20,
        "the holder's claims",
    )
    return spins


def watch_held(
    store: Store, spins: list[str], *, also: Callable[[], bool] = lambda: True, what: str = ""
) -> None:
    """For WATCH seconds, and until ``also()`` holds (20 s at most: ``what``), every one of
    ``spins`` stays RUNNING under ``holder`` at epoch 1."""
    started = time.monotonic()
    while time.monotonic() < started + WATCH or not also():
        assert time.monotonic() < started + 20, f"timed out after 20s waiting for {what}"
        for spin in spins:
            assert running_under(store, spin, "holder", 1), store.transitions(spin)
        time.sleep(0.1)


def assert_untouched(store: Store, spins: list[str]) -> None:
    """Nobody but ``holder`` ever claimed ``spins``; no attempt of theirs ended."""
    for spin in spins:
        trail = store.transitions(spin)
        assert [(t.event, t.epoch, t.actor) for t in trail[1:]] == [
            (fencepost.Event.CLAIMED, 1, "holder")
        ], trail


def test_serve_an_hour_fast_takes_no_live_lease(procs: Procs, clock_db: tuple[str, Store]) -> None:
    url, store = clock_db
    spins = held_spins(procs, url, store, count=4)
    waiting = store.submit("quick").id  # the holder does not run it; the remote worker would
    port = free_port()
    service = f"http://127.0.0.1:{port}"
    # No embedded workers: serve's own reaper thread reaps, every second.
    procs.start("serve", [*under_faketime("+1h"), FENCEPOST, "serve", APP, "--db", url,
                          "--port", str(port), "--workers", "0"])  # fmt: skip
    wait_ready(service, procs.procs[-1])
    procs.start("remote", [FENCEPOST, "worker", APP, "--server", service, "--owner", "remote",
                           "--jobs", "spin,quick"])  # fmt: skip
    wait_until(lambda: OFF in procs.log("serve"), 20, "the service's clock error")

    # To serve the holder's 5 s leases expired an hour ago; they are still the holder's,
    # through three passes of its reaper and the remote worker's claims (every 0.5 s).
    watch_held(
        store,
        spins,
        also=lambda: procs.log("serve").count("POST /claims") >= 3,
        what="the remote worker's claims",
    )
    assert_untouched(store, spins)
    assert store.get(waiting).state is State.SCHEDULED  # the claim endpoint hands out nothing
    log = procs.log("serve")
    assert "claiming and reaping nothing" in log
    assert log.count(OFF) == 1  # logged once, not at every pass


def test_reconcile_an_hour_fast_times_out_no_live_lease(
    procs: Procs, clock_db: tuple[str, Store]
) -> None:
    url, store = clock_db
    [spin] = held_spins(procs, url, store)
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


def test_a_worker_whose_clock_steps_an_hour_ahead_takes_no_live_lease(
    procs: Procs, clock_db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = clock_db
    spins = held_spins(procs, url, store, count=3)
    clock = tmp_path / "stepped.faketime"
    set_faketime(clock, "+0")
    # It runs ``step`` (which does not sleep; see under_faketime) and would take ``spin``.
    procs.start("stepped", [*under_faketime(timestamp_file=clock), FENCEPOST, "worker", APP,
                            "--db", url, "--owner", "stepped", "--jobs", "spin,step"])  # fmt: skip
    before = store.submit("step").id
    done = wait_until(
        lambda: (e := store.get(before)).state is State.SUCCEEDED and e, 20, "a first step"
    )
    assert done.result == "stepped"  # it claims, while its clock is right

    set_faketime(clock, "+1h")
    stepped_at = time.monotonic()
    after = store.submit("step").id
    # Its next claim (it polls every 0.05 s) says so, not its node's renewal (every 10 s).
    wait_until(lambda: OFF in procs.log("stepped"), 5, "the stepped worker's clock error")
    noticed = time.monotonic() - stepped_at
    watch_held(store, spins)
    assert_untouched(store, spins)
    assert store.get(after).state is State.SCHEDULED
    assert "stepped" not in {t.actor for t in store.transitions(after)}

    set_faketime(clock, "+0")  # put right, it claims again
    wait_until(lambda: store.get(after).state is State.SUCCEEDED, 20, "the step after")
    assert store.get(after).result == "stepped"
    log = procs.log("stepped")
    assert AGAIN in log
    assert log.count(OFF) == 1
    print(f"the stepped worker said so {noticed:.2f} s after its clock stepped")

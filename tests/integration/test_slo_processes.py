"""The service-level report of a real run: every miss in its error class.

Real ``fencepost worker`` processes on SQLite and on PostgreSQL, and one run with a
worker SIGSTOPped past its lease (renewal failed), a job that times out, a job that
fails to a dead letter, and a concurrency limit holding work back (throttled). The
report is taken with tight objectives (claimed within 1 s, finished within 2 s) so
that the run takes seconds, not minutes: ``fencepost slo`` attributes each miss to
its class, counts the throttled ones apart, and exits 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import fencepost
from fencepost import State
from fencepost.domain.states import Event
from fencepost.store.base import Store
from tests.integration.test_service_processes import FENCEPOST, ROOT, Processes, processes
from tests.integration.test_worker_processes import freeze, wait_until

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # fixture

APP = "tests.integration._slo_app:app"
TERMINAL = (State.SUCCEEDED, State.FAILED)


def serving(store: Store, node: str) -> None:
    """Wait until worker ``node`` is registered with its jobs (it claims from then on)."""
    wait_until(lambda: any(n.id == node and n.jobs for n in store.nodes()), 30, f"worker {node}")


def test_each_miss_is_attributed_to_its_class(shared_db: str, processes: Processes) -> None:
    with fencepost.connect(shared_db) as store:
        stalled_worker = processes.start(
            "worker-a", "worker", APP, "--db", shared_db, "--owner", "a"
        )
        # Planned when submitted: submit once the worker serves its jobs, so that its
        # start-up is not counted as a late claim.
        serving(store, "a")
        stall = store.submit("stall")
        wait_until(
            lambda: (
                store.get(stall.id).lease_owner == "a"
                and store.get(stall.id).state is State.RUNNING
            ),
            30,
            "worker a running the stall job",
        )
        if shared_db.startswith("sqlite:"):  # never inside a write: it would block worker b
            freeze(stalled_worker, Path(shared_db.removeprefix("sqlite:///")))
        else:
            os.kill(stalled_worker.pid, signal.SIGSTOP)
        try:
            processes.start("worker-b", "worker", APP, "--db", shared_db, "--owner", "b")
            serving(store, "b")
            ids = [stall.id]
            ids += [store.submit("on-time").id for _ in range(3)]
            ids += [store.submit(job).id for job in ("too-slow", "doomed", "narrow", "narrow")]
            wait_until(
                lambda: all(store.get(i).state in TERMINAL for i in ids), 60, "every execution"
            )
        finally:
            os.kill(stalled_worker.pid, signal.SIGCONT)
        # The stopped worker wakes up and reports: refused, its lease was replaced.
        wait_until(
            lambda: any(t.event is Event.STALE_REFUSED for t in store.transitions(stall.id)),
            30,
            "worker a's refused report",
        )
        claimed_by = [t.actor for t in store.transitions(stall.id) if t.event is Event.CLAIMED]
        assert claimed_by == ["a", "b"], "worker b took the stopped worker's lease over"
    done = subprocess.run(
        [FENCEPOST, "slo", "--db", shared_db, "--window", "1h", "--claim-within", "1s",
         "--finish-within", "2s", "--worst", "20", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    report = json.loads(done.stdout)
    finished, claimed = report["finished"], report["claimed"]
    assert finished["misses"]["renewal_failed"] == 1, finished  # the stalled worker's run
    assert finished["misses"]["timed_out"] == 1, finished
    assert finished["misses"]["handler_failed"] == 1, finished
    assert finished["missed"] is True
    # The second "narrow" waited on the first: late only by the time the limit held it.
    assert claimed["excluded"]["throttled"] >= 1, claimed
    verdicts = {o["execution_id"]: o["verdict"] for o in report["worst"]}
    assert verdicts[stall.id] == "met", "claimed at once, before its worker stopped"
    assert list(verdicts.values()).count("throttled") >= 1, verdicts

"""Real OS processes sharing one SQLite file: exactly-once completion under fenced leases.

Four worker processes (``_worker.py``) claim and complete 5,000 executions. Some
batches stall past their lease so that the executions are taken over and the
stalled completion must be refused. Afterwards the store's audit trail and the
workers' own logs must show that every execution SUCCEEDED through exactly one
accepted completion, made by the holder of its latest lease while that lease was
live, and that no execution was ever held by two live leases at once.

Each worker first runs a drill on a few executions that only it claims, which makes
sure, whatever the timing, that a completion is refused both when its lease merely
expired and when the same worker already holds a newer, live lease of the execution
(where only the epoch tells the two leases apart).

Overlap is judged on the store's own times, without tolerance: the CLAIMED
transition's ``at`` is the claim's now, and the lease's ``lease_until`` is that same
now plus the ttl. On SQLite the store's now is this machine's wall clock, so a wall
clock stepped backwards mid-run (NTP) would defeat the store and this test alike.
The checks are shared with the PostgreSQL tests (``_audit.py``).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

import fencepost
from tests.integration import _audit

EXECUTIONS = 5_000
WORKERS = 4
MAX_ATTEMPTS = 50  # takeovers count as attempts; never let them dead-letter an execution
DEADLINE = 90.0  # seconds the workers get before they are killed and the test fails
DRILL_SIZE = 8  # executions per worker that only that worker claims (see _worker.py)
MAX_BATCH = 32  # the most executions a worker claims at once
WORKER = Path(__file__).with_name("_worker.py")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_processes_complete_each_execution_exactly_once_under_fenced_leases(
    tmp_path: Path,
) -> None:
    url = "sqlite:///" + str(tmp_path / "fencepost.db")  # tmp_path is absolute: sqlite:////...
    # Each worker drills on DRILL_SIZE executions of its own job; all share the rest.
    jobs = [f"drill-worker-{n}" for n in range(WORKERS) for _ in range(DRILL_SIZE)]
    jobs += ["work"] * (EXECUTIONS - len(jobs))
    with fencepost.connect(url) as store:
        ids = [
            e.id
            for e in store.submit_many(
                {"job": job, "inputs": {"n": n}, "max_attempts": MAX_ATTEMPTS}
                for n, job in enumerate(jobs)
            )
        ]
    assert len(set(ids)) == EXECUTIONS

    seed = random.randrange(2**32)
    where = f"(worker seed base {seed}; logs in {tmp_path})"
    logs = [tmp_path / f"worker-{n}.jsonl" for n in range(WORKERS)]
    limits = [str(DRILL_SIZE), str(MAX_BATCH)]
    _audit.run_processes(
        [
            [sys.executable, str(WORKER), url, str(log), f"worker-{n}", str(seed + n), *limits]
            for n, log in enumerate(logs)
        ],
        tmp_path,
        deadline=DEADLINE,
        what=where,
    )
    records = _audit.read_jsonl(logs)

    with fencepost.connect(url) as store:
        executions = {e.id: e for e in _audit.all_executions(store)}
        audit = {id_: store.transitions(id_) for id_ in ids}
    assert executions.keys() == set(ids), where

    ttl = {r["owner"]: r["ttl"] for r in records if r["kind"] == "lease"}
    kinds = _audit.check_exactly_once(executions, audit, ttl, where=where)
    _audit.check_worker_logs(records, audit, where=where, wall_clock_is_store_clock=True)
    # Stalls happened, and their completions were refused in each way a fence must
    # refuse one: the lease merely expired (only `lease_until > now` refuses it); another
    # process took the execution over; this same process holds a newer, live lease
    # (only the epoch tells them apart). The workers' drills guarantee the first and last.
    # No worker completes a lease twice.
    assert kinds[_audit.EXPIRED] > 0, f"{kinds} {where}"
    assert kinds[_audit.TAKEN_OVER] > 0, f"{kinds} {where}"
    assert kinds[_audit.SAME_OWNER_NEWER_LEASE] > 0, f"{kinds} {where}"
    assert kinds[_audit.COMPLETED_TWICE] == 0, f"{kinds} {where}"

"""Concurrent fenced calls on a real PostgreSQL server: one accepted completion, always.

Threads race to complete one execution through one store (one pooled connection
each), and eight worker processes (``_worker.py``, the same worker as the SQLite
test) drain 50,000 executions with stalls and takeovers. The verdict comes from the
store's audit trail (``_audit.py``): exactly one COMPLETED transition per execution,
by its latest lease while that lease was live, and a STALE_REFUSED record for every
other attempt.

Eight threads holding one identical lease are told apart by the row alone: the
first completion finishes it. Only the second race, where half the threads hold
the lease the same owner held before, and the drills of the processes, need the
epoch in the fence to pass.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import fencepost
from fencepost import Event, Lease, StaleLease, State, Store
from fencepost.domain.machine import stale_reason
from tests.integration import _audit, _pg
from tests.postgres import require_postgres

THREADS = 8
ROUNDS = 20


def _race(store: Store, leases: Sequence[Lease]) -> tuple[list[int | None], bool]:
    """Thread ``n`` completes ``leases[n]``, all released at once by a barrier.

    Returns, per thread, ``n`` if its completion was accepted, else None (StaleLease);
    and whether all the calls were in flight together at some instant.
    """
    barrier = threading.Barrier(len(leases))
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * len(leases)

    def complete(n: int) -> int | None:
        barrier.wait(timeout=30)
        start = time.perf_counter()
        try:
            store.complete(leases[n], {"thread": n})
        except StaleLease:
            return None
        finally:
            spans[n] = (start, time.perf_counter())
        return n

    with ThreadPoolExecutor(len(leases)) as pool:
        outcomes = list(pool.map(complete, range(len(leases))))
    return outcomes, max(s for s, _ in spans) < min(e for _, e in spans)


def _open(schema: str) -> Store:
    # One connection per thread, opened up front, so that the calls really overlap.
    return fencepost.connect(_pg.url(schema, pool_min=THREADS, pool_max=THREADS))


@pytest.mark.timeout(60)
def test_eight_threads_complete_the_same_lease_and_exactly_one_wins() -> None:
    require_postgres()
    with _pg.fresh_schema() as schema:
        with _open(schema) as store:
            store.submit_many({"job": "race", "inputs": {"round": n}} for n in range(ROUNDS))
            leases = store.claim("racer", limit=ROUNDS, ttl=60)
            assert len(leases) == ROUNDS
            winners = {}
            together = 0
            for lease in leases:
                outcomes, overlapped = _race(store, [lease] * THREADS)
                together += overlapped
                accepted = [n for n in outcomes if n is not None]
                assert len(accepted) == 1, f"round {lease.execution_id}: {outcomes}"
                winners[lease.execution_id] = accepted[0]
        audit = _pg.load_audit(schema)
        executions = _pg.load_executions(schema)

    for id_, winner in winners.items():
        trail = audit[id_]
        context = f"execution {id_}: {_audit.show(trail)}"
        events = Counter(t.event for t in trail)
        assert events == {
            Event.SUBMITTED: 1,
            Event.CLAIMED: 1,
            Event.COMPLETED: 1,
            Event.STALE_REFUSED: THREADS - 1,
        }, context
        assert all(t.epoch == 1 and t.actor == "racer" for t in trail[1:]), context
        refusals = [t for t in trail if t.event == Event.STALE_REFUSED]
        assert {t.reason for t in refusals} == {stale_reason("complete")}, context
        # Every refusal came after the accepted completion (audit order).
        done = next(t for t in trail if t.event == Event.COMPLETED)
        assert all(t.seq > done.seq for t in refusals), context
        assert executions[id_].state == State.SUCCEEDED, context
        assert executions[id_].result == {"thread": winner}, context
    # The race was real: in some rounds all eight calls were in flight at once.
    assert together > 0, "no round had its eight calls in flight together"


@pytest.mark.timeout(60)
def test_eight_threads_race_with_live_and_superseded_leases_of_one_owner() -> None:
    """Half the threads hold the live lease, half the expired one it replaced.

    The same owner claimed twice, so the two leases differ only in their epoch: a
    completion may be accepted only from the live lease, whoever gets the row first.
    """
    require_postgres()
    ttl = 0.5
    with _pg.fresh_schema() as schema:
        with _open(schema) as store:
            store.submit_many({"job": "race", "inputs": {"round": n}} for n in range(ROUNDS))
            old = store.claim("racer", limit=ROUNDS, ttl=ttl)
            time.sleep(ttl + 0.05)  # the server's now at the claim is no later than this
            new = {lease.execution_id: lease for lease in store.claim("racer", limit=ROUNDS)}
            assert len(old) == len(new) == ROUNDS
            assert {lease.epoch for lease in new.values()} == {2}
            winners = {}
            for stale in old:
                live = new[stale.execution_id]
                outcomes, _ = _race(store, [stale, live] * (THREADS // 2))
                accepted = [n for n in outcomes if n is not None]
                assert len(accepted) == 1, f"round {stale.execution_id}: {outcomes}"
                assert accepted[0] % 2 == 1, (
                    f"thread {accepted[0]} completed {stale.execution_id} with the expired "
                    f"lease of epoch {stale.epoch}, superseded by epoch {live.epoch}"
                )
                winners[stale.execution_id] = accepted[0]
        audit = _pg.load_audit(schema)
        executions = _pg.load_executions(schema)

    for id_, winner in winners.items():
        trail = audit[id_]
        context = f"execution {id_}: {_audit.show(trail)}"
        completions = [(t.event, t.epoch) for t in trail if t.event == Event.COMPLETED]
        assert completions == [(Event.COMPLETED, 2)], context
        refused = Counter(t.epoch for t in trail if t.event == Event.STALE_REFUSED)
        assert refused == {1: THREADS // 2, 2: THREADS // 2 - 1}, context
        assert executions[id_].result == {"thread": winner}, context


EXECUTIONS = 50_000
WORKERS = 8
MAX_ATTEMPTS = 50  # takeovers count as attempts; never let them dead-letter an execution
DEADLINE = 100.0  # seconds the workers get before they are killed and the test fails
DRILL_SIZE = 8  # executions per worker that only that worker claims (see _worker.py)
MAX_BATCH = 64  # the most executions a worker claims at once
SUBMIT_BATCH = 5_000
WORKER = Path(__file__).with_name("_worker.py")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_eight_processes_drain_50000_executions_exactly_once(tmp_path: Path) -> None:
    require_postgres()
    with _pg.fresh_schema() as schema:
        jobs = [f"drill-worker-{n}" for n in range(WORKERS) for _ in range(DRILL_SIZE)]
        jobs += ["work"] * (EXECUTIONS - len(jobs))
        with fencepost.connect(_pg.url(schema)) as store:
            for start in range(0, EXECUTIONS, SUBMIT_BATCH):
                store.submit_many(
                    {"job": job, "inputs": {"n": n}, "max_attempts": MAX_ATTEMPTS}
                    for n, job in enumerate(jobs[start : start + SUBMIT_BATCH], start)
                )
        _pg.analyze(schema)

        seed = random.randrange(2**32)
        where = f"(schema {schema}, worker seed base {seed}, logs in {tmp_path})"
        logs = [tmp_path / f"worker-{n}.jsonl" for n in range(WORKERS)]
        url = _pg.url(schema, pool_min=1, pool_max=2)
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
        executions = _pg.load_executions(schema)
        audit = _pg.load_audit(schema)

    assert len(executions) == EXECUTIONS, where
    ttl = {r["owner"]: r["ttl"] for r in records if r["kind"] == "lease"}
    kinds = _audit.check_exactly_once(executions, audit, ttl, where=where)
    _audit.check_worker_logs(
        records, audit, where=where, wall_clock_is_store_clock=_pg.server_is_local()
    )
    assert kinds[_audit.EXPIRED] > 0, f"{kinds} {where}"
    assert kinds[_audit.TAKEN_OVER] > 0, f"{kinds} {where}"
    assert kinds[_audit.SAME_OWNER_NEWER_LEASE] > 0, f"{kinds} {where}"
    assert kinds[_audit.COMPLETED_TWICE] == 0, f"{kinds} {where}"

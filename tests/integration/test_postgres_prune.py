"""Prune, stats and slo on a real PostgreSQL server: indexes read, claims never held up.

The big test prunes 20,000 finished executions in batches of 500 while another
thread keeps submitting, claiming and completing fresh ones through its own store.
Each batch is one short statement, so no claim waits for the prune: the claimer's
sessions refuse to wait more than two seconds for any lock (``lock_timeout``, timed
by the server, so a loaded test machine cannot trip it, and a lock the prune held
would), and after each step of the prune (a batch, a dropped day) it goes on only
once the claimer has completed a few claims, so claims do run while it lasts
however quick it is. The slowest claim is reported (``-s`` shows it).
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import fencepost
from fencepost import State, Store
from fencepost.store.postgres.connection import QUERIES
from fencepost.testing import ManualClock
from fencepost.timing.planning import HELD
from tests.integration import _pg
from tests.postgres import require_postgres

OLD = 20_000
BATCH = 500
#: The longest the claimer's statements may wait for a lock (PostgreSQL's lock_timeout).
MAX_LOCK_WAIT = "2s"
#: Claims the claimer completes after each step of the prune before it goes on.
CLAIMS_PER_STEP = 5


@pytest.fixture
def schema() -> Any:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


def plan(schema: str, block: str, params: dict[str, Any]) -> str:
    """The plan of a query block, sequential scans disfavoured: which indexes it can use."""
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute("SET enable_seqscan = off")
        text = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {QUERIES[block]}", params))
    # The history is partitioned by day (migration 10); a partition's index is named
    # after its parent's (executions_p20261203_finished reads as executions_finished).
    return re.sub(r"\b(executions|execution_data|transitions)_p\d{8}_", r"\1_", text)


def test_reports_and_prune_read_their_indexes(schema: str) -> None:
    fencepost.connect(_pg.url(schema)).close()
    now = datetime.now(UTC)
    params: dict[str, Any] = defaultdict(
        lambda: None,
        now=now,
        start=now - timedelta(hours=1),
        held=HELD,
        cutoff=now - timedelta(days=1),
        batch=BATCH,
    )
    # The partial indexes' WHERE clauses must be implied by the queries' own.
    assert "executions_finished" in plan(schema, "prune_batch", params)
    assert "executions_finished" in plan(schema, "count_prunable", params)
    stats = plan(schema, "stats", params)
    assert "transitions_lease_events" in stats
    # The window's TIMED_OUT and FAILED transitions (stats' error classes), by time too.
    assert "transitions_failure_events" in stats
    # The due backlog reads a claimable partial index: the plain one or the queues' (same
    # WHERE clause, ordered by queue first), whichever the planner finds cheaper.
    assert "executions_claimable" in stats or "executions_queue_claimable" in stats
    assert "executions_active_bucket" in plan(schema, "bucket_counts_unfinished", params)


def _fill_old(schema: str, count: int) -> None:
    """``count`` SUCCEEDED executions, finished two days ago by the server's clock."""
    clock = ManualClock(_pg.server_now() - timedelta(days=2))
    with fencepost.connect(_pg.url(schema), clock=clock) as store:
        for _ in range(count // 1000):
            store.submit_many([{"job": "old", "inputs": {"n": 1}}] * 1000)
            leases = store.claim("setup", limit=1000, jobs=["old"])
            assert store.complete_many([(lease, "done") for lease in leases]) == [None] * 1000


@pytest.mark.parametrize("whole_day", [False, True], ids=["by-row", "whole-day"])
def test_prune_does_not_hold_up_claims(schema: str, whole_day: bool) -> None:
    """Two days of history: one execution still waiting keeps its day (made two days
    ago), whose finished rows are deleted in batches (by-row); without it the day is
    detached and dropped whole, in one step (whole-day). Claims carry on either way."""
    _fill_old(schema, OLD)
    if not whole_day:
        clock = ManualClock(_pg.server_now() - timedelta(days=2))
        with fencepost.connect(_pg.url(schema), clock=clock) as store:
            store.submit("keeper")
    _pg.analyze(schema)
    # A claim, submit or completion waiting that long for a lock fails, and the test with it.
    no_waiting = f"-c%20lock_timeout%3D{MAX_LOCK_WAIT}"
    claimer = fencepost.connect(_pg.url(schema, pool_min=1, pool_max=2, options=no_waiting))
    pruner = fencepost.connect(_pg.url(schema, pool_min=1, pool_max=2))
    waits: list[float] = []
    fresh: list[str] = []
    started = threading.Event()
    stop = threading.Event()
    failures: list[BaseException] = []

    def claim_and_complete(store: Store) -> None:
        try:
            while not stop.is_set():
                fresh.extend(e.id for e in store.submit_many([{"job": "fresh"}] * 10))
                begun = time.perf_counter()
                leases = store.claim("worker", limit=10, jobs=["fresh"])
                waits.append(time.perf_counter() - begun)
                store.complete_many([(lease, "ok") for lease in leases])
                started.set()
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            started.set()

    totals: list[int] = []
    held = 0.0  # seconds the prune spent in step_done, waiting for claims

    def step_done(total: int) -> None:
        """After each step, let the claimer complete CLAIMS_PER_STEP claims (from the
        prune's thread, mid-call: the whole-day drop is one step of tens of ms)."""
        nonlocal held
        totals.append(total)
        begun = time.perf_counter()
        enough = len(waits) + CLAIMS_PER_STEP
        while len(waits) < enough and not failures:
            assert time.perf_counter() - begun < 30, "the claimer stopped claiming mid-prune"
            time.sleep(0.001)
        held += time.perf_counter() - begun

    thread = threading.Thread(target=claim_and_complete, args=(claimer,), daemon=True)
    thread.start()
    try:
        assert started.wait(timeout=30)
        assert pruner.prune(older_than=timedelta(days=1), dry_run=True) == OLD
        before = len(waits)
        prune_started = time.perf_counter()
        pruned = pruner.prune(older_than=timedelta(days=1), batch=BATCH, on_batch=step_done)
        took = time.perf_counter() - prune_started - held
        during = waits[before:]
        time.sleep(0.2)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert failures == []
    slowest = max(during, default=0.0)
    print(
        f"\nprune of {OLD:,} in batches of {BATCH}: {took:.2f} s; {len(during)} claims meanwhile, "
        f"slowest {slowest * 1000:.1f} ms"
    )
    assert pruned == OLD
    assert totals == ([OLD] if whole_day else list(range(BATCH, OLD + 1, BATCH)))
    with _pg.connect() as conn:
        days = conn.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass",
            (f"{schema}.executions",),
        ).fetchone()
    # The old day went with its rows, or stayed (its keeper); the day after it (made
    # ahead of it), today and two days ahead stay.
    assert days == ((4,) if whole_day else (5,))
    assert len(during) >= CLAIMS_PER_STEP * len(totals), "the claimer claimed during the prune"
    with _pg.connect() as conn:
        left = conn.execute(
            f"SELECT (SELECT count(*) FROM {schema}.executions WHERE job = 'old'),"
            f" (SELECT count(*) FROM {schema}.execution_data d"
            f"  LEFT JOIN {schema}.executions e ON e.id = d.execution_id WHERE e.id IS NULL),"
            f" (SELECT count(*) FROM {schema}.transitions t"
            f"  LEFT JOIN {schema}.executions e ON e.id = t.execution_id WHERE e.id IS NULL)"
        ).fetchone()
    assert left == (0, 0, 0), "no old execution, and no payload or audit row without one"
    with fencepost.connect(_pg.url(schema, pool_min=1, pool_max=1)) as store:
        while leases := store.claim("worker", limit=100, jobs=["fresh"]):
            store.complete_many([(lease, "ok") for lease in leases])
        stats = store.stats()
        assert stats.by_job["fresh"] == dict.fromkeys(State, 0) | {State.SUCCEEDED: len(fresh)}
        assert set(stats.by_job) == ({"fresh"} if whole_day else {"fresh", "keeper"})
    claimer.close()
    pruner.close()

"""SQLite's fenced batches, and the query plans of their statements.

A batch of heartbeats is one ``UPDATE executions`` over a JSON array of fences per
round (see :func:`fencepost.store.batching.rounds`). A batch of completions runs its
fenced statement once per lease, one prepared statement stepped (cheaper per row here
than a set-based ``UPDATE ... FROM``: ``SqlDialect._fences_row_by_row``), and runs it
again lease by lease only when the batch's count says one was refused. The statements
are counted on the store's own connection (``sqlite3``'s trace callback sees each step
of an ``executemany``), and each block's query plan is read with EXPLAIN QUERY PLAN.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import fencepost
from fencepost.domain.errors import StaleLease
from fencepost.domain.models import Lease
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.store.sqlite.connection import QUERIES
from fencepost.testing import ManualClock
from tests.sqlite_statements import statements, without_comments

BATCH = 64
#: How the fenced statements of completing and renewing begin (after UPDATE ... SET).
DONE = "state = 'SUCCEEDED'"
RENEW = "lease_until = max("


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "fenced.db"


@pytest.fixture
def store(path: Path) -> Iterator[Store]:
    with fencepost.connect(f"sqlite:///{path}", clock=ManualClock(0)) as opened:
        yield opened


def _fenced(store: Store, call: Callable[[], object], sets: str) -> list[str]:
    """The fenced ``UPDATE executions ... SET <sets>`` statements ``call()`` runs on the
    store's connection (not the audit of a refusal, which marks the row it refuses)."""
    head = f"UPDATE executions SET {sets}"
    ran = statements(store, call)
    return [s for s in ran if " ".join(without_comments(s).split()).startswith(head)]


def _leases(store: Store) -> list[Lease]:
    store.submit_many([{"job": "j"} for _ in range(BATCH)])
    return store.claim("w", limit=BATCH, ttl=30)


def test_a_batch_of_completions_steps_each_lease_once(store: Store) -> None:
    leases = _leases(store)
    batch = [(lease, {"n": i}) for i, lease in enumerate(leases)]
    verdicts: list[StaleLease | None] = []
    updates = _fenced(store, lambda: verdicts.extend(store.complete_many(batch)), DONE)
    assert len(updates) == BATCH, "no lease run twice while none is refused"
    assert verdicts == [None] * BATCH
    assert [store.get(lease.execution_id).result for lease in leases] == [
        {"n": i} for i in range(BATCH)
    ]


def test_a_refusal_in_a_batch_runs_it_again_lease_by_lease(store: Store) -> None:
    leases = _leases(store)
    store.submit("j")
    (other,) = store.claim("w2")
    forged = replace(other, epoch=other.epoch + 7)  # stale, and its id not in the batch
    batch = [(lease, {"n": i}) for i, lease in enumerate(leases)] + [(forged, "no")]
    verdicts: list[StaleLease | None] = []
    updates = _fenced(store, lambda: verdicts.extend(store.complete_many(batch)), DONE)
    assert len(updates) == 2 * (BATCH + 1), "the batch once, then lease by lease"
    assert verdicts[:BATCH] == [None] * BATCH
    assert isinstance(verdicts[BATCH], StaleLease)
    assert [store.get(lease.execution_id).result for lease in leases] == [
        {"n": i} for i in range(BATCH)
    ]
    assert store.get(other.execution_id).state is State.RUNNING
    completed = [t for t in store.transitions(leases[0].execution_id) if t.event is Event.COMPLETED]
    assert len(completed) == 1, "the batch undone before its rerun: one record"


def test_a_lease_repeated_in_a_batch_takes_a_second_round(store: Store) -> None:
    leases = _leases(store)
    batch = [(lease, 1) for lease in leases] + [(leases[0], 2)]
    verdicts: list[StaleLease | None] = []
    updates = _fenced(store, lambda: verdicts.extend(store.complete_many(batch)), DONE)
    assert len(updates) == BATCH + 1, updates
    assert verdicts[:BATCH] == [None] * BATCH
    assert isinstance(verdicts[BATCH], StaleLease)
    assert store.get(leases[0].execution_id).result == 1


def test_a_batch_of_heartbeats_is_one_fenced_statement(store: Store) -> None:
    leases = _leases(store)
    beats = [(lease, {"done": i} if i % 2 else None) for i, lease in enumerate(leases)]
    renewed: list[object] = []
    updates = _fenced(store, lambda: renewed.extend(store.heartbeat_many(beats, ttl=60)), RENEW)
    assert len(updates) == 1, updates
    assert not any(isinstance(r, StaleLease) for r in renewed)
    assert store.get(leases[3].execution_id).progress == {"done": 3}


@pytest.mark.parametrize("block", ["complete_fenced", "heartbeat_fenced"])
def test_a_fenced_block_reaches_each_row_by_its_key(store: Store, path: Path, block: str) -> None:
    params = {"now": 0, "ttl": 1, "leases": "[]", "id": "x", "owner": "w", "epoch": 1}
    with sqlite3.connect(path) as conn:
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + QUERIES[block], params)]
    assert "SEARCH executions USING PRIMARY KEY (id=?)" in plan, plan
    assert not any(step.startswith("SCAN executions") for step in plan), plan

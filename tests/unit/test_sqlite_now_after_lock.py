"""A SQLite write that binds the store's now reads it once it holds the file's lock.

SQLite's now is the process's clock, and a writer may wait up to its busy timeout for
the lock: a now read before that wait would backdate what the write stores (a node's
expiry, a schedule's lease, a command's delivery). The one-statement writes written
once for both dialects (``store/verbs/sql_*.py``) therefore run in a write transaction
on SQLite and read the clock inside it; on PostgreSQL the statement reads the server's
clock, in autocommit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from fencepost.domain.nodes import Registration
from fencepost.store.executors import Plan
from fencepost.store.sqlite.store import SqliteStore
from fencepost.store.values import StoreConfig
from fencepost.store.verbs import sql_operating, sql_schedules
from fencepost.testing import ManualClock
from fencepost.testing.clock import MANUAL_EPOCH


class CountingClock(ManualClock):
    """A pinned clock that counts its reads."""

    reads = 0

    def now(self):  # type: ignore[no-untyped-def]
        self.reads += 1
        return super().now()


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    opened = SqliteStore(str(tmp_path / "s.db"), StoreConfig(clock=CountingClock(0)))
    opened.add_schedule("job", every=60, id="s")
    return opened


def _register(store: SqliteStore) -> Plan[object]:
    registration = Registration(node_id="n", kind="worker", buckets=None, ttl=timedelta(seconds=30))
    return sql_operating.register_node_plan(store, registration)  # type: ignore[return-value]


def _acquire(store: SqliteStore) -> Plan[object]:
    return sql_schedules.acquire_schedules_plan(store, "m", limit=10, ttl=timedelta(seconds=30))  # type: ignore[return-value]


@pytest.mark.parametrize("build", [_register, _acquire], ids=["register_node", "acquire"])
def test_the_clock_is_read_inside_the_write_transaction_not_before(
    store: SqliteStore, build: Callable[[SqliteStore], Plan[object]]
) -> None:
    clock = store.clock
    assert isinstance(clock, CountingClock)
    clock.set(60)  # the schedule is due
    before = clock.reads
    plan = build(store)
    assert plan.atomic, "runs in BEGIN IMMEDIATE: the lock is held before its steps start"
    assert clock.reads == before, "nothing read while the plan is built"
    clock.set(100)  # as if the write had waited 40 s for the lock
    found = store._run(plan)
    later = MANUAL_EPOCH + timedelta(seconds=100)
    if build is _register:
        assert (found.heartbeat_at, found.expires_at) == (later, later + timedelta(seconds=30))  # type: ignore[attr-defined]
    else:
        [acquired] = found  # type: ignore[misc]
        assert acquired.lease_until == later + timedelta(seconds=30)


def test_a_registration_renewed_after_a_wait_is_live_for_its_whole_ttl(
    store: SqliteStore,
) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    plan = _register(store)
    clock.set(29)  # built at 0, run at 29: live until 59, not 30
    store._run(plan)
    clock.set(45)
    assert [n.id for n in store.nodes(live_only=True)] == ["n"]

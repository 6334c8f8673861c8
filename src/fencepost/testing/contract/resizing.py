"""The contract of the bucket count: :meth:`Store.resize_buckets` and the count it records.

A resize moves every unfinished execution (SCHEDULED, RETRY_WAIT, RUNNING) to the
bucket a submit under the new count gives it, leaves finished ones alone, is
refused while live nodes run with the old count (unless forced), and refuses a
count that is not an int from 1 to 65536 before anything is written. How a count
is recorded in a database and refused to a process that asks for another is shown
on the real databases, with real processes (tests/integration/test_num_buckets_stored.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Execution
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import ContractFixtures
from fencepost.testing.factory import ExecutionFactory

#: Counts every store refuses, naming ``num_buckets``, with nothing changed.
BAD_COUNTS: list[Any] = [0, -1, 65_537, 10**30, 1.5, "8", "\x00", True, None, [8]]


def _expected_bucket(execution: Execution, num_buckets: int) -> int:
    """The bucket a submit under ``num_buckets`` gives ``execution``."""
    key = execution.bucket_key if execution.bucket_key is not None else execution.id
    return bucket_for(key, num_buckets)


def _buckets(store: Store) -> dict[str, int]:
    """Every execution's bucket, by id."""
    return {e.id: e.bucket for e in store.query(state=list(State), limit=10_000).items}


class BucketCountContract(ContractFixtures):
    """Changing the bucket count: the executions move with it, or nothing changes."""

    def test_a_resize_moves_every_unfinished_execution(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        waiting = [store.submit("job", bucket_key=f"tenant-{n}") for n in range(6)]
        waiting += [store.submit("job") for _ in range(6)]  # their ids decide
        running = make.running(bucket_key="tenant-running")
        retrying = make.retry_waiting()
        done = make.succeeded(bucket_key="tenant-done")
        before = _buckets(store)

        resized = store.resize_buckets(7)

        unfinished = [*waiting, store.get(running.execution_id), retrying]
        for e in unfinished:
            assert store.get(e.id).bucket == _expected_bucket(e, 7), e
        moved = sum(before[e.id] != _expected_bucket(e, 7) for e in unfinished)
        assert resized.previous == 64
        assert resized.num_buckets == 7
        assert resized.unfinished == len(unfinished) == 14
        assert resized.moved == moved > 0
        assert resized.live_nodes == ()
        assert store.get(done.id).bucket == before[done.id], "finished: the bucket it ran in"
        assert store.config.num_buckets == 7
        assert store.bucket_report().num_buckets == 7
        # A submit under the new count, and a claim from a bucket of it, agree.
        new = store.submit("job", bucket_key="tenant-0")
        assert new.bucket == store.get(waiting[0].id).bucket == bucket_for("tenant-0", 7)
        claimed = store.claim("w", limit=20, jobs=["job"], buckets=[new.bucket])
        assert {lease.execution_id for lease in claimed} == {
            e.id for e in [*waiting, new] if store.get(e.id).bucket == new.bucket
        }
        # The lease held through the resize still fences: its holder completes it.
        assert store.complete(running, "ok").state is State.SUCCEEDED
        assert store.get(running.execution_id).bucket == _expected_bucket(
            store.get(running.execution_id), 7
        )

    def test_a_resize_to_the_recorded_count_moves_only_misplaced_executions(
        self, store: Store
    ) -> None:
        for n in range(5):
            store.submit("job", bucket_key=f"tenant-{n}")
        before = _buckets(store)
        again = store.resize_buckets(64)
        assert (again.previous, again.num_buckets, again.unfinished, again.moved) == (64, 64, 5, 0)
        assert _buckets(store) == before

    def test_a_resize_is_refused_while_live_nodes_run(
        self, store: Store, clock: ManualClock
    ) -> None:
        executions = [store.submit("job", bucket_key=f"tenant-{n}") for n in range(8)]
        store.register_node("worker-a", buckets=[0, 1, 2, 3], ttl=10)
        store.register_node("worker-b", ttl=10)
        before = _buckets(store)

        with pytest.raises(ValidationError) as refused:
            store.resize_buckets(16)
        assert refused.value.field == "num_buckets"
        assert "worker-a, worker-b" in refused.value.message
        assert "nothing was changed" in refused.value.message
        assert _buckets(store) == before
        assert store.config.num_buckets == 64
        assert store.bucket_report().num_buckets == 64

        # The recorded count is no change: live nodes are no reason to refuse it.
        assert store.resize_buckets(64).live_nodes == ()

        forced = store.resize_buckets(16, force=True)
        assert forced.live_nodes == ("worker-a", "worker-b")
        assert all(store.get(e.id).bucket == _expected_bucket(e, 16) for e in executions)

        clock.advance(10)  # both registrations lapse at expires_at (live while now < it)
        assert store.resize_buckets(32).live_nodes == ()
        assert store.config.num_buckets == 32

    @pytest.mark.parametrize("count", BAD_COUNTS, ids=repr)
    def test_a_bad_count_is_refused_and_nothing_changes(self, store: Store, count: Any) -> None:
        for n in range(3):
            store.submit("job", bucket_key=f"tenant-{n}")
        before = _buckets(store)
        with pytest.raises(ValidationError) as refused:
            store.resize_buckets(count)
        assert refused.value.field == "num_buckets"
        assert _buckets(store) == before
        assert store.config.num_buckets == 64
        assert store.bucket_report().num_buckets == 64

    def test_force_must_be_a_bool(self, store: Store) -> None:
        with pytest.raises(ValidationError) as refused:
            store.resize_buckets(8, force="yes")  # type: ignore[arg-type]
        assert refused.value.field == "force"
        assert store.config.num_buckets == 64

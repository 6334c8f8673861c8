"""``Store.complete`` returns what it wrote, on every backend (memory, SQLite, PostgreSQL).

The completion reads the execution back inside its own transaction (issue #15): the
answer is exactly what :meth:`Store.get` reads afterwards, and a stale completion
still raises :class:`StaleLease` and changes nothing but its audit record.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fencepost.domain.errors import ResultInvalid, StaleLease
from fencepost.domain.models import Fence
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def store(store_factory: Callable[..., Store], clock: ManualClock) -> Store:
    return store_factory(clock)


def test_complete_returns_exactly_what_get_reads(store: Store, clock: ManualClock) -> None:
    submitted = store.submit("job", {"n": 1}, bucket_key="tenant")
    (lease,) = store.claim("w1", ttl=30)
    store.heartbeat(lease, progress={"step": 2})
    clock.advance(1.5)

    done = store.complete(lease, {"answer": [1, 2.5, "x", None, {"deep": True}]})

    assert done == store.get(submitted.id)
    assert done.state is State.SUCCEEDED
    assert done.result == {"answer": [1, 2.5, "x", None, {"deep": True}]}
    assert done.inputs == {"n": 1}
    assert done.progress == {"step": 2}
    assert done.lease_owner is None
    assert done.lease_until is None
    assert done.updated_at == clock.now()
    assert done.epoch == lease.epoch
    assert done.attempt == 1


def test_complete_after_a_failed_attempt_returns_the_stored_error(
    store: Store, clock: ManualClock
) -> None:
    store.submit("job", max_attempts=2)
    (first,) = store.claim("w1", ttl=30)
    store.fail(first, "boom", retry_in=0)
    (second,) = store.claim("w1", ttl=30)

    done = store.complete(second, None)

    assert done == store.get(second.execution_id)
    assert done.result is None
    assert done.attempt == 2


def test_a_stale_complete_raises_and_changes_nothing(store: Store, clock: ManualClock) -> None:
    store.submit("job")
    (lease,) = store.claim("w1", ttl=10)
    clock.advance(10)  # lease_until == now: expired
    before = store.get(lease.execution_id)
    trail = store.transitions(lease.execution_id)

    with pytest.raises(StaleLease):
        store.complete(lease, {"late": True})

    assert store.get(lease.execution_id) == before
    after = store.transitions(lease.execution_id)
    assert after[: len(trail)] == trail
    (refusal,) = after[len(trail) :]
    assert refusal.event is Event.STALE_REFUSED
    assert refusal.from_state is refusal.to_state is State.RUNNING
    assert (refusal.actor, refusal.epoch) == ("w1", lease.epoch)


def test_a_forged_fence_is_refused_without_a_change(store: Store) -> None:
    store.submit("job")
    (lease,) = store.claim("w1", ttl=30)
    before = store.get(lease.execution_id)

    with pytest.raises(StaleLease):
        store.complete(Fence(execution_id=lease.execution_id, owner="w2", epoch=lease.epoch), 1)
    with pytest.raises(StaleLease):
        store.complete(Fence(execution_id="no-such-id", owner="w1", epoch=1), 1)

    assert store.get(lease.execution_id) == before
    assert store.complete(lease, 2) == store.get(lease.execution_id)


def test_an_invalid_result_fails_the_execution_as_before(store: Store) -> None:
    store.submit("job")
    (lease,) = store.claim("w1", ttl=30)

    with pytest.raises(ResultInvalid):
        store.complete(lease, {"not json": {1, 2}})

    failed = store.get(lease.execution_id)
    assert failed.state is State.FAILED
    assert failed.error is not None
    assert failed.error.startswith("result_invalid: ")
    with pytest.raises(StaleLease):
        store.complete(lease, {"late": True})

"""A store tells its observers of the leasing work it did (fencepost.store.observers), on
every backend and through AsyncStore: each event once, with exact counts, and an
observer that fails never fails the verb."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

import pytest

import fencepost
from fencepost.domain.errors import ResultInvalid, StaleLease
from fencepost.domain.models import Occurrence
from fencepost.store.asyncstore import AsyncStore
from fencepost.store.base import Store
from fencepost.store.observers import (
    AttemptsEnded,
    LeasesClaimed,
    LeasesExpired,
    OccurrencesStored,
    StaleRefused,
    StoreEvent,
)
from fencepost.testing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(store_factory: Callable[..., Store], clock: ManualClock) -> Store:
    return store_factory(clock)


@pytest.fixture
def events(store: Store) -> list[StoreEvent]:
    seen: list[StoreEvent] = []
    store.observers.add(seen.append)
    return seen


def test_a_claim_tells_its_leases_and_their_ttl(store: Store, events: list[StoreEvent]) -> None:
    store.submit("job")
    store.submit("job")
    assert store.claim("w", jobs=["other"]) == []
    leases = store.claim("w", limit=5, ttl=12)
    assert events == [LeasesClaimed(leases, timedelta(seconds=12))]


def test_each_ending_is_told_once_with_its_outcome(
    store: Store, events: list[StoreEvent], clock: ManualClock
) -> None:
    for _ in range(7):
        store.submit("job", max_attempts=1)
    a, b, c, d, e, f, g = store.claim("w", limit=7, ttl=30)
    events.clear()
    store.complete(a, {"ok": True})
    store.fail(b, "boom")
    store.fail(c, "slow", timed_out=True)
    store.release(d)
    store.snooze(e, 60)
    store.abort(f)
    with pytest.raises(ResultInvalid):
        store.complete(g, {"not json": object()})
    assert events == [
        AttemptsEnded("succeeded"),
        AttemptsEnded("failed"),
        AttemptsEnded("timed_out"),
        AttemptsEnded("released"),
        AttemptsEnded("snoozed"),
        AttemptsEnded("cancelled"),
        AttemptsEnded("result_invalid"),
    ]


def test_a_snooze_past_its_bound_is_a_failed_attempt(
    store: Store, events: list[StoreEvent]
) -> None:
    store.submit("job")
    (lease,) = store.claim("w")
    events.clear()
    store.snooze(lease, 60, max_snoozes=0)
    assert events == [AttemptsEnded("failed")]


def test_stale_calls_are_told_by_verb(
    store: Store, events: list[StoreEvent], clock: ManualClock
) -> None:
    store.submit("job", max_attempts=5)
    (old,) = store.claim("a", ttl=5)
    clock.advance(6)
    (new,) = store.claim("b", ttl=30)
    events.clear()
    for verb, call in [
        ("heartbeat", lambda: store.heartbeat(old)),
        ("complete", lambda: store.complete(old)),
        ("fail", lambda: store.fail(old, "late")),
        ("release", lambda: store.release(old)),
        ("snooze", lambda: store.snooze(old, 5)),
        ("abort", lambda: store.abort(old)),
    ]:
        with pytest.raises(StaleLease):
            call()
        assert events.pop() == StaleRefused(verb)
    renewed = store.heartbeat_many([(old, None), (new, None), (old, None)])
    assert [isinstance(r, StaleLease) for r in renewed] == [True, False, True]
    assert events == [StaleRefused("heartbeat_many", 2)]
    events.clear()
    verdicts = store.complete_many([(old, None), (new, 1)])
    assert isinstance(verdicts[0], StaleLease)
    assert verdicts[1] is None
    assert events == [StaleRefused("complete_many"), AttemptsEnded("succeeded")]


def test_a_batch_of_completions_counts_each_outcome(store: Store, events: list[StoreEvent]) -> None:
    for _ in range(3):
        store.submit("job")
    leases = store.claim("w", limit=3)
    events.clear()
    verdicts = store.complete_many([(leases[0], 1), (leases[1], {"x": object()}), (leases[2], 2)])
    assert verdicts == [None, None, None]
    assert events == [AttemptsEnded("succeeded", 2), AttemptsEnded("result_invalid", 1)]


def test_the_reaper_tells_how_many_leases_expired(
    store: Store, events: list[StoreEvent], clock: ManualClock
) -> None:
    for _ in range(3):
        store.submit("job")
    store.claim("w", limit=3, ttl=5)
    events.clear()
    assert store.reap_expired() == 0
    clock.advance(6)
    assert store.reap_expired(limit=2) == 2
    assert events == [LeasesExpired(2)]


def test_materializing_tells_what_it_stored(
    store: Store, events: list[StoreEvent], clock: ManualClock
) -> None:
    store.add_schedule("report", every=60)
    (acquired,) = store.acquire_schedules("m", limit=1, ttl=30)
    now = clock.now()
    occurrences = [
        Occurrence(slot=now, due_at=now),
        Occurrence(slot=now, due_at=now),  # the same slot again: one execution, told once
        Occurrence(slot=now + timedelta(seconds=60), due_at=now, skipped="misfire: missed"),
        Occurrence(slot=now + timedelta(seconds=120), due_at=now, skipped="paused"),
    ]
    answers = store.materialize(
        [
            (acquired, occurrences, now, now + timedelta(seconds=180)),
            (acquired, occurrences[:1], now, now),  # its lease was cleared just now: refused
        ]
    )
    assert isinstance(answers[1], StaleLease)
    assert events == [OccurrencesStored(scheduled=1, skipped=2, misfires=1)]


def test_an_observer_that_fails_never_fails_the_verb(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    told: list[StoreEvent] = []

    def broken(event: StoreEvent) -> None:
        raise RuntimeError("observer down")

    store.observers.add(broken)
    store.observers.add(told.append)
    store.submit("job")
    with caplog.at_level(logging.ERROR, logger="fencepost.store"):
        (lease,) = store.claim("w")
    assert [type(e) for e in told] == [LeasesClaimed]
    assert "observer down" in caplog.text
    store.observers.remove(broken)
    store.complete(lease)
    assert told[-1] == AttemptsEnded("succeeded")
    with pytest.raises(ValueError, match=r"not in list"):
        store.observers.remove(broken)


def test_observers_given_at_connect_and_through_asyncstore() -> None:
    told: list[StoreEvent] = []
    store = fencepost.connect("memory://", observers=[told.append])

    async def work() -> None:
        async with AsyncStore(store) as astore:
            await astore.submit("job")
            (lease,) = await astore.claim("w")
            await astore.complete(lease)

    asyncio.run(work())
    assert [type(e) for e in told] == [LeasesClaimed, AttemptsEnded]


def test_an_app_s_own_counters_observe_its_store_while_it_is_served(store: Store) -> None:
    from fencepost.api.app import create_app
    from fencepost.api.metrics import create_metrics
    from tests.api.support import TestClient

    def claims_counted(app: object) -> float:
        metrics = app.state.metrics  # type: ignore[attr-defined]
        value = metrics.registry.get_sample_value("fencepost_claim_lateness_seconds_count")
        return 0.0 if value is None else value

    before = len(list(store.observers))
    apps = [create_app(store) for _ in range(3)]
    assert len(list(store.observers)) == before + 3
    for app in apps:  # served, then stopped: the lifespan's end closes its own metrics
        with TestClient(app):
            pass
    assert len(list(store.observers)) == before, "stopped apps leave no observers"
    served = create_app(store)
    with TestClient(served):
        store.submit("job")
        store.claim("w", limit=1)
        assert claims_counted(served) == 1.0
        assert [claims_counted(app) for app in apps] == [0.0, 0.0, 0.0]
    given = create_metrics(store)  # the caller's: the caller closes them
    with TestClient(create_app(store, metrics=given)):
        pass
    assert len(list(store.observers)) == before + 1
    given.close()
    given.close()  # twice is harmless
    assert len(list(store.observers)) == before

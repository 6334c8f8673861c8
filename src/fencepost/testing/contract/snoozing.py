"""The contract of ``snooze``: a lease given back until a chosen time, the attempt kept.

A snooze ends the attempt SNOOZED without counting it against ``max_attempts``; it is
fenced like every write after a claim; one execution may snooze a bounded number of
times (``max_snoozes``, default 100) before a snooze fails the attempt instead; and
its arguments are checked before anything is written.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.errors import StaleLease
from fencepost.domain.machine import DEFAULT_MAX_SNOOZES, SNOOZED_TOO_OFTEN
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    US,
    ContractFixtures,
    StoreFactory,
    assert_audit_valid,
    at,
    expired_lease,
    names_the_field,
    refused_unchanged,
    taken_over,
)

#: Seconds a snooze may not be (or not be given as), each refused naming ``seconds``.
HOSTILE_SECONDS: list[Any] = [
    True,
    False,
    float("nan"),
    float("inf"),
    float("-inf"),
    -1,
    -0.5,
    0,
    0.0,
    1e-9,  # below a microsecond: it would be stored as no wait at all
    30 * 86400 + 1,  # one second past the 30-day bound
    10**400,  # past any float
    timedelta(days=31),
    timedelta(seconds=-1),
    "30",
    None,
    [30],
]


def _short(value: Any) -> str:
    """A test id for ``value``: its repr, cut (``10**400`` has 401 digits)."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}...{len(text)}"


class SnoozingContract(ContractFixtures):
    """Snooze a running execution: given back until later, the attempt not counted."""

    def test_snooze_gives_the_execution_back_until_later_and_keeps_the_attempt(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=1, execute_at=at(0))
        (lease,) = store.claim("a", ttl=30)
        clock.set(4)
        snoozed = store.snooze(lease, 10, reason="upstream busy")
        assert (
            snoozed.state,
            snoozed.attempt,
            snoozed.epoch,
            snoozed.due_at,
            snoozed.lease_owner,
            snoozed.lease_until,
        ) == (State.SCHEDULED, 0, 1, at(14), None, None)
        assert store.get(e.id) == snoozed
        clock.set(at(14) - US)
        assert store.claim("b", ttl=30) == [], "not claimable before the snooze ends"
        clock.set(14)
        (again,) = store.claim("b", ttl=30)
        assert (again.execution_id, again.epoch, again.attempt) == (e.id, 2, 1)
        clock.set(15)
        store.snooze(again, timedelta(milliseconds=1500))  # no reason; a timedelta
        clock.set(16.5)
        (last,) = store.claim("c", ttl=30)
        assert (last.epoch, last.attempt) == (3, 1)
        done = store.complete(last, "done")
        assert (done.state, done.attempt) == (State.SUCCEEDED, 1)
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.owner, a.outcome, a.ended_at) for a in attempts] == [
            (1, "a", AttemptOutcome.SNOOZED, at(4)),
            (1, "b", AttemptOutcome.SNOOZED, at(15)),
            (1, "c", AttemptOutcome.SUCCEEDED, at(16.5)),
        ]
        trail = [t for t in store.transitions(e.id) if t.event is Event.SNOOZED]
        assert [(t.from_state, t.to_state, t.actor, t.epoch, t.reason) for t in trail] == [
            (State.RUNNING, State.SCHEDULED, "a", 1, "snoozed for 10 s (1 of at most 100): "
             "upstream busy"),
            (State.RUNNING, State.SCHEDULED, "b", 2, "snoozed for 1.5 s (2 of at most 100)"),
        ]  # fmt: skip
        assert_audit_valid(store, e.id)

    def test_snooze_counts_from_the_store_s_now(self, store: Store, clock: ManualClock) -> None:
        store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=60)
        clock.set(at(20) + timedelta(microseconds=250))
        assert store.snooze(lease, 0.25).due_at == at(20.25) + timedelta(microseconds=250)

    def test_snooze_is_fenced(self, store: Store, clock: ManualClock) -> None:
        e, lease = expired_lease(store, clock, "a")  # t=5: the instant the lease expires
        with refused_unchanged(store, e.id):
            store.snooze(lease, 10)
        refusals = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert [(t.actor, t.epoch, t.reason) for t in refusals] == [
            ("a", 1, "stale snooze refused")
        ]
        assert_audit_valid(store, e.id)

    def test_a_snooze_just_before_expiry_counts(self, store: Store, clock: ManualClock) -> None:
        store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - US)
        assert store.snooze(lease, 1).state is State.SCHEDULED

    def test_a_stale_snooze_after_a_takeover_changes_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        e, lost, holder = taken_over(store, clock, "a", "b", ttl=30)
        with refused_unchanged(store, e.id):
            store.snooze(lost, 10)
        assert store.complete(holder, "mine").state is State.SUCCEEDED
        assert_audit_valid(store, e.id)

    def test_a_lease_snoozes_once(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=30)
        store.snooze(lease, 10)
        with refused_unchanged(store, e.id):
            store.snooze(lease, 10)
        with pytest.raises(StaleLease):
            store.complete(lease, "after the snooze")
        assert_audit_valid(store, e.id)

    def test_a_snooze_past_the_bound_is_a_failed_attempt(
        self, store_factory: StoreFactory, clock: ManualClock
    ) -> None:
        store = store_factory(clock, retry=RetryPolicy(base_delay=2, max_delay=2))
        e = store.submit("job", max_attempts=2, execute_at=at(0))
        for _ in (1, 2):
            (lease,) = store.claim("w", ttl=30)
            assert lease.attempt == 1
            assert store.snooze(lease, 1, max_snoozes=2).state is State.SCHEDULED
            clock.advance(1)
        (lease,) = store.claim("w", ttl=30)
        failed = store.snooze(lease, 1, reason="still busy", max_snoozes=2)
        assert (failed.state, failed.attempt, failed.lease_owner) == (State.RETRY_WAIT, 1, None)
        assert failed.error == (
            f"{SNOOZED_TOO_OFTEN}: asked to snooze for 1 s after 2 snoozes, at most 2 (still busy)"
        )
        # The usual backoff, not the snooze's second: at most base_delay after attempt 1.
        assert clock.now() <= failed.due_at <= clock.now() + timedelta(seconds=2)
        clock.set(failed.due_at)
        (second,) = store.claim("w", ttl=30)
        assert second.attempt == 2
        dead = store.snooze(second, 1, max_snoozes=2)  # still past the bound: the last attempt
        assert (dead.state, dead.attempt) == (State.FAILED, 2)
        assert (dead.error or "").startswith(SNOOZED_TOO_OFTEN)
        clock.advance(1000)
        assert store.claim("w") == []
        assert [(a.attempt, a.outcome) for a in store.attempts(e.id)] == [
            (1, AttemptOutcome.SNOOZED),
            (1, AttemptOutcome.SNOOZED),
            (1, AttemptOutcome.FAILED),
            (2, AttemptOutcome.FAILED),
        ]
        failures = [t for t in store.transitions(e.id) if t.event is Event.FAILED]
        assert [(t.to_state, t.actor) for t in failures] == [
            (State.RETRY_WAIT, "w"),
            (State.FAILED, "w"),
        ]
        assert_audit_valid(store, e.id)
        store.close()

    def test_the_default_bound_is_a_hundred_snoozes(self, store: Store, clock: ManualClock) -> None:
        assert DEFAULT_MAX_SNOOZES == 100
        e = store.submit("job", max_attempts=1, execute_at=at(0))
        for n in range(1, 101):
            (lease,) = store.claim("w", ttl=30)
            assert (lease.attempt, lease.epoch) == (1, n)
            store.snooze(lease, 1)
            clock.advance(1)
        (lease,) = store.claim("w", ttl=30)
        dead = store.snooze(lease, 1)
        assert (dead.state, dead.attempt) == (State.FAILED, 1)
        assert dead.error == (
            f"{SNOOZED_TOO_OFTEN}: asked to snooze for 1 s after 100 snoozes, at most 100"
        )
        last = [t for t in store.transitions(e.id) if t.event is Event.SNOOZED][-1]
        assert last.reason == "snoozed for 1 s (100 of at most 100)"

    def test_a_replay_gives_the_snoozes_back(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=1, execute_at=at(0))
        (lease,) = store.claim("w", ttl=30)
        store.snooze(lease, 1, max_snoozes=1)
        clock.advance(1)
        (lease,) = store.claim("w", ttl=30)
        assert store.snooze(lease, 1, max_snoozes=1).state is State.FAILED
        store.replay(e.id, actor="operator")
        (lease,) = store.claim("w", ttl=30)
        again = store.snooze(lease, 1, max_snoozes=1)
        assert (again.state, again.attempt) == (State.SCHEDULED, 0)
        last = [t for t in store.transitions(e.id) if t.event is Event.SNOOZED][-1]
        assert last.reason == "snoozed for 1 s (1 of at most 1)"
        assert_audit_valid(store, e.id)

    def test_max_snoozes_zero_fails_every_snooze(self, store: Store) -> None:
        store.submit("job", max_attempts=1)
        (lease,) = store.claim("w", ttl=30)
        assert store.snooze(lease, 5, max_snoozes=0).state is State.FAILED

    def test_a_cancel_reaches_a_snoozed_execution(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=30)
        store.snooze(lease, 3600)
        assert store.cancel(e.id, actor="op").state is State.CANCELLED
        assert_audit_valid(store, e.id)

    @pytest.mark.parametrize("seconds", HOSTILE_SECONDS, ids=_short)
    def test_snooze_refuses_hostile_seconds(
        self, store: Store, clock: ManualClock, seconds: Any
    ) -> None:
        e = store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=30)
        trail = store.transitions(e.id)
        before = store.get(e.id)
        with names_the_field("seconds"):
            store.snooze(lease, seconds)
        assert store.get(e.id) == before
        assert store.transitions(e.id) == trail, "nothing written, not even a refusal"

    def test_snooze_takes_thirty_days_at_most(self, store: Store, clock: ManualClock) -> None:
        store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=30)
        assert store.snooze(lease, 30 * 86400).due_at == at(30 * 86400)

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"reason": ""}, "reason"),
            ({"reason": "x" * 1025}, "reason"),
            ({"reason": 42}, "reason"),
            ({"reason": "a\x00b"}, "reason"),
            ({"max_snoozes": -1}, "max_snoozes"),
            ({"max_snoozes": True}, "max_snoozes"),
            ({"max_snoozes": 1.5}, "max_snoozes"),
            ({"max_snoozes": 10**7}, "max_snoozes"),
        ],
        ids=repr,
    )
    def test_snooze_refuses_hostile_arguments(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=30)
        trail = store.transitions(e.id)
        with names_the_field(field):
            store.snooze(lease, 10, **arguments)
        assert store.transitions(e.id) == trail
        assert store.get(e.id).state is State.RUNNING

    @pytest.mark.parametrize("execution_id", ["not-an-id", "01a22855-f771-73a3-922b-7f26eef558a3"])
    def test_snooze_of_an_unknown_execution_is_stale(self, store: Store, execution_id: str) -> None:
        (real,) = store.claim("w", ids=[store.submit("job").id])
        with pytest.raises(StaleLease):
            store.snooze(replace(real, execution_id=execution_id), 10)
        assert store.get(real.execution_id).state is State.RUNNING

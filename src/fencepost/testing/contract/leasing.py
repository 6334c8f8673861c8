"""The contract of leases: who may run an execution, and until when.

Claiming (order, limits, filters, ``ids``, pinned versions, takeover exactly at expiry),
heartbeats, the fence every write after a claim carries (owner, epoch, ``lease_until``;
stale calls change nothing and are audited), reaping expired leases, and the stateful
property: random workers on a random timeline never break fencing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, ClassVar

import pytest

from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.models import Lease
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
    fields_of,
    refused_unchanged,
    taken_over,
)


class LeasingContract(ContractFixtures):
    """Claim, heartbeat, fencing and expiry: the lease timeline on every backend."""

    # -- the lease timeline ------------------------------------------------------------

    def test_lease_timeline(self, store: Store, clock: ManualClock) -> None:
        """The canonical story: a stalled worker comes back and cannot overwrite the result."""
        job10 = store.submit("job", execute_at=at(10), idempotency_key="job:10")
        job20 = store.submit("job", execute_at=at(20), idempotency_key="job:20")

        clock.set(9)
        assert store.claim("worker-a", ttl=5) == []

        clock.set(10)
        (lease_a,) = store.claim("worker-a", ttl=5)
        assert (lease_a.execution_id, lease_a.epoch, lease_a.lease_until) == (job10.id, 1, at(15))

        clock.set(14)
        assert store.claim("worker-b", ttl=5) == []

        clock.set(15)
        (lease_b,) = store.claim("worker-b", ttl=5)
        assert (lease_b.execution_id, lease_b.epoch, lease_b.lease_until) == (job10.id, 2, at(20))

        clock.set(16)
        before = store.get(job10.id)
        with pytest.raises(StaleLease):
            store.complete(lease_a, "stale output")
        assert store.get(job10.id) == before

        done = store.complete(lease_b, "output")
        assert (done.state, done.result, done.epoch) == (State.SUCCEEDED, "output", 2)
        with pytest.raises(StaleLease):
            store.complete(lease_b, "output again")
        assert store.get(job10.id).result == "output"
        assert store.get(job20.id).result is None

        clock.set(19)
        assert store.claim("worker-c", ttl=5) == []
        clock.set(20)
        (lease_c,) = store.claim("worker-c", ttl=5)
        assert lease_c.execution_id == job20.id

        refused = [t for t in store.transitions(job10.id) if t.event is Event.STALE_REFUSED]
        assert [(t.actor, t.epoch, t.at) for t in refused] == [
            ("worker-a", 1, at(16)),
            ("worker-b", 2, at(16)),
        ]
        attempts = store.attempts(job10.id)
        assert [(a.owner, a.epoch, a.outcome) for a in attempts] == [
            ("worker-a", 1, AttemptOutcome.TIMED_OUT),
            ("worker-b", 2, AttemptOutcome.SUCCEEDED),
        ]
        assert_audit_valid(store, job10.id)

    # -- claim -------------------------------------------------------------------------

    def test_claim_order_priority_then_due_then_id(self, store: Store, clock: ManualClock) -> None:
        low_old = store.submit("job", execute_at=at(1))
        high_new = store.submit("job", execute_at=at(5), priority=10)
        low_new_a = store.submit("job", execute_at=at(3))
        low_new_b = store.submit("job", execute_at=at(3))
        negative = store.submit("job", execute_at=at(0), priority=-1)
        store.submit("job", execute_at=at(11), priority=100)  # not due yet
        clock.set(10)
        leases = store.claim("w", limit=10)
        assert [lease.execution_id for lease in leases] == [
            high_new.id,
            low_old.id,
            low_new_a.id,
            low_new_b.id,
            negative.id,
        ]
        assert {lease.epoch for lease in leases} == {1}
        assert {lease.attempt for lease in leases} == {1}

    def test_claim_respects_limit_and_never_hands_out_twice(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit_many([{"job": "job"} for _ in range(10)])
        first = store.claim("a", limit=4)
        second = store.claim("b", limit=4)
        third = store.claim("c", limit=4)
        assert (len(first), len(second), len(third)) == (4, 4, 2)
        ids = [lease.execution_id for lease in first + second + third]
        assert len(set(ids)) == 10
        assert store.claim("d", limit=4) == []

    def test_claim_is_due_inclusive(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", execute_at=at(10))
        clock.set(at(10) - US)
        assert store.claim("w") == []
        clock.set(10)
        assert [lease.execution_id for lease in store.claim("w")] == [e.id]

    def test_claim_lease_fields(self, store: Store, clock: ManualClock) -> None:
        e = store.submit(
            "job", inputs={"x": 1}, version=2, timeout=60, max_attempts=4, execute_at=at(1)
        )
        clock.set(2)
        (lease,) = store.claim("w", ttl=timedelta(seconds=7))
        assert lease == Lease(
            execution_id=e.id,
            owner="w",
            epoch=1,
            lease_until=at(9),
            due_at=at(1),
            attempt=1,
            max_attempts=4,
            job="job",
            job_version=2,
            inputs={"x": 1},
            timeout=timedelta(seconds=60),
            schedule_id=None,
            slot=None,
        )
        got = store.get(e.id)
        assert (got.state, got.lease_owner, got.lease_until, got.epoch) == (
            State.RUNNING,
            "w",
            at(9),
            1,
        )

    def test_claim_filters_by_job_and_bucket(self, store: Store) -> None:
        a = store.submit("a", bucket_key="k-a")
        b = store.submit("b", bucket_key="k-b")
        assert store.claim("w", jobs=["zzz"]) == []
        assert [lease.execution_id for lease in store.claim("w", jobs=["b"])] == [b.id]
        other = [n for n in range(64) if n != a.bucket]
        assert store.claim("w", buckets=other) == []
        assert [lease.execution_id for lease in store.claim("w", buckets=[a.bucket])] == [a.id]

    @pytest.mark.parametrize("execution_id", ["not-an-id", "01a22855-f771-73a3-922b-7f26eef558a3"])
    def test_fenced_calls_on_unknown_executions_are_stale(
        self, store: Store, execution_id: str
    ) -> None:
        [real] = store.claim("w", ids=[store.submit("job").id])
        lease = Lease(**{**fields_of(real), "execution_id": execution_id})
        for call in (
            lambda: store.complete(lease, 1),
            lambda: store.heartbeat(lease),
            lambda: store.fail(lease, "x"),
            lambda: store.release(lease),
            lambda: store.abort(lease),
        ):
            with pytest.raises(StaleLease):
                call()
        refused, accepted = store.complete_many([(lease, 1), (real, 2)])
        assert isinstance(refused, StaleLease)
        assert accepted is None
        assert isinstance(store.heartbeat_many([(lease, None)])[0], StaleLease)
        assert store.get(real.execution_id).result == 2

    def test_claim_restricted_to_ids(self, store: Store, clock: ManualClock) -> None:
        first = store.submit("job", priority=9)
        wanted = store.submit("job")
        later = store.submit("job", delay=60)
        assert store.claim("w", ids=["no-such-id"]) == []
        assert store.claim("w", ids=[later.id]) == []  # not due yet
        [lease] = store.claim("w", ids=[wanted.id], limit=5)
        assert lease.execution_id == wanted.id
        assert store.claim("w", ids=[wanted.id]) == []  # leased: not claimable again
        assert store.get(first.id).state is State.SCHEDULED
        clock.advance(61)
        assert [le.execution_id for le in store.claim("w", ids=[later.id])] == [later.id]
        capped = store.submit("job")
        got = store.claim("w", ids=[capped.id], limit=5, max_per_bucket=10)
        assert [le.execution_id for le in got] == [capped.id]  # first is due too, and left
        assert store.get(first.id).state is State.SCHEDULED

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"ttl": -1}, "ttl", id="negative-ttl"),
            pytest.param({"ttl": 0}, "ttl", id="zero-ttl"),
            pytest.param({"ttl": "30"}, "ttl", id="string-ttl"),
            pytest.param({"ttl": float("inf")}, "ttl", id="infinite-ttl"),
            pytest.param({"limit": 0}, "limit", id="zero-limit"),
            pytest.param({"limit": 10_001}, "limit", id="huge-limit"),
            pytest.param({"buckets": [64]}, "buckets", id="bucket-out-of-range"),
            pytest.param({"buckets": [-1]}, "buckets", id="negative-bucket"),
            pytest.param({"jobs": "job"}, "jobs", id="jobs-as-string"),
            pytest.param({"versions": "job:1"}, "versions", id="versions-as-string"),
            pytest.param({"versions": [("job", 0)]}, "versions", id="version-zero"),
            pytest.param({"versions": [("job", True)]}, "versions", id="version-bool"),
            pytest.param({"versions": [("job", "1")]}, "versions", id="version-string"),
            pytest.param({"versions": [("", 1)]}, "versions", id="version-empty-job"),
            pytest.param({"versions": [("job",)]}, "versions", id="version-not-a-pair"),
        ],
    )
    def test_bad_claim_names_the_field(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        e = store.submit("job")
        with pytest.raises(ValidationError) as caught:
            store.claim("w", **arguments)
        assert caught.value.field == field
        assert store.get(e.id).state is State.SCHEDULED

    def test_claim_filters_by_versions(self, store: Store, clock: ManualClock) -> None:
        """Pinned executions go only to claimers that run their version; unpinned ones to all."""
        unknown = store.submit("job", version=3)
        unpinned = store.submit("job")
        known = store.submit("job", version=2, max_attempts=3)
        other = store.submit("other", version=1)
        runs = [("job", 2), ("other", 7), ("job:3", 1)]  # "job:3" v1 is not "job" v3
        got = store.claim("w", limit=10, ttl=5, versions=runs)
        assert sorted(lease.execution_id for lease in got) == sorted([unpinned.id, known.id])
        assert store.claim("w", limit=10, versions=[("other", 1)], jobs=["job"]) == []
        (lease,) = store.claim("w", limit=10, versions=[("other", 1)], jobs=["other"])
        assert lease.execution_id == other.id
        assert store.claim("w", limit=10, versions=[]) == [], "only unpinned ones, none left"
        assert store.get(unknown.id).state is State.SCHEDULED

        clock.set(5)  # the leases of "known" and "unpinned" expired: takeovers
        taken = store.claim("w", limit=10, versions=[("job", 9)])
        assert [t.execution_id for t in taken] == [unpinned.id], "a pinned takeover is filtered"
        assert store.claim("w", limit=10, versions=[("job", 9)], max_per_bucket=10) == []
        (again,) = store.claim("w", limit=10, versions=[("job", 2)], max_per_bucket=10)
        assert (again.execution_id, again.epoch) == (known.id, 2), "capped: pinned v3 skipped"
        (last,) = store.claim("w", limit=10, versions=[("job", 3)], max_per_bucket=10)
        assert last.execution_id == unknown.id
        for e in (unknown, unpinned, known, other):
            assert_audit_valid(store, e.id)

    def test_claim_needs_an_owner(self, store: Store) -> None:
        with pytest.raises(ValidationError) as caught:
            store.claim("")
        assert caught.value.field == "owner"

    def test_takeover_happens_exactly_at_expiry(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (first,) = store.claim("a", ttl=5)
        clock.set(at(5) - US)
        assert store.claim("b", ttl=5) == []
        clock.set(5)
        (second,) = store.claim("b", ttl=5)
        assert (second.execution_id, second.epoch, second.attempt) == (e.id, 2, 2)
        assert first.epoch == 1

    def test_lease_due_at_is_the_due_time_claimed(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", execute_at=at(3))
        clock.set(4)
        (first,) = store.claim("a", ttl=5)
        assert first.due_at == at(3)
        clock.set(6)
        assert store.heartbeat(first, ttl=5).due_at == at(3), "a heartbeat keeps it"
        (beat,) = store.heartbeat_many([(first, None)], ttl=5)
        assert isinstance(beat, Lease)
        assert beat.due_at == at(3)
        clock.set(20)
        (taken,) = store.claim("b", ttl=5)
        assert (taken.epoch, taken.due_at) == (2, at(3)), "a takeover: the current due_at"
        store.fail(taken, "boom", retry_in=10)
        assert store.get(e.id).due_at == at(30)
        clock.set(31)
        (retried,) = store.claim("c", ttl=5)
        assert (retried.epoch, retried.due_at) == (3, at(30)), "a retry: its new due time"

    def test_no_takeover_without_attempts_left(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=1)
        store.claim("a", ttl=5)
        clock.set(100)
        assert store.claim("b") == []
        assert store.reap_expired() == 1
        dead = store.get(e.id)
        assert dead.state is State.FAILED
        assert dead.error == "lease expired"
        assert [a.outcome for a in store.attempts(e.id)] == [AttemptOutcome.TIMED_OUT]
        assert_audit_valid(store, e.id)

    def test_takeovers_and_due_rows_share_one_claim_order(
        self, store: Store, clock: ManualClock
    ) -> None:
        old = store.submit("job", execute_at=at(0), max_attempts=3)
        store.claim("a", ttl=5)
        late = store.submit("job", execute_at=at(3))
        urgent = store.submit("job", execute_at=at(4), priority=9)
        store.submit("job", execute_at=at(6))
        clock.set(5)
        leases = store.claim("b", limit=3)
        assert [lease.execution_id for lease in leases] == [urgent.id, old.id, late.id]
        assert [lease.epoch for lease in leases] == [1, 2, 1]

    @pytest.mark.parametrize("owner", ["w\x00", "\ud800", "", " "])
    def test_fences_and_claims_refuse_owners_no_store_can_hold(
        self, store: Store, owner: str
    ) -> None:
        e = store.submit("job")
        with pytest.raises(ValidationError) as caught:
            store.claim(owner)
        assert caught.value.field == "owner"
        (lease,) = store.claim("w")
        forged = replace(lease, owner=owner)
        verbs: list[Callable[[], object]] = [
            lambda: store.heartbeat(forged),
            lambda: store.complete(forged, 1),
            lambda: store.complete_many([(lease, 1), (forged, 1)]),
            lambda: store.fail(forged, "boom"),
            lambda: store.release(forged),
            lambda: store.abort(forged),
            lambda: store.claim_commands(owner, [e.id]),
        ]
        for verb in verbs:
            with pytest.raises(ValidationError) as caught:
                verb()
            assert caught.value.field == "owner"
        # Nothing was written: the real lease still holds and completes.
        assert [t.event for t in store.transitions(e.id)] == [Event.SUBMITTED, Event.CLAIMED]
        assert store.complete(lease, 1).state is State.SUCCEEDED

    @pytest.mark.parametrize("name", ["j\x00", "\udfff", ""])
    def test_claim_filters_refuse_names_no_store_can_hold(self, store: Store, name: str) -> None:
        for options, field in (
            ({"jobs": [name]}, "jobs"),
            ({"ids": [name]}, "ids"),
            ({"versions": [(name, 1)]}, "versions"),
        ):
            with pytest.raises(ValidationError) as caught:
                store.claim("w", **options)
            assert caught.value.field == field

    # -- heartbeat ---------------------------------------------------------------------

    def test_heartbeat_extends_a_live_lease(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(4)
        renewed = store.heartbeat(lease, ttl=5, progress={"done": 40})
        assert renewed.lease_until == at(9)
        assert renewed.epoch == lease.epoch
        got = store.get(e.id)
        assert (got.lease_until, got.progress) == (at(9), {"done": 40})
        clock.set(8)
        assert store.claim("other", ttl=5) == []
        assert store.heartbeat(renewed, ttl=0.5).lease_until == at(9), "never shortened"
        store.heartbeat(renewed, ttl=5)
        assert store.get(e.id).progress == {"done": 40}, "progress=None keeps the last progress"
        # The old lease object carries the same owner and epoch; what counts is the row.
        assert store.complete(lease, "ok").state is State.SUCCEEDED

    def test_heartbeat_at_expiry_is_stale(self, store: Store, clock: ManualClock) -> None:
        e, lease = expired_lease(store, clock)
        with refused_unchanged(store, e.id):
            store.heartbeat(lease)
        (t,) = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert (t.actor, t.epoch, t.reason) == ("w", 1, "stale heartbeat refused")

    def test_heartbeat_with_wrong_owner_or_epoch_is_stale(self, store: Store) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        before = store.get(e.id)
        for forged in (
            Lease(**{**fields_of(lease), "owner": "intruder"}),
            Lease(**{**fields_of(lease), "epoch": lease.epoch + 1}),
            Lease(**{**fields_of(lease), "epoch": lease.epoch - 1}),
        ):
            with pytest.raises(StaleLease):
                store.heartbeat(forged, progress={"evil": True})
        assert store.get(e.id) == before

    def test_heartbeat_many_mixes_live_and_stale(self, store: Store, clock: ManualClock) -> None:
        e, old, new = taken_over(store, clock, "a", "b")
        outcomes = store.heartbeat_many([(new, {"p": 1}), (old, {"p": 2})], ttl=5)
        assert isinstance(outcomes[0], Lease)
        assert outcomes[0].lease_until == at(10)
        assert isinstance(outcomes[1], StaleLease)
        assert store.get(e.id).progress == {"p": 1}

    # -- reaping -------------------------------------------------------------------------

    def test_reap_times_out_expired_attempts(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - US)
        assert store.reap_expired() == 0
        clock.set(5)
        assert store.reap_expired() == 1
        reaped = store.get(e.id)
        assert reaped.state is State.RETRY_WAIT
        assert reaped.due_at == at(0), "due as it was: no retry delay after an expiry"
        assert reaped.lease_owner is None
        (attempt,) = store.attempts(e.id)
        assert (attempt.outcome, attempt.ended_at, attempt.owner) == (
            AttemptOutcome.TIMED_OUT,
            at(5),
            "w",
        )
        with pytest.raises(StaleLease):
            store.complete(lease, "too late")
        assert store.reap_expired() == 0
        assert_audit_valid(store, e.id)

    def test_a_reaped_lease_is_claimable_at_its_expiry_like_a_takeover(
        self, store: Store, clock: ManualClock
    ) -> None:
        """One takeover rule: the reaper reaching an expired lease first changes neither
        when it can be claimed (at its expiry) nor its place in the claim order."""
        reaped = store.submit("job", execute_at=at(0), max_attempts=3)
        store.claim("a", ttl=5)
        later = store.submit("job", execute_at=at(3))
        clock.set(5)
        assert store.reap_expired() == 1
        leases = store.claim("b", limit=2, ttl=5)
        assert [(lease.execution_id, lease.epoch) for lease in leases] == [
            (reaped.id, 2),
            (later.id, 1),
        ]
        assert store.get(reaped.id).attempt == 2
        outcomes = [a.outcome for a in store.attempts(reaped.id)]
        assert outcomes == [AttemptOutcome.TIMED_OUT, None], "the lost attempt counts"
        assert_audit_valid(store, reaped.id)

    def test_the_reaper_still_fails_an_expiry_on_the_last_attempt(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=2)
        store.claim("a", ttl=5)
        clock.set(5)
        assert store.reap_expired() == 1
        store.claim("b", ttl=5)
        clock.set(10)
        assert store.claim("c") == []
        assert store.reap_expired() == 1
        dead = store.get(e.id)
        assert (dead.state, dead.attempt) == (State.FAILED, 2)
        outcomes = [a.outcome for a in store.attempts(e.id)]
        assert outcomes == [AttemptOutcome.TIMED_OUT, AttemptOutcome.TIMED_OUT]

    def test_reap_limit(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job"} for _ in range(5)])
        store.claim("w", limit=5, ttl=1)
        clock.set(2)
        assert store.reap_expired(limit=3) == 3
        assert store.reap_expired(limit=3) == 2
        assert store.reap_expired(limit=3) == 0

    # -- the stateful property -------------------------------------------------------------

    #: Examples of the fencing state machine (of 40 steps each) per run: a subclass whose
    #: runs repeat another's worker verbs may take fewer.
    fencing_machine_examples: ClassVar[int] = 150

    def test_random_workers_never_break_fencing(self, store_factory: StoreFactory) -> None:
        from fencepost.testing.stateful import run_fencing_machine

        run_fencing_machine(store_factory, max_examples=self.fencing_machine_examples)

"""The store contract suite: the behaviour every backend must show.

Use it from a test module by providing a ``store_factory`` fixture — a callable
``(clock, **connect_options) -> Store`` that opens a fresh, empty store reading
time from ``clock`` (None: the system clock) — and subclassing :class:`StoreContract`::

    @pytest.fixture
    def store_factory(tmp_path):
        return lambda clock, **options: MyStore(tmp_path / "db", clock=clock, **options)

    class TestMyStore(StoreContract):
        pass

fencepost's own suite parametrizes that one fixture over every backend it ships.
All times are driven by a :class:`~fencepost.testing.ManualClock`, so every
boundary (``now == lease_until``, ``now == due_at``) is tested exactly.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.errors import (
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    NotRunning,
    ResultInvalid,
    StaleLease,
    ValidationError,
)
from fencepost.domain.machine import is_edge
from fencepost.domain.models import Command, Execution, Lease, Occurrence, Schedule
from fencepost.domain.reports import Lateness, SloOffender, SloShare, Stats
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.schedules import parse_slot, slot_text
from fencepost.domain.states import AttemptOutcome, CommandKind, CommandState, Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import MANUAL_EPOCH, ManualClock
from fencepost.testing.factory import ExecutionFactory
from fencepost.timing.planning import HELD
from fencepost.timing.policies import DstFold, DstGap, Misfire, Overlap

StoreFactory = Callable[..., Store]

_US = timedelta(microseconds=1)


def at(seconds: float) -> datetime:
    """The instant "t = seconds" on a ManualClock timeline."""
    return MANUAL_EPOCH + timedelta(seconds=seconds)


def assert_audit_valid(store: Store, execution_id: str) -> None:
    """Every audit record is an edge of the state machine, in order, with epochs never falling."""
    trail = store.transitions(execution_id)
    assert trail, "every execution has at least its SUBMITTED transition"
    assert trail[0].event is Event.SUBMITTED
    assert [t.seq for t in trail] == sorted(t.seq for t in trail)
    state: State | None = None
    epoch = 0
    for t in trail:
        assert is_edge(t.event, t.from_state, t.to_state), t
        if t.event is Event.STALE_REFUSED:
            assert t.from_state == state, t
            continue
        assert t.from_state == state, f"audit gap before {t}"
        assert t.epoch >= epoch, t
        state, epoch = t.to_state, t.epoch
    assert store.get(execution_id).state == state


class StoreContract:
    """The behavioural specification of :class:`~fencepost.store.base.Store`."""

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock(0)

    @pytest.fixture
    def store(self, store_factory: StoreFactory, clock: ManualClock) -> Iterator[Store]:
        store = store_factory(clock, rng=random.Random(1234))
        yield store
        store.close()

    @pytest.fixture
    def make(self, store: Store) -> ExecutionFactory:
        return ExecutionFactory(store)

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

    # -- submit ------------------------------------------------------------------------

    def test_submit_defaults(self, store: Store, clock: ManualClock) -> None:
        clock.set(5)
        e = store.submit("report")
        assert e.state is State.SCHEDULED
        assert (e.epoch, e.attempt, e.max_attempts, e.priority) == (0, 0, 3, 0)
        assert e.due_at == at(5) == e.created_at
        assert e.inputs == {}
        assert e.lease_owner is None
        assert e.lease_until is None
        assert 0 <= e.bucket < 64
        assert store.get(e.id) == e
        (t,) = store.transitions(e.id)
        assert (t.event, t.from_state, t.to_state, t.at) == (
            Event.SUBMITTED,
            None,
            State.SCHEDULED,
            at(5),
        )

    def test_submit_round_trips_every_field(self, store: Store) -> None:
        e = store.submit(
            "report",
            inputs={"day": "2026-01-01", "n": [1, 2.5, None, True], "ü": "ß"},
            execute_at=datetime(2026, 1, 1, 3, 0, tzinfo=timezone_plus(2)),
            idempotency_key="k1",
            max_attempts=7,
            timeout=90,
            bucket_key="tenant-42",
            priority=5,
            job_version=3,
        )
        got = store.get(e.id)
        assert got == e
        assert got.due_at == datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
        assert got.inputs == {"day": "2026-01-01", "n": [1, 2.5, None, True], "ü": "ß"}
        assert got.timeout == timedelta(seconds=90)
        assert got.bucket == bucket_for("tenant-42", 64)
        assert (got.job_version, got.priority, got.max_attempts) == (3, 5, 7)

    def test_inputs_follow_json_semantics(self, store: Store) -> None:
        e = store.submit("job", inputs={"pair": (1, 2)})
        assert store.get(e.id).inputs == {"pair": [1, 2]}

    def test_delay_is_relative_to_the_store_clock(self, store: Store, clock: ManualClock) -> None:
        clock.set(100)
        assert store.submit("job", delay=30).due_at == at(130)
        assert store.submit("job", delay=timedelta(minutes=1)).due_at == at(160)

    def test_ids_are_time_ordered(self, store: Store, clock: ManualClock) -> None:
        ids: list[str] = []
        for second in range(5):
            clock.set(second)
            ids.extend(e.id for e in store.submit_many([{"job": "j"}, {"job": "j"}]))
        assert ids == sorted(ids)
        assert len(set(ids)) == 10

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"execute_at": datetime(2026, 1, 1)}, "execute_at", id="naive"),
            pytest.param({"execute_at": "2026-01-01T00:00:00Z"}, "execute_at", id="string-time"),
            pytest.param({"execute_at": at(1), "delay": 1}, "execute_at", id="both-times"),
            pytest.param({"delay": -1}, "delay", id="negative-delay"),
            pytest.param({"inputs": {"s": {1, 2}}}, "inputs", id="set-inputs"),
            pytest.param({"inputs": {"x": float("nan")}}, "inputs", id="nan-inputs"),
            pytest.param({"inputs": object()}, "inputs", id="object-inputs"),
            pytest.param({"inputs": {"s": "a\x00b"}}, "inputs", id="nul-in-inputs"),
            pytest.param({"max_attempts": 0}, "max_attempts", id="zero-attempts"),
            pytest.param({"max_attempts": True}, "max_attempts", id="bool-attempts"),
            pytest.param({"timeout": 0}, "timeout", id="zero-timeout"),
            pytest.param({"priority": 2**40}, "priority", id="huge-priority"),
            pytest.param({"idempotency_key": ""}, "idempotency_key", id="empty-key"),
            pytest.param({"bucket_key": 7}, "bucket_key", id="int-bucket-key"),
            pytest.param({"job_version": 0}, "job_version", id="zero-version"),
            pytest.param({"inputs": {"s": "a\ud800"}}, "inputs", id="surrogate-in-inputs"),
            pytest.param({"max_attempts": 2**31}, "max_attempts", id="huge-attempts"),
            pytest.param({"job_version": 2**40}, "job_version", id="huge-version"),
            pytest.param({"delay": 1e20}, "delay", id="overflowing-delay"),
            pytest.param({"timeout": 1e-9}, "timeout", id="timeout-rounds-to-zero"),
            pytest.param({"bucket_key": "k\x00"}, "bucket_key", id="nul-in-bucket-key"),
            pytest.param({"idempotency_key": "\udfff"}, "idempotency_key", id="surrogate-key"),
        ],
    )
    def test_bad_submit_names_the_field_and_writes_nothing(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            store.submit("job", **arguments)
        assert caught.value.field == field
        assert field in str(caught.value)
        assert store.query().items == []

    def test_bad_job_name(self, store: Store) -> None:
        for job in ("", "   ", None, "x" * 201, "a\x00b", "\ud800"):
            with pytest.raises(ValidationError) as caught:
                store.submit(job)  # type: ignore[arg-type]
            assert caught.value.field == "job"

    def test_oversized_inputs_are_refused(self, store_factory: StoreFactory) -> None:
        default = store_factory(ManualClock(0))
        with pytest.raises(ValidationError) as caught:
            default.submit("job", inputs={"blob": "x" * (256 * 1024)})
        assert caught.value.field == "inputs"
        assert "262144" in str(caught.value)
        default.submit("job", inputs={"blob": "x" * (250 * 1024)})
        default.close()

        small = store_factory(ManualClock(0), max_payload_bytes=100)
        with pytest.raises(ValidationError, match="limit is 100"):
            small.submit("job", inputs={"blob": "é" * 60})  # 120 bytes in UTF-8
        small.submit("job", inputs={"blob": "x" * 80})
        small.close()

    def test_idempotent_resubmit_returns_the_same_execution(self, store: Store) -> None:
        first = store.submit("job", inputs={"a": 1}, idempotency_key="order-7", delay=10)
        again = store.submit("job", inputs={"a": 1}, idempotency_key="order-7", delay=10)
        assert again == first
        assert len(store.query().items) == 1
        assert len(store.transitions(first.id)) == 1

    def test_find_by_idempotency_key(self, store: Store, make: ExecutionFactory) -> None:
        keyed = store.submit("job", idempotency_key="order-8", delay=60)
        store.submit("job", delay=60)
        assert store.find("order-8") == keyed
        assert store.find("order-9") is None
        done = make.succeeded("job", idempotency_key="k")
        assert store.find("k") == store.get(done.id)
        with pytest.raises(ValidationError) as caught:
            store.find("")
        assert caught.value.field == "idempotency_key"

    def test_submit_or_find_says_who_created_it(self, store: Store) -> None:
        first, created = store.submit_or_find("job", idempotency_key="order-1", delay=10)
        again, created_again = store.submit_or_find("job", idempotency_key="order-1", delay=10)
        assert (created, created_again) == (True, False)
        assert again == first
        unkeyed = [store.submit_or_find("job")[1] for _ in range(2)]
        assert unkeyed == [True, True]  # without a key every submit is a new execution
        with pytest.raises(IdempotencyConflict):
            store.submit_or_find("job", idempotency_key="order-1", delay=11)
        with pytest.raises(TypeError):
            store.submit_or_find("job", colour="red")

    def test_submit_or_find_under_concurrent_submits(self, store_factory: StoreFactory) -> None:
        """Of many racing submits with one key exactly one is told it created it."""
        import threading

        store = store_factory(None)
        barrier = threading.Barrier(8)
        created: list[bool] = []
        ids: set[str] = set()

        def submit() -> None:
            barrier.wait()
            for _ in range(5):
                execution, new = store.submit_or_find("job", idempotency_key="race")
                created.append(new)
                ids.add(execution.id)

        threads = [threading.Thread(target=submit) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(ids) == 1
        assert created.count(True) == 1
        assert len(created) == 40

    def test_idempotent_resubmit_after_it_ran(self, store: Store, make: ExecutionFactory) -> None:
        done = make.succeeded("job", idempotency_key="k")
        assert store.submit("job", idempotency_key="k") == store.get(done.id)

    @pytest.mark.parametrize(
        "change",
        [
            {"inputs": {"a": 2}},
            {"job": "other"},
            {"priority": 1},
            {"max_attempts": 9},
            {"delay": 11},
            {"bucket_key": "b"},
        ],
    )
    def test_idempotency_conflict(self, store: Store, change: dict[str, Any]) -> None:
        request: dict[str, Any] = {"job": "job", "inputs": {"a": 1}, "delay": 10}
        first = store.submit(idempotency_key="order-7", **request)
        with pytest.raises(IdempotencyConflict) as caught:
            store.submit(idempotency_key="order-7", **(request | change))
        assert caught.value.existing_id == first.id
        assert [e.id for e in store.query().items] == [first.id]

    def test_submit_many_is_one_transaction(self, store: Store) -> None:
        made = store.submit_many([{"job": "a", "inputs": {"i": i}} for i in range(50)])
        assert [e.inputs["i"] for e in made] == list(range(50))
        assert len(store.query(limit=100).items) == 50

        with pytest.raises(ValidationError) as caught:
            store.submit_many([{"job": "b"}, {"job": "b", "inputs": {1, 2}}, {"job": "b"}])
        assert caught.value.field == "[1].inputs"
        with pytest.raises(ValidationError) as caught:
            store.submit_many([{"job": "b"}, {"job": "b", "when": 1}])
        assert caught.value.field == "[1].when"
        with pytest.raises(ValidationError) as caught:
            store.submit_many([{"inputs": {}}])
        assert caught.value.field == "[0].job"
        assert store.query(job="b").items == []

    def test_submit_many_idempotency(self, store: Store) -> None:
        existing = store.submit("job", idempotency_key="k0")
        made = store.submit_many(
            [
                {"job": "job", "idempotency_key": "k0"},
                {"job": "job", "idempotency_key": "k1"},
                {"job": "job", "idempotency_key": "k1"},
                {"job": "job"},
            ]
        )
        assert made[0] == existing
        assert made[1].id == made[2].id != existing.id
        assert len(store.query().items) == 3

        with pytest.raises(IdempotencyConflict):
            store.submit_many(
                [{"job": "new"}, {"job": "job", "idempotency_key": "k0", "priority": 3}]
            )
        with pytest.raises(IdempotencyConflict):
            store.submit_many(
                [
                    {"job": "new", "idempotency_key": "k9"},
                    {"job": "new", "idempotency_key": "k9", "priority": 3},
                ]
            )
        assert store.query(job="new").items == []

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
        clock.set(at(10) - _US)
        assert store.claim("w") == []
        clock.set(10)
        assert [lease.execution_id for lease in store.claim("w")] == [e.id]

    def test_claim_lease_fields(self, store: Store, clock: ManualClock) -> None:
        e = store.submit(
            "job", inputs={"x": 1}, job_version=2, timeout=60, max_attempts=4, execute_at=at(1)
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
        lease = Lease(**{**_fields(real), "execution_id": execution_id})
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
        unknown = store.submit("job", job_version=3)
        unpinned = store.submit("job")
        known = store.submit("job", job_version=2, max_attempts=3)
        other = store.submit("other", job_version=1)
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
        clock.set(at(5) - _US)
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
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(5)
        before = store.get(e.id)
        with pytest.raises(StaleLease):
            store.heartbeat(lease)
        assert store.get(e.id) == before
        (t,) = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert (t.actor, t.epoch, t.reason) == ("w", 1, "stale heartbeat refused")

    def test_heartbeat_with_wrong_owner_or_epoch_is_stale(self, store: Store) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        before = store.get(e.id)
        for forged in (
            Lease(**{**_fields(lease), "owner": "intruder"}),
            Lease(**{**_fields(lease), "epoch": lease.epoch + 1}),
            Lease(**{**_fields(lease), "epoch": lease.epoch - 1}),
        ):
            with pytest.raises(StaleLease):
                store.heartbeat(forged, progress={"evil": True})
        assert store.get(e.id) == before

    def test_heartbeat_many_mixes_live_and_stale(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (old,) = store.claim("a", ttl=5)
        clock.set(5)
        (new,) = store.claim("b", ttl=5)
        outcomes = store.heartbeat_many([(new, {"p": 1}), (old, {"p": 2})], ttl=5)
        assert isinstance(outcomes[0], Lease)
        assert outcomes[0].lease_until == at(10)
        assert isinstance(outcomes[1], StaleLease)
        assert store.get(e.id).progress == {"p": 1}

    # -- complete ------------------------------------------------------------------------

    def test_complete(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(3)
        done = store.complete(lease, {"rows": 12})
        assert (done.state, done.result, done.lease_owner, done.lease_until) == (
            State.SUCCEEDED,
            {"rows": 12},
            None,
            None,
        )
        assert store.get(e.id) == done
        (attempt,) = store.attempts(e.id)
        assert (attempt.outcome, attempt.started_at, attempt.ended_at) == (
            AttemptOutcome.SUCCEEDED,
            at(0),
            at(3),
        )
        assert store.claim("w") == []
        assert_audit_valid(store, e.id)

    def test_complete_at_expiry_is_stale(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - _US)
        clock.set(5)
        with pytest.raises(StaleLease):
            store.complete(lease, "late")
        assert store.get(e.id).state is State.RUNNING
        assert store.get(e.id).result is None

    def test_complete_just_before_expiry_counts(self, store: Store, clock: ManualClock) -> None:
        store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - _US)
        assert store.complete(lease, "in time").result == "in time"

    def test_stale_complete_after_takeover_changes_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job")
        (old,) = store.claim("a", ttl=5)
        clock.set(6)
        (new,) = store.claim("b", ttl=5)
        before = store.get(e.id)
        with pytest.raises(StaleLease):
            store.complete(old, "stale")
        with pytest.raises(StaleLease):
            store.fail(old, "stale failure", retryable=False)
        with pytest.raises(StaleLease):
            store.heartbeat(old)
        assert store.get(e.id) == before
        assert store.complete(new, "fresh").result == "fresh"
        assert_audit_valid(store, e.id)

    def test_another_owner_at_the_current_epoch_is_stale(self, store: Store) -> None:
        """The epoch alone proves nothing either: owner and epoch must both match."""
        e = store.submit("job")
        (lease,) = store.claim("w", ttl=5)
        forged = Lease(**{**_fields(lease), "owner": "intruder"})
        before = store.get(e.id)
        assert isinstance(store.complete_many([(forged, "forged")])[0], StaleLease)
        with pytest.raises(StaleLease):
            store.fail(forged, "forged", retryable=False)
        assert store.get(e.id) == before
        refused = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert [(t.actor, t.epoch) for t in refused] == [("intruder", 1), ("intruder", 1)]

    def test_same_owner_with_an_older_epoch_is_stale(
        self, store: Store, clock: ManualClock
    ) -> None:
        """The owner name proves nothing: after re-claiming, a worker holds only the new epoch."""
        e = store.submit("job", max_attempts=5)
        (first,) = store.claim("w", ttl=5)
        clock.set(5)
        (second,) = store.claim("w", ttl=5)
        assert (first.owner, second.owner, second.epoch) == ("w", "w", 2)
        before = store.get(e.id)
        for call in (
            lambda: store.heartbeat(first),
            lambda: store.complete(first, "from epoch 1"),
            lambda: store.fail(first, "from epoch 1", retryable=False),
        ):
            with pytest.raises(StaleLease):
                call()
            assert store.get(e.id) == before
        assert store.complete(second, "from epoch 2").result == "from epoch 2"

    @pytest.mark.parametrize(
        "result",
        [
            pytest.param({1, 2}, id="set"),
            pytest.param(float("inf"), id="infinity"),
            pytest.param(object(), id="object"),
            pytest.param({"blob": "x" * (256 * 1024)}, id="oversized"),
        ],
    )
    def test_invalid_result_fails_permanently(self, store: Store, result: Any) -> None:
        e = store.submit("job", max_attempts=5)
        (lease,) = store.claim("w")
        with pytest.raises(ResultInvalid) as caught:
            store.complete(lease, result)
        assert caught.value.field == "result"
        failed = store.get(e.id)
        assert failed.state is State.FAILED, "an invalid result is not retried"
        assert failed.error is not None
        assert failed.error.startswith("result_invalid")
        assert failed.result is None
        assert [a.outcome for a in store.attempts(e.id)] == [AttemptOutcome.FAILED]
        assert_audit_valid(store, e.id)

    def test_complete_many(self, store: Store, clock: ManualClock) -> None:
        ids = [e.id for e in store.submit_many([{"job": "job"} for _ in range(4)])]
        leases = store.claim("w", limit=4, ttl=5)
        stale = Lease(**{**_fields(leases[1]), "epoch": 99})
        outcomes = store.complete_many(
            [(leases[0], 0), (stale, "forged"), (leases[2], {1}), (leases[3], [3])]
        )
        assert outcomes[0] is None
        assert isinstance(outcomes[1], StaleLease)
        assert outcomes[2] is None
        assert outcomes[3] is None
        got = {i: store.get(i) for i in ids}
        by_lease = [got[lease.execution_id] for lease in leases]
        assert [e.state for e in by_lease] == [
            State.SUCCEEDED,
            State.RUNNING,
            State.FAILED,
            State.SUCCEEDED,
        ]
        assert [by_lease[0].result, by_lease[3].result] == [0, [3]]
        assert store.complete_many([]) == []

    def test_a_batch_means_its_items_one_after_another(self, store: Store) -> None:
        """Repeats in one batch: the first completion counts, the repeat is stale."""
        a, b = (e.id for e in store.submit_many([{"job": "job"}, {"job": "job"}]))
        la, lb = store.claim("w", limit=2)
        forged = Lease(**{**_fields(lb), "epoch": 7})
        outcomes = store.complete_many([(la, 1), (forged, 2), (la, 3), (lb, 4), (lb, {5})])
        assert outcomes[0] is None
        assert isinstance(outcomes[1], StaleLease)
        assert isinstance(outcomes[2], StaleLease)
        assert outcomes[3] is None
        assert isinstance(outcomes[4], StaleLease), "already completed: the invalid repeat is stale"
        assert store.get(la.execution_id).result == 1
        assert store.get(lb.execution_id).result == 4
        for eid in (a, b):
            completed = [t for t in store.transitions(eid) if t.event is Event.COMPLETED]
            assert len(completed) == 1
            assert_audit_valid(store, eid)

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

    # -- fail and retry ------------------------------------------------------------------

    def test_retryable_failure_waits_with_jittered_backoff(
        self, store_factory: StoreFactory, clock: ManualClock
    ) -> None:
        store = store_factory(clock, retry=RetryPolicy(base_delay=2, max_delay=5))
        e = store.submit("job", max_attempts=10)
        waits = []
        for attempt in range(1, 6):
            (lease,) = store.claim("w")
            assert lease.attempt == attempt
            failed = store.fail(lease, f"boom {attempt}")
            assert failed.state is State.RETRY_WAIT
            assert failed.error == f"boom {attempt}"
            wait = failed.due_at - clock.now()
            cap = min(5.0, 2.0 * 2 ** (attempt - 1))
            assert timedelta(0) <= wait <= timedelta(seconds=cap), (attempt, wait)
            waits.append(wait)
            if wait > timedelta(0):
                clock.set(failed.due_at - _US)
                assert store.claim("w") == [], "not claimable before its retry is due"
            clock.set(failed.due_at)
        assert len(set(waits)) > 1, "full jitter draws different delays"
        assert_audit_valid(store, e.id)
        store.close()

    def test_retry_in_overrides_the_policy(self, store: Store, clock: ManualClock) -> None:
        store.submit("job")
        (lease,) = store.claim("w")
        assert store.fail(lease, "later", retry_in=120).due_at == at(120)

    def test_exhausted_retries_end_failed(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        for _ in range(3):
            clock.advance(1000)
            (lease,) = store.claim("w")
            last = store.fail(lease, "still broken")
        assert last.state is State.FAILED
        clock.advance(1000)
        assert store.claim("w") == []
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.outcome, a.error) for a in attempts] == [
            (n, AttemptOutcome.FAILED, "still broken") for n in (1, 2, 3)
        ]
        assert store.query(state="FAILED").items == [store.get(e.id)]

    def test_permanent_failure_is_a_dead_letter(self, store: Store) -> None:
        e = store.submit("job", max_attempts=5)
        (lease,) = store.claim("w")
        failed = store.fail(lease, "bad input", retryable=False)
        assert (failed.state, failed.attempt, failed.error) == (State.FAILED, 1, "bad input")
        assert store.claim("w") == []
        assert_audit_valid(store, e.id)

    @pytest.mark.parametrize("error", ["bad\x00err", "lone \ud800 surrogate"])
    def test_fail_refuses_error_text_no_store_can_hold(self, store: Store, error: str) -> None:
        """The store refuses it on every backend (a worker sanitizes its own texts first)."""
        e = store.submit("job")
        (lease,) = store.claim("w")
        with pytest.raises(ValidationError) as caught:
            store.fail(lease, error)
        assert caught.value.field == "error"
        assert store.get(e.id).state is State.RUNNING
        assert [t.event for t in store.transitions(e.id)] == [Event.SUBMITTED, Event.CLAIMED]
        # Too long is cut, not refused.
        failed = store.fail(lease, "x" * 10_000, retryable=False)
        assert failed.error == "x" * 8_192

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

    def test_fail_rejects_non_string_errors(self, store: Store) -> None:
        store.submit("job")
        (lease,) = store.claim("w")
        with pytest.raises(ValidationError) as caught:
            store.fail(lease, 42)  # type: ignore[arg-type]
        assert caught.value.field == "error"

    # -- release -------------------------------------------------------------------------

    def test_release_gives_the_execution_back_at_once(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=1, execute_at=at(0))
        (lease,) = store.claim("a", ttl=30)
        clock.set(4)
        released = store.release(lease, reason="shutting down")
        assert (released.state, released.attempt, released.due_at, released.lease_owner) == (
            State.SCHEDULED,
            0,
            at(4),
            None,
        )
        with pytest.raises(StaleLease):
            store.complete(lease, "after release")
        (again,) = store.claim("b", ttl=30)
        assert (again.execution_id, again.epoch, again.attempt) == (e.id, 2, 1)
        store.complete(again, "done")
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.owner, a.outcome) for a in attempts] == [
            (1, "a", AttemptOutcome.ABANDONED),
            (1, "b", AttemptOutcome.SUCCEEDED),
        ]
        released_t = [t for t in store.transitions(e.id) if t.event is Event.RELEASED]
        assert [(t.actor, t.reason, t.epoch) for t in released_t] == [("a", "shutting down", 1)]
        assert_audit_valid(store, e.id)

    def test_release_is_fenced(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job")
        (lease,) = store.claim("a", ttl=5)
        clock.set(5)
        before = store.get(e.id)
        with pytest.raises(StaleLease):
            store.release(lease)
        assert store.get(e.id) == before
        with pytest.raises(ValidationError) as caught:
            store.release(lease, reason="")
        assert caught.value.field == "reason"

    # -- worker-declared timeouts --------------------------------------------------------

    def test_timed_out_attempts_retry_then_dead_letter(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=2, timeout=10)
        (lease,) = store.claim("w", ttl=30)
        clock.set(11)
        waiting = store.fail(lease, "ran past 10s", timed_out=True, retry_in=5)
        assert (waiting.state, waiting.error, waiting.due_at, waiting.lease_owner) == (
            State.RETRY_WAIT,
            "ran past 10s",
            at(16),
            None,
        )
        clock.set(16)
        (again,) = store.claim("w2", ttl=30)
        clock.set(27)
        dead = store.fail(again, "ran past 10s again", timed_out=True)
        assert (dead.state, dead.error, dead.attempt) == (State.FAILED, "ran past 10s again", 2)
        clock.set(1000)
        assert store.claim("w") == []
        attempts = store.attempts(e.id)
        assert [(a.attempt, a.owner, a.outcome, a.error, a.ended_at) for a in attempts] == [
            (1, "w", AttemptOutcome.TIMED_OUT, "ran past 10s", at(11)),
            (2, "w2", AttemptOutcome.TIMED_OUT, "ran past 10s again", at(27)),
        ]
        timed_out = [t for t in store.transitions(e.id) if t.event is Event.TIMED_OUT]
        assert [(t.from_state, t.to_state, t.actor, t.epoch) for t in timed_out] == [
            (State.RUNNING, State.RETRY_WAIT, "w", 1),
            (State.RUNNING, State.FAILED, "w2", 2),
        ]
        assert_audit_valid(store, e.id)

    def test_timed_out_without_retry_is_a_dead_letter(self, store: Store) -> None:
        e = store.submit("job", max_attempts=5)
        (lease,) = store.claim("w")
        dead = store.fail(lease, "too slow", timed_out=True, retryable=False)
        assert (dead.state, dead.error) == (State.FAILED, "too slow")
        assert [a.outcome for a in store.attempts(e.id)] == [AttemptOutcome.TIMED_OUT]
        assert store.claim("w") == []
        assert_audit_valid(store, e.id)

    def test_stale_timed_out_fail_is_refused_and_audited(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=3)
        (lease,) = store.claim("w", ttl=5)
        clock.set(5)
        before = store.get(e.id)
        with pytest.raises(StaleLease):
            store.fail(lease, "too slow", timed_out=True)
        assert store.get(e.id) == before
        (t,) = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert (t.actor, t.epoch, t.reason, t.at) == ("w", 1, "stale fail refused", at(5))
        assert [a.outcome for a in store.attempts(e.id)] == [None], "still open"
        assert_audit_valid(store, e.id)

    # -- abort -----------------------------------------------------------------------------

    def test_abort_cancels_a_running_execution(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        (lease,) = store.claim("w", ttl=30)
        clock.set(3)
        aborted = store.abort(lease, reason="user asked")
        assert (aborted.state, aborted.lease_owner, aborted.lease_until, aborted.epoch) == (
            State.CANCELLED,
            None,
            None,
            1,
        )
        assert store.get(e.id) == aborted
        last = store.transitions(e.id)[-1]
        assert (last.event, last.from_state, last.to_state, last.actor, last.reason) == (
            Event.CANCELLED,
            State.RUNNING,
            State.CANCELLED,
            "w",
            "user asked",
        )
        (attempt,) = store.attempts(e.id)
        assert (attempt.outcome, attempt.ended_at, attempt.owner) == (
            AttemptOutcome.CANCELLED,
            at(3),
            "w",
        )
        with pytest.raises(StaleLease):
            store.complete(lease, "after the abort")
        clock.set(100)
        assert store.claim("w") == [], "cancelled is terminal"
        assert_audit_valid(store, e.id)

        other = store.submit("job")
        (second,) = store.claim("w")
        store.abort(second)
        assert store.transitions(other.id)[-1].reason == "cancel requested"
        with pytest.raises(ValidationError) as caught:
            store.abort(second, reason="")
        assert caught.value.field == "reason"

    def test_abort_is_fenced(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        (old,) = store.claim("a", ttl=5)
        clock.set(5)
        before = store.get(e.id)
        with pytest.raises(StaleLease):
            store.abort(old)  # expired exactly now
        assert store.get(e.id) == before
        (new,) = store.claim("b", ttl=5)
        taken = store.get(e.id)
        forged = Lease(**{**_fields(new), "owner": "intruder"})
        for stale in (old, forged):
            with pytest.raises(StaleLease):
                store.abort(stale)
            assert store.get(e.id) == taken
        refused = [t for t in store.transitions(e.id) if t.event is Event.STALE_REFUSED]
        assert [(t.actor, t.epoch, t.reason) for t in refused] == [
            ("a", 1, "stale abort refused"),
            ("a", 1, "stale abort refused"),
            ("intruder", 2, "stale abort refused"),
        ]
        assert store.complete(new, "finished").state is State.SUCCEEDED
        assert_audit_valid(store, e.id)

    def test_client_cancel_still_cannot_stop_a_running_execution(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        lease = make.running()
        before = store.get(lease.execution_id)
        with pytest.raises(InvalidTransition):
            store.cancel(lease.execution_id)
        assert store.get(lease.execution_id) == before

    # -- commands --------------------------------------------------------------------------

    def test_request_to_a_running_execution_is_pending(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        lease = make.running()
        before = store.get(lease.execution_id)
        clock.set(2)
        pause = store.request(lease.execution_id, "pause", actor="alice")
        assert pause == Command(
            id=pause.id,
            execution_id=lease.execution_id,
            kind=CommandKind.PAUSE,
            state=CommandState.PENDING,
            requested_by="alice",
            requested_at=at(2),
            owner=None,
            claim_until=None,
            epoch=None,
            done_at=None,
        )
        cancel = store.request(lease.execution_id, CommandKind.CANCEL)
        assert (cancel.kind, cancel.state, cancel.requested_by) == (
            CommandKind.CANCEL,
            CommandState.PENDING,
            "client",
        )
        assert store.commands(lease.execution_id) == [pause, cancel]
        assert store.get(lease.execution_id) == before, "delivery is the worker's job"
        assert len(store.transitions(lease.execution_id)) == 2

    def test_request_cancel_of_a_not_started_execution_cancels_it(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        waiting = make.scheduled(delay=60)
        retrying = make.retry_waiting()
        clock.set(7)
        for e in (waiting, retrying):
            command = store.request(e.id, "cancel", actor="alice")
            assert (command.kind, command.state, command.done_at, command.requested_at) == (
                CommandKind.CANCEL,
                CommandState.DONE,
                at(7),
                at(7),
            )
            assert (command.owner, command.claim_until, command.epoch) == (None, None, None)
            assert store.commands(e.id) == [command]
            assert store.get(e.id).state is State.CANCELLED
            last = store.transitions(e.id)[-1]
            assert (last.event, last.actor, last.at) == (Event.CANCELLED, "alice", at(7))
            assert_audit_valid(store, e.id)
        clock.set(1000)
        assert store.claim("w", limit=10) == []

    def test_requests_a_not_running_execution_cannot_take(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        done = make.succeeded()
        dead = make.dead()
        waiting = make.scheduled()
        retrying = make.retry_waiting()
        cases = [
            (done, "cancel", State.SUCCEEDED),
            (dead, "cancel", State.FAILED),
            (dead, "resume", State.FAILED),
            (waiting, "pause", State.SCHEDULED),
            (waiting, "resume", State.SCHEDULED),
            (retrying, "pause", State.RETRY_WAIT),
        ]
        for e, kind, state in cases:
            before = store.get(e.id)
            with pytest.raises(NotRunning) as caught:
                store.request(e.id, kind)
            assert (caught.value.execution_id, caught.value.state, caught.value.kind) == (
                e.id,
                state,
                kind,
            )
            assert state in str(caught.value)
            assert kind in str(caught.value)
            assert store.get(e.id) == before
            assert store.commands(e.id) == []
            assert_audit_valid(store, e.id)
        cancelled = store.request(waiting.id, "cancel").execution_id
        with pytest.raises(NotRunning):
            store.request(cancelled, "cancel")
        assert len(store.commands(cancelled)) == 1

    @pytest.mark.parametrize("kind", ["stop", "CANCEL", "", 3, None])
    def test_request_validates_the_kind(
        self, store: Store, make: ExecutionFactory, kind: Any
    ) -> None:
        lease = make.running()
        with pytest.raises(ValidationError) as caught:
            store.request(lease.execution_id, kind)
        assert caught.value.field == "kind"
        assert store.commands(lease.execution_id) == []

    def test_commands_of_unknown_executions(self, store: Store) -> None:
        unknown = "00000000-0000-7000-8000-000000000000"
        for call in (
            lambda: store.request(unknown, "cancel"),
            lambda: store.commands(unknown),
            lambda: store.commands("not-an-id"),
        ):
            with pytest.raises(NotFound):
                call()
        assert store.claim_commands("w", [unknown, "not-an-id"]) == []

    def test_claim_commands_in_request_order_with_expiring_claims(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        a = make.running(ttl=100).execution_id
        b = make.running(ttl=100).execution_id
        idle = make.running(ttl=100).execution_id
        clock.set(1)
        a_pause = store.request(a, "pause")
        clock.set(2)
        b_cancel = store.request(b, "cancel")
        b_pause = store.request(b, "pause")  # same instant: ordered by id
        clock.set(3)
        a_resume = store.request(a, "resume")
        store.request(idle, "pause")

        clock.set(4)
        first = store.claim_commands("w", [b, a], ttl=5, limit=3)
        assert [c.id for c in first] == [a_pause.id, b_cancel.id, b_pause.id]
        assert {(c.state, c.owner, c.claim_until) for c in first} == {
            (CommandState.CLAIMED, "w", at(9))
        }
        (rest,) = store.claim_commands("x", [a, b], ttl=5)
        assert (rest.id, rest.owner, rest.claim_until) == (a_resume.id, "x", at(9))
        clock.set(at(9) - _US)
        assert store.claim_commands("x", [a, b]) == [], "every claim is still live"
        clock.set(9)
        expired = store.claim_commands("y", [a, b], ttl=1)
        assert [c.id for c in expired] == [a_pause.id, b_cancel.id, b_pause.id, a_resume.id]
        assert {(c.owner, c.claim_until) for c in expired} == {("y", at(10))}
        assert store.commands(a) == [c for c in expired if c.execution_id == a]
        assert [c.state for c in store.commands(idle)] == [CommandState.PENDING]
        assert store.claim_commands("y", []) == []

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"owner": ""}, "owner", id="empty-owner"),
            pytest.param({"ttl": 0}, "ttl", id="zero-ttl"),
            pytest.param({"limit": 0}, "limit", id="zero-limit"),
            pytest.param({"execution_ids": "abc"}, "execution_ids", id="ids-as-string"),
            pytest.param({"execution_ids": [""]}, "execution_ids", id="empty-id"),
        ],
    )
    def test_bad_claim_commands_names_the_field(
        self, store: Store, make: ExecutionFactory, arguments: dict[str, Any], field: str
    ) -> None:
        lease = make.running()
        command = store.request(lease.execution_id, "pause")
        call: dict[str, Any] = {"owner": "w", "execution_ids": [lease.execution_id]}
        with pytest.raises(ValidationError) as caught:
            store.claim_commands(**(call | arguments))
        assert caught.value.field == field
        assert store.commands(lease.execution_id) == [command]

    def test_a_command_taken_by_a_lost_lease_reaches_the_holder(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", max_attempts=3)
        (lost,) = store.claim("a", ttl=5)
        clock.set(5)
        (holder,) = store.claim("b", ttl=30)
        clock.set(6)
        store.request(e.id, "cancel", actor="alice")

        (mine,) = store.claim_commands("a", [e.id])  # a still thinks it runs e
        assert store.claim_commands("b", [e.id]) == [], "a's claim is live"
        with pytest.raises(StaleLease):
            store.complete_command(mine, lost)
        assert store.commands(e.id) == [mine], "a refused completion changes nothing"
        store.release_command(mine)
        (released,) = store.commands(e.id)
        assert (released.state, released.owner, released.claim_until) == (
            CommandState.PENDING,
            None,
            None,
        )

        clock.set(7)
        (theirs,) = store.claim_commands("b", [e.id])
        with pytest.raises(StaleLease):
            store.complete_command(theirs, lost)  # a lease of another owner
        store.release_command(mine)  # a's claim is gone: nothing happens
        assert store.commands(e.id) == [theirs]
        done = store.complete_command(theirs, holder)
        assert (done.id, done.state, done.epoch, done.done_at, done.owner) == (
            theirs.id,
            CommandState.DONE,
            2,
            at(7),
            "b",
        )
        assert store.commands(e.id) == [done]
        store.release_command(theirs)  # completed: release is a no-op
        assert store.commands(e.id) == [done]
        assert store.claim_commands("b", [e.id]) == [], "done commands are not claimed again"
        with pytest.raises(StaleLease):
            store.complete_command(theirs, holder)

        aborted = store.abort(holder, reason="cancel requested by alice")
        assert aborted.state is State.CANCELLED
        assert [(a.owner, a.outcome) for a in store.attempts(e.id)] == [
            ("a", AttemptOutcome.TIMED_OUT),
            ("b", AttemptOutcome.CANCELLED),
        ]
        assert_audit_valid(store, e.id)

    def test_complete_command_needs_the_current_epoch(
        self, store: Store, clock: ManualClock
    ) -> None:
        """The owner name proves nothing: a re-claimed execution takes the new epoch's lease."""
        e = store.submit("job", max_attempts=3)
        (first,) = store.claim("w", ttl=5)
        clock.set(5)
        (second,) = store.claim("w", ttl=30)
        store.request(e.id, "pause")
        (command,) = store.claim_commands("w", [e.id])
        with pytest.raises(StaleLease):
            store.complete_command(command, first)
        assert store.commands(e.id) == [command]
        assert store.complete_command(command, second).epoch == 2

    def test_complete_command_fence_boundaries(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        short_lease = make.running(ttl=5)
        long_lease = make.running(ttl=100)
        for lease in (short_lease, long_lease):
            store.request(lease.execution_id, "pause")
        clock.set(1)
        short_cmd, long_cmd = store.claim_commands(
            "worker", [short_lease.execution_id, long_lease.execution_id], ttl=4
        )
        with pytest.raises(StaleLease):
            store.complete_command(long_cmd, short_lease)  # another execution's lease
        clock.set(5)  # both the command claims and the short lease end now
        for command, lease in ((short_cmd, short_lease), (long_cmd, long_lease)):
            with pytest.raises(StaleLease):
                store.complete_command(command, lease)
            assert store.commands(lease.execution_id) == [command]

        clock.set(6)
        (short_again,) = store.claim_commands("worker", [short_lease.execution_id], ttl=30)
        with pytest.raises(StaleLease):
            store.complete_command(short_again, short_lease)  # its lease expired at t=5
        (long_again,) = store.claim_commands("worker", [long_lease.execution_id], ttl=30)
        clock.set(at(36) - _US)
        done = store.complete_command(long_again, long_lease)
        assert (done.state, done.epoch, done.done_at) == (CommandState.DONE, 1, at(36) - _US)
        pending = Command(**{**_command_fields(short_again), "owner": None})
        with pytest.raises(StaleLease):
            store.complete_command(pending, short_lease)
        for lease in (short_lease, long_lease):
            assert_audit_valid(store, lease.execution_id)

    # -- reaping -------------------------------------------------------------------------

    def test_reap_times_out_expired_attempts(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", max_attempts=3)
        (lease,) = store.claim("w", ttl=5)
        clock.set(at(5) - _US)
        assert store.reap_expired() == 0
        clock.set(5)
        assert store.reap_expired() == 1
        reaped = store.get(e.id)
        assert reaped.state is State.RETRY_WAIT
        assert reaped.due_at >= at(5)
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

    def test_reap_limit(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job"} for _ in range(5)])
        store.claim("w", limit=5, ttl=1)
        clock.set(2)
        assert store.reap_expired(limit=3) == 3
        assert store.reap_expired(limit=3) == 2
        assert store.reap_expired(limit=3) == 0

    # -- cancel and replay ---------------------------------------------------------------

    def test_cancel_before_start(self, store: Store, make: ExecutionFactory) -> None:
        waiting = make.scheduled(delay=60)
        retrying = make.retry_waiting()
        for e in (waiting, retrying):
            cancelled = store.cancel(e.id, actor="alice")
            assert cancelled.state is State.CANCELLED
            assert store.transitions(e.id)[-1].actor == "alice"
            assert_audit_valid(store, e.id)
        assert store.claim("w") == []

    def test_cancel_refuses_started_and_finished(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        running = make.running()
        done = make.succeeded()
        for execution_id in (running.execution_id, done.id):
            before = store.get(execution_id)
            with pytest.raises(InvalidTransition):
                store.cancel(execution_id)
            assert store.get(execution_id) == before
        with pytest.raises(NotFound):
            store.cancel("00000000-0000-7000-8000-000000000000")

    def test_reschedule_moves_a_waiting_execution_and_is_audited(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        held = make.scheduled(delay=3600)
        clock.set(10)
        moved = store.reschedule(held.id, at(10), actor="scheduler", reason="released")
        assert (moved.state, moved.due_at) == (State.SCHEDULED, at(10))
        last = store.transitions(held.id)[-1]
        assert (last.event, last.actor, last.reason) == (Event.RESCHEDULED, "scheduler", "released")
        assert_audit_valid(store, held.id)
        (lease,) = store.claim("w")
        assert lease.execution_id == held.id
        with pytest.raises(InvalidTransition):
            store.reschedule(held.id, at(20))  # RUNNING now
        with pytest.raises(NotFound):
            store.reschedule("00000000-0000-7000-8000-000000000000", at(20))
        with pytest.raises(ValidationError) as naive:
            store.reschedule(held.id, datetime(2026, 1, 1))
        assert naive.value.field == "due_at"

    def test_replay_revives_a_dead_letter(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        dead = make.dead(max_attempts=2)
        clock.set(50)
        revived = store.replay(dead.id, actor="ops@example")
        assert (revived.id, revived.state, revived.attempt, revived.due_at) == (
            dead.id,
            State.SCHEDULED,
            0,
            at(50),
        )
        (lease,) = store.claim("w")
        assert (lease.execution_id, lease.epoch, lease.attempt) == (dead.id, 2, 1)
        store.complete(lease, "second time lucky")
        trail = store.transitions(dead.id)
        assert [(t.event, t.actor) for t in trail if t.event is Event.REPLAYED] == [
            (Event.REPLAYED, "ops@example")
        ]
        assert [(a.attempt, a.epoch, a.outcome) for a in store.attempts(dead.id)] == [
            (1, 1, AttemptOutcome.FAILED),
            (1, 2, AttemptOutcome.SUCCEEDED),
        ]
        assert_audit_valid(store, dead.id)

    def test_replay_only_dead_letters(self, store: Store, make: ExecutionFactory) -> None:
        for e in (make.scheduled(), make.succeeded()):
            with pytest.raises(InvalidTransition):
                store.replay(e.id)
        with pytest.raises(NotFound):
            store.replay("nope")

    # -- reading -------------------------------------------------------------------------

    def test_unknown_ids(self, store: Store) -> None:
        for read in (store.get, store.transitions, store.attempts):
            with pytest.raises(NotFound) as caught:
                read("00000000-0000-7000-8000-000000000000")
            assert "00000000-0000-7000-8000-000000000000" in str(caught.value)

    def test_query_filters(self, store: Store, clock: ManualClock, make: ExecutionFactory) -> None:
        a = make.scheduled("a", execute_at=at(100))
        b = make.scheduled("b", execute_at=at(200), bucket_key="tenant")
        running = make.running("c")
        dead = make.dead("d")

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(**filters).items]

        assert ids(job="a") == [a.id]
        assert ids(state="RUNNING") == [running.execution_id]
        assert ids(state=[State.FAILED, "RUNNING"]) == [running.execution_id, dead.id]
        assert ids(bucket=b.bucket, job="b") == [b.id]
        assert ids(due_after=at(100), due_before=at(200)) == [a.id]
        assert ids(due_after=at(101)) == [b.id]
        assert ids(schedule="nope") == []

    def test_query_pages_by_keyset(self, store: Store) -> None:
        made = [e.id for e in store.submit_many([{"job": "j"} for _ in range(25)])]
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = store.query(limit=10, after=cursor)
            seen.extend(e.id for e in page.items)
            pages += 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert pages == 3
        assert seen == sorted(made)
        exact = store.query(limit=25)
        assert (len(exact.items), exact.next_cursor) == (25, None)

    @pytest.mark.parametrize("schedule", [None, "s"], ids=["all", "one-schedule"])
    def test_query_newest_first(
        self, store: Store, clock: ManualClock, schedule: str | None
    ) -> None:
        if schedule is not None:
            store.add_schedule("j", every=60, id=schedule)
            clock.advance(3600)
            store.add_occurrences(
                schedule, [Occurrence(slot=at(60 * i), due_at=at(60 * i)) for i in range(25)]
            )
            made = [e.id for e in store.query(schedule=schedule, limit=100).items]
        else:
            made = [e.id for e in store.submit_many([{"job": "j"} for _ in range(25)])]
        seen: list[str] = []
        cursor = None
        while True:
            page = store.query(schedule=schedule, limit=10, after=cursor, newest_first=True)
            seen.extend(e.id for e in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert len(made) == 25
        assert seen == sorted(made, reverse=True)

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"state": "DONE"}, "state", id="unknown-state"),
            pytest.param({"state": ["RUNNING", "nope"]}, "state", id="unknown-in-list"),
            pytest.param({"limit": 0}, "limit", id="zero-limit"),
            pytest.param({"bucket": -1}, "bucket", id="negative-bucket"),
            pytest.param({"due_after": datetime(2026, 1, 1)}, "due_after", id="naive-after"),
        ],
    )
    def test_bad_query_names_the_field(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            store.query(**arguments)
        assert caught.value.field == field

    def test_query_by_buckets(self, store: Store, make: ExecutionFactory) -> None:
        keys = _keys_in_distinct_buckets(3, store.config.num_buckets)
        a, b, c = (make.scheduled(f"job-{n}", bucket_key=key) for n, key in enumerate(keys))
        running = make.running("job-r", bucket_key=keys[0])

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(**filters).items]

        assert ids(buckets=[a.bucket, c.bucket]) == [a.id, c.id, running.execution_id]
        assert ids(buckets={c.bucket, a.bucket}, state="SCHEDULED") == [a.id, c.id]
        assert ids(buckets=(b.bucket,)) == [b.id]
        assert ids(buckets=[]) == [], "no buckets match nothing"
        page = store.query(buckets=[a.bucket, c.bucket], limit=2)
        assert [e.id for e in page.items] == [a.id, c.id]
        assert ids(buckets=[a.bucket, c.bucket], after=page.next_cursor) == [running.execution_id]
        bad: list[dict[str, Any]] = [
            {"buckets": [store.config.num_buckets]},
            {"buckets": [-1]},
            {"buckets": ["1"]},
            {"buckets": "12"},
            {"buckets": 3},
            {"bucket": a.bucket, "buckets": [a.bucket]},
        ]
        for arguments in bad:
            with pytest.raises(ValidationError) as caught:
                store.query(**arguments)
            assert caught.value.field == "buckets", arguments

    # -- schedules: definitions ----------------------------------------------------------

    def test_add_schedule_defaults(self, store: Store, clock: ManualClock) -> None:
        clock.set(5)
        s = store.add_schedule("report", cron="0  2 * * *", timezone="Europe/Berlin")
        assert (s.job, s.job_version, s.inputs, s.cron, s.every, s.timezone) == (
            "report",
            None,
            {},
            "0 2 * * *",
            None,
            "Europe/Berlin",
        )
        assert (s.dst_gap, s.dst_fold, s.misfire, s.overlap) == (
            DstGap.SHIFT,
            DstFold.ONCE,
            Misfire.COALESCE,
            Overlap.ALLOW,
        )
        assert (s.misfire_grace, s.max_catch_up, s.max_attempts, s.priority, s.paused) == (
            timedelta(seconds=60),
            100,
            3,
            0,
            False,
        )
        assert (s.start_at, s.end_at, s.materializer, s.lease_until) == (None, None, None, None)
        assert s.watermark == s.next_due == s.created_at == s.updated_at == at(5)
        assert len(s.id) == 36, "a UUIDv7 when no id is given"
        assert store.get_schedule(s.id) == s

    def test_add_schedule_round_trips_every_field(self, store: Store) -> None:
        s = store.add_schedule(
            "sync",
            every=timedelta(minutes=90),
            inputs={"n": [1, 2.5, None, True], "ü": "ß"},
            job_version=2,
            misfire="catch_up",
            misfire_grace=0,
            max_catch_up=7,
            overlap=Overlap.BUFFER_ONE,
            dst_gap="skip",
            dst_fold="twice",
            start_at=datetime(2026, 1, 2, 1, 0, tzinfo=timezone_plus(1)),
            end_at=at(30 * 86400),
            max_attempts=5,
            priority=-3,
            id="sync-1",
            paused=True,
        )
        assert store.get_schedule("sync-1") == s
        assert (s.every, s.timezone, s.start_at, s.end_at) == (
            timedelta(minutes=90),
            "UTC",
            datetime(2026, 1, 2, tzinfo=UTC),
            at(30 * 86400),
        )
        assert (s.misfire, s.misfire_grace, s.overlap, s.dst_gap, s.dst_fold) == (
            Misfire.CATCH_UP,
            timedelta(0),
            Overlap.BUFFER_ONE,
            DstGap.SKIP,
            DstFold.TWICE,
        )
        assert (s.inputs, s.job_version, s.max_catch_up, s.max_attempts, s.priority, s.paused) == (
            {"n": [1, 2.5, None, True], "ü": "ß"},
            2,
            7,
            5,
            -3,
            True,
        )

    def test_watermark_starts_before_a_future_start_at(
        self, store: Store, clock: ManualClock
    ) -> None:
        """Slots strictly after the watermark are to come: a slot at start_at runs."""
        clock.set(100)
        future = store.add_schedule("job", every=60, start_at=at(200))
        assert (future.watermark, future.next_due) == (at(200) - _US, at(100))
        assert store.add_schedule("job", every=60, start_at=at(50)).watermark == at(100)
        assert store.add_schedule("job", every=60, start_at=at(100)).watermark == at(100)

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"cron": "0 * * * *", "every": 60}, "cron", id="both-rules"),
            pytest.param({}, "cron", id="no-rule"),
            pytest.param({"cron": "61 * * * *"}, "cron", id="bad-minute"),
            pytest.param({"cron": "0 0 30 2 *"}, "cron", id="never-fires"),
            pytest.param({"cron": "* * *"}, "cron", id="three-fields"),
            pytest.param({"cron": 5}, "cron", id="int-cron"),
            pytest.param({"cron": "0 * * * *", "timezone": "Mars/Olympus"}, "timezone", id="zone"),
            pytest.param({"cron": "0 * * * *", "timezone": ""}, "timezone", id="empty-zone"),
            pytest.param({"every": 60, "timezone": "Europe/Berlin"}, "timezone", id="zoned-every"),
            pytest.param({"every": 0}, "every", id="zero-every"),
            pytest.param({"every": -5}, "every", id="negative-every"),
            pytest.param({"every": "1h"}, "every", id="string-every"),
            pytest.param({"every": 60, "start_at": at(9), "end_at": at(9)}, "end_at", id="empty"),
            pytest.param(
                {"every": 60, "start_at": at(9), "end_at": at(5)}, "end_at", id="ends-early"
            ),
            pytest.param({"every": 60, "start_at": datetime(2026, 1, 1)}, "start_at", id="naive"),
            pytest.param({"every": 60, "end_at": "tomorrow"}, "end_at", id="string-end"),
            pytest.param({"every": 60, "misfire": "sometimes"}, "misfire", id="misfire"),
            pytest.param({"every": 60, "overlap": "queue"}, "overlap", id="overlap"),
            pytest.param({"every": 60, "dst_gap": "jump"}, "dst_gap", id="dst-gap"),
            pytest.param({"every": 60, "dst_fold": "thrice"}, "dst_fold", id="dst-fold"),
            pytest.param({"every": 60, "misfire_grace": -1}, "misfire_grace", id="grace"),
            pytest.param({"every": 60, "max_catch_up": 0}, "max_catch_up", id="catch-up"),
            pytest.param({"every": 60, "inputs": {"s": {1, 2}}}, "inputs", id="inputs"),
            pytest.param({"every": 60, "id": ""}, "id", id="empty-id"),
            pytest.param({"every": 60, "id": "x" * 201}, "id", id="long-id"),
            pytest.param({"every": 60, "id": 7}, "id", id="int-id"),
            pytest.param({"every": 60, "job_version": 0}, "job_version", id="version"),
            pytest.param({"every": 60, "max_attempts": 0}, "max_attempts", id="attempts"),
            pytest.param({"every": 60, "priority": 2**40}, "priority", id="priority"),
            pytest.param({"every": 60, "paused": "yes"}, "paused", id="paused"),
            pytest.param({"every": 1e-9}, "every", id="every-rounds-to-zero"),
            pytest.param({"every": 1e20}, "every", id="overflowing-every"),
            pytest.param({"every": 60, "max_catch_up": 2**40}, "max_catch_up", id="huge-catch-up"),
            pytest.param({"every": 60, "id": "a\x00"}, "id", id="nul-in-id"),
        ],
    )
    def test_bad_add_schedule_names_the_field_and_writes_nothing(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            store.add_schedule("job", **arguments)
        assert caught.value.field == field
        assert field in str(caught.value)
        assert store.schedules().items == []

    def test_text_no_store_can_hold_names_nothing(self, store: Store) -> None:
        """U+0000 cannot be stored, so an id or filter holding it finds nothing (never a 5xx)."""
        store.add_schedule("job", every=60, id="s")
        store.add_schedule("job", every=60, id="t")
        store.submit("job")
        for verb in (
            store.get_schedule,
            store.pause_schedule,
            store.resume_schedule,
            store.delete_schedule,
            lambda i: store.update_schedule(i, priority=1),
            lambda i: store.add_occurrences(i, []),
        ):
            with pytest.raises(NotFound):
                verb("s\x00")
        assert store.query(job="job\x00").items == []
        assert store.query(schedule="s\x00").items == []
        assert [s.id for s in store.schedules(after="s\x00").items] == ["t"]
        assert [s.id for s in store.schedules().items] == ["s", "t"]

    def test_bad_schedule_job(self, store: Store) -> None:
        for job in ("", "  ", None, "x" * 201):
            with pytest.raises(ValidationError) as caught:
                store.add_schedule(job, every=60)  # type: ignore[arg-type]
            assert caught.value.field == "job"
        assert store.schedules().items == []

    def test_add_schedule_with_an_id_is_idempotent(self, store: Store, clock: ManualClock) -> None:
        request: dict[str, Any] = {
            "job": "job",
            "cron": "0 2 * * *",
            "id": "nightly",
            "inputs": {"a": 1},
            "start_at": at(0),
        }
        first = store.add_schedule(**request)
        clock.set(50)
        same = request | {
            "cron": " 0 2 *  * * ",
            "misfire_grace": timedelta(seconds=60),
            "start_at": datetime(2026, 1, 1, 1, 0, tzinfo=timezone_plus(1)),
        }
        assert store.add_schedule(**same) == first
        paused = store.pause_schedule("nightly")
        assert store.add_schedule(**request) == paused, "returned as it is now"
        for change in (
            {"inputs": {"a": 2}},
            {"cron": "0 3 * * *"},
            {"every": 60, "cron": None},
            {"paused": True},
            {"priority": 1},
            {"job": "other"},
            {"misfire": "skip"},
            {"start_at": None},
        ):
            with pytest.raises(IdempotencyConflict) as caught:
                store.add_schedule(**(request | change))
            assert (caught.value.key, caught.value.existing_id) == ("nightly", "nightly")
            assert "schedule" in str(caught.value)
        assert store.get_schedule("nightly") == paused
        assert [s.id for s in store.schedules().items] == ["nightly"]

    def test_get_and_list_schedules(self, store: Store) -> None:
        ids = ["b", "A", "a", "c-2", "c-10", "Z"]
        for n, schedule_id in enumerate(ids):
            store.add_schedule(
                "even" if n % 2 == 0 else "odd", every=60, id=schedule_id, paused=schedule_id == "a"
            )
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = store.schedules(limit=4, after=cursor)
            seen.extend(s.id for s in page.items)
            pages += 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == ["A", "Z", "a", "b", "c-10", "c-2"], "code point order on every backend"
        assert pages == 2
        assert store.schedules(limit=6).next_cursor is None

        def listed(**filters: Any) -> list[str]:
            return [s.id for s in store.schedules(**filters).items]

        assert listed(job="even") == ["a", "b", "c-10"]
        assert listed(paused=True) == ["a"]
        assert listed(paused=False, job="even") == ["b", "c-10"]
        assert listed(job="none") == []
        assert store.get_schedule("c-2").job == "odd"
        with pytest.raises(NotFound) as caught:
            store.get_schedule("nope")
        assert str(caught.value) == "schedule nope not found"
        for arguments, field in (
            ({"limit": 0}, "limit"),
            ({"limit": 10_001}, "limit"),
            ({"paused": "yes"}, "paused"),
            ({"job": ""}, "job"),
            ({"after": 5}, "after"),
        ):
            with pytest.raises(ValidationError) as bad:
                store.schedules(**arguments)
            assert bad.value.field == field

    def test_list_schedules_due_before(self, store: Store, clock: ManualClock) -> None:
        for second, schedule_id in ((0, "s0"), (10, "s10"), (20, "s20")):
            clock.set(second)
            store.add_schedule("job", every=60, id=schedule_id, paused=schedule_id == "s10")
        clock.set(30)

        def listed(**filters: Any) -> list[str]:
            return [s.id for s in store.schedules(**filters).items]

        # next_due is each schedule's creation instant; due_before is inclusive.
        assert listed(due_before=at(10)) == ["s0", "s10"]
        assert listed(due_before=at(10) - _US) == ["s0"]
        assert listed(due_before=at(-1)) == []
        assert listed(due_before=at(10), paused=False) == ["s0"]
        assert listed(due_before=at(100), limit=2) == ["s0", "s10"]
        assert listed(due_before=at(100), after="s10") == ["s20"]
        (leased,) = store.acquire_schedules("m", limit=1)
        assert leased.id == "s0"
        assert listed(due_before=at(0)) == ["s0"], "a leased schedule is still listed"
        naive: list[Any] = [datetime(2026, 1, 1), "2026-01-01T00:00:00Z"]
        for value in naive:
            with pytest.raises(ValidationError) as caught:
                store.schedules(due_before=value)
            assert caught.value.field == "due_before"

    def test_update_schedule(self, store: Store, clock: ManualClock) -> None:
        clock.set(10)
        store.add_schedule("job", cron="0 2 * * *", timezone="Europe/Berlin", id="s")
        (acquired,) = store.acquire_schedules("m")
        clock.set(20)
        updated = store.update_schedule("s", cron="30  3 * * *", inputs={"v": 2}, priority=4)
        assert (updated.cron, updated.inputs, updated.priority, updated.timezone) == (
            "30 3 * * *",
            {"v": 2},
            4,
            "Europe/Berlin",
        )
        assert (updated.watermark, updated.next_due, updated.created_at, updated.updated_at) == (
            at(10),
            at(20),
            at(10),
            at(20),
        )
        assert (updated.materializer, updated.lease_until) == (None, None)
        assert store.get_schedule("s") == updated
        plan = [Occurrence(slot=at(3600), due_at=at(3600))]
        (refused,) = store.materialize([(acquired, plan, at(3600), at(3000))])
        assert isinstance(refused, StaleLease), "a plan made before the update is refused"
        assert store.query(schedule="s").items == []
        assert store.get_schedule("s") == updated

        with pytest.raises(ValidationError) as caught:
            store.update_schedule("s", every=60)
        assert caught.value.field == "cron", "the combination is validated: both rules"
        interval = store.update_schedule("s", every=60, cron=None)
        assert (interval.every, interval.cron, interval.timezone) == (
            timedelta(seconds=60),
            None,
            "UTC",
        )
        for changes, field in (
            ({"every": 0}, "every"),
            ({"timezone": "Europe/Berlin"}, "timezone"),
            ({"start_at": at(100), "end_at": at(50)}, "end_at"),
            ({"inputs": {1, 2}}, "inputs"),
            ({"colour": "red"}, "colour"),
            ({"id": "t"}, "id"),
            ({"paused": 1}, "paused"),
        ):
            with pytest.raises(ValidationError) as bad:
                store.update_schedule("s", **changes)
            assert bad.value.field == field
        assert store.get_schedule("s") == interval, "nothing written on error"
        with pytest.raises(NotFound):
            store.update_schedule("nope", priority=1)

    def test_pause_and_resume_are_idempotent(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=60, id="p")
        (acquired,) = store.acquire_schedules("m")
        clock.set(5)
        paused = store.pause_schedule("p")
        assert (paused.paused, paused.next_due, paused.updated_at) == (True, at(5), at(5))
        assert (paused.materializer, paused.lease_until) == (None, None)
        clock.set(6)
        assert store.pause_schedule("p") == paused, "already paused: unchanged"
        (refused,) = store.materialize([(acquired, [], at(60), at(60))])
        assert isinstance(refused, StaleLease)
        assert [s.id for s in store.acquire_schedules("m")] == ["p"], "paused ones are planned too"
        clock.set(7)
        resumed = store.resume_schedule("p")
        assert (resumed.paused, resumed.next_due, resumed.materializer) == (False, at(7), None)
        clock.set(8)
        assert store.resume_schedule("p") == resumed
        assert store.get_schedule("p") == resumed
        for verb in (store.pause_schedule, store.resume_schedule):
            with pytest.raises(NotFound):
                verb("nope")

    def test_delete_schedule_cancels_what_has_not_started(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("doomed", every=60, id="d", max_attempts=3)
        store.add_schedule("kept", every=60, id="keep")
        leased = {s.id: s for s in store.acquire_schedules("m")}
        due_now = [Occurrence(slot=at(n * 60), due_at=at(0)) for n in range(1, 5)]
        later = Occurrence(slot=at(300), due_at=at(900))
        skipped = Occurrence(slot=at(360), due_at=at(360), skipped="overlap: still running")
        made, kept = store.materialize(
            [
                (leased["d"], [*due_now, later, skipped], at(360), at(400)),
                (leased["keep"], [Occurrence(slot=at(60), due_at=at(0))], at(60), at(400)),
            ]
        )
        assert isinstance(made, list)
        assert isinstance(kept, list)
        running, done, retrying = store.claim("w", limit=3, jobs=["doomed"], ttl=60)
        store.complete(done, "ok")
        store.fail(retrying, "boom", retry_in=30)
        clock.set(1)
        store.delete_schedule("d")
        states = [store.get(e.id).state for e in made]
        assert states == [
            State.RUNNING,
            State.SUCCEEDED,
            State.CANCELLED,
            State.CANCELLED,
            State.CANCELLED,
            State.SKIPPED,
        ]
        for e in made[2:5]:
            last = store.transitions(e.id)[-1]
            assert (last.event, last.actor, last.at) == (Event.CANCELLED, "schedule deleted", at(1))
        for e in [*made, *kept]:
            assert_audit_valid(store, e.id)
        assert store.get(kept[0].id).state is State.SCHEDULED
        assert store.get(running.execution_id).lease_owner == "w"
        assert [s.id for s in store.schedules().items] == ["keep"]
        with pytest.raises(NotFound):
            store.get_schedule("d")
        with pytest.raises(NotFound):
            store.delete_schedule("d")
        with pytest.raises(NotFound):
            store.add_occurrences("d", [Occurrence(slot=at(600), due_at=at(600))])
        assert store.add_schedule("job", every=60, id="d").job == "job", "the id is free again"

    # -- schedules: acquiring ----------------------------------------------------------

    def test_acquire_eligibility_and_order(self, store: Store, clock: ManualClock) -> None:
        for schedule_id in ("c", "a", "b", "d"):
            store.add_schedule("job", every=60, id=schedule_id)
        got = store.acquire_schedules("m", limit=10)
        assert [s.id for s in got] == ["a", "b", "c", "d"], "same next_due: by id"
        next_due = {"a": at(20), "b": at(10), "c": at(10), "d": at(30)}
        store.materialize([(s, [], s.watermark, next_due[s.id]) for s in got])

        clock.set(at(10) - _US)
        assert store.acquire_schedules("m", limit=10) == []
        clock.set(10)
        first = store.acquire_schedules("m", limit=10, ttl=5)
        assert [s.id for s in first] == ["b", "c"], "next_due == now is due"
        assert {(s.materializer, s.lease_until) for s in first} == {("m", at(15))}
        assert store.get_schedule("b") == first[0]

        clock.set(at(15) - _US)
        assert store.acquire_schedules("n", limit=10) == [], "leases live until 15"
        clock.set(15)
        assert [s.id for s in store.acquire_schedules("n", limit=1)] == ["b"], "expired at 15"
        assert [s.id for s in store.acquire_schedules("n", limit=10)] == ["c"]
        clock.set(20)
        got = store.acquire_schedules("x", limit=10)
        assert [s.id for s in got] == ["a"], "oldest next_due first; b and c are leased"
        clock.set(60)
        got = store.acquire_schedules("x", limit=10)
        assert [s.id for s in got] == ["b", "c", "a", "d"], "all expired: by next_due, then id"

    def test_two_materializers_never_get_the_same_schedule(self, store: Store) -> None:
        for n in range(10):
            store.add_schedule("job", every=60, id=f"s{n}")
        first = store.acquire_schedules("a", limit=4)
        second = store.acquire_schedules("b", limit=4)
        third = store.acquire_schedules("c", limit=4)
        assert (len(first), len(second), len(third)) == (4, 4, 2)
        assert len({s.id for s in first + second + third}) == 10
        assert store.acquire_schedules("d") == []

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"owner": ""}, "owner", id="no-owner"),
            pytest.param({"owner": "m", "limit": 0}, "limit", id="zero-limit"),
            pytest.param({"owner": "m", "limit": 10_001}, "limit", id="huge-limit"),
            pytest.param({"owner": "m", "ttl": 0}, "ttl", id="zero-ttl"),
        ],
    )
    def test_bad_acquire_names_the_field(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        with pytest.raises(ValidationError) as caught:
            store.acquire_schedules(**arguments)
        assert caught.value.field == field
        assert store.get_schedule("s").materializer is None

    def test_release_gives_leases_back_unchanged(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=60, id="a")
        store.add_schedule("job", every=60, id="b")
        held = store.acquire_schedules("m", ttl=30)
        clock.set(1)
        store.release_schedules(held)
        released = store.get_schedule("a")
        assert (released.materializer, released.lease_until, released.next_due) == (
            None,
            None,
            at(0),
        )
        taken = store.acquire_schedules("n", limit=10)
        assert [s.id for s in taken] == ["a", "b"], "free for another materializer at once"
        store.release_schedules(held)  # no longer m's: left alone
        assert store.get_schedule("a") == taken[0]
        store.release_schedules([released])
        assert store.get_schedule("a") == taken[0], "an unleased schedule releases nothing"
        store.release_schedules([])
        with pytest.raises(ValidationError) as caught:
            store.release_schedules(["a"])  # type: ignore[list-item]
        assert caught.value.field == "[0]"

    # -- schedules: materializing ------------------------------------------------------

    def test_materialize_inserts_occurrences(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule(
            "report",
            every=3600,
            id="hourly",
            inputs={"x": 1},
            job_version=2,
            max_attempts=5,
            priority=7,
        )
        clock.set(10)
        (leased,) = store.acquire_schedules("m", ttl=30)
        plan = [
            Occurrence(slot=datetime(2026, 1, 1, 2, 0, tzinfo=timezone_plus(1)), due_at=at(3600)),
            Occurrence(slot=at(7200), due_at=at(7190)),
        ]
        (made,) = store.materialize([(leased, plan, at(7200), at(7000))])
        assert isinstance(made, list)
        assert [e.slot for e in made] == ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]
        assert [e.due_at for e in made] == [at(3600), at(7190)]
        for e in made:
            assert (e.job, e.job_version, e.inputs, e.max_attempts, e.priority) == (
                "report",
                2,
                {"x": 1},
                5,
                7,
            )
            assert (e.state, e.attempt, e.epoch, e.schedule_id, e.idempotency_key) == (
                State.SCHEDULED,
                0,
                0,
                "hourly",
                f"hourly:{e.slot}",
            )
            assert (e.timeout, e.bucket_key, e.created_at, e.updated_at) == (
                None,
                None,
                at(10),
                at(10),
            )
            assert e.bucket == bucket_for(e.id, 64)
            assert store.get(e.id) == e
            assert [t.event for t in store.transitions(e.id)] == [Event.SUBMITTED]
        stored = store.get_schedule("hourly")
        assert (stored.watermark, stored.next_due, stored.materializer, stored.lease_until) == (
            at(7200),
            at(7000),
            None,
            None,
        )
        assert stored.updated_at == at(0), "materializing is not a client's change"
        clock.set(3600)
        (lease,) = store.claim("w", jobs=["report"])
        assert (lease.execution_id, lease.schedule_id, lease.slot, lease.inputs) == (
            made[0].id,
            "hourly",
            "2026-01-01T01:00:00Z",
            {"x": 1},
        )

    def test_materialize_is_insert_if_absent(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=60, id="s")
        (leased,) = store.acquire_schedules("m")
        first = [Occurrence(slot=at(60), due_at=at(60)), Occurrence(slot=at(120), due_at=at(120))]
        (made,) = store.materialize([(leased, first, at(120), at(0))])
        assert isinstance(made, list)
        clock.set(60)
        (lease,) = store.claim("w", jobs=["job"])
        done = store.complete(lease, "ran")
        waiting = store.get(made[1].id)
        trails = {e.id: store.transitions(e.id) for e in made}

        (again,) = store.acquire_schedules("m")
        replanned = [
            Occurrence(slot=at(60), due_at=at(999), skipped="misfire: planned differently"),
            Occurrence(slot=at(120), due_at=at(5), skipped="overlap: planned differently"),
            Occurrence(slot=at(180), due_at=at(180)),
            Occurrence(slot=at(120), due_at=at(7)),
        ]
        (second,) = store.materialize([(again, replanned, at(180), at(120))])
        assert isinstance(second, list)
        assert second[0] == done, "an existing execution is returned exactly as it is"
        assert second[1] == waiting
        assert second[3] == waiting, "a repeated slot names one execution"
        assert second[2].slot == "2026-01-01T00:03:00Z"
        assert {e.id: store.transitions(e.id) for e in made} == trails
        assert len(store.query(schedule="s").items) == 3

    def test_skipped_occurrences_are_audited_and_queryable(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        store.add_schedule("job", every=60, id="other")
        leased = {s.id: s for s in store.acquire_schedules("m")}
        plan = [
            Occurrence(slot=at(60), due_at=at(60), skipped="misfire: missed by 3 h"),
            Occurrence(slot=at(120), due_at=at(120)),
        ]
        made, other = store.materialize(
            [(leased["s"], plan, at(120), at(60)), (leased["other"], [], at(0), at(60))]
        )
        assert isinstance(made, list)
        assert other == []
        skipped, runs = made
        assert skipped.state is State.SKIPPED
        assert [
            (t.event, t.from_state, t.to_state, t.reason, t.at)
            for t in store.transitions(skipped.id)
        ] == [
            (Event.SUBMITTED, None, State.SCHEDULED, None, at(0)),
            (Event.SKIPPED, State.SCHEDULED, State.SKIPPED, "misfire: missed by 3 h", at(0)),
        ]

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(**filters).items]

        assert ids(schedule="s", state="SKIPPED") == [skipped.id]
        assert ids(schedule="s", state=["SCHEDULED", "RETRY_WAIT"]) == [runs.id]
        assert ids(schedule="s") == [skipped.id, runs.id]
        assert ids(schedule="s", state="SKIPPED", after=skipped.id) == []
        assert ids(schedule="other") == []
        clock.set(1000)
        assert [lease.execution_id for lease in store.claim("w", limit=10)] == [runs.id]
        for e in made:
            assert_audit_valid(store, e.id)

    def test_watermark_never_moves_backwards(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=60, id="s")
        for planned, expected in ((at(600), at(600)), (at(300), at(600)), (at(900), at(900))):
            (leased,) = store.acquire_schedules("m")
            store.materialize([(leased, [], planned, at(0))])
            assert store.get_schedule("s").watermark == expected

    def test_stale_materializer_leases_write_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        """Each refused plan writes nothing for its schedule; the rest of the batch is stored."""
        short: dict[str, Schedule] = {}
        for t, schedule_id in enumerate(("taken", "retaken", "expired")):
            clock.set(t)
            store.add_schedule("job", every=60, id=schedule_id)
            (short[schedule_id],) = store.acquire_schedules("m", ttl=5)  # until t + 5
        clock.set(3)
        kinds = ("fresh", "forged", "updated", "paused", "deleted", "unleased", "replanned")
        for schedule_id in kinds:
            store.add_schedule("job", every=60, id=schedule_id)
        long = {s.id: s for s in store.acquire_schedules("m", ttl=100, limit=10)}
        assert sorted(long) == sorted(kinds)
        clock.set(4)
        store.update_schedule("replanned", priority=2)  # clears m's lease, due again now
        clock.set(5)
        assert [s.id for s in store.acquire_schedules("n", limit=10)] == ["taken", "replanned"]
        store.release_schedules([store.get_schedule("replanned")])
        clock.set(6)
        again = store.acquire_schedules("m", limit=10, ttl=100)
        assert [s.id for s in again] == ["retaken", "replanned"]
        clock.set(7)  # the lease of "expired" ends now; nobody took it
        store.update_schedule("updated", priority=1)
        store.pause_schedule("paused")
        store.delete_schedule("deleted")
        presented = {
            "taken": short["taken"],  # another materializer holds it now
            "retaken": short["retaken"],  # the same one does, under a newer lease
            "replanned": long["replanned"],  # the same, though the old lease would still be live
            "expired": short["expired"],  # lease_until == now
            "fresh": long["fresh"],
            "forged": Schedule(**{**_schedule_fields(long["forged"]), "materializer": "intruder"}),
            "updated": long["updated"],
            "paused": long["paused"],
            "deleted": long["deleted"],
            "unleased": Schedule(
                **{**_schedule_fields(long["unleased"]), "materializer": None, "lease_until": None}
            ),
        }
        before = {sid: store.get_schedule(sid) for sid in presented if sid != "deleted"}
        plan = [Occurrence(slot=at(60), due_at=at(60))]
        results = store.materialize([(s, plan, at(60), at(30)) for s in presented.values()])
        verdicts = dict(zip(presented, results, strict=True))
        fresh = verdicts.pop("fresh")
        assert isinstance(fresh, list)
        assert [e.idempotency_key for e in fresh] == ["fresh:2026-01-01T00:01:00Z"]
        assert store.get_schedule("fresh").watermark == at(60)
        for schedule_id, verdict in verdicts.items():
            assert isinstance(verdict, StaleLease), schedule_id
            assert (verdict.execution_id, verdict.owner, verdict.epoch) == (
                schedule_id,
                presented[schedule_id].materializer or "",
                0,
            )
            assert store.query(schedule=schedule_id).items == [], schedule_id
            if schedule_id != "deleted":
                assert store.get_schedule(schedule_id) == before[schedule_id], schedule_id
        with pytest.raises(NotFound):
            store.get_schedule("deleted")

    def test_a_schedule_repeated_in_one_batch(self, store: Store) -> None:
        """Items apply in order: the repeat finds the lease its first plan cleared."""
        store.add_schedule("job", every=60, id="s")
        (leased,) = store.acquire_schedules("m")
        first, repeat = store.materialize(
            [
                (leased, [Occurrence(slot=at(60), due_at=at(60))], at(60), at(30)),
                (leased, [Occurrence(slot=at(120), due_at=at(120))], at(120), at(90)),
            ]
        )
        assert isinstance(first, list)
        assert isinstance(repeat, StaleLease)
        assert [e.slot for e in store.query(schedule="s").items] == ["2026-01-01T00:01:00Z"]
        stored = store.get_schedule("s")
        assert (stored.watermark, stored.next_due) == (at(60), at(30))

    def test_materialize_a_batch_of_many_schedules(self, store: Store, clock: ManualClock) -> None:
        for n in range(60):
            store.add_schedule("job", every=3600, id=f"s{n:03}", inputs={"n": n})
        leased = store.acquire_schedules("m", limit=100)
        plans = [[Occurrence(slot=at(3600), due_at=at(3600))] for _ in leased]
        plans[7] = []
        results = store.materialize(
            [(s, plan, at(3600), at(3000)) for s, plan in zip(leased, plans, strict=True)]
        )
        assert [len(r) for r in results if isinstance(r, list)] == [len(p) for p in plans]
        for s, made in zip(leased, results, strict=True):
            assert isinstance(made, list)
            assert all(e.schedule_id == s.id and e.inputs == s.inputs for e in made)
        assert len(store.query(limit=1000).items) == 59
        assert store.acquire_schedules("m") == []

    @pytest.mark.parametrize(
        ("item", "field"),
        [
            pytest.param(lambda s: (s, [], at(0)), "[0]", id="three-items"),
            pytest.param(lambda s: ("s", [], at(0), at(0)), "[0].schedule", id="not-a-schedule"),
            pytest.param(
                lambda s: (s, [], datetime(2026, 1, 1), at(0)), "[0].watermark", id="naive"
            ),
            pytest.param(lambda s: (s, [], at(0), None), "[0].next_due", id="no-next-due"),
            pytest.param(lambda s: (s, "abc", at(0), at(0)), "[0].occurrences", id="string"),
            pytest.param(lambda s: (s, ["x"], at(0), at(0)), "[0].occurrences[0]", id="not-occ"),
            pytest.param(
                lambda s: (s, [Occurrence(slot=datetime(2026, 1, 1), due_at=at(0))], at(0), at(0)),
                "[0].occurrences[0].slot",
                id="naive-slot",
            ),
            pytest.param(
                lambda s: (s, [Occurrence(slot=at(0), due_at=0)], at(0), at(0)),  # type: ignore[arg-type]
                "[0].occurrences[0].due_at",
                id="int-due-at",
            ),
            pytest.param(
                lambda s: (s, [Occurrence(slot=at(0), due_at=at(0), skipped="")], at(0), at(0)),
                "[0].occurrences[0].skipped",
                id="empty-reason",
            ),
        ],
    )
    def test_bad_materialize_names_the_field_and_writes_nothing(
        self, store: Store, item: Callable[[Schedule], Any], field: str
    ) -> None:
        store.add_schedule("job", every=60, id="good")
        store.add_schedule("job", every=60, id="bad")
        leased = {s.id: s for s in store.acquire_schedules("m")}
        good = (leased["good"], [Occurrence(slot=at(60), due_at=at(60))], at(60), at(30))
        with pytest.raises(ValidationError) as caught:
            store.materialize([item(leased["bad"]), good])
        assert caught.value.field == field
        assert store.query().items == []
        assert store.get_schedule("good") == leased["good"], "nothing of the batch written"
        assert store.materialize([]) == []

    # -- schedules: backfill and slots -------------------------------------------------

    def test_add_occurrences_is_idempotent_and_leaves_the_schedule(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="bf", inputs={"k": "v"})
        (leased,) = store.acquire_schedules("m", ttl=3600)
        clock.set(1000)
        made = store.add_occurrences(
            "bf",
            [
                Occurrence(slot=at(60), due_at=at(1000)),
                Occurrence(slot=at(120), due_at=at(1000), skipped="paused"),
            ],
        )
        assert [(e.slot, e.state, e.inputs) for e in made] == [
            ("2026-01-01T00:01:00Z", State.SCHEDULED, {"k": "v"}),
            ("2026-01-01T00:02:00Z", State.SKIPPED, {"k": "v"}),
        ]
        assert store.get_schedule("bf") == leased, "no watermark, next_due or lease change"
        again = store.add_occurrences(
            "bf", [Occurrence(slot=at(120), due_at=at(5)), Occurrence(slot=at(60), due_at=at(5))]
        )
        assert again == [made[1], made[0]]
        assert len(store.query(schedule="bf").items) == 2
        for e in made:
            assert_audit_valid(store, e.id)
        (stored,) = store.materialize(
            [(leased, [Occurrence(slot=at(60), due_at=at(60))], at(60), at(60))]
        )
        assert stored == [made[0]], "the lease was untouched; the slot already stored"
        assert store.add_occurrences("bf", []) == []
        with pytest.raises(NotFound) as missing:
            store.add_occurrences("nope", [Occurrence(slot=at(60), due_at=at(60))])
        assert "schedule nope" in str(missing.value)
        for occurrences, field in (
            ([Occurrence(slot=datetime(2026, 1, 1), due_at=at(0))], "occurrences[0].slot"),
            ([Occurrence(slot=at(0), due_at=at(0)), "x"], "occurrences[1]"),
        ):
            with pytest.raises(ValidationError) as bad:
                store.add_occurrences("bf", occurrences)  # type: ignore[arg-type]
            assert bad.value.field == field
        assert len(store.query(schedule="bf").items) == 2

    def test_slot_text_and_keys(self, store: Store) -> None:
        store.add_schedule("job", cron="0 2 * * *", timezone="Europe/Berlin", id="nightly")
        made = store.add_occurrences(
            "nightly",
            [
                Occurrence(
                    slot=datetime(2026, 11, 29, 3, 0, tzinfo=timezone_plus(1)), due_at=at(0)
                ),
                Occurrence(slot=at(0.25), due_at=at(0)),
                Occurrence(slot=datetime(2026, 3, 29, 1, 0, 5, tzinfo=UTC), due_at=at(0)),
            ],
        )
        assert [e.slot for e in made] == [
            "2026-11-29T02:00:00Z",
            "2026-01-01T00:00:00.250000Z",
            "2026-03-29T01:00:05Z",
        ]
        assert [e.idempotency_key for e in made] == [f"nightly:{e.slot}" for e in made]
        assert [slot_text(datetime(2026, 11, 29, 3, 0, tzinfo=timezone_plus(1)))] == [made[0].slot]
        assert [parse_slot(e.slot or "") for e in made] == [
            datetime(2026, 11, 29, 2, 0, tzinfo=UTC),
            at(0.25),
            datetime(2026, 3, 29, 1, 0, 5, tzinfo=UTC),
        ]

    # -- buckets and nodes ---------------------------------------------------------------

    def test_max_per_bucket_caps_running_executions(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job", "bucket_key": "tenant-a"} for _ in range(6)])
        store.submit_many([{"job": "job", "bucket_key": "tenant-b"} for _ in range(2)])
        bucket_a = store.query(limit=1).items[0].bucket
        first = store.claim("w1", limit=10, max_per_bucket=2)
        assert sorted(lease.execution_id for lease in first) == sorted(
            e.id for e in store.query(state="RUNNING").items
        )
        per_bucket = Counter(store.get(lease.execution_id).bucket for lease in first)
        assert max(per_bucket.values()) == 2
        assert len(first) == 4, "two of tenant-a, both of tenant-b"
        assert store.claim("w2", limit=10, max_per_bucket=2) == [], "every bucket is full"
        assert len(store.claim("uncapped", limit=1)) == 1, "the cap binds only who passes it"
        done = next(lease for lease in first if store.get(lease.execution_id).bucket == bucket_a)
        store.complete(done, "ok")
        assert store.claim("w2", limit=10, max_per_bucket=2) == [], "the uncapped one took it"
        store.complete(next(lease for lease in first if lease != done), "ok")
        assert len(store.claim("w2", limit=10, max_per_bucket=2)) == 1

    def test_capped_takeovers_do_not_count_twice(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job", "bucket_key": "k"} for _ in range(3)])
        store.claim("a", limit=3, max_per_bucket=1, ttl=5)  # one
        clock.set(5)
        taken = store.claim("b", limit=3, max_per_bucket=1, ttl=5)
        assert [lease.epoch for lease in taken] == [2], "the expired one, nothing new"

    def test_bad_max_per_bucket(self, store: Store) -> None:
        with pytest.raises(ValidationError) as caught:
            store.claim("w", max_per_bucket=0)
        assert caught.value.field == "max_per_bucket"

    def test_nodes_register_renew_and_lapse(self, store: Store, clock: ManualClock) -> None:
        node = store.register_node("host:1", buckets=[3, 1], ttl=10)
        assert (node.id, node.kind, node.buckets, node.started_at, node.expires_at) == (
            "host:1",
            "worker",
            (3, 1),
            at(0),
            at(10),
        )
        clock.set(8)
        renewed = store.register_node("host:1", buckets=[2], kind="scheduler", ttl=10)
        assert (renewed.started_at, renewed.heartbeat_at, renewed.buckets) == (at(0), at(8), (2,))
        assert [n.id for n in store.nodes()] == ["host:1"]
        clock.set(18)
        assert store.nodes() == [], "live strictly before expires_at"
        assert [n.id for n in store.nodes(live_only=False)] == ["host:1"]
        store.deregister_node("host:1")
        store.deregister_node("never-registered")
        assert store.nodes(live_only=False) == []
        assert store.register_node(buckets=None).id.endswith(f":{os.getpid()}")

    def test_bad_node_registration(self, store: Store) -> None:
        for arguments, field in (
            ({"buckets": [64]}, "buckets"),
            ({"ttl": 0}, "ttl"),
            ({"kind": ""}, "kind"),
        ):
            with pytest.raises(ValidationError) as caught:
                store.register_node("n", **arguments)
            assert caught.value.field == field
        assert store.nodes(live_only=False) == []

    def test_bucket_report(self, store: Store, clock: ManualClock) -> None:
        stuck = store.submit("job", bucket_key="nobody-home")
        lonely = stuck.bucket
        covered = [b for b in range(64) if b != lonely]
        store.register_node("a", buckets=covered[:40], ttl=60)
        store.register_node("b", buckets=covered[35:], ttl=60)
        store.register_node("gone", buckets=[lonely], ttl=1)
        clock.set(100)
        store.register_node("a", buckets=covered[:40], ttl=60)
        store.register_node("b", buckets=covered[35:], ttl=60)
        fresh = store.submit("job", bucket_key="nobody-home")
        report = store.bucket_report(orphaned_after=60)
        assert report.unowned == [lonely]
        assert report.duplicated == {b: ["a", "b"] for b in covered[35:40]}
        assert [e.id for e in report.orphans] == [stuck.id], "changed 100 s ago, not just now"
        assert fresh.id not in {e.id for e in report.orphans}

        store.register_node("floater", buckets=None, ttl=60)
        floating = store.bucket_report(orphaned_after=60)
        assert (floating.unowned, floating.orphans, floating.floating) == ([], [], ["floater"])

    # -- reports -------------------------------------------------------------------------

    def test_bucket_counts(self, store: Store, make: ExecutionFactory) -> None:
        x, y, z = _keys_in_distinct_buckets(3, store.config.num_buckets)
        bx, by, bz = (bucket_for(key, store.config.num_buckets) for key in (x, y, z))
        make.scheduled("a", bucket_key=x)
        make.running("b", bucket_key=x)
        make.retry_waiting("c", bucket_key=x)
        make.scheduled("d", bucket_key=y, delay=3600)
        make.succeeded("e", bucket_key=y)
        make.dead("f", bucket_key=z)
        expected = dict(sorted({bx: 3, by: 1}.items()))
        assert store.bucket_counts() == expected, "unfinished ones by default"
        assert list(store.bucket_counts()) == sorted(expected), "in bucket order"
        assert store.bucket_counts(states=[State.SCHEDULED, "RETRY_WAIT", State.RUNNING]) == (
            expected
        )
        assert store.bucket_counts(states="SUCCEEDED") == {by: 1}
        assert store.bucket_counts(states=[State.FAILED, State.SUCCEEDED]) == dict(
            sorted({by: 1, bz: 1}.items())
        )
        assert store.bucket_counts(states=State.RUNNING) == {bx: 1}
        assert store.bucket_counts(states=[]) == {}
        assert store.bucket_counts(states="CANCELLED") == {}, "only buckets with executions"
        for states in ("DONE", ["RUNNING", "nope"]):
            with pytest.raises(ValidationError) as caught:
                store.bucket_counts(states=states)
            assert caught.value.field == "states"

    def test_stats_counts_by_state_and_job(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        make.running("a")
        make.scheduled("a")
        make.scheduled("a", delay=600)
        make.succeeded("b")
        make.succeeded("b")
        make.dead("b")
        make.retry_waiting("c")
        store.cancel(make.scheduled("c").id)
        clock.set(50)
        stats = store.stats()
        assert (stats.at, stats.window) == (at(50), timedelta(hours=1))
        zeros = dict.fromkeys(State, 0)
        assert stats.by_state == zeros | {
            State.SCHEDULED: 2,
            State.RUNNING: 1,
            State.RETRY_WAIT: 1,
            State.SUCCEEDED: 2,
            State.FAILED: 1,
            State.CANCELLED: 1,
        }
        assert list(stats.by_state) == list(State), "every state, zeros included"
        assert list(stats.by_job) == ["a", "b", "c"]
        assert stats.by_job["a"] == zeros | {State.SCHEDULED: 2, State.RUNNING: 1}
        assert stats.by_job["b"] == zeros | {State.SUCCEEDED: 2, State.FAILED: 1}
        assert stats.by_job["c"] == zeros | {State.RETRY_WAIT: 1, State.CANCELLED: 1}
        assert stats.due_backlog == 1, "the one due at 0; not the one due at 600, nor the retry"
        assert store.stats(window=timedelta(minutes=5)).window == timedelta(minutes=5)
        for window in (0, -1, "1h", None):
            with pytest.raises(ValidationError) as caught:
                store.stats(window=window)  # type: ignore[arg-type]
            assert caught.value.field == "window"

    def test_stats_on_an_empty_store(self, store: Store, clock: ManualClock) -> None:
        stats = store.stats(window=60)
        assert stats == Stats(
            at=at(0),
            window=timedelta(minutes=1),
            by_state=dict.fromkeys(State, 0),
            by_job={},
            due_backlog=0,
            claim_lateness=Lateness(count=0, p50=None, p90=None, p99=None, max=None),
            stale_refused=0,
            lease_expiries=0,
        )

    def test_stats_backlog_boundary(self, store: Store, clock: ManualClock) -> None:
        clock.set(100)
        store.submit("job", execute_at=at(100))  # due_at == now: due
        store.submit("job", execute_at=at(99))
        store.submit("job", execute_at=at(100) + _US)  # not yet
        (lease,) = store.claim("w", limit=1)
        store.fail(lease, "boom", retry_in=0)  # RETRY_WAIT, due now
        store.submit("running", execute_at=at(50))
        store.claim("w", jobs=["running"])
        assert store.stats().due_backlog == 2
        clock.set(at(100) + _US)
        assert store.stats().due_backlog == 3

    def test_stats_backlog_leaves_held_occurrences_out(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        store.add_occurrences("s", [Occurrence(slot=at(60), due_at=HELD)])
        store.submit("job", execute_at=HELD - timedelta(days=1))
        clock.set(HELD + timedelta(days=1))
        # Even once the clock passes HELD, a held occurrence is waiting for its turn, not due.
        assert store.stats().due_backlog == 1

    def test_stats_claim_lateness_percentiles(self, store: Store, clock: ManualClock) -> None:
        clock.set(1000)
        store.submit_many([{"job": "job", "execute_at": at(1000 - k)} for k in range(1, 101)])
        assert len(store.claim("w", limit=100)) == 100  # late by 1 s .. 100 s
        late = store.stats().claim_lateness
        assert late == Lateness(
            count=100,
            p50=timedelta(seconds=50),
            p90=timedelta(seconds=90),
            p99=timedelta(seconds=99),
            max=timedelta(seconds=100),
        )

    def test_stats_lateness_of_few_claims(self, store: Store, clock: ManualClock) -> None:
        clock.set(100)
        store.submit_many([{"job": "job", "execute_at": at(100 - k)} for k in (7, 3, 5)])
        store.submit("retried", execute_at=at(90))
        store.claim("w", limit=10, jobs=["job"])  # late by 7, 3 and 5 s
        (lease,) = store.claim("w", jobs=["retried"])  # late by 10 s at first ...
        store.fail(lease, "boom", retry_in=50)  # ... but now due at 150: counted as 0
        clock.set(200)
        store.claim("w", jobs=["retried"])  # late by 50 s
        late = store.stats().claim_lateness
        # Nearest rank of 0, 3, 5, 7, 50: p50 is the 3rd value, p90 and p99 the 5th.
        assert late == Lateness(
            count=5,
            p50=timedelta(seconds=5),
            p90=timedelta(seconds=50),
            p99=timedelta(seconds=50),
            max=timedelta(seconds=50),
        )
        store.submit("solo", execute_at=at(150))
        clock.set(210)
        store.claim("w", jobs=["solo"])
        assert store.stats(window=5).claim_lateness == Lateness(
            count=1,
            p50=timedelta(seconds=60),
            p90=timedelta(seconds=60),
            p99=timedelta(seconds=60),
            max=timedelta(seconds=60),
        )

    def test_stats_window_boundary(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job"} for _ in range(3)])
        for second in (0, 10, 20):
            clock.set(second)
            store.claim("w", limit=1, ttl=10_000)
        clock.set(3610)
        store.submit("job", execute_at=at(3605))
        store.claim("w", limit=1)  # at == now: inside the window

        def lateness(window: float | timedelta) -> tuple[int, timedelta | None]:
            late = store.stats(window=window).claim_lateness
            return late.count, late.max

        # The window is (now - window, now]: a claim at exactly now - window is out.
        assert lateness(3600) == (2, timedelta(seconds=20))
        assert lateness(timedelta(seconds=3600, microseconds=1)) == (3, timedelta(seconds=20))
        assert lateness(3610 + 1e-6) == (4, timedelta(seconds=20))
        assert lateness(1e-6) == (1, timedelta(seconds=5))

    def test_stats_counts_refusals_and_expiries(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        lost = make.running("x", ttl=5)
        make.running("y", ttl=5)
        clock.set(1)
        with pytest.raises(StaleLease):
            store.complete(replace(lost, epoch=99), "forged")
        clock.set(5)
        (taken,) = store.claim("w2", jobs=["x"])  # a takeover: the lost lease expired
        assert taken.epoch == 2
        assert store.reap_expired() == 1  # y's lease expired too
        with pytest.raises(StaleLease):
            store.heartbeat(lost)
        clock.set(6)
        stats = store.stats(window=6)  # (0, 6]: the claims at 0 are out
        assert (stats.stale_refused, stats.lease_expiries) == (2, 2)
        assert stats.claim_lateness.count == 1, "the takeover"
        assert stats.claim_lateness.max == timedelta(seconds=5), "late by the time since due"
        narrow = store.stats(window=1)  # (5, 6]
        assert (narrow.stale_refused, narrow.lease_expiries, narrow.claim_lateness.count) == (
            0,
            0,
            0,
        )
        wide = store.stats(window=7)  # (-1, 6]
        assert (wide.stale_refused, wide.lease_expiries, wide.claim_lateness.count) == (2, 2, 3)

    def test_slo_shares_and_worst(self, store: Store, clock: ManualClock) -> None:
        def due(name: str, second: float) -> str:
            return store.submit(name, execute_at=at(second)).id

        def claim(name: str, second: float) -> Lease:
            clock.set(second)
            (lease,) = store.claim("w", jobs=[name], ttl=10_000)
            return lease

        def finish(lease: Lease, second: float) -> None:
            clock.set(second)
            store.complete(lease, "ok")

        on_time = due("on-time", 100)  # claimed at the claim boundary, finished in time
        late = due("late", 200)  # claimed late, finished at the finish boundary
        slow = due("slow", 300)  # claimed in time, finished too late
        unclaimed = due("unclaimed", 500)
        undecided = due("undecided", 995)  # neither objective decided yet
        cancelled = due("cancelled", 450)  # never claimed: not meant to run
        store.cancel(cancelled)
        dead = due("dead", 600)  # a dead letter counts as finished
        aborted = due("aborted", 650)  # cancelled while running: never finishes
        running = due("running", 900)
        due("future", 2000)
        early = due("early", 50)  # due exactly at now - window: outside
        store.add_schedule("job", every=60, id="s")
        (skipped,) = store.add_occurrences(
            "s", [Occurrence(slot=at(400), due_at=at(400), skipped="misfire")]
        )
        first = claim("on-time", 110)
        finish(first, 150)
        second = claim("late", 230)
        third = claim("slow", 301)
        finish(second, 500)
        fourth = claim("dead", 600)
        finish(third, 601)
        clock.set(610)
        store.fail(fourth, "fatal", retryable=False)
        fifth = claim("aborted", 651)
        store.abort(fifth)
        claim("running", 905)
        clock.set(1000)

        report = store.slo(window=950, claim_within=10, finish_within=300, worst=3)
        assert (report.at, report.window) == (at(1000), timedelta(seconds=950))
        assert (report.claim_within, report.finish_within) == (
            timedelta(seconds=10),
            timedelta(seconds=300),
        )
        # Claimed: on-time, late, slow, dead, aborted, running, and unclaimed (500 s overdue);
        # met by all but late and unclaimed. Undecided (5 s overdue) is left out.
        assert report.claimed == SloShare(met=5, total=7, share=5 / 7)
        # Finished: on-time, late, slow, dead; unclaimed and aborted are overdue (500 s,
        # 350 s); running (100 s) and undecided are not decided yet. Met: on-time, late, dead.
        assert report.finished == SloShare(met=3, total=6, share=0.5)
        assert report.worst == [
            SloOffender(
                execution_id=unclaimed,
                job="unclaimed",
                due_at=at(500),
                claimed_at=None,
                lateness=timedelta(seconds=500),
                state=State.SCHEDULED,
            ),
            SloOffender(
                execution_id=late,
                job="late",
                due_at=at(200),
                claimed_at=at(230),
                lateness=timedelta(seconds=30),
                state=State.SUCCEEDED,
            ),
            SloOffender(
                execution_id=on_time,
                job="on-time",
                due_at=at(100),
                claimed_at=at(110),
                lateness=timedelta(seconds=10),
                state=State.SUCCEEDED,
            ),
        ]
        everyone = store.slo(window=950, worst=100).worst
        listed = [o.execution_id for o in everyone]
        assert listed == [unclaimed, late, on_time, running, undecided, slow, aborted, dead], (
            "by lateness, then due_at"
        )
        assert {cancelled, skipped.id, early}.isdisjoint(listed)
        assert store.slo(window=950, worst=0).worst == []
        # One microsecond wider, the window takes in the execution due at 50.
        wider = store.slo(window=timedelta(seconds=950, microseconds=1), worst=1)
        assert (wider.claimed.total, wider.finished.total) == (8, 7)
        assert wider.worst[0].execution_id == early

    def test_slo_decides_at_the_boundaries(self, store: Store, clock: ManualClock) -> None:
        store.submit("job", execute_at=at(0))
        clock.set(10)
        assert store.slo(claim_within=10, finish_within=10).claimed == SloShare(0, 0, None)
        clock.set(at(10) + _US)
        report = store.slo(claim_within=10, finish_within=20)
        assert report.claimed == SloShare(0, 1, 0.0), "overdue now: a miss"
        assert report.finished == SloShare(0, 0, None), "not decided yet"
        (lease,) = store.claim("w", ttl=100)
        clock.set(20)
        store.complete(lease, "ok")
        report = store.slo(claim_within=10, finish_within=20)
        assert report.claimed == SloShare(0, 1, 0.0)
        assert report.finished == SloShare(1, 1, 1.0), "finished exactly at due_at + 20 s"
        assert store.slo(claim_within=timedelta(seconds=10, microseconds=1)).claimed == SloShare(
            1, 1, 1.0
        )

    def test_slo_measures_retries_against_the_latest_due_time(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=100)
        clock.set(5)
        store.fail(lease, "boom", retry_in=60)  # due again at 65
        clock.set(100)
        (again,) = store.claim("w", ttl=100)
        store.complete(again, "ok")
        report = store.slo(claim_within=10, finish_within=300)
        # The first claim (at 0) is measured against the current due_at (65): on time.
        assert report.claimed == SloShare(1, 1, 1.0)
        assert report.finished == SloShare(1, 1, 1.0)
        (offender,) = report.worst
        assert (offender.due_at, offender.claimed_at, offender.lateness) == (
            at(65),
            at(0),
            timedelta(0),
        )

    def test_bad_slo_names_the_field(self, store: Store) -> None:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"window": 0}, "window"),
            ({"claim_within": -1}, "claim_within"),
            ({"finish_within": "5m"}, "finish_within"),
            ({"worst": -1}, "worst"),
            ({"worst": 10_001}, "worst"),
            ({"worst": 1.5}, "worst"),
        ]
        for arguments, field in cases:
            with pytest.raises(ValidationError) as caught:
                store.slo(**arguments)
            assert caught.value.field == field
        assert store.slo(claim_within=0, finish_within=0).claimed.total == 0

    # -- pruning -------------------------------------------------------------------------

    def test_prune_deletes_only_old_finished_executions(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        old = [
            make.succeeded("done", idempotency_key="reused").id,
            make.dead("dead").id,
            store.cancel(make.scheduled("cancelled").id).id,
        ]
        store.add_schedule("job", every=60, id="s")
        (skipped,) = store.add_occurrences(
            "s", [Occurrence(slot=at(60), due_at=at(60), skipped="misfire")]
        )
        old.append(skipped.id)
        # An execution with commands: cancelled while running, by a command.
        aborted = make.running("aborted")
        store.request(aborted.execution_id, "pause")
        (command,) = store.claim_commands("worker", [aborted.execution_id])
        store.complete_command(command, aborted)
        store.request(aborted.execution_id, "cancel")  # left PENDING
        store.abort(aborted)
        old.append(aborted.execution_id)
        running = make.running("running", ttl=10_000)
        kept = [
            running.execution_id,
            make.scheduled("waiting").id,
            make.retry_waiting("retrying").id,
        ]
        store.request(running.execution_id, "pause")
        clock.set(100)
        old.append(make.succeeded("boundary").id)  # updated_at == now - older_than: pruned
        clock.set(100.5)
        kept.append(make.succeeded("young").id)
        clock.set(200)

        def stored() -> list[str]:
            return sorted(e.id for e in executions(store))

        everything = stored()
        assert store.prune(older_than=100, dry_run=True) == len(old) == 6
        assert stored() == everything, "a dry run deletes nothing"
        assert len(store.transitions(aborted.execution_id)) > 0

        totals: list[int] = []
        assert store.prune(older_than=timedelta(seconds=100), batch=4, on_batch=totals.append) == 6
        assert totals == [4, 6]
        assert stored() == sorted(kept)
        for execution_id in old:
            for read in (store.get, store.transitions, store.commands):
                with pytest.raises(NotFound):
                    read(execution_id)
        assert [c.kind for c in store.commands(running.execution_id)] == [CommandKind.PAUSE]
        assert store.get(running.execution_id).state is State.RUNNING
        assert store.prune(older_than=100, on_batch=totals.append) == 0
        assert totals == [4, 6], "no batch deleted anything: no call"
        assert store.prune(older_than=100, dry_run=True) == 0
        assert store.get_schedule("s").id == "s", "schedules stay"
        fresh = store.submit("done", idempotency_key="reused")
        assert fresh.id not in old, "a pruned execution's idempotency key is free again"
        assert store.complete(running, "ok").state is State.SUCCEEDED
        assert_audit_valid(store, running.execution_id)

    def test_prune_in_batches(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job"} for _ in range(7)])
        for lease in store.claim("w", limit=7):
            clock.advance(1)
            store.complete(lease, None)
        clock.set(1000)
        totals: list[int] = []
        assert store.prune(older_than=0, batch=3, on_batch=totals.append) == 7
        assert totals == [3, 6, 7], "after each batch, the total so far"
        assert executions(store) == []
        store.submit_many([{"job": "job"} for _ in range(4)])
        for lease in store.claim("w", limit=4):
            store.complete(lease, None)
        totals.clear()
        assert store.prune(older_than=0, batch=2, on_batch=totals.append) == 4
        assert totals == [2, 4], "an empty last batch is not reported"

    def test_a_second_prune_with_the_same_cutoff_starts_over(
        self, store: Store, clock: ManualClock
    ) -> None:
        early, late = store.submit_many([{"job": "job"}, {"job": "job"}])
        [lease_late] = store.claim("w", ids=[late.id])
        store.complete(lease_late, None)
        assert store.prune(older_than=0) == 1  # the later id only; the earlier one is running
        [lease_early] = store.claim("w", ids=[early.id])
        store.complete(lease_early, None)
        assert store.prune(older_than=0, dry_run=True) == 1
        assert store.prune(older_than=0) == 1, "the earlier id is not skipped"
        assert executions(store) == []

    def test_prune_batches_that_are_done_stay_done(self, store: Store, clock: ManualClock) -> None:
        made = []
        for second in (30, 10, 20):
            clock.set(second)
            made.append(store.cancel(store.submit("job").id))
        clock.set(100)
        totals: list[int] = []

        def stop_after_one_batch(deleted: int) -> None:
            totals.append(deleted)
            raise RuntimeError("interrupted")

        with pytest.raises(RuntimeError, match="interrupted"):
            store.prune(older_than=0, batch=1, on_batch=stop_after_one_batch)
        assert totals == [1]
        left = {e.id for e in executions(store)}
        assert len(left) == 2, "one batch of one was deleted, and stays deleted"
        assert left < {e.id for e in made}

    def test_prune_cutoff_is_fixed_when_the_call_starts(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.cancel(store.submit("job").id)
        clock.set(50)
        young = store.cancel(store.submit("job").id)
        clock.set(100)

        def time_passes(deleted: int) -> None:
            clock.set(1000)  # the second execution is now old enough, but too late

        assert store.prune(older_than=60, batch=1, on_batch=time_passes) == 1
        assert [e.id for e in executions(store)] == [young.id]

    def test_bad_prune_names_the_field(self, store: Store, make: ExecutionFactory) -> None:
        done = make.succeeded()
        cases: list[tuple[dict[str, Any], str]] = [
            ({"older_than": -1}, "older_than"),
            ({"older_than": "30d"}, "older_than"),
            ({"older_than": None}, "older_than"),
            ({"older_than": 0, "batch": 0}, "batch"),
            ({"older_than": 0, "batch": 100_001}, "batch"),
            ({"older_than": 0, "batch": 2.5}, "batch"),
            ({"older_than": 0, "on_batch": 5}, "on_batch"),
        ]
        for arguments, field in cases:
            with pytest.raises(ValidationError) as caught:
                store.prune(**arguments)
            assert caught.value.field == field
        assert store.get(done.id) == done, "nothing was deleted"
        assert store.prune(older_than=0, batch=100_000) == 1

    # -- the stateful property -------------------------------------------------------------

    def test_random_workers_never_break_fencing(self, store_factory: StoreFactory) -> None:
        from fencepost.testing.stateful import run_fencing_machine

        run_fencing_machine(store_factory)


def timezone_plus(hours: int) -> Any:
    from datetime import timezone

    return timezone(timedelta(hours=hours))


def _fields(lease: Lease) -> dict[str, Any]:
    return {name: getattr(lease, name) for name in Lease.__dataclass_fields__}


def _command_fields(command: Command) -> dict[str, Any]:
    return {name: getattr(command, name) for name in Command.__dataclass_fields__}


def _schedule_fields(schedule: Schedule) -> dict[str, Any]:
    return {name: getattr(schedule, name) for name in Schedule.__dataclass_fields__}


def _keys_in_distinct_buckets(count: int, num_buckets: int) -> list[str]:
    """``count`` bucket keys that land in ``count`` different buckets."""
    keys: dict[int, str] = {}
    for n in range(10 * num_buckets):
        keys.setdefault(bucket_for(f"tenant-{n}", num_buckets), f"tenant-{n}")
        if len(keys) == count:
            return list(keys.values())
    raise AssertionError(f"fewer than {count} buckets")


def executions(store: Store) -> list[Execution]:
    """Every execution in the store, in id order."""
    out: list[Execution] = []
    cursor = None
    while True:
        page = store.query(limit=1000, after=cursor)
        out.extend(page.items)
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor

"""The contract of submitting: ``submit``, ``submit_many``, ``submit_or_find``, ``find``.

Defaults and round trips of every field, validation that names the field and writes
nothing, payload limits, and idempotency keys (the same request finds the same
execution; a different one under the same key conflicts).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.errors import IdempotencyConflict, ValidationError
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    NOT_AN_OBJECT,
    OBJECT_INPUTS,
    ContractFixtures,
    StoreFactory,
    at,
    names_the_field,
    not_an_object,
    timezone_plus,
)
from fencepost.testing.factory import ExecutionFactory


class SubmittingContract(ContractFixtures):
    """Submit one or many executions, with and without an idempotency key."""

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
            version=3,
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

    @pytest.mark.parametrize("inputs", NOT_AN_OBJECT, ids=repr)
    def test_inputs_that_are_not_an_object_are_refused(self, store: Store, inputs: Any) -> None:
        """A handler takes its inputs as keywords: any other JSON is refused, nothing stored."""
        calls: list[tuple[Callable[[], object], str]] = [
            (lambda: store.submit("job", inputs=inputs), "inputs"),
            (lambda: store.submit_or_find("job", inputs=inputs, idempotency_key="k"), "inputs"),
            (
                lambda: store.submit_many(
                    [{"job": "job"}] * 3 + [{"job": "job", "inputs": inputs}]
                ),
                "[3].inputs",
            ),
        ]
        for call, field in calls:
            with pytest.raises(ValidationError) as caught:
                call()
            assert (caught.value.field, caught.value.message) == (field, not_an_object(inputs))
        assert store.query().items == []
        assert store.find("k") is None

    @pytest.mark.parametrize(("inputs", "stored"), OBJECT_INPUTS, ids=repr)
    def test_inputs_that_are_an_object_or_none_are_stored(
        self, store: Store, inputs: Any, stored: Any
    ) -> None:
        made = [
            store.submit("job", inputs=inputs),
            store.submit_or_find("job", inputs=inputs, idempotency_key="k")[0],
            *store.submit_many([{"job": "job"}, {"job": "job", "inputs": inputs}])[1:],
        ]
        for execution in made:
            assert execution.inputs == stored
            assert store.get(execution.id).inputs == stored
        listed = store.query(limit=10).items
        assert [e.inputs for e in listed] == [stored, stored, {}, stored]
        leases = store.claim("w", limit=10)
        assert {lease.execution_id: lease.inputs for lease in leases} == {
            e.id: e.inputs for e in listed
        }, "a claim delivers the inputs as stored"

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
            pytest.param({"version": 0}, "job_version", id="zero-version"),
            pytest.param({"inputs": {"s": "a\ud800"}}, "inputs", id="surrogate-in-inputs"),
            pytest.param({"max_attempts": 2**31}, "max_attempts", id="huge-attempts"),
            pytest.param({"version": 2**40}, "job_version", id="huge-version"),
            pytest.param({"delay": 1e20}, "delay", id="overflowing-delay"),
            pytest.param({"timeout": 1e-9}, "timeout", id="timeout-rounds-to-zero"),
            pytest.param({"bucket_key": "k\x00"}, "bucket_key", id="nul-in-bucket-key"),
            pytest.param({"idempotency_key": "\udfff"}, "idempotency_key", id="surrogate-key"),
        ],
    )
    def test_bad_submit_names_the_field_and_writes_nothing(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        with names_the_field(field):
            store.submit("job", **arguments)
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
            store.submit_or_find("job", colour="red")  # type: ignore[call-arg]

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

"""The contract of named queues: where an execution waits, and who may claim it.

Every execution and schedule has a queue (``"default"`` unless one is named); a
schedule's executions take its queue. ``claim(queues=...)`` takes only from those
queues (takeovers included), at most N of a queue given as ``{name: N}``, in the
usual claim order across them, and combines with every other claim filter;
``queues=None`` claims from every queue. Queue names are checked like job names.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from fencepost.domain.errors import IdempotencyConflict, ValidationError
from fencepost.domain.models import Occurrence
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    ContractFixtures,
    at,
    executions,
    keys_in_distinct_buckets,
    names_the_field,
)

#: Names no store may keep as a queue: each is refused, naming the field.
HOSTILE_QUEUES: tuple[Any, ...] = (
    "",
    "   ",
    "a\x00b",
    "\x00",
    "lone \ud800 surrogate",
    "x" * 101,
    "q" * 10_000,
    5,
    True,
    ["a"],
    {"a": 1},
    b"bytes",
)

#: Odd but valid names: each must round-trip, list, claim and encode.
ODD_QUEUES = ("emails", "ünïcode 🚀", "a,b=c", "with space", "'; DROP TABLE x; --", "q" * 100)


def _queues(leases: list[Any]) -> Counter[str]:
    return Counter(lease.queue for lease in leases)


class QueuesContract(ContractFixtures):
    """Named queues: submit and schedule round trips, queue-restricted claims, bad names."""

    # -- where an execution waits --------------------------------------------------------

    def test_an_execution_keeps_its_queue(self, store: Store) -> None:
        plain = store.submit("job")
        named = store.submit("job", queue="emails")
        unnamed = store.submit("job", queue=None)
        batch = store.submit_many([{"job": "job", "queue": "reports"}, {"job": "job"}])
        assert (plain.queue, named.queue, unnamed.queue) == ("default", "emails", "default")
        assert [e.queue for e in batch] == ["reports", "default"]
        for e in (plain, named, unnamed, *batch):
            assert store.get(e.id).queue == e.queue
        listed = {e.id: e.queue for e in store.query(limit=10).items}
        assert listed == {e.id: e.queue for e in (plain, named, unnamed, *batch)}

    def test_the_queue_is_part_of_an_idempotent_submit(self, store: Store) -> None:
        first = store.submit("job", idempotency_key="k", queue="a")
        assert store.submit("job", idempotency_key="k", queue="a").id == first.id
        with pytest.raises(IdempotencyConflict):
            store.submit("job", idempotency_key="k", queue="b")
        with pytest.raises(IdempotencyConflict):
            store.submit("job", idempotency_key="k")
        # The default queue named or not is the same request.
        unnamed = store.submit("job", idempotency_key="d")
        assert store.submit("job", idempotency_key="d", queue="default").id == unnamed.id

    def test_a_schedule_and_its_executions_keep_its_queue(
        self, store: Store, clock: ManualClock
    ) -> None:
        s = store.add_schedule("report", every=60, id="s", queue="reports")
        assert (s.queue, store.get_schedule("s").queue) == ("reports", "reports")
        assert store.add_schedule("report", every=60, id="s", queue="reports") == s
        with pytest.raises(IdempotencyConflict):
            store.add_schedule("report", every=60, id="s", queue="other")
        assert store.add_schedule("report", every=60, id="d").queue == "default"
        assert [x.queue for x in store.schedules().items] == ["default", "reports"]
        (occurrence,) = store.add_occurrences("s", [Occurrence(slot=at(60), due_at=at(60))])
        assert occurrence.queue == "reports"
        clock.set(1)
        (leased,) = [x for x in store.acquire_schedules("m", ttl=30) if x.id == "s"]
        assert leased.queue == "reports"
        (made,) = store.materialize(
            [(leased, [Occurrence(slot=at(120), due_at=at(120))], at(120), at(60))]
        )
        assert isinstance(made, list)
        assert [e.queue for e in made] == ["reports"]
        moved = store.update_schedule("s", queue="batch")
        assert (moved.queue, store.get_schedule("s").queue) == ("batch", "batch")
        assert store.get(occurrence.id).queue == "reports"  # already made: unchanged
        assert store.update_schedule("s", queue=None).queue == "default"

    def test_query_and_stats_by_queue(self, store: Store) -> None:
        a1 = store.submit("x", queue="a")
        a2 = store.submit("y", queue="a")
        store.submit("x", queue="b")
        store.submit("x")
        assert [e.id for e in store.query(queue="a").items] == [a1.id, a2.id]
        assert [e.id for e in store.query(queue="a", job="y").items] == [a2.id]
        assert store.query(queue="nowhere").items == []
        assert store.query(queue="\ud800").items == []  # no queue holds such text
        with names_the_field("queue"):
            store.query(queue=5)  # type: ignore[arg-type]
        store.claim("w", queues=["a"])
        stats = store.stats()
        assert list(stats.by_queue) == ["a", "b", "default"]
        zeros = dict.fromkeys(State, 0)
        assert stats.by_queue["a"] == zeros | {State.SCHEDULED: 1, State.RUNNING: 1}
        assert stats.by_queue["b"] == zeros | {State.SCHEDULED: 1}
        assert stats.by_queue["default"] == zeros | {State.SCHEDULED: 1}

    # -- claims restricted to queues ------------------------------------------------------

    def test_a_claim_takes_only_from_its_queues(self, store: Store) -> None:
        for queue in ("a", "a", "b", "b", "default", "c"):
            store.submit("job", queue=queue)
        assert _queues(store.claim("w", limit=10, queues=["a"])) == Counter({"a": 2})
        assert _queues(store.claim("w", limit=10, queues=("b", "nowhere"))) == {"b": 2}
        assert store.claim("w", limit=10, queues=[]) == []
        assert store.claim("w", limit=10, queues=["a", "b"]) == []
        assert _queues(store.claim("w", limit=10)) == Counter({"default": 1, "c": 1})

    def test_a_claim_takes_at_most_n_of_a_queue(self, store: Store) -> None:
        for queue in ("a",) * 5 + ("b",) * 5:
            store.submit("job", queue=queue)
        taken = store.claim("w", limit=10, queues={"a": 2, "b": 3})
        assert _queues(taken) == Counter({"a": 2, "b": 3})
        assert _queues(store.claim("w", limit=10, queues={"a": 0, "b": 1})) == {"b": 1}
        # The claim's limit still holds over the queues' (and caps a queue's N).
        assert len(store.claim("w", limit=2, queues={"a": 50, "b": 50})) == 2
        assert store.claim("w", limit=10, queues={"a": 0, "b": 0}) == []
        left = [e for e in executions(store) if e.state is State.SCHEDULED]
        assert Counter(e.queue for e in left) == Counter({"a": 1, "b": 1})

    def test_claim_order_holds_across_queues(self, store: Store, clock: ManualClock) -> None:
        low_a = store.submit("job", queue="a", priority=1, execute_at=at(0))
        high_b = store.submit("job", queue="b", priority=9, execute_at=at(5))
        old_b = store.submit("job", queue="b", priority=1, execute_at=at(-5))
        store.submit("job", queue="c", priority=99)
        clock.set(10)
        (first,) = store.claim("w", queues=["a", "b"])
        assert first.execution_id == high_b.id
        rest = store.claim("w", limit=5, queues=["b", "a"])
        assert [lease.execution_id for lease in rest] == [old_b.id, low_a.id]

    def test_takeovers_are_restricted_to_the_queues_too(
        self, store: Store, clock: ManualClock
    ) -> None:
        first = store.submit("job", queue="a")
        second = store.submit("job", queue="a")
        waiting = store.submit("job", queue="a", execute_at=at(5))
        (lost1, lost2) = store.claim("old", limit=2, ttl=5, queues=["a"])
        assert {lost1.execution_id, lost2.execution_id} == {first.id, second.id}
        clock.set(5)  # both leases expired; the third is due
        assert store.claim("w", limit=10, queues=["b"]) == []
        (one,) = store.claim("w", limit=10, queues={"a": 1})
        assert one.queue == "a"
        rest = store.claim("w", limit=10, queues=["a"])
        assert {lease.execution_id for lease in (one, *rest)} == {first.id, second.id, waiting.id}
        taken_over = [lease for lease in (one, *rest) if lease.execution_id != waiting.id]
        assert [lease.epoch for lease in taken_over] == [2, 2]

    def test_queue_claims_combine_with_the_other_filters(self, store: Store) -> None:
        x = store.submit("x", queue="a")
        store.submit("y", queue="a")
        store.submit("x", queue="b")
        (only,) = store.claim("w", limit=10, queues=["a"], jobs=["x"])
        assert only.execution_id == x.id
        pinned = store.submit("z", queue="a", version=2)
        assert store.claim("w", limit=10, queues=["a"], jobs=["z"], versions=[("z", 1)]) == []
        (by_id,) = store.claim("w", queues=["a"], ids=[pinned.id], versions=[("z", 2)])
        assert by_id.execution_id == pinned.id
        key, other = keys_in_distinct_buckets(2, store.config.num_buckets)
        mine = store.submit("job", queue="c", bucket_key=key)
        store.submit("job", queue="c", bucket_key=other)
        (in_bucket,) = store.claim("w", limit=10, queues=["c"], buckets=[mine.bucket])
        assert in_bucket.execution_id == mine.id

    def test_the_bucket_cap_holds_over_every_queue_of_a_claim(self, store: Store) -> None:
        (tenant,) = keys_in_distinct_buckets(1, store.config.num_buckets)
        for queue in ("a", "a", "a", "b", "b", "b"):
            store.submit("job", queue=queue, bucket_key=tenant)
        taken = store.claim("w", limit=10, queues=["a", "b"], max_per_bucket=2)
        assert len(taken) == 2
        assert store.claim("w", limit=10, queues=["b"], max_per_bucket=2) == []
        assert _queues(store.claim("w", limit=10, queues={"a": 1, "b": 1}, max_per_bucket=4))
        running = [e for e in executions(store) if e.state is State.RUNNING]
        assert len(running) == 4

    def test_a_claim_without_queues_is_unchanged(self, store: Store) -> None:
        for queue in ("a", "b", "default"):
            store.submit("job", queue=queue)
        taken = store.claim("w", limit=10)
        assert _queues(taken) == Counter({"a": 1, "b": 1, "default": 1})

    # -- names -----------------------------------------------------------------------------

    @pytest.mark.parametrize("queue", HOSTILE_QUEUES, ids=lambda q: repr(q)[:20])
    def test_a_bad_queue_is_refused_by_name_and_nothing_is_written(
        self, store: Store, queue: Any
    ) -> None:
        with names_the_field("queue"):
            store.submit("job", queue=queue)
        with names_the_field("[1].queue"):
            store.submit_many([{"job": "job"}, {"job": "job", "queue": queue}])
        with names_the_field("queue"):
            store.add_schedule("job", every=60, id="s", queue=queue)
        assert executions(store) == []
        assert store.schedules().items == []
        ok = store.add_schedule("job", every=60, id="ok")
        with names_the_field("queue"):
            store.update_schedule("ok", queue=queue)
        assert store.get_schedule("ok") == ok
        with pytest.raises(ValidationError) as caught:
            store.claim("w", queues=[queue])
        assert caught.value.field == "queues"
        if isinstance(queue, str):
            with pytest.raises(ValidationError) as caught:
                store.claim("w", queues={queue: 1})
            assert caught.value.field == "queues"

    def test_claim_refuses_malformed_queues(self, store: Store) -> None:
        for bad in ("a", {"a": -1}, {"a": 1.5}, {"a": True}, {"a": 2**80}, [None]):
            with pytest.raises(ValidationError) as caught:
                store.claim("w", queues=bad)  # type: ignore[arg-type]
            assert caught.value.field == "queues", bad

    @pytest.mark.parametrize("queue", ODD_QUEUES, ids=lambda q: repr(q)[:20])
    def test_an_odd_queue_name_round_trips_and_claims(self, store: Store, queue: str) -> None:
        neighbour = queue[:-1] if len(queue) > 1 else "other"
        e = store.submit("job", queue=queue, inputs={"q": queue})
        store.submit("job", queue=neighbour)
        assert store.get(e.id).queue == queue
        assert [x.queue for x in store.query(limit=10).items] == [queue, neighbour]
        (lease,) = store.claim("w", limit=10, queues=[queue])
        assert (lease.execution_id, lease.queue) == (e.id, queue)
        (limited,) = store.claim("w", limit=10, queues={neighbour: 1, queue: 1})
        assert limited.queue == neighbour

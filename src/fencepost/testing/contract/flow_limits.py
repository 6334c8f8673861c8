"""The contract of flow control, the limits a claim obeys: rates, concurrency, keys.

A limit holds for every execution of its scope (``job:NAME`` or ``queue:NAME``), on
every claim of every claimer, and the claim that obeys it stays the claim it was:

* a **rate** counts starts — claims, retries and takeovers alike — with a token
  bucket of ``burst`` tokens refilled at the rate: over any window of W seconds a
  scope never starts more than ``rate * W + burst``;
* a **concurrency** counts RUNNING executions with a live lease: a completion frees
  a place, an expired lease holds none (its takeover is a new start);
* with ``per_key`` each distinct ``limit_key`` has its own allowance (executions
  without one share the key ``""``), so one key's backlog never starves the others;
* an execution of a limited job in a limited queue needs room in both; a held-back
  scope is passed over, never waited on; the claim's own filters still hold;
* ``throttled()`` counts the executions a limit held past their due time,
  ``throttles(id)`` lists one execution's records, and ``next_start_in()`` says when
  the rate that held the last claim has a token again.

Every time is the store's ManualClock, on PostgreSQL too.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fencepost.domain.errors import NotFound, StaleLease
from fencepost.domain.models import Execution, Lease
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    ContractFixtures,
    StoreFactory,
    at,
    executions,
    keys_in_distinct_buckets,
)

#: The rates the random run draws from, with their starts a second.
RANDOM_RATES: Sequence[tuple[str, float]] = (
    ("2/s", 2.0),
    ("5/s", 5.0),
    ("10/s", 10.0),
    ("30/min", 0.5),
)

#: One step of the random run: ("advance", ms), ("claim", limit, ttl),
#: ("complete", which) or ("fail", which), a retry due at once.
_STEP = st.one_of(
    st.tuples(st.just("advance"), st.integers(0, 400)),
    st.tuples(st.just("claim"), st.integers(1, 8), st.sampled_from([0.25, 30.0])),
    st.tuples(st.just("complete"), st.integers(0, 1000)),
    st.tuples(st.just("fail"), st.integers(0, 1000)),
)

#: Job names for the random run's examples: each example limits a job of its own,
#: so the examples, sharing one store, never see each other's buckets.
_RUNS = itertools.count(1)


def due(store: Store, job: str, n: int, **submit: Any) -> list[Execution]:
    """``n`` executions of ``job`` due now, in claim order (one batch)."""
    return store.submit_many([{"job": job, **submit} for _ in range(n)])


def keys_of(store: Store, leases: Sequence[Lease]) -> Counter[str | None]:
    """How many of ``leases`` hold each limit key."""
    return Counter(store.get(lease.execution_id).limit_key for lease in leases)


def live_leases(store: Store, clock: ManualClock, job: str) -> int:
    """RUNNING executions of ``job`` whose lease is live at the clock's now."""
    return sum(
        1
        for e in executions(store)
        if e.job == job
        and e.state is State.RUNNING
        and e.lease_until is not None
        and e.lease_until > clock.now()
    )


def claimed_at(store: Store, ids: Sequence[str]) -> list[float]:
    """The instants (seconds) of every CLAIMED transition of ``ids``, in order."""
    times = [
        t.at
        for execution_id in ids
        for t in store.transitions(execution_id)
        if t.event is Event.CLAIMED
    ]
    if not times:
        return []
    first = min(times)
    return sorted((t - first).total_seconds() for t in times)


def assert_within_rate(times: Sequence[float], rate: float, burst: int) -> None:
    """In every window between two starts, at most ``rate * W + burst`` starts."""
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            window = times[j] - start
            assert j - i + 1 <= rate * window + burst + 1e-6, (
                f"{j - i + 1} starts in {window:.3f} s at {rate}/s, burst {burst}: {times}"
            )


#: A claim's filters, each a function of the store's ids by submit order (``ids=``
#: names executions, which differ from store to store).
CLAIM_FILTERS: Mapping[str, Callable[[list[str], list[int]], dict[str, Any]]] = {
    "jobs": lambda ids, buckets: {"jobs": ["x", "z"]},
    "queue-rooms": lambda ids, buckets: {"queues": {"a": 2, "b": 1}},
    "queues": lambda ids, buckets: {"queues": ["a", "c"]},
    "buckets": lambda ids, buckets: {"buckets": [buckets[1]]},
    "max-per-bucket": lambda ids, buckets: {"max_per_bucket": 2},
    "ids": lambda ids, buckets: {"ids": [ids[3], ids[7], ids[12], ids[20]]},
    "versions": lambda ids, buckets: {"versions": [("z", 1)]},
    "together": lambda ids, buckets: {
        "jobs": ["x", "y"],
        "queues": {"a": 3, "b": 3},
        "max_per_bucket": 3,
    },
}


def populate(store: Store) -> tuple[list[str], list[int]]:
    """The same executions in any store: three jobs (``z`` pinned to versions), three
    queues, two buckets, priorities and distinct due times, so that claim order is
    the same everywhere. Returns the ids in submit order and the two buckets."""
    heavy, light = keys_in_distinct_buckets(2, store.config.num_buckets)
    requests = []
    for n in range(24):
        requests.append(
            {
                "job": "xyz"[n % 3],
                "inputs": {"n": n},
                "queue": "abc"[(n // 3) % 3],
                # The first ten share a bucket: a cap of 2 must pass over most of them.
                "bucket_key": heavy if n < 10 else light,
                "priority": 1 if n % 7 == 0 else 0,
                "execute_at": at(-100 + n),
                **({"version": 1 + n % 2} if n % 3 == 2 and n % 4 else {}),
            }
        )
    made = store.submit_many(requests)
    return [e.id for e in made], [made[0].bucket, made[-1].bucket]


def numbers(leases: Sequence[Lease]) -> list[tuple[int, int]]:
    """A claim's answer as (the execution's ``n``, epoch), in claim order."""
    out = []
    for lease in leases:
        assert isinstance(lease.inputs, dict)
        out.append((int(lease.inputs["n"]), lease.epoch))
    return out


class FlowLimitsContract(ContractFixtures):
    """Rates, concurrency and per-key limits as every claim obeys them."""

    # -- rates ---------------------------------------------------------------------------

    def test_a_rate_allows_its_burst_then_its_rate(self, store: Store, clock: ManualClock) -> None:
        store.set_limit("job:a", rate="10/s", burst=3)
        due(store, "a", 50)
        assert len(store.claim("w", limit=50)) == 3
        assert store.claim("w", limit=50) == []
        clock.advance(0.1)
        assert len(store.claim("w", limit=50)) == 1
        clock.advance(0.05)
        assert store.claim("w", limit=50) == []  # half a token
        clock.advance(1)
        assert len(store.claim("w", limit=50)) == 3  # the bucket holds burst, not 10
        assert sum(e.state is State.RUNNING for e in executions(store)) == 7

    @settings(
        max_examples=20,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=False,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        rate=st.sampled_from(RANDOM_RATES),
        burst=st.integers(1, 5),
        steps=st.lists(_STEP, min_size=5, max_size=40),
    )
    def test_starts_never_exceed_rate_times_window_plus_burst(
        self,
        store: Store,
        clock: ManualClock,
        rate: tuple[str, float],
        burst: int,
        steps: list[tuple[Any, ...]],
    ) -> None:
        """A random run of claims, completions, retries and lost leases (takeovers)."""
        job = f"rated-{next(_RUNS)}"
        store.set_limit(f"job:{job}", rate=rate[0], burst=burst)
        ids = [e.id for e in due(store, job, 40, max_attempts=1000)]
        held: list[Lease] = []
        for step in steps:
            if step[0] == "advance":
                clock.advance(step[1] / 1000)
            elif step[0] == "claim":
                held.extend(store.claim("w", limit=step[1], ttl=step[2], jobs=[job]))
            elif held:
                lease = held.pop(step[1] % len(held))
                try:
                    if step[0] == "complete":
                        store.complete(lease, None)
                    else:
                        store.fail(lease, "boom", retry_in=0)  # due again at once
                except StaleLease:
                    pass  # expired: taken over, or to be
        assert_within_rate(claimed_at(store, ids), rate[1], burst)
        store.remove_limit(f"job:{job}")  # later examples' claims read one limit less

    def test_retries_and_takeovers_spend_tokens(self, store: Store, clock: ManualClock) -> None:
        store.set_limit("job:a", rate="1/h", burst=2)
        retried = store.submit("a")
        (first,) = store.claim("w", limit=10)
        store.fail(first, "boom", retry_in=1)
        clock.advance(1)
        (retry,) = store.claim("w", limit=10, ttl=7200)  # the second token
        assert (retry.execution_id, retry.attempt) == (retried.id, 2)
        fresh = store.submit("a")
        assert store.claim("w", limit=10) == []  # the retry took the fresh one's token

        store.set_limit("job:b", rate="1/h", burst=2)
        lost = store.submit("b")
        store.claim("w", jobs=["b"], ttl=5)
        clock.advance(5)
        (taken,) = store.claim("v", limit=10, jobs=["b"], ttl=7200)
        assert (taken.execution_id, taken.epoch) == (lost.id, 2)
        store.submit("b")
        assert store.claim("v", limit=10) == []  # the takeover took the second token

        clock.advance(3600)  # one token each
        assert {lease.job for lease in store.claim("w", limit=10)} == {"a", "b"}
        assert store.get(fresh.id).state is State.RUNNING

    # -- concurrency ---------------------------------------------------------------------

    def test_concurrency_counts_live_leases(self, store: Store, clock: ManualClock) -> None:
        store.set_limit("job:a", concurrency=2)
        made = due(store, "a", 6)
        first = store.claim("w", limit=10, ttl=10)
        assert [lease.execution_id for lease in first] == [made[0].id, made[1].id]
        assert store.claim("w", limit=10) == []
        store.complete(first[0], None)  # a completion frees a place
        (third,) = store.claim("w", limit=10, ttl=10)
        assert third.execution_id == made[2].id
        assert store.claim("w", limit=10) == []
        assert live_leases(store, clock, "a") == 2

        clock.set(10)  # both leases expire (lease_until == now): they hold no place
        again = store.claim("w", limit=10, ttl=30)
        assert {(lease.execution_id, lease.epoch) for lease in again} == {
            (first[1].execution_id, 2),
            (third.execution_id, 2),
        }
        assert store.claim("w", limit=10) == []  # the takeovers are starts: they hold them
        assert live_leases(store, clock, "a") == 2

    def test_an_expired_lease_without_attempts_holds_no_place(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.set_limit("job:b", concurrency=1)
        spent = store.submit("b", max_attempts=1)
        waiting = store.submit("b")
        (lease,) = store.claim("w", limit=10, ttl=5)
        assert lease.execution_id == spent.id
        assert store.claim("w", limit=10) == []
        clock.set(5)  # spent's lease expired, with no attempt left to take it over
        (next_,) = store.claim("w", limit=10)
        assert next_.execution_id == waiting.id

    # -- per key -------------------------------------------------------------------------

    def test_per_key_concurrency_gives_each_key_its_own_places(self, store: Store) -> None:
        store.set_limit("job:a", concurrency=2, per_key=True)
        for key in ("x", "y", "z", None):  # None: the keyless executions share ""
            due(store, "a", 3, limit_key=key)
        taken = store.claim("w", limit=50)
        assert keys_of(store, taken) == Counter({"x": 2, "y": 2, "z": 2, None: 2})
        assert store.claim("w", limit=50) == []
        done = next(lease for lease in taken if store.get(lease.execution_id).limit_key == "y")
        store.complete(done, None)
        assert keys_of(store, store.claim("w", limit=50)) == Counter({"y": 1})
        assert store.claim("w", limit=50) == []

    def test_per_key_rate_gives_each_key_its_own_bucket(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.set_limit("job:r", rate="1/h", burst=2, per_key=True)
        for key in ("x", "y", "z", None):
            due(store, "r", 4, limit_key=key)
        taken = store.claim("w", limit=50)
        assert keys_of(store, taken) == Counter({"x": 2, "y": 2, "z": 2, None: 2})
        assert store.claim("w", limit=50) == []
        clock.advance(1800)  # half a token each
        assert store.claim("w", limit=50) == []
        clock.advance(1800)
        assert keys_of(store, store.claim("w", limit=50)) == Counter(
            {"x": 1, "y": 1, "z": 1, None: 1}
        )

    def test_a_big_key_does_not_starve_small_ones(self, store: Store) -> None:
        store.set_limit("job:a", concurrency=1, per_key=True)
        due(store, "a", 200, limit_key="big")  # due first: every claim meets it first
        store.submit_many(
            [{"job": "a", "limit_key": f"small-{k}"} for k in range(10) for _ in range(2)]
        )
        taken = store.claim("w", limit=11)
        expected = Counter({"big": 1, **{f"small-{k}": 1 for k in range(10)}})
        assert keys_of(store, taken) == expected
        assert store.claim("w", limit=11) == []

    # -- scopes together -----------------------------------------------------------------

    def test_a_held_back_scope_never_blocks_others(self, store: Store, clock: ManualClock) -> None:
        store.set_limit("job:a", rate="1/h", burst=1)
        due(store, "a", 100)
        due(store, "b", 5, execute_at=at(1))
        clock.set(1)
        # The bucket is full at first: one of a, then b's behind a's hundred.
        assert Counter(lease.job for lease in store.claim("w", limit=10)) == {"a": 1, "b": 5}
        due(store, "b", 5)
        # Now a is exhausted before the claim starts.
        assert Counter(lease.job for lease in store.claim("w", limit=10)) == {"b": 5}

        store.set_limit("job:c", concurrency=1)
        due(store, "c", 100)
        due(store, "d", 5, execute_at=at(2))
        clock.set(2)
        assert Counter(lease.job for lease in store.claim("w", limit=3)) == {"c": 1, "d": 2}
        assert Counter(lease.job for lease in store.claim("w", limit=10)) == {"d": 3}

    def test_job_and_queue_limits_both_apply(self, store: Store, clock: ManualClock) -> None:
        store.set_limit("job:a", concurrency=3)
        store.set_limit("queue:q", concurrency=2)
        due(store, "a", 4, queue="q")
        due(store, "a", 4, queue="r")
        due(store, "b", 4, queue="q")
        taken = store.claim("w", limit=20)
        assert Counter((lease.job, lease.queue) for lease in taken) == {
            ("a", "q"): 2,
            ("a", "r"): 1,
        }
        assert store.claim("w", limit=20) == []

        store.set_limit("job:e", rate="1/h", burst=2)
        store.set_limit("queue:s", rate="1/h", burst=3)
        due(store, "e", 5, queue="s")
        due(store, "f", 5, queue="s")
        taken = store.claim("w", limit=20, queues=["s"])
        # e's two tokens (each also one of s's), then one f with s's last.
        assert Counter(lease.job for lease in taken) == {"e": 2, "f": 1}
        assert store.claim("w", limit=20, queues=["s"]) == []

    @pytest.mark.parametrize("limit", [5, 50])
    @pytest.mark.parametrize("claim_filter", sorted(CLAIM_FILTERS))
    def test_the_claim_s_filters_hold_on_the_limited_path(
        self,
        store: Store,
        store_factory: StoreFactory,
        clock: ManualClock,
        claim_filter: str,
        limit: int,
    ) -> None:
        """Limits that hold nothing back leave a claim as it is without them."""
        plain = store_factory(clock)
        plain_ids, plain_buckets = populate(plain)
        ids, buckets = populate(store)
        assert buckets == plain_buckets
        for scope in ("job:x", "job:y", "job:z", "queue:a", "queue:b", "queue:c"):
            store.set_limit(scope, rate="1000/s", burst=1000, concurrency=1000)
        for _ in range(2):  # the second claim runs with the first one's leases live
            expected = plain.claim(
                "w", limit=limit, **CLAIM_FILTERS[claim_filter](plain_ids, plain_buckets)
            )
            got = store.claim("w", limit=limit, **CLAIM_FILTERS[claim_filter](ids, buckets))
            assert numbers(got) == numbers(expected), f"{numbers(got)} != {numbers(expected)}"
        assert store.next_start_in() is None

    def test_a_capped_claim_over_queues_keeps_claim_order(self, store: Store) -> None:
        """The reference the limited path is held to: a bucket's room goes to its first
        rows in claim order, whichever queue they wait in."""
        populate(store)
        # 0 and 7 fill the first bucket, 14 and 21 the second (all of priority 1).
        assert numbers(store.claim("w", limit=5, max_per_bucket=2)) == [
            (0, 1),
            (7, 1),
            (14, 1),
            (21, 1),
        ]

    def test_a_binding_limit_keeps_the_claim_s_filters(self, store: Store) -> None:
        populate(store)
        store.set_limit("job:x", concurrency=1)
        store.set_limit("queue:b", rate="1/h", burst=2)
        taken = store.claim(
            "w", limit=50, queues={"a": 3, "b": 5}, jobs=["x", "y"], max_per_bucket=4
        )
        rows = [store.get(lease.execution_id) for lease in taken]
        assert rows, "the claim took nothing"
        assert all(e.job in ("x", "y") and e.queue in ("a", "b") for e in rows)
        assert Counter(e.queue for e in rows)["a"] <= 3
        assert Counter(e.queue for e in rows)["b"] <= 2  # its rate, under its room of 5
        assert Counter(e.job for e in rows)["x"] <= 1
        assert max(Counter(e.bucket for e in rows).values()) <= 4

    # -- what a limit held ---------------------------------------------------------------

    def test_throttled_counts_what_a_rate_held_back(self, store: Store, clock: ManualClock) -> None:
        store.set_limit("job:a", rate="1/s", burst=1)
        at_once, held = due(store, "a", 2)
        store.submit("b")
        assert {lease.execution_id for lease in store.claim("w", limit=10)} >= {at_once.id}
        assert store.throttled() == []  # claimed at once: not throttled
        clock.advance(1.5)
        (later,) = store.claim("w", limit=10)
        assert later.execution_id == held.id
        (count,) = store.throttled()
        assert (count.scope, count.count) == ("job:a", 1)
        assert count.held.total_seconds() == pytest.approx(1.5)
        clock.advance(3600)
        assert store.throttled(window=60) == []  # outside the window
        assert [c.scope for c in store.throttled(window=7200)] == ["job:a"]

    def test_throttles_reads_one_execution_s_records(
        self, store: Store, clock: ManualClock
    ) -> None:
        """``throttles(id)``: the records of that execution only, oldest first, from a
        limited claim (at the claim) and from a paused queue's resume (at the resume)."""
        store.set_limit("job:a", rate="1/s", burst=1)
        at_once, held = due(store, "a", 2)
        other = store.submit("b")
        store.claim("w", limit=10)
        clock.advance(1.5)
        (later,) = store.claim("w", limit=10)
        assert later.execution_id == held.id
        (record,) = store.throttles(held.id)
        assert (record.execution_id, record.scope, record.held, record.at) == (
            held.id,
            "job:a",
            timedelta(seconds=1.5),
            at(1.5),
        )
        assert store.throttles(at_once.id) == []  # claimed at once
        assert store.throttles(other.id) == []
        store.pause_queue("q")
        parked = store.submit("c", queue="q")
        clock.advance(2)
        store.resume_queue("q")
        store.fail(later, "again", retry_in=0)
        store.set_limit("job:a", rate="1/h", burst=1)
        clock.advance(0.5)
        assert store.claim("w", jobs=["a"]) == []  # the bucket is empty: held again
        store.remove_limit("job:a")
        clock.advance(1)
        (retried,) = store.claim("w", jobs=["a"])
        assert retried.execution_id == held.id
        assert [(r.scope, r.held, r.at) for r in store.throttles(held.id)] == [
            ("job:a", timedelta(seconds=1.5), at(1.5)),
        ], "a claim with no limit left records nothing"
        assert [(r.scope, r.held, r.at) for r in store.throttles(parked.id)] == [
            ("queue:q", timedelta(seconds=2), at(3.5)),
        ]
        for unknown in (
            "00000000-0000-7000-8000-000000000000",
            "not-an-id",
            "",
            "a\x00b",
            "tail\udfff",
            "'; DROP TABLE throttles; --",
            "%_",
            "x" * 10_000,
        ):
            with pytest.raises(NotFound):
                store.throttles(unknown)

    def test_next_start_in_says_when_the_rate_allows_a_start(
        self, store: Store, clock: ManualClock
    ) -> None:
        """Seconds until the rate that held the last claim back has that claim's worth
        of tokens (as many as it asked for, at most the burst): (n - tokens) / rate."""
        store.set_limit("job:a", rate="4/s", burst=2)
        store.set_limit("job:c", concurrency=1)
        due(store, "a", 10)
        assert store.next_start_in() is None
        assert len(store.claim("w", limit=1, jobs=["a"])) == 1
        assert store.next_start_in() is None  # nothing held back
        assert len(store.claim("w", limit=1, jobs=["a"])) == 1
        assert store.next_start_in() is None
        assert store.claim("w", limit=1, jobs=["a"]) == []
        assert store.next_start_in() == pytest.approx(0.25)  # (1 - 0 tokens) / 4
        clock.advance(0.1)
        assert store.claim("w", limit=1, jobs=["a"]) == []
        assert store.next_start_in() == pytest.approx(0.15)  # (1 - 0.4) / 4
        clock.advance(0.15)
        assert len(store.claim("w", limit=10, jobs=["a"])) == 1
        assert store.next_start_in() == pytest.approx(0.5)  # a claim of 10 waits for 2
        clock.advance(0.125)
        assert store.claim("w", limit=10, jobs=["a"]) == []
        assert store.next_start_in() == pytest.approx(0.375)  # (2 - 0.5) / 4
        due(store, "c", 2)
        assert len(store.claim("w", limit=10, jobs=["c"])) == 1  # held by concurrency
        assert store.next_start_in() is None  # a finish frees it, not time
        clock.advance(1)
        assert len(store.claim("w", limit=10, jobs=["a"])) == 2
        assert store.next_start_in() is not None
        store.claim("w", limit=10, jobs=["unlimited"])
        assert store.next_start_in() is None


__all__ = ["FlowLimitsContract", "assert_within_rate", "claimed_at", "due", "keys_of"]

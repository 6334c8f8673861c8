"""The contract of flow control, the operator's side: paused queues, setting and
removing limits, limits declared with jobs, and the values every verb refuses.

* ``pause_queue``: nothing in the queue is claimed (takeovers included), other queues
  are; running executions still heartbeat, complete and fail. The pause is stored
  (another store object on the database sees it) and audited with its actor; pausing
  twice changes nothing. ``resume_queue`` makes the queue claimable again and counts
  each execution the pause held past its due time as throttled by ``queue:NAME``;
  resuming a queue that is not paused changes nothing. Setting or removing a paused
  queue's limit keeps the pause.
* ``set_limit`` replaces a scope's limit; ``limits()`` lists them by scope with who
  set them and when; ``remove_limit`` of a scope without one is :class:`NotFound`.
  A change holds from this store object's next claim, and from every other store
  object's within :data:`~fencepost.store.flow.FLOW_REFRESH` seconds.
* ``declare_limits`` stores limits with ``source = "code"``; an operator's limit
  replaces a declaration, which does not come back until the operator's is removed.
* Bad values are refused naming their argument, and change nothing; odd but valid
  scopes and keys round-trip through every verb.

A test that needs a second store object on the same database asks :meth:`reopen`,
which opens ``store.location`` again; a backend that cannot be opened twice (the
memory store is its own database) skips those tests, saying so.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fencepost.domain.errors import NotFound
from fencepost.domain.limits import Limit, Rate, new_limit
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.store.flow import FLOW_REFRESH
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.flow_limits import due, keys_of
from fencepost.testing.contract.support import ContractFixtures, at, executions, names_the_field

#: ``set_limit`` arguments each store must refuse, with the argument the error names.
BAD_LIMITS: list[tuple[dict[str, Any], str]] = [
    *(
        ({"scope": "job:a", "rate": rate}, "rate")
        for rate in ("0/s", "-1/s", "1e400/s", "5/fortnight", "", "abc", "9" * 10_000, 5)
    ),
    ({"scope": "job:a"}, "rate"),  # neither a rate nor a concurrency
    ({"scope": "job:a", "rate": None, "concurrency": None}, "rate"),
    *(
        ({"scope": "job:a", "rate": "5/s", "burst": burst}, "burst")
        for burst in (0, -1, 2**63, True, "5", 1.5)
    ),
    ({"scope": "job:a", "burst": 5, "concurrency": 1}, "burst"),  # a burst needs a rate
    *(
        ({"scope": "job:a", "concurrency": concurrency}, "concurrency")
        for concurrency in (0, -1, 2**63, 1.5, True, "2")
    ),
    *(
        ({"scope": scope, "concurrency": 1}, "scope")
        for scope in (
            "job:a\x00b",
            "\x00",
            "job:\ud800",
            "queue:lone \udfff",
            "nokind:x",
            "job:",
            "job: ",
            "queue:",
            "a",
            "",
            "job:" + "x" * 10_000,
            "queue:" + "q" * 101,
            5,
            None,
        )
    ),
    ({"scope": "job:a", "concurrency": 1, "per_key": "yes"}, "per_key"),
    ({"scope": "job:a", "concurrency": 1, "per_key": 1}, "per_key"),
    ({"scope": "job:a", "concurrency": 1, "actor": "\x00"}, "actor"),
    ({"scope": "job:a", "concurrency": 1, "actor": ""}, "actor"),
]

#: Limit keys each submit must refuse, naming ``limit_key``.
BAD_LIMIT_KEYS: tuple[Any, ...] = (
    "a\x00b",
    "\x00",
    "lone \ud800",
    "bell\x07",
    "new\nline",
    "tab\t",
    "del\x7f",
    "",
    "   ",
    "k" * 201,
    5,
    True,
    ["k"],
)

#: Odd but valid names: each is a job, a queue (cut to a queue's 100 characters) and a
#: limit key, and must round-trip through set_limit, limits, submit and claim.
ODD_NAMES = (
    "ünïcode 🚀",
    'it\'s "quoted"',
    "'; DROP TABLE x; --",
    "with  spaces",
    "50%_and\\back",
    "x" * 200,
)


def claims_until(
    store: Store, done: Callable[[list[Any]], bool], *, within: float
) -> list[tuple[float, list[Any]]]:
    """Claim (``jobs=["a"]``) until ``done(leases)``, for at most ``within`` seconds.

    Returns each claim's start (monotonic seconds) and its leases, the last being
    the one that was ``done``; fails the test if none was.
    """
    deadline = time.monotonic() + within
    claims: list[tuple[float, list[Any]]] = []
    while time.monotonic() < deadline:
        started = time.monotonic()
        leases = store.claim("w", limit=1, jobs=["a"])
        claims.append((started, leases))
        if done(leases):
            return claims
        time.sleep(0.01)  # a poll interval: the condition is the claim's answer
    pytest.fail(f"no claim was done within {within} s ({len(claims)} claims)")


class FlowQueuesContract(ContractFixtures):
    """Paused queues, the limit verbs and declarations, and bad values."""

    def reopen(self, store: Store, clock: ManualClock) -> Store | None:
        """Another store object on ``store``'s database, reading ``clock``; None when
        ``store`` is its own database (memory). A backend whose ``location`` does not
        open it again overrides this."""
        if store.location.startswith("memory:"):
            return None
        from fencepost.store import connect

        return connect(store.location, clock=clock)

    @contextmanager
    def another(self, store: Store, clock: ManualClock) -> Iterator[Store]:
        """:meth:`reopen`, closed afterwards; skips the test where there is none."""
        other = self.reopen(store, clock)
        if other is None:
            pytest.skip(f"{store.location} cannot be opened by a second store object")
        try:
            yield other
        finally:
            other.close()

    # -- paused queues -------------------------------------------------------------------

    def test_nothing_in_a_paused_queue_is_claimed(self, store: Store, clock: ManualClock) -> None:
        waiting = due(store, "job", 3, queue="q")
        due(store, "job", 2, queue="r")
        (running,) = store.claim("w", queues=["q"], ttl=5)
        paused = store.pause_queue("q", actor="alice")
        assert (paused.scope, paused.paused, paused.updated_by) == ("queue:q", True, "alice")
        assert Counter(lease.queue for lease in store.claim("w", limit=10)) == {"r": 2}
        assert store.claim("w", limit=10, queues=["q"]) == []
        assert store.claim("w", limit=10, ids=[waiting[1].id]) == []
        clock.set(5)  # running's lease expired: not taken over in a paused queue either
        assert store.claim("w", limit=10) == []
        assert store.get(running.execution_id).state is State.RUNNING
        assert [store.get(e.id).state for e in waiting[1:]] == [State.SCHEDULED] * 2

    def test_running_executions_of_a_paused_queue_finish(self, store: Store) -> None:
        due(store, "job", 3, queue="q")
        first, second, third = store.claim("w", limit=3, ttl=30)
        store.pause_queue("q")
        assert store.heartbeat(first, ttl=60).lease_until > first.lease_until
        assert store.complete(first, "done").state is State.SUCCEEDED
        assert store.fail(second, "boom", retryable=False).state is State.FAILED
        store.heartbeat(third, ttl=60)
        assert store.complete(third, None).state is State.SUCCEEDED

    def test_a_pause_is_audited_with_its_actor(self, store: Store, clock: ManualClock) -> None:
        clock.set(7)
        store.pause_queue("q", actor="alice")
        (change,) = store.flow_changes()
        assert (change.at, change.actor, change.action, change.scope) == (
            at(7),
            "alice",
            "pause",
            "queue:q",
        )
        (paused,) = store.paused_queues()
        assert (paused.scope, paused.paused, paused.updated_by, paused.updated_at) == (
            "queue:q",
            True,
            "alice",
            at(7),
        )
        assert store.limits() == [paused]

    def test_a_pause_is_stored(self, store: Store, clock: ManualClock) -> None:
        with self.another(store, clock) as other:
            store.pause_queue("q", actor="alice")
            due(store, "job", 2, queue="q")
            assert other.paused_queues() == store.paused_queues()
            assert other.claim("w", limit=10) == []
            other.resume_queue("q", actor="bob")
            assert store.paused_queues() == []
            assert len(store.claim("w", limit=10)) == 2
            assert [c.action for c in store.flow_changes()] == ["resume", "pause"]

    def test_resume_makes_the_queue_claimable_and_counts_the_held_ones(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit("job", queue="q")
        (running,) = store.claim("w", ttl=60)  # running when paused: not held
        store.pause_queue("q")
        due(store, "job", 3, queue="q")
        store.submit("job", queue="q", execute_at=at(100))  # not due yet: not held
        store.submit("job", queue="elsewhere")
        clock.set(4)
        due(store, "job", 1, queue="q")  # due at 4, held for 6 s
        clock.set(10)
        store.claim("w", queues=["elsewhere"])
        resumed = store.resume_queue("q", actor="bob")
        assert resumed is None or not resumed.paused
        assert store.paused_queues() == []
        (count,) = store.throttled()
        assert (count.scope, count.count) == ("queue:q", 4)
        assert count.held.total_seconds() == pytest.approx(3 * 10 + 6)
        change = store.flow_changes()[0]
        assert (change.action, change.actor, change.scope, change.at) == (
            "resume",
            "bob",
            "queue:q",
            at(10),
        )
        assert len(store.claim("w", limit=10, queues=["q"])) == 4
        store.complete(running, None)

    def test_pausing_twice_and_resuming_an_unpaused_queue_change_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        clock.set(1)
        first = store.pause_queue("q", actor="alice")
        store.set_limit("queue:s", concurrency=3)
        before, changes = store.limits(), store.flow_changes()
        clock.set(2)
        assert store.pause_queue("q", actor="bob") == first
        store.resume_queue("r", actor="bob")  # never paused, no limit
        store.resume_queue("s", actor="bob")  # a limit, not paused
        assert store.limits() == before
        assert store.flow_changes() == changes

    def test_set_limit_on_a_paused_queue_keeps_the_pause(self, store: Store) -> None:
        due(store, "job", 4, queue="q")
        store.pause_queue("q")
        limit = store.set_limit("queue:q", concurrency=3, actor="carol")
        assert (limit.paused, limit.concurrency, limit.updated_by) == (True, 3, "carol")
        assert store.limits() == [limit]
        assert [x.scope for x in store.paused_queues()] == ["queue:q"]
        assert store.claim("w", limit=10) == []
        remaining = store.resume_queue("q")
        assert remaining is not None
        assert (remaining.paused, remaining.concurrency) == (False, 3)
        assert len(store.claim("w", limit=10)) == 3  # the limit holds after the pause

    def test_remove_limit_on_a_paused_queue_keeps_the_pause(self, store: Store) -> None:
        due(store, "job", 4, queue="q")
        store.set_limit("queue:q", rate="1/h", burst=1)
        store.pause_queue("q")
        store.remove_limit("queue:q")
        (paused,) = store.limits()
        assert (paused.scope, paused.paused, paused.rate, paused.concurrency) == (
            "queue:q",
            True,
            None,
            None,
        )
        assert store.claim("w", limit=10) == []
        with pytest.raises(NotFound):
            store.remove_limit("queue:q")  # a pause is not a limit to remove
        store.resume_queue("q")
        assert store.limits() == []
        assert len(store.claim("w", limit=10)) == 4  # no limit left

    # -- set, replace, remove ------------------------------------------------------------

    def test_limits_are_listed_by_scope_with_who_and_when(
        self, store: Store, clock: ManualClock
    ) -> None:
        clock.set(5)
        q = store.set_limit("queue:q", concurrency=4, actor="alice")
        clock.set(6)
        b = store.set_limit("job:b", rate="50/s")
        a = store.set_limit(
            "job:a", rate="100/5min", burst=7, concurrency=2, per_key=True, actor="bob"
        )
        assert store.limits() == [a, b, q]
        assert a == Limit(
            scope="job:a",
            rate=Rate(count=100, period=300),
            burst=7,
            concurrency=2,
            per_key=True,
            source="operator",
            updated_by="bob",
            updated_at=at(6),
        )
        assert (b.rate, b.burst, b.concurrency, b.updated_by) == (Rate(50, 1), 5, None, "operator")
        assert (q.concurrency, q.rate, q.updated_by, q.updated_at) == (4, None, "alice", at(5))
        assert [(c.action, c.scope, c.actor) for c in store.flow_changes()] == [
            ("set", "job:a", "bob"),
            ("set", "job:b", "operator"),
            ("set", "queue:q", "alice"),
        ]
        assert len(store.flow_changes(limit=1)) == 1
        clock.set(8)
        replaced = store.set_limit("job:a", concurrency=1, actor="carol")
        assert replaced == Limit(scope="job:a", concurrency=1, updated_by="carol", updated_at=at(8))
        assert store.limits() == [replaced, b, q]

    def test_remove_limit(self, store: Store) -> None:
        store.set_limit("job:a", concurrency=1)
        store.set_limit("job:b", concurrency=1)
        store.remove_limit("job:a", actor="dave")
        assert [x.scope for x in store.limits()] == ["job:b"]
        assert (store.flow_changes()[0].action, store.flow_changes()[0].actor) == (
            "remove",
            "dave",
        )
        for scope in ("job:a", "queue:never", "job:never"):
            with pytest.raises(NotFound) as caught:
                store.remove_limit(scope)
            assert scope in str(caught.value)
        assert [x.scope for x in store.limits()] == ["job:b"]

    def test_a_change_takes_effect_at_the_next_claim(
        self, store: Store, clock: ManualClock
    ) -> None:
        due(store, "a", 10)
        assert len(store.claim("w", limit=2)) == 2  # no limit yet
        store.set_limit("job:a", concurrency=3)
        assert len(store.claim("w", limit=10)) == 1
        store.set_limit("job:a", concurrency=4)
        assert len(store.claim("w", limit=10)) == 1
        store.set_limit("job:a", rate="1/h", burst=2)  # the concurrency goes
        assert len(store.claim("w", limit=10)) == 2
        store.remove_limit("job:a")
        assert len(store.claim("w", limit=10)) == 4

    def test_a_change_reaches_another_store_object_within_a_second(
        self, store: Store, clock: ManualClock
    ) -> None:
        """However a store learns of limits (PostgreSQL caches "are there any" per store
        object for FLOW_REFRESH), a claim that starts FLOW_REFRESH after the change
        obeys it."""
        with self.another(store, clock) as other:
            due(store, "a", 400)
            assert len(store.claim("w", jobs=["a"])) == 1  # this object has looked: none
            other.set_limit("job:a", concurrency=1)
            changed = time.monotonic()
            claims = claims_until(store, lambda leases: leases == [], within=FLOW_REFRESH + 5)
            late = [s - changed for s, leases in claims if leases and s >= changed + FLOW_REFRESH]
            assert late == [], "claims that ignored the limit after FLOW_REFRESH"
            assert store.claim("w", limit=10, jobs=["a"]) == []

            other.remove_limit("job:a")
            changed = time.monotonic()
            claims = claims_until(store, lambda leases: leases != [], within=FLOW_REFRESH + 5)
            late = [
                s - changed for s, leases in claims if not leases and s >= changed + FLOW_REFRESH
            ]
            assert late == [], "claims still limited after FLOW_REFRESH"
            assert len(store.claim("w", limit=10, jobs=["a"])) == 10

    # -- declared limits -----------------------------------------------------------------

    def test_declared_limits_give_way_to_the_operator(self, store: Store) -> None:
        due(store, "a", 10)
        store.declare_limits([new_limit("job:a", concurrency=1)])
        (declared,) = store.limits()
        assert (declared.source, declared.updated_by, declared.concurrency) == (
            "code",
            "publisher",
            1,
        )
        assert (store.flow_changes()[0].action, store.flow_changes()[0].scope) == (
            "declare",
            "job:a",
        )
        assert len(store.claim("w", limit=10)) == 1  # a declared limit holds
        store.declare_limits([new_limit("job:a", concurrency=1)], actor="worker-2")
        assert len(store.flow_changes()) == 1  # the same declaration: nothing changed

        store.set_limit("job:a", concurrency=2, actor="alice")
        store.declare_limits([new_limit("job:a", concurrency=5)])
        (operators,) = store.limits()
        assert (operators.source, operators.concurrency, operators.updated_by) == (
            "operator",
            2,
            "alice",
        )
        assert len(store.claim("w", limit=10)) == 1  # two running: the operator's 2

        store.remove_limit("job:a")
        assert store.limits() == []
        store.declare_limits([new_limit("job:a", concurrency=5)])
        (back,) = store.limits()
        assert (back.source, back.concurrency) == ("code", 5)
        assert len(store.claim("w", limit=10)) == 3

    # -- bad and odd values --------------------------------------------------------------

    @pytest.mark.parametrize(
        ("arguments", "field"), BAD_LIMITS, ids=[repr(a)[:60] for a, _ in BAD_LIMITS]
    )
    def test_a_bad_limit_is_refused_by_name_and_changes_nothing(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        store.set_limit("job:a", rate="5/s", concurrency=2)
        store.pause_queue("q")
        before, changes = store.limits(), store.flow_changes()
        arguments = dict(arguments)
        scope = arguments.pop("scope")
        with names_the_field(field):
            store.set_limit(scope, **arguments)
        if field == "scope":
            with names_the_field("scope"):
                store.remove_limit(scope)
        assert store.limits() == before
        assert store.flow_changes() == changes

    @pytest.mark.parametrize("name", ["", " ", "\x00", "q\ud800", "q" * 101, 5])
    def test_a_bad_queue_name_is_refused_by_pause_and_resume(self, store: Store, name: Any) -> None:
        with names_the_field("name"):
            store.pause_queue(name)
        with names_the_field("name"):
            store.resume_queue(name)
        with names_the_field("actor"):
            store.pause_queue("q", actor="\x00")
        assert store.limits() == []
        assert store.flow_changes() == []

    @pytest.mark.parametrize("key", BAD_LIMIT_KEYS, ids=lambda k: repr(k)[:20])
    def test_a_bad_limit_key_is_refused_by_name(self, store: Store, key: Any) -> None:
        store.set_limit("job:job", concurrency=1, per_key=True)
        before = store.limits()
        with names_the_field("limit_key"):
            store.submit("job", limit_key=key)
        with names_the_field("[1].limit_key"):
            store.submit_many([{"job": "job"}, {"job": "job", "limit_key": key}])
        assert executions(store) == []
        assert store.limits() == before

    @pytest.mark.parametrize("name", ODD_NAMES, ids=lambda n: repr(n)[:20])
    def test_odd_scopes_and_keys_round_trip(self, store: Store, name: str) -> None:
        queue = name[:100]
        other_key = name[:199] + "!"
        job_limit = store.set_limit(f"job:{name}", concurrency=1, per_key=True)
        queue_limit = store.set_limit(f"queue:{queue}", rate="1/h", burst=3)
        assert (job_limit.scope, queue_limit.scope) == (f"job:{name}", f"queue:{queue}")
        assert store.limits() == sorted([job_limit, queue_limit], key=lambda x: x.scope)
        due(store, name, 2, queue=queue, limit_key=name)
        due(store, name, 2, queue=queue, limit_key=other_key)
        taken = store.claim("w", limit=10)
        assert keys_of(store, taken) == Counter({name: 1, other_key: 1})
        assert {lease.queue for lease in taken} == {queue}
        assert store.claim("w", limit=10) == []
        assert store.pause_queue(queue).scope == f"queue:{queue}"
        assert [x.scope for x in store.paused_queues()] == [f"queue:{queue}"]
        store.resume_queue(queue)
        store.remove_limit(f"job:{name}")
        assert len(store.claim("w", limit=10)) == 1  # the queue's third token
        assert [c.scope for c in store.flow_changes()][-2:] == [f"queue:{queue}", f"job:{name}"]


__all__ = ["BAD_LIMITS", "BAD_LIMIT_KEYS", "ODD_NAMES", "FlowQueuesContract"]

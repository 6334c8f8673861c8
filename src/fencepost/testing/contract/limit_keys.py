"""The contract of limit keys: the key a per-key limit counts an execution under.

``submit``, ``submit_many`` and ``add_schedule`` take a ``limit_key`` (None: none;
else 1 to 200 characters of text without control characters, U+0000 or lone
surrogates). An execution keeps it; a schedule keeps it, ``update_schedule`` may
change it, and every occurrence it materializes (or is given, or runs now) carries
the key the schedule had when the occurrence was stored. A key is part of an
idempotent submit's and schedule's arguments only when given, so what was stored
before keys existed matches its retries. A bad key is refused naming ``limit_key``
and nothing is stored; an odd but valid key reads, lists and claims like any other,
under a per-key limit too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from fencepost.domain.errors import IdempotencyConflict
from fencepost.domain.models import Occurrence
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import ContractFixtures, at, executions, names_the_field

#: Keys no store may keep: each is refused, naming the field, with nothing stored.
HOSTILE_LIMIT_KEYS: tuple[Any, ...] = (
    "",
    "   ",
    "a\x00b",
    "lone \ud800 surrogate",
    "tab\there",
    "new\nline",
    "\x1b[31m",
    "del\x7f",
    "k" * 201,
    "k" * 10_000,
    5,
    True,
    [],
    {},
    ["a"],
    b"bytes",
)

#: Odd but valid keys: each must round-trip, list, claim and encode.
ODD_LIMIT_KEYS = (
    "tenant 🙂",
    "with spaces",
    "'; DROP TABLE executions; --",
    "quotes \"double\" and 'single'",
    "ünïcode/ключ:1",
    "k" * 200,
)


class LimitKeysContract(ContractFixtures):
    """Limit keys on executions and schedules: round trips, idempotency, bad and odd keys."""

    # -- executions --------------------------------------------------------------------------

    def test_an_execution_keeps_its_limit_key(self, store: Store) -> None:
        keyed = store.submit("job", limit_key="tenant-1")
        plain = store.submit("job")
        batch = store.submit_many([{"job": "job", "limit_key": "tenant-2"}, {"job": "job"}])
        assert (keyed.limit_key, plain.limit_key) == ("tenant-1", None)
        assert [e.limit_key for e in batch] == ["tenant-2", None]
        for e in (keyed, plain, *batch):
            assert store.get(e.id).limit_key == e.limit_key
        listed = {e.id: e.limit_key for e in store.query(limit=10).items}
        assert listed == {e.id: e.limit_key for e in (keyed, plain, *batch)}

    def test_the_limit_key_is_part_of_an_idempotent_submit(self, store: Store) -> None:
        first = store.submit("job", idempotency_key="k", limit_key="a")
        assert store.submit("job", idempotency_key="k", limit_key="a").id == first.id
        with pytest.raises(IdempotencyConflict):
            store.submit("job", idempotency_key="k", limit_key="b")
        with pytest.raises(IdempotencyConflict):
            store.submit("job", idempotency_key="k")
        # Without a key, a retry is what it always was.
        unkeyed = store.submit("job", idempotency_key="n")
        assert store.submit("job", idempotency_key="n", limit_key=None).id == unkeyed.id
        with pytest.raises(IdempotencyConflict):
            store.submit("job", idempotency_key="n", limit_key="a")

    # -- schedules ---------------------------------------------------------------------------

    def test_a_schedule_and_its_occurrences_keep_its_limit_key(
        self, store: Store, clock: ManualClock
    ) -> None:
        s = store.add_schedule("report", every=60, id="s", limit_key="tenant-1")
        assert (s.limit_key, store.get_schedule("s").limit_key) == ("tenant-1", "tenant-1")
        assert store.add_schedule("report", every=60, id="plain").limit_key is None
        assert [x.limit_key for x in store.schedules().items] == [None, "tenant-1"]
        (given,) = store.add_occurrences("s", [Occurrence(slot=at(60), due_at=at(60))])
        assert given.limit_key == "tenant-1"
        clock.set(1)
        leased = {x.id: x for x in store.acquire_schedules("m", ttl=30)}
        assert leased["s"].limit_key == "tenant-1"
        made = store.materialize(
            [(leased["s"], [Occurrence(slot=at(120), due_at=at(120))], at(120), at(60))]
        )
        assert isinstance(made[0], list)
        assert [e.limit_key for e in made[0]] == ["tenant-1"]
        assert store.get(made[0][0].id).limit_key == "tenant-1"
        plain = store.materialize(
            [(leased["plain"], [Occurrence(slot=at(120), due_at=at(120))], at(120), at(60))]
        )
        assert isinstance(plain[0], list)
        assert [e.limit_key for e in plain[0]] == [None]

    def test_update_schedule_changes_the_limit_key_of_later_occurrences(self, store: Store) -> None:
        store.add_schedule("report", every=60, id="s", limit_key="a")
        (before,) = store.add_occurrences("s", [Occurrence(slot=at(60), due_at=at(60))])
        moved = store.update_schedule("s", limit_key="b")
        assert (moved.limit_key, store.get_schedule("s").limit_key) == ("b", "b")
        (after,) = store.add_occurrences("s", [Occurrence(slot=at(120), due_at=at(120))])
        assert after.limit_key == "b"
        assert store.get(before.id).limit_key == "a"  # already stored: unchanged
        assert store.update_schedule("s", limit_key=None).limit_key is None
        assert store.get_schedule("s").limit_key is None
        # The add_schedule fingerprint stays the original arguments'.
        assert store.add_schedule("report", every=60, id="s", limit_key="a").id == "s"

    def test_the_limit_key_is_part_of_an_idempotent_add_schedule(self, store: Store) -> None:
        s = store.add_schedule("report", every=60, id="s", limit_key="a")
        assert store.add_schedule("report", every=60, id="s", limit_key="a") == s
        with pytest.raises(IdempotencyConflict):
            store.add_schedule("report", every=60, id="s", limit_key="b")
        with pytest.raises(IdempotencyConflict):
            store.add_schedule("report", every=60, id="s")
        plain = store.add_schedule("report", every=60, id="p")
        assert store.add_schedule("report", every=60, id="p", limit_key=None) == plain
        with pytest.raises(IdempotencyConflict):
            store.add_schedule("report", every=60, id="p", limit_key="a")

    def test_a_per_key_limit_counts_occurrences_under_their_schedule_s_key(
        self, store: Store
    ) -> None:
        store.set_limit("job:report", concurrency=1, per_key=True)
        for sid, key in (("a", "tenant-a"), ("b", "tenant-b")):
            store.add_schedule("report", every=60, id=sid, limit_key=key)
            store.add_occurrences(
                sid,
                [Occurrence(slot=at(-60), due_at=at(-60)), Occurrence(slot=at(0), due_at=at(0))],
            )
        taken = store.claim("w", limit=10)
        keys = Counter(store.get(lease.execution_id).limit_key for lease in taken)
        assert keys == Counter({"tenant-a": 1, "tenant-b": 1})
        assert store.claim("w", limit=10) == []

    # -- bad and odd keys --------------------------------------------------------------------

    @pytest.mark.parametrize("key", HOSTILE_LIMIT_KEYS, ids=lambda k: repr(k)[:20])
    def test_a_bad_limit_key_is_refused_by_name_and_nothing_is_written(
        self, store: Store, key: Any
    ) -> None:
        with names_the_field("limit_key"):
            store.submit("job", limit_key=key)
        with names_the_field("limit_key"):
            store.submit("job", limit_key=key, idempotency_key="k")
        with names_the_field("[1].limit_key"):
            store.submit_many([{"job": "job"}, {"job": "job", "limit_key": key}])
        with names_the_field("limit_key"):
            store.add_schedule("job", every=60, id="s", limit_key=key)
        assert executions(store) == []
        assert store.schedules().items == []
        ok = store.add_schedule("job", every=60, id="ok", limit_key="fine")
        with names_the_field("limit_key"):
            store.update_schedule("ok", limit_key=key)
        assert store.get_schedule("ok") == ok

    @pytest.mark.parametrize("key", ODD_LIMIT_KEYS, ids=lambda k: repr(k)[:20])
    def test_an_odd_limit_key_round_trips_and_claims_under_a_per_key_limit(
        self, store: Store, key: str
    ) -> None:
        store.set_limit("job:job", concurrency=1, per_key=True)
        neighbour = key[:-1] if len(key) > 1 else "other"
        first = store.submit("job", limit_key=key, inputs={"k": key}, idempotency_key=key)
        second = store.submit("job", limit_key=key)
        other = store.submit("job", limit_key=neighbour)
        assert store.get(first.id).limit_key == key
        assert store.submit("job", limit_key=key, inputs={"k": key}, idempotency_key=key) == first
        listed = [e.limit_key for e in store.query(limit=10).items]
        assert listed == [key, key, neighbour]
        taken = {lease.execution_id for lease in store.claim("w", limit=10)}
        assert taken == {first.id, other.id}  # one of each key: the key's own allowance
        assert store.claim("w", limit=10) == []
        assert store.get(second.id).state is State.SCHEDULED
        s = store.add_schedule("job", every=60, id="s", limit_key=key)
        assert store.get_schedule("s").limit_key == key == s.limit_key
        (occurrence,) = store.add_occurrences("s", [Occurrence(slot=at(60), due_at=at(60))])
        assert store.get(occurrence.id).limit_key == key

"""The contract of turning schedules into executions.

Acquiring schedules under a materializer's lease (eligibility, order, exclusivity),
materializing occurrences insert-if-absent with a watermark that never moves back,
skipped occurrences audited, stale materializer leases writing nothing, and backfill
(``add_occurrences``) with the slot text and keys.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.errors import NotFound, StaleLease, ValidationError
from fencepost.domain.models import Occurrence, Schedule
from fencepost.domain.schedules import parse_slot, slot_text
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    US,
    ContractFixtures,
    assert_audit_valid,
    at,
    fields_of,
    timezone_plus,
)


class MaterializingContract(ContractFixtures):
    """Acquire schedules, materialize their occurrences, backfill slots."""

    # -- schedules: acquiring ----------------------------------------------------------

    def test_acquire_eligibility_and_order(self, store: Store, clock: ManualClock) -> None:
        for schedule_id in ("c", "a", "b", "d"):
            store.add_schedule("job", every=60, id=schedule_id)
        got = store.acquire_schedules("m", limit=10)
        assert [s.id for s in got] == ["a", "b", "c", "d"], "same next_due: by id"
        next_due = {"a": at(20), "b": at(10), "c": at(10), "d": at(30)}
        store.materialize([(s, [], s.watermark, next_due[s.id]) for s in got])

        clock.set(at(10) - US)
        assert store.acquire_schedules("m", limit=10) == []
        clock.set(10)
        first = store.acquire_schedules("m", limit=10, ttl=5)
        assert [s.id for s in first] == ["b", "c"], "next_due == now is due"
        assert {(s.materializer, s.lease_until) for s in first} == {("m", at(15))}
        assert store.get_schedule("b") == first[0]

        clock.set(at(15) - US)
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
            version=2,
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
            "forged": Schedule(**{**fields_of(long["forged"]), "materializer": "intruder"}),
            "updated": long["updated"],
            "paused": long["paused"],
            "deleted": long["deleted"],
            "unleased": Schedule(
                **{**fields_of(long["unleased"]), "materializer": None, "lease_until": None}
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

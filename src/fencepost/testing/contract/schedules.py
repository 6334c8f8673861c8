"""The contract of schedule definitions.

``add_schedule`` (defaults, every field, validation, idempotent ids, the first watermark),
``get_schedule`` and ``schedules`` (filters, pages), ``update_schedule``,
``pause_schedule`` and ``resume_schedule``, and ``delete_schedule``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fencepost.domain.errors import IdempotencyConflict, NotFound, StaleLease, ValidationError
from fencepost.domain.models import Occurrence
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    NOT_AN_OBJECT,
    OBJECT_INPUTS,
    US,
    ContractFixtures,
    assert_audit_valid,
    at,
    names_the_field,
    not_an_object,
    pages_of,
    timezone_plus,
)
from fencepost.timing.planning import HELD


class SchedulesContract(ContractFixtures):
    """Add, read, update, pause, resume and delete schedules."""

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
            version=2,
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
        assert (future.watermark, future.next_due) == (at(200) - US, at(100))
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
            pytest.param({"every": 60, "version": 0}, "job_version", id="version"),
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
        with names_the_field(field):
            store.add_schedule("job", **arguments)
        assert store.schedules().items == []

    @pytest.mark.parametrize("inputs", NOT_AN_OBJECT, ids=repr)
    def test_schedule_inputs_that_are_not_an_object_are_refused(
        self, store: Store, inputs: Any
    ) -> None:
        """Every occurrence would run a handler with them as keywords: refused, nothing written."""
        with pytest.raises(ValidationError) as caught:
            store.add_schedule("job", every=60, id="s", inputs=inputs)
        assert (caught.value.field, caught.value.message) == ("inputs", not_an_object(inputs))
        assert store.schedules().items == []
        kept = store.add_schedule("job", every=60, id="s", inputs={"a": 1})
        with pytest.raises(ValidationError) as caught:
            store.update_schedule("s", inputs=inputs, priority=5)
        assert (caught.value.field, caught.value.message) == ("inputs", not_an_object(inputs))
        assert store.get_schedule("s") == kept

    @pytest.mark.parametrize(("inputs", "stored"), OBJECT_INPUTS, ids=repr)
    def test_schedule_inputs_that_are_an_object_or_none_are_stored(
        self, store: Store, clock: ManualClock, inputs: Any, stored: Any
    ) -> None:
        added = store.add_schedule("job", every=60, id="added", inputs=inputs)
        store.add_schedule("job", every=60, id="updated", inputs={"old": 1})
        updated = store.update_schedule("updated", inputs=inputs)
        for schedule in (added, updated):
            assert schedule.inputs == stored
            assert store.get_schedule(schedule.id).inputs == stored
        assert [s.inputs for s in store.schedules().items] == [stored, stored]
        # Every occurrence carries them to a worker.
        [occurrence] = store.add_occurrences("added", [Occurrence(slot=at(0), due_at=at(0))])
        [lease] = store.claim("w", ids=[occurrence.id])
        assert lease.inputs == store.get(occurrence.id).inputs == stored

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
        pages = pages_of(lambda cursor: store.schedules(limit=4, after=cursor))
        seen = [s.id for page in pages for s in page]
        assert seen == ["A", "Z", "a", "b", "c-10", "c-2"], "code point order on every backend"
        assert len(pages) == 2
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
        assert listed(due_before=at(10) - US) == ["s0"]
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

    # -- pausing stops what has not started -------------------------------------------

    def test_pause_skips_the_occurrences_not_yet_started(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("paused-job", every=60, id="p", max_attempts=3)
        store.add_schedule("kept-job", every=60, id="keep")
        leased = {s.id: s for s in store.acquire_schedules("m")}
        # Due one second apart, so that claims take them in this order.
        due = [Occurrence(slot=at(60 * n), due_at=at(n)) for n in range(1, 6)]
        ahead = Occurrence(slot=at(600), due_at=at(600))  # materialized a minute ahead
        held = Occurrence(slot=at(660), due_at=HELD)  # waiting behind an overlap policy
        skipped = Occurrence(slot=at(720), due_at=at(720), skipped="overlap: still running")
        made, kept = store.materialize(
            [
                (leased["p"], [*due, ahead, held, skipped], at(720), at(700)),
                (leased["keep"], [Occurrence(slot=at(60), due_at=at(1))], at(60), at(700)),
            ]
        )
        assert isinstance(made, list)
        assert isinstance(kept, list)
        clock.set(10)
        running, done, retrying, released = store.claim("w", limit=4, jobs=["paused-job"], ttl=60)
        store.complete(done, "ok")
        store.fail(retrying, "boom", retry_in=30)
        store.release(released)
        clock.set(11)
        paused = store.pause_schedule("p", actor="alice")
        assert paused.paused is True
        assert [store.get(e.id).state for e in made] == [
            State.RUNNING,
            State.SUCCEEDED,
            State.RETRY_WAIT,  # started once: its retries go on
            State.SCHEDULED,  # started once, given back: it goes on too
            State.SKIPPED,  # never started
            State.SKIPPED,  # the one stored ahead
            State.SKIPPED,  # the held one
            State.SKIPPED,  # skipped before, by its overlap policy, and left so
        ]
        for e in made[4:7]:
            last = store.transitions(e.id)[-1]
            assert (last.event, last.from_state, last.actor, last.reason, last.at) == (
                Event.SKIPPED,
                State.SCHEDULED,
                "alice",
                "paused",
                at(11),
            )
        assert store.transitions(made[7].id)[-1].reason == "overlap: still running"
        for e in [*made, *kept]:
            assert_audit_valid(store, e.id)
        assert store.get(kept[0].id).state is State.SCHEDULED, "another schedule's: untouched"
        assert store.get(running.execution_id).lease_owner == "w"

        # What a claim finds now: the one given back, not the skipped ones.
        clock.set(12)
        [again] = store.claim("w", limit=10, jobs=["paused-job"], ttl=60)
        assert again.execution_id == released.execution_id

        # Pausing again changes nothing and records nothing.
        trails = {e.id: store.transitions(e.id) for e in made}
        assert store.pause_schedule("p", actor="bob") == paused
        assert {e.id: store.transitions(e.id) for e in made} == trails

        # Resuming brings none of them back: a slot keeps its one execution.
        clock.set(13)
        store.resume_schedule("p")
        (replanned,) = store.acquire_schedules("m")
        (again_made,) = store.materialize([(replanned, [due[4], ahead, held], at(720), at(780))])
        assert isinstance(again_made, list)
        assert [e.id for e in again_made] == [e.id for e in made[4:7]]
        assert {store.get(e.id).state for e in again_made} == {State.SKIPPED}

    def test_pausing_by_update_skips_too_and_a_bad_actor_writes_nothing(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="u")
        [waiting] = store.add_occurrences("u", [Occurrence(slot=at(60), due_at=at(60))])
        with pytest.raises(ValidationError) as bad:
            store.pause_schedule("u", actor="  ")
        assert bad.value.field == "actor"
        assert store.get_schedule("u").paused is False
        assert store.get(waiting.id).state is State.SCHEDULED
        with pytest.raises(ValidationError) as bad:
            store.update_schedule("u", paused=True, actor="")
        assert bad.value.field == "actor"
        assert store.get(waiting.id).state is State.SCHEDULED
        clock.set(5)
        assert store.update_schedule("u", paused=True, actor="ops").paused is True
        last = store.transitions(waiting.id)[-1]
        assert (last.event, last.to_state, last.actor, last.reason) == (
            Event.SKIPPED,
            State.SKIPPED,
            "ops",
            "paused",
        )
        # A schedule added paused has nothing to skip; resuming and pausing it again
        # skips what was stored meanwhile (a backfill), once.
        store.add_schedule("job", every=60, id="born-paused", paused=True)
        store.resume_schedule("born-paused")
        [backfilled] = store.add_occurrences(
            "born-paused", [Occurrence(slot=at(120), due_at=at(120))]
        )
        store.pause_schedule("born-paused")
        assert store.get(backfilled.id).state is State.SKIPPED
        assert store.transitions(backfilled.id)[-1].actor == "client"

    # -- live materializers ------------------------------------------------------------

    def test_live_schedulers_own_no_bucket(self, store: Store, clock: ManualClock) -> None:
        stuck = store.submit("job", bucket_key="nobody-home")
        lonely = stuck.bucket
        others = [b for b in range(store.config.num_buckets) if b != lonely]
        store.register_node("w", buckets=others, ttl=60)
        assert store.live_schedulers() == []
        # A materializer claims nothing: not "any bucket", nor the buckets it names.
        store.register_node("host:1:scheduler", kind="scheduler", ttl=60)
        store.register_node("host:2:scheduler", kind="scheduler", buckets=[lonely], ttl=5)
        clock.set(1)
        report = store.bucket_report(orphaned_after=0)
        assert (report.unowned, report.floating, report.duplicated) == ([lonely], [], {})
        assert [e.id for e in report.orphans] == [stuck.id]
        assert lonely not in report.owners
        assert [n.id for n in store.live_schedulers()] == ["host:1:scheduler", "host:2:scheduler"]
        assert {n.kind for n in store.live_schedulers()} == {"scheduler"}
        clock.set(5)  # the second one's registration lapses at its expiry
        assert [n.id for n in store.live_schedulers()] == ["host:1:scheduler"]
        store.deregister_node("host:1:scheduler")
        assert store.live_schedulers() == []
        assert [n.id for n in store.nodes()] == ["w"], "workers are listed as they were"

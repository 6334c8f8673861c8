"""The contract of ``run_schedule``: one extra run of a schedule, due now.

The run is an execution of the schedule (its job, version, inputs, attempts, priority,
queue) that is no slot of its rule: its slot is None and its key
``schedule_id:run:execution_id`` never meets a slot's ``schedule_id:slot``, so the
slot of the same instant is stored beside it. Its SUBMITTED record names the caller;
a paused schedule runs too; unknown and impossible ids are NotFound, writing nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.models import Occurrence
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    ContractFixtures,
    assert_audit_valid,
    at,
    executions,
    names_the_field,
)

#: Ids no schedule can have: every backend answers NotFound and writes nothing.
IMPOSSIBLE_IDS = ["", "   ", "a\x00b", "\ud800", "lone \udfff", "x" * 201, "y" * 100_000]


class RunningNowContract(ContractFixtures):
    """Run a schedule now: ``run_schedule``."""

    def test_run_schedule_stores_a_run_of_the_schedule_due_now(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule(
            "report",
            cron="0 2 * * *",
            id="nightly",
            inputs={"day": "today", "n": [1, None]},
            version=3,
            max_attempts=7,
            priority=-4,
            queue="reports",
        )
        clock.set(100.25)
        before = store.get_schedule("nightly")
        run = store.run_schedule("nightly", actor="alice")
        assert (run.job, run.job_version, run.inputs, run.max_attempts, run.priority) == (
            "report",
            3,
            {"day": "today", "n": [1, None]},
            7,
            -4,
        )
        assert (run.queue, run.schedule_id, run.slot, run.timeout) == (
            "reports",
            "nightly",
            None,
            None,
        )
        assert (run.state, run.attempt, run.epoch, run.lease_owner) == (
            State.SCHEDULED,
            0,
            0,
            None,
        )
        assert run.due_at == run.created_at == at(100.25), "due now: its planned time"
        assert run.idempotency_key == f"nightly:run:{run.id}"
        assert store.get(run.id) == run
        assert store.find(f"nightly:run:{run.id}") == run
        assert store.query(schedule="nightly").items == [run]
        assert store.get_schedule("nightly") == before, "watermark, next_due, lease unchanged"
        (lease,) = store.claim("w", ttl=30, queues=["reports"])
        assert (lease.execution_id, lease.schedule_id, lease.slot) == (run.id, "nightly", None)
        assert (lease.inputs, lease.job_version, lease.due_at) == (run.inputs, 3, at(100.25))

    def test_run_schedule_is_never_a_slot_of_the_rule(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        clock.set(120)
        first = store.run_schedule("s")
        (leased,) = store.acquire_schedules("m", ttl=30)
        slot = Occurrence(slot=at(120), due_at=at(120))
        (materialized,) = store.materialize([(leased, [slot], at(120), at(180))])
        assert isinstance(materialized, list)
        (real,) = materialized
        second = store.run_schedule("s")
        (backfilled,) = store.add_occurrences("s", [slot])
        assert backfilled == real, "the slot is stored once, beside the runs"
        assert real.slot == "2026-01-01T00:02:00Z"
        assert real.idempotency_key == "s:2026-01-01T00:02:00Z"
        assert real.due_at == first.due_at == second.due_at == at(120)
        runs = {e.id: e for e in store.query(schedule="s").items}
        assert set(runs) == {first.id, second.id, real.id}, "three executions, none merged"
        assert len({e.idempotency_key for e in runs.values()}) == 3
        assert [runs[first.id].slot, runs[second.id].slot] == [None, None]
        for e in runs.values():
            assert e.state is State.SCHEDULED
            assert_audit_valid(store, e.id)
        assert [t.actor for t in store.transitions(real.id)] == [None], "the schedule's own"

    def test_run_schedule_audits_the_caller(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=60, id="s")
        clock.set(5)
        named = store.run_schedule("s", actor="cli:ops@host")
        unnamed = store.run_schedule("s")
        for run, actor in ((named, "cli:ops@host"), (unnamed, "client")):
            (submitted,) = store.transitions(run.id)
            assert (submitted.event, submitted.from_state, submitted.to_state) == (
                Event.SUBMITTED,
                None,
                State.SCHEDULED,
            )
            assert (submitted.actor, submitted.epoch, submitted.at) == (actor, 0, at(5))

    def test_run_schedule_twice_runs_twice(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=3600, id="s")
        clock.set(10)
        first = store.run_schedule("s")
        second = store.run_schedule("s")
        assert first.id != second.id
        assert first.idempotency_key != second.idempotency_key
        leases = store.claim("w", limit=10, ttl=30)
        assert sorted(lease.execution_id for lease in leases) == sorted([first.id, second.id])

    def test_run_schedule_runs_a_paused_schedule(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("job", every=60, id="p", paused=True)
        clock.set(30)
        run = store.run_schedule("p", actor="ops")
        assert store.get_schedule("p").paused, "the schedule stays paused"
        (lease,) = store.claim("w", ttl=30)
        assert lease.execution_id == run.id
        assert store.get(run.id).state is State.RUNNING

    def test_pausing_skips_a_run_that_has_not_started(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        clock.set(30)
        run = store.run_schedule("s")
        store.pause_schedule("s", actor="ops")
        skipped = store.get(run.id)
        assert skipped.state is State.SKIPPED
        assert (store.transitions(run.id)[-1].actor, store.transitions(run.id)[-1].reason) == (
            "ops",
            "paused",
        )
        again = store.run_schedule("s")
        assert store.get(again.id).state is State.SCHEDULED, "paused: asked for, it runs"

    def test_deleting_a_schedule_cancels_its_waiting_run(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        run = store.run_schedule("s")
        store.delete_schedule("s")
        assert store.get(run.id).state is State.CANCELLED
        with pytest.raises(NotFound) as missing:
            store.run_schedule("s")
        assert missing.value.subject == "schedule"
        assert len(executions(store)) == 1

    def test_run_schedule_of_an_unknown_or_impossible_id_writes_nothing(self, store: Store) -> None:
        store.add_schedule("job", every=60, id="s")
        for schedule_id in ["nope", "s ", "S", *IMPOSSIBLE_IDS]:
            with pytest.raises(NotFound) as missing:
                store.run_schedule(schedule_id)
            assert missing.value.subject == "schedule"
        not_strings: list[Any] = [None, 7, b"s", ["s"]]
        for not_a_string in not_strings:
            with names_the_field("schedule_id"):
                store.run_schedule(not_a_string)
        for actor in ["", "  ", "a\x00", "\ud800", "x" * 201, None]:
            with names_the_field("actor"):
                store.run_schedule("s", actor=actor)  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            store.run_schedule("nope", actor="")  # the arguments first, then the lookup
        assert executions(store) == []

"""A run asked for now among what reads a schedule's executions: the materializer's overlap
policies (which count it as the schedule's run in flight, and never as a slot), a paused
schedule's slots, and the SLO report (which measures it from its planned time)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fencepost
from fencepost import State
from fencepost.domain.models import Execution
from fencepost.scheduler.materializer import REPLACED_BY, Materializer, MaterializerOptions
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract import at
from fencepost.timing.planning import HELD


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def store(clock: ManualClock) -> Iterator[Store]:
    store = fencepost.connect("memory://", clock=clock)
    yield store
    store.close()


def materialize(store: Store) -> None:
    Materializer(store, MaterializerOptions(owner="m", lookahead=0, recheck=1)).run_once()


def by_slot(store: Store, schedule_id: str) -> dict[str | None, Execution]:
    return {e.slot: e for e in store.query(schedule=schedule_id, limit=1000).items}


def test_a_running_run_makes_a_skip_schedule_skip_the_next_slot(
    store: Store, clock: ManualClock
) -> None:
    store.add_schedule("job", every=60, id="s", overlap="skip")
    materialize(store)  # nothing due yet; next looked at for the slot at t=60
    clock.set(10)
    run = store.run_schedule("s")
    (lease,) = store.claim("w", ttl=600)
    clock.set(60)
    materialize(store)
    slots = by_slot(store, "s")
    assert slots[None].id == run.id, "the run is no slot"
    assert slots["2026-01-01T00:01:00Z"].state is State.SKIPPED
    assert store.transitions(slots["2026-01-01T00:01:00Z"].id)[-1].reason == (
        "overlap: the previous run has not finished"
    )
    store.complete(lease)
    clock.set(120)
    materialize(store)
    assert by_slot(store, "s")["2026-01-01T00:02:00Z"].state is State.SCHEDULED


def test_a_running_run_holds_a_buffer_one_slot_until_it_ends(
    store: Store, clock: ManualClock
) -> None:
    store.add_schedule("job", every=60, id="s", overlap="buffer_one")
    materialize(store)
    clock.set(10)
    store.run_schedule("s")
    (lease,) = store.claim("w", ttl=600)
    clock.set(60)
    materialize(store)
    held = by_slot(store, "s")["2026-01-01T00:01:00Z"]
    assert (held.state, held.due_at) == (State.SCHEDULED, HELD)
    store.complete(lease)
    clock.set(61)
    materialize(store)  # the recheck: nothing runs now, so the held slot is released
    assert store.get(held.id).due_at == at(61)


def test_a_replace_slot_cancels_a_run_still_waiting(store: Store, clock: ManualClock) -> None:
    store.add_schedule("job", every=60, id="s", overlap="replace")
    materialize(store)
    clock.set(10)
    run = store.run_schedule("s")
    clock.set(60)
    materialize(store)
    assert store.get(run.id).state is State.CANCELLED
    assert store.transitions(run.id)[-1].actor == REPLACED_BY.format(
        id="s", slot="2026-01-01T00:01:00Z"
    )
    slot = by_slot(store, "s")["2026-01-01T00:01:00Z"]
    assert (slot.state, slot.due_at) == (State.SCHEDULED, at(60)), "released in the same pass"


def test_a_paused_schedule_s_slots_are_skipped_but_its_run_goes_on(
    store: Store, clock: ManualClock
) -> None:
    store.add_schedule("job", every=60, id="p", paused=True)
    materialize(store)
    clock.set(10)
    run = store.run_schedule("p")
    clock.set(60)
    materialize(store)
    slots = by_slot(store, "p")
    assert slots["2026-01-01T00:01:00Z"].state is State.SKIPPED
    assert slots[None].state is State.SCHEDULED
    (lease,) = store.claim("w", ttl=60)
    assert lease.execution_id == run.id


def test_the_slo_measures_a_run_from_its_planned_time(store: Store, clock: ManualClock) -> None:
    store.add_schedule("job", cron="0 3 * * *", id="nightly")
    clock.set(100)
    on_time = store.run_schedule("nightly")
    clock.set(103)
    assert [lease.execution_id for lease in store.claim("w", ttl=600)] == [on_time.id]
    clock.set(110)
    late = store.run_schedule("nightly")
    clock.set(140)
    assert [lease.execution_id for lease in store.claim("w", ttl=600)] == [late.id]
    clock.set(400)
    report = store.slo(window=3600, claim_within=10)
    assert (report.claimed.met, report.claimed.total) == (1, 2)
    assert [(w.execution_id, w.lateness.total_seconds()) for w in report.worst] == [
        (late.id, 30.0),
        (on_time.id, 3.0),
    ]

"""``app.schedule`` and its handle: validation, preview, update, backfill, delete (memory store)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import fencepost
from fencepost import State, ValidationError
from fencepost.domain.schedules import slot_text
from fencepost.testing import ManualClock
from fencepost.testing.clock import MANUAL_EPOCH


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def app(clock: ManualClock) -> Iterator[fencepost.App]:
    app = fencepost.App(fencepost.connect("memory://", clock=clock))

    @app.job("report")
    def report(day: str = "today") -> None: ...

    yield app
    app.store.close()


def drain(app: fencepost.App, lookahead: float = 60) -> None:
    materializer = app.materializer(lookahead=lookahead)
    while materializer.run_once():
        pass


def slots(app: fencepost.App, schedule_id: str, state: State | None = None) -> list[str]:
    page = app.store.query(schedule=schedule_id, state=state, limit=1000)
    return sorted(e.slot or "" for e in page.items)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        pytest.param({"cron": "* * * * *", "inputs": {"day": 5}}, "inputs.day", id="bad-inputs"),
        pytest.param({"cron": "61 * * * *"}, "cron", id="malformed-cron"),
        pytest.param({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "timezone", id="zone"),
        pytest.param({"every": 0}, "every", id="interval-zero"),
        pytest.param({"every": -5}, "every", id="interval-negative"),
        pytest.param({}, "cron", id="no-rule"),
        pytest.param(
            {
                "cron": "* * * * *",
                "start_at": MANUAL_EPOCH + timedelta(days=2),
                "end_at": MANUAL_EPOCH + timedelta(days=1),
            },
            "end_at",
            id="end-before-start",
        ),
        pytest.param({"cron": "* * * * *", "misfire": "later"}, "misfire", id="misfire-name"),
        pytest.param({"cron": "* * * * *", "overlap": "queue"}, "overlap", id="overlap-name"),
        pytest.param({"cron": "* * * * *", "dst_gap": "jump"}, "dst_gap", id="dst-gap-name"),
        pytest.param({"cron": "* * * * *", "dst_fold": "thrice"}, "dst_fold", id="dst-fold-name"),
    ],
)
def test_bad_schedules_name_the_field_and_store_nothing(
    app: fencepost.App, arguments: dict[str, Any], field: str
) -> None:
    job = arguments.pop("job", "report")
    with pytest.raises(ValidationError) as caught:
        app.schedule(job, **arguments)
    assert caught.value.field == field
    assert app.store.schedules().items == []


def test_preview_is_fire_times_from_now(app: fencepost.App, clock: ManualClock) -> None:
    schedule = app.schedule("report", cron="30 2 * * *", timezone="America/New_York")
    clock.advance(timedelta(days=3))  # "from now", not from when the schedule was made
    expected = fencepost.fire_times(
        "30 2 * * *", timezone="America/New_York", after=clock.now(), count=5
    )
    assert schedule.preview(5) == expected
    assert all(t.tzinfo is UTC for t in expected)


def test_update_takes_effect_for_slots_not_yet_materialized(
    app: fencepost.App, clock: ManualClock
) -> None:
    schedule = app.schedule("report", cron="*/10 * * * *", id="r")
    clock.advance(timedelta(minutes=9, seconds=30))
    drain(app)  # stores 00:10
    schedule.update(cron="*/15 * * * *")
    clock.advance(timedelta(minutes=20))  # 00:29:30
    drain(app)
    minutes = [datetime.fromisoformat(s).minute for s in slots(app, "r")]
    assert minutes == [10, 15, 30]  # 00:10 as it was; the new rule from the watermark on


def test_backfill_stores_each_missing_slot_once(app: fencepost.App, clock: ManualClock) -> None:
    schedule = app.schedule("report", cron="0 * * * *", id="hourly")
    start, end = MANUAL_EPOCH - timedelta(hours=5), MANUAL_EPOCH - timedelta(hours=1)
    first = schedule.backfill(start, end)
    assert [e.slot for e in first] == [
        slot_text(MANUAL_EPOCH - timedelta(hours=h)) for h in (5, 4, 3, 2, 1)
    ]
    app.store.cancel(first[0].id)
    again = schedule.backfill(start - timedelta(hours=1), end)
    assert len(again) == 6
    assert {e.id for e in again[1:]} == {e.id for e in first}  # the same executions
    assert app.store.get(first[0].id).state is State.CANCELLED  # left alone
    assert len(slots(app, "hourly")) == 6
    with pytest.raises(ValidationError) as backwards:
        schedule.backfill(end, start)
    assert backwards.value.field == "end"


def test_delete_cancels_what_has_not_started(app: fencepost.App, clock: ManualClock) -> None:
    schedule = app.schedule("report", every=60, id="minutely")
    clock.advance(timedelta(seconds=30))
    drain(app, lookahead=120)
    waiting = app.store.query(schedule="minutely").items
    assert waiting
    schedule.delete()
    assert {app.store.get(e.id).state for e in waiting} == {State.CANCELLED}
    with pytest.raises(fencepost.NotFound):
        app.get_schedule("minutely")


def test_the_same_schedule_id_is_idempotent(app: fencepost.App) -> None:
    first = app.schedule("report", cron="0 * * * *", id="same")
    assert app.schedule("report", cron="0 * * * *", id="same").id == first.id
    with pytest.raises(fencepost.IdempotencyConflict):
        app.schedule("report", cron="5 * * * *", id="same")


def test_a_job_nobody_published_follows_the_stores_unknown_jobs(clock: ManualClock) -> None:
    allowing = fencepost.App(fencepost.connect("memory://", clock=clock))
    handle = allowing.schedule("nope", cron="* * * * *")
    assert (handle.schedule.job_version, handle.schedule.max_attempts) == (None, 3)
    refusing = fencepost.App(fencepost.connect("memory://?unknown_jobs=refuse", clock=clock))
    with pytest.raises(ValidationError) as caught:
        refusing.schedule("nope", cron="* * * * *")
    assert caught.value.field == "job"
    assert refusing.store.schedules().items == []

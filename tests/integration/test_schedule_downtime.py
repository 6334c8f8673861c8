"""Downtime: stop everything, advance the clock two hours, restart; each misfire policy.

One SQLite file and a ManualClock. A slot every ten minutes; the materializer
runs at 00:09:30 (storing 00:10 ahead), everything stops, and it starts again
at 02:09:30 with a new store and a new materializer. Slots 00:20 .. 02:00 were
missed (more than the 60 s grace late); 02:10 is ahead and on time.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost.domain.schedules import slot_text
from fencepost.testing import ManualClock
from fencepost.testing.clock import MANUAL_EPOCH

pytestmark = pytest.mark.slow


def at(minutes: int) -> str:
    return slot_text(MANUAL_EPOCH + timedelta(minutes=minutes))


MISSED = [at(m) for m in range(20, 121, 10)]  # 00:20 .. 02:00


def drain(app: fencepost.App) -> None:
    materializer = app.materializer(lookahead=60)
    while materializer.run_once():
        pass


@pytest.mark.parametrize(
    ("misfire", "max_catch_up", "runs", "skipped"),
    [
        pytest.param("catch_up", 100, [at(10), *MISSED, at(130)], [], id="catch_up"),
        pytest.param("catch_up", 5, [at(10), *MISSED[-5:], at(130)], MISSED[:-5],
                     id="catch_up-max-5"),
        pytest.param("coalesce", 100, [at(10), MISSED[-1], at(130)], MISSED[:-1], id="coalesce"),
        pytest.param("skip", 100, [at(10), at(130)], MISSED, id="skip"),
    ],
)  # fmt: skip
def test_after_two_hours_down_each_misfire_policy_stores_exactly_what_it_says(
    tmp_path: Path, misfire: str, max_catch_up: int, runs: list[str], skipped: list[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'fencepost.db'}"
    clock = ManualClock()
    before = fencepost.App(fencepost.connect(url, clock=clock))

    @before.job("tick")
    def tick() -> None: ...

    schedule = before.schedule(
        "tick", cron="*/10 * * * *", misfire=misfire, max_catch_up=max_catch_up, id="ticker"
    )
    clock.advance(timedelta(minutes=9, seconds=30))
    drain(before)
    before.store.close()  # everything stops

    clock.advance(timedelta(hours=2))
    after = fencepost.App(fencepost.connect(url, clock=clock))  # and starts again
    after.registry = before.registry
    drain(after)

    executions = after.get_schedule(schedule.id).executions(limit=1000).items
    stored_runs = sorted(e.slot for e in executions if e.state is fencepost.State.SCHEDULED)
    stored_skips = sorted(e.slot for e in executions if e.state is fencepost.State.SKIPPED)
    assert stored_runs == runs
    assert stored_skips == skipped
    for e in executions:
        if e.state is fencepost.State.SKIPPED:
            reason = after.store.transitions(e.id)[-1].reason or ""
            assert reason.startswith("misfire"), reason
    # Nothing more to do: planning again stores nothing new.
    drain(after)
    assert len(after.get_schedule(schedule.id).executions(limit=1000).items) == len(executions)
    after.store.close()


def test_a_paused_schedule_records_its_slots_as_skipped_and_resumes_on_time(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    app = fencepost.App(fencepost.connect(f"sqlite:///{tmp_path / 'f.db'}", clock=clock))

    @app.job("tick")
    def tick() -> None: ...

    schedule = app.schedule("tick", cron="*/10 * * * *", id="ticker")
    schedule.pause()
    for _ in range(4):
        clock.advance(timedelta(minutes=10))
        drain(app)
    schedule.resume()
    clock.advance(timedelta(minutes=9, seconds=30))
    drain(app)
    executions = schedule.executions(limit=100).items
    assert [(e.slot, e.state.value) for e in sorted(executions, key=lambda e: e.slot or "")] == [
        (at(10), "SKIPPED"),
        (at(20), "SKIPPED"),
        (at(30), "SKIPPED"),
        (at(40), "SKIPPED"),
        (at(50), "SCHEDULED"),
    ]
    assert app.store.transitions(executions[0].id)[-1].reason == "paused"
    app.store.close()

"""The materializer's decisions, as the pure function ``plan``: misfire and overlap policies.

A slot every ten minutes from 00:00 UTC; the schedule's watermark and the time
are set by each test. No store, no clock: what ``plan`` returns is the decision.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fencepost.domain.models import Occurrence
from fencepost.domain.policies import Misfire, Overlap
from fencepost.timing.planning import HELD, NEVER, PAUSED, InFlight, plan

T0 = datetime(2026, 11, 29, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def t(hours: int = 0, minutes: int = 0, seconds: int = 0) -> datetime:
    return T0 + timedelta(hours=hours, minutes=minutes, seconds=seconds)


@dataclass(frozen=True)
class EveryTenMinutes:
    """A stand-in rule: a slot at every whole ten minutes, optionally ending."""

    end: datetime | None = None

    def slots(self, after: datetime, until: datetime | None = None) -> Iterator[datetime]:
        step = timedelta(minutes=10)
        slot = T0 + ((after - T0) // step + 1) * step
        while (until is None or slot <= until) and (self.end is None or slot <= self.end):
            yield slot
            slot += step


@dataclass(frozen=True, kw_only=True)
class FakeSchedule:
    """The fields ``plan`` reads."""

    id: str = "s"
    paused: bool = False
    overlap: Overlap = Overlap.ALLOW
    misfire: Misfire = Misfire.COALESCE
    misfire_grace: timedelta = timedelta(seconds=60)
    max_catch_up: int = 100
    watermark: datetime = T0


def planned(schedule: FakeSchedule, now: datetime, **kwargs: Any) -> Any:
    options: dict[str, Any] = {"in_flight": InFlight(), "lookahead": MINUTE, **kwargs}
    rule = options.pop("rule", EveryTenMinutes())
    return plan(schedule, rule, now=now, **options)  # type: ignore[arg-type]


def runs(occurrences: list[Occurrence]) -> list[datetime]:
    return [o.slot for o in occurrences if o.skipped is None and o.due_at != HELD]


def skipped(occurrences: list[Occurrence]) -> list[datetime]:
    return [o.slot for o in occurrences if o.skipped is not None]


def test_allow_materializes_within_the_lookahead_and_sleeps_until_the_next_slot() -> None:
    result = planned(FakeSchedule(), t(minutes=9, seconds=30))
    assert runs(result.occurrences) == [t(minutes=10)]
    assert result.watermark == t(minutes=10, seconds=30)
    assert result.next_due == t(minutes=19)  # the next slot minus the lookahead


def test_planning_resumes_after_the_watermark_without_repeating() -> None:
    first = planned(FakeSchedule(), t(minutes=9, seconds=30))
    second = planned(FakeSchedule(watermark=first.watermark), t(minutes=19))
    assert runs(second.occurrences) == [t(minutes=20)]


DOWNTIME = t(hours=2, seconds=30)  # back at 02:00:30; 00:10 .. 01:50 were missed
MISSED = [t(minutes=10 * k) for k in range(1, 12)]


@pytest.mark.parametrize(
    ("misfire", "max_catch_up", "expect_runs", "expect_skipped"),
    [
        pytest.param(Misfire.CATCH_UP, 100, [*MISSED, t(hours=2)], [], id="catch_up"),
        pytest.param(
            Misfire.CATCH_UP, 5, [*MISSED[-5:], t(hours=2)], MISSED[:-5], id="catch_up-bounded"
        ),
        pytest.param(Misfire.COALESCE, 100, [MISSED[-1], t(hours=2)], MISSED[:-1], id="coalesce"),
        pytest.param(Misfire.SKIP, 100, [t(hours=2)], MISSED, id="skip"),
    ],
)
def test_misfire_policies_after_two_hours_of_downtime(
    misfire: Misfire, max_catch_up: int, expect_runs: list[datetime], expect_skipped: list[datetime]
) -> None:
    schedule = FakeSchedule(misfire=misfire, max_catch_up=max_catch_up)
    result = planned(schedule, DOWNTIME)
    assert runs(result.occurrences) == expect_runs
    assert skipped(result.occurrences) == expect_skipped
    assert all(
        o.skipped and o.skipped.startswith("misfire") for o in result.occurrences if o.skipped
    )
    assert bool(result.warnings) == (misfire is Misfire.CATCH_UP and max_catch_up == 5)
    assert result.watermark == DOWNTIME + MINUTE


def test_a_slot_within_the_grace_period_is_on_time() -> None:
    result = planned(FakeSchedule(misfire=Misfire.SKIP), t(minutes=10, seconds=59))
    assert runs(result.occurrences) == [t(minutes=10)]


def test_paused_slots_are_recorded_as_they_pass_and_not_ahead() -> None:
    result = planned(FakeSchedule(paused=True), t(minutes=25))
    assert [(o.slot, o.skipped) for o in result.occurrences] == [
        (t(minutes=10), PAUSED),
        (t(minutes=20), PAUSED),
    ]
    assert result.watermark == t(minutes=25)
    assert result.next_due == t(minutes=30)


def test_a_year_of_missed_slots_is_worked_through_in_bounded_steps() -> None:
    schedule = FakeSchedule(misfire=Misfire.SKIP)
    now = t(hours=24 * 365)
    result = planned(schedule, now, limit=1000)
    assert len(result.occurrences) == 1000
    assert result.next_due == now  # more to do at once
    second = planned(replace(schedule, watermark=result.watermark), now, limit=1000)
    assert second.occurrences[0].slot == result.occurrences[-1].slot + timedelta(minutes=10)


def test_an_ended_schedule_is_never_due_again() -> None:
    result = planned(FakeSchedule(), t(hours=1), rule=EveryTenMinutes(end=t(minutes=30)))
    assert result.next_due == NEVER


BUSY = InFlight(running=1)


def test_non_allow_schedules_are_planned_at_due_time_not_ahead() -> None:
    result = planned(FakeSchedule(overlap=Overlap.SKIP), t(minutes=9, seconds=30))
    assert result.occurrences == []
    assert result.next_due == t(minutes=10)


@pytest.mark.parametrize(
    ("overlap", "in_flight", "expect"),
    [
        pytest.param(Overlap.ALLOW, BUSY, "run", id="allow-busy"),
        pytest.param(Overlap.SKIP, BUSY, "skipped", id="skip-busy"),
        pytest.param(Overlap.SKIP, InFlight(), "run", id="skip-idle"),
        pytest.param(Overlap.BUFFER_ONE, BUSY, "held", id="buffer_one-busy"),
        pytest.param(
            Overlap.BUFFER_ONE, InFlight(running=1, held=1), "skipped", id="buffer_one-full"
        ),
        pytest.param(Overlap.BUFFER_ALL, InFlight(running=1, held=3), "held", id="buffer_all-busy"),
        pytest.param(Overlap.REPLACE, BUSY, "held", id="replace-busy"),
        pytest.param(Overlap.REPLACE, InFlight(), "run", id="replace-idle"),
    ],
)
def test_overlap_policies_when_a_slot_falls_due(
    overlap: Overlap, in_flight: InFlight, expect: str
) -> None:
    result = planned(FakeSchedule(overlap=overlap), t(minutes=10), in_flight=in_flight)
    (occurrence,) = result.occurrences
    kind = "skipped" if occurrence.skipped else "held" if occurrence.due_at == HELD else "run"
    assert kind == expect
    if kind == "skipped":
        assert occurrence.skipped is not None
        assert occurrence.skipped.startswith("overlap")
    assert result.cancel_running == (overlap is Overlap.REPLACE and in_flight.running > 0)


def test_held_occurrences_are_released_one_at_a_time_when_the_previous_run_ends() -> None:
    schedule = FakeSchedule(overlap=Overlap.BUFFER_ALL, watermark=t(minutes=10))
    still_running = planned(schedule, t(minutes=15), in_flight=InFlight(running=1, held=1))
    assert not still_running.release_held
    assert still_running.next_due == t(minutes=15, seconds=1)  # look again soon
    ended = planned(schedule, t(minutes=15), in_flight=InFlight(held=2))
    assert ended.release_held
    started = planned(schedule, t(minutes=15), in_flight=InFlight(waiting=1, held=1))
    assert not started.release_held  # the released one has not started yet


def test_replace_supersedes_what_was_waiting_before_the_new_slot() -> None:
    schedule = FakeSchedule(overlap=Overlap.REPLACE, watermark=t(minutes=10))
    result = planned(schedule, t(minutes=20), in_flight=InFlight(running=1, held=1))
    assert result.supersede_before == t(minutes=20)
    assert result.cancel_running
    assert [o.due_at for o in result.occurrences] == [HELD]

"""The SLO's rules as pure functions (fencepost.domain.slo): verdicts at their
boundaries, the order of the classes, windows, marks and the budget's arithmetic."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.domain.machine import stale_reason
from fencepost.domain.slo import (
    BURN_WINDOWS,
    ErrorClass,
    SloFacts,
    SloMark,
    Tally,
    Verdict,
    claim_verdict,
    counted,
    finish_verdict,
    is_backfill,
    mark_for,
    objective,
    require_target,
    rollup_verdicts,
    window_start,
)
from fencepost.domain.states import Event, State

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
S = timedelta(seconds=1)
TEN = 10 * S
FIVE_MIN = 300 * S


def facts(**changes: object) -> SloFacts:
    base = SloFacts(
        state=State.SUCCEEDED,
        planned_at=T0,
        first_claimed_at=T0 + S,
        first_finished_at=T0 + 2 * S,
        held=timedelta(0),
        marks=SloMark.NONE,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_claim_is_met_up_to_the_boundary_and_late_past_it() -> None:
    at = T0 + 3600 * S
    assert claim_verdict(facts(first_claimed_at=T0 + TEN), at, TEN) is Verdict.MET
    late = facts(first_claimed_at=T0 + TEN + timedelta(microseconds=1))
    assert claim_verdict(late, at, TEN) is Verdict.LATE_CLAIM


def test_an_unclaimed_execution_is_undecided_until_overdue() -> None:
    waiting = facts(state=State.SCHEDULED, first_claimed_at=None, first_finished_at=None)
    assert claim_verdict(waiting, T0 + TEN, TEN) is None
    assert claim_verdict(waiting, T0 + TEN + timedelta(microseconds=1), TEN) is Verdict.LATE_CLAIM
    assert finish_verdict(waiting, T0 + FIVE_MIN, FIVE_MIN, TEN) is None


def test_held_time_excuses_only_what_it_covers() -> None:
    at = T0 + 3600 * S
    held = facts(first_claimed_at=T0 + 40 * S, held=30 * S)
    assert claim_verdict(held, at, TEN) is Verdict.THROTTLED
    assert claim_verdict(replace(held, held=29 * S), at, TEN) is Verdict.LATE_CLAIM


def test_exclusions_come_before_any_verdict_once_decided() -> None:
    at = T0 + 3600 * S
    late = facts(first_claimed_at=T0 + 100 * S, first_finished_at=T0 + 1000 * S)
    for mark, verdict in ((SloMark.BACKFILL, Verdict.BACKFILL), (SloMark.REPLAYED, Verdict.REPLAY)):
        marked = replace(late, marks=mark | SloMark.RENEWAL_FAILED)
        assert claim_verdict(marked, at, TEN) is verdict
        assert finish_verdict(marked, at, FIVE_MIN, TEN) is verdict
    assert finish_verdict(
        replace(late, marks=SloMark.BACKFILL | SloMark.REPLAYED), at, FIVE_MIN, TEN
    ) is (Verdict.BACKFILL)


@pytest.mark.parametrize(
    ("marks", "claimed_after", "verdict"),
    [
        (
            SloMark.RENEWAL_FAILED | SloMark.STALE_COMPLETION | SloMark.HANDLER_FAILED,
            1,
            Verdict.RENEWAL_FAILED,
        ),
        (SloMark.STALE_COMPLETION | SloMark.TIMED_OUT, 1, Verdict.STALE_COMPLETION_REFUSED),
        (SloMark.TIMED_OUT | SloMark.HANDLER_FAILED, 1, Verdict.TIMED_OUT),
        (SloMark.HANDLER_FAILED, 100, Verdict.HANDLER_FAILED),
        (SloMark.NONE, 100, Verdict.LATE_CLAIM),
        (SloMark.NONE, 1, Verdict.RAN_LONG),
    ],
)
def test_a_finish_miss_takes_the_first_class_that_applies(
    marks: SloMark, claimed_after: int, verdict: Verdict
) -> None:
    late = facts(
        first_claimed_at=T0 + claimed_after * S, first_finished_at=T0 + 400 * S, marks=marks
    )
    assert finish_verdict(late, T0 + 3600 * S, FIVE_MIN, TEN) is verdict


def test_what_is_counted() -> None:
    assert counted(facts())
    assert not counted(facts(state=State.SKIPPED))
    assert not counted(facts(state=State.CANCELLED, first_claimed_at=None))
    assert counted(facts(state=State.CANCELLED))  # cancelled while running


def test_the_marks_of_audit_events() -> None:
    assert mark_for(Event.LEASE_EXPIRED, State.RUNNING, None) is SloMark.RENEWAL_FAILED
    assert mark_for(Event.CLAIMED, State.RUNNING, "took over") is SloMark.RENEWAL_FAILED
    assert mark_for(Event.CLAIMED, State.SCHEDULED, None) is SloMark.NONE
    refused_beat = mark_for(Event.STALE_REFUSED, State.RUNNING, stale_reason("heartbeat"))
    assert refused_beat is SloMark.RENEWAL_FAILED
    refused_done = mark_for(Event.STALE_REFUSED, State.RUNNING, stale_reason("complete"))
    assert refused_done is SloMark.STALE_COMPLETION
    assert mark_for(Event.TIMED_OUT, State.RUNNING, None) is SloMark.TIMED_OUT
    assert mark_for(Event.FAILED, State.RUNNING, None) is SloMark.HANDLER_FAILED
    assert mark_for(Event.REPLAYED, State.FAILED, None) is SloMark.REPLAYED
    assert mark_for(Event.COMPLETED, State.RUNNING, None) is SloMark.NONE


def test_a_backfill_is_more_than_a_second_in_the_past() -> None:
    assert not is_backfill(T0 - S, T0)
    assert is_backfill(T0 - S - timedelta(microseconds=1), T0)
    assert not is_backfill(T0 + S, T0)


def test_windows_of_days_start_at_midnight_and_shorter_ones_exactly() -> None:
    at = datetime(2026, 3, 31, 15, 30, tzinfo=UTC)
    assert window_start(at, timedelta(days=30)) == datetime(2026, 3, 1, tzinfo=UTC)
    assert window_start(at, timedelta(hours=6)) == at - timedelta(hours=6)


def test_the_budget_and_burn_rates() -> None:
    whole = Tally(counts={Verdict.MET: 990, Verdict.LATE_CLAIM: 10, Verdict.THROTTLED: 5})
    hour = Tally(counts={Verdict.MET: 9, Verdict.LATE_CLAIM: 1})
    o = objective("claim", TEN, 0.99, whole, {BURN_WINDOWS[0]: hour})
    assert (o.met, o.total, o.consumed) == (990, 1000, 10)
    assert o.budget == pytest.approx(10.0)
    assert o.remaining == pytest.approx(0.0)
    assert o.excluded == {"backfill": 0, "replay": 0, "throttled": 5}
    assert o.misses == {ErrorClass.LATE_CLAIM: 10}
    assert not o.missed  # exactly the target
    assert o.burn[0].rate == pytest.approx(10.0)  # 10% misses against a 1% budget
    assert o.burn[1].rate is None  # nothing decided in six hours
    worse = objective("claim", TEN, 0.995, whole, {})
    assert worse.missed


@pytest.mark.parametrize("value", [0, 1, -0.1, 1.5, float("nan"), float("inf"), "0.9", True, None])
def test_a_target_is_strictly_between_zero_and_one(value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        require_target(value, "claim_target")
    assert refused.value.field == "claim_target"


def test_rollups_hold_decided_verdicts_of_counted_executions() -> None:
    at = T0 + 3600 * S
    assert rollup_verdicts(facts(), at) == [("claim", Verdict.MET), ("finish", Verdict.MET)]
    assert rollup_verdicts(facts(state=State.SKIPPED), at) == []

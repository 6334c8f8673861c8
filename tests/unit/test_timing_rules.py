"""Firing rules: intervals, bounds, validation, laziness, and properties of every slot sequence."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fencepost
from fencepost import ValidationError, fire_times
from fencepost.domain.policies import DstFold, DstGap
from fencepost.timing.rules import EPOCH, Rule, first_slot, make_rule, rule_of
from fencepost.timing.slots import cron_slots
from fencepost.timing.zones import zone

NEW_YORK = "America/New_York"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- intervals ----------------------------------------------------------------------------------


def test_an_interval_aligns_to_the_unix_epoch_by_default() -> None:
    slots = fire_times(timedelta(minutes=15), after=_at("2026-05-05T10:07:31Z"), count=4)
    assert [slot.isoformat() for slot in slots] == [
        "2026-05-05T10:15:00+00:00",
        "2026-05-05T10:30:00+00:00",
        "2026-05-05T10:45:00+00:00",
        "2026-05-05T11:00:00+00:00",
    ]
    assert all(slot.tzinfo is UTC for slot in slots)
    assert make_rule(every=900).anchor == EPOCH


def test_an_interval_is_strictly_after_a_slot() -> None:
    slots = fire_times(timedelta(hours=1), after=_at("2026-05-05T10:00:00Z"), count=2)
    assert slots == [_at("2026-05-05T11:00:00Z"), _at("2026-05-05T12:00:00Z")]
    just_before = _at("2026-05-05T09:59:59.999999Z")
    assert fire_times(timedelta(hours=1), after=just_before, count=1) == [
        slots[0] - timedelta(hours=1)
    ]


def test_an_interval_anchors_at_start_at_and_includes_it() -> None:
    rule = make_rule(every=timedelta(minutes=40), start_at=_at("2026-05-05T10:07:00+02:00"))
    assert rule.anchor == _at("2026-05-05T08:07:00Z")
    assert list(islice(rule.slots(_at("2026-01-01T00:00:00Z")), 3)) == [
        _at("2026-05-05T08:07:00Z"),
        _at("2026-05-05T08:47:00Z"),
        _at("2026-05-05T09:27:00Z"),
    ]


def test_an_explicit_anchor_sets_only_the_phase() -> None:
    rule = make_rule(every=3600, anchor=_at("2030-01-01T00:20:00Z"))
    # Slots exist before the anchor too: it is a phase, not a start.
    assert list(islice(rule.slots(_at("2026-05-05T10:00:00Z")), 2)) == [
        _at("2026-05-05T10:20:00Z"),
        _at("2026-05-05T11:20:00Z"),
    ]


def test_an_interval_ignores_dst() -> None:
    rule = make_rule(every=timedelta(days=1), start_at=_at("2026-03-07T09:00:00-05:00"))
    slots = list(islice(rule.slots(_at("2026-03-01T00:00:00Z")), 3))
    assert [s - slots[0] for s in slots] == [timedelta(0), timedelta(days=1), timedelta(days=2)]
    # 09:00 EST, then 10:00 EDT: a fixed duration on the UTC timeline.
    assert slots[2].astimezone(ZoneInfo(NEW_YORK)).isoformat() == "2026-03-09T10:00:00-04:00"


def test_bounds_are_inclusive_and_the_sequence_ends_after_end_at() -> None:
    rule = make_rule(
        every=600, start_at=_at("2026-05-05T10:00:00Z"), end_at=_at("2026-05-05T10:30:00Z")
    )
    expected = [_at(f"2026-05-05T10:{m}:00Z") for m in ("00", "10", "20", "30")]
    assert list(rule.slots(_at("2000-01-01T00:00:00Z"))) == expected
    assert list(rule.slots(_at("2026-05-05T10:00:00Z"))) == expected[1:]
    assert list(rule.slots(_at("2026-05-05T10:30:00Z"))) == []
    assert list(rule.slots(_at("2026-05-05T10:05:00Z"), _at("2026-05-05T10:20:00Z"))) == [
        expected[1],
        expected[2],
    ]


def test_cron_bounds_are_inclusive_too() -> None:
    rule = make_rule(
        cron="*/10 * * * *",
        start_at=_at("2026-05-05T10:00:00Z"),
        end_at=_at("2026-05-05T10:30:00Z"),
    )
    assert [s.minute for s in rule.slots(_at("2026-05-05T09:00:00Z"))] == [0, 10, 20, 30]
    assert [s.minute for s in rule.slots(_at("2026-05-05T10:10:00Z"))] == [20, 30]


def test_a_bounded_cron_rule_ends_instead_of_searching() -> None:
    rule = make_rule(cron="0 0 29 2 *", end_at=_at("2026-05-05T00:00:00Z"))
    assert list(rule.slots(_at("2023-01-01T00:00:00Z"))) == [_at("2024-02-29T00:00:00Z")]
    assert list(rule.slots(_at("2026-06-01T00:00:00Z"))) == []


@pytest.mark.timeout(10)
def test_a_rule_that_only_matches_skipped_wall_times_stops_at_until() -> None:
    # The second Sunday of March at 02:30 is always in New York's gap.
    after = _at("2026-01-01T00:00:00Z")
    skip = make_rule(cron="30 2 * 3 SUN#2", timezone=NEW_YORK, dst_gap="skip")
    assert list(skip.slots(after, after + timedelta(days=800))) == []
    shift = make_rule(cron="30 2 * 3 SUN#2", timezone=NEW_YORK)
    assert list(shift.slots(after, after + timedelta(days=800))) == [
        _at("2026-03-08T07:00:00Z"),
        _at("2027-03-14T07:00:00Z"),
    ]


def test_wall_times_on_one_instant_are_one_slot() -> None:
    slots = fire_times(
        "0,20,40 2,3 * * *", timezone=NEW_YORK, after=_at("2026-03-08T00:00:00Z"), count=3
    )
    # 02:00, 02:20, 02:40 (in the gap) and the real 03:00 are all 07:00Z.
    assert slots == [_at(f"2026-03-08T07:{m}:00Z") for m in ("00", "20", "40")]


def test_every_second_through_a_twice_fold_covers_each_second_once() -> None:
    rule = make_rule(cron="* * * * * *", timezone=NEW_YORK, dst_fold="twice")
    start, end = _at("2026-11-01T04:00:00Z"), _at("2026-11-01T08:00:00Z")
    slots = rule.slots(start, end)
    assert sum(1 for _ in slots) == 4 * 3600  # the repeated hour's seconds: every UTC second
    once = make_rule(cron="* * * * * *", timezone=NEW_YORK)
    assert sum(1 for _ in once.slots(start, end)) == 3 * 3600


@pytest.mark.timeout(10)
def test_slots_are_lazy() -> None:
    rule = make_rule(cron="* * * * * *", timezone=NEW_YORK)
    after = _at("2026-01-01T00:00:00Z")
    slots = rule.slots(after, after + timedelta(days=365))
    assert isinstance(slots, Iterator)
    assert list(islice(slots, 5)) == [after + timedelta(seconds=s) for s in range(1, 6)]
    interval = make_rule(every=1e-3)  # a millisecond: 3e10 slots in a year
    assert len(list(islice(interval.slots(after, after + timedelta(days=365)), 5))) == 5


def test_fire_times_returns_fewer_when_the_rule_stops() -> None:
    assert fire_times("0 0 * * *", after=_at("9999-12-29T12:00:00Z"), count=5) == [
        _at("9999-12-30T00:00:00Z"),
        _at("9999-12-31T00:00:00Z"),
    ]


def test_fire_times_is_exported() -> None:
    assert "fire_times" in fencepost.__all__
    assert fencepost.fire_times is fire_times


# -- validation -------------------------------------------------------------------------------

AFTER = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"rule": "61 * * * *"}, "rule", id="minute-out-of-range"),
        pytest.param({"rule": "* * *"}, "rule", id="three-fields"),
        pytest.param({"rule": "0 0 30 2 *"}, "rule", id="never-fires"),
        pytest.param({"rule": ""}, "rule", id="empty"),
        pytest.param({"rule": 60}, "rule", id="bare-number"),
        pytest.param({"rule": timedelta(0)}, "rule", id="zero-interval"),
        pytest.param({"rule": timedelta(seconds=-5)}, "rule", id="negative-interval"),
        pytest.param({"timezone": "Mars/Olympus_Mons"}, "timezone", id="unknown-zone"),
        pytest.param({"timezone": ""}, "timezone", id="empty-zone"),
        pytest.param({"timezone": ["UTC"]}, "timezone", id="zone-not-a-string"),
        pytest.param(
            {"rule": timedelta(days=1), "timezone": "Europe/Paris"},
            "timezone",
            id="interval-in-a-zone",
        ),
        pytest.param({"dst_gap": "later"}, "dst_gap", id="unknown-gap-policy"),
        pytest.param({"dst_fold": "thrice"}, "dst_fold", id="unknown-fold-policy"),
        pytest.param({"after": datetime(2026, 1, 1)}, "after", id="naive-after"),
        pytest.param({"after": "2026-01-01"}, "after", id="string-after"),
        pytest.param({"count": 0}, "count", id="count-zero"),
        pytest.param({"count": 10_001}, "count", id="count-too-big"),
        pytest.param({"count": 2.0}, "count", id="count-float"),
        pytest.param({"count": True}, "count", id="count-bool"),
    ],
)
def test_fire_times_names_the_bad_argument(kwargs: dict[str, Any], field: str) -> None:
    arguments: dict[str, Any] = {"rule": "*/5 * * * *", "after": AFTER, "count": 3, **kwargs}
    with pytest.raises(ValidationError) as caught:
        fire_times(**arguments)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({}, "cron", id="neither-cron-nor-every"),
        pytest.param({"cron": "* * * * *", "every": 60}, "every", id="both-cron-and-every"),
        pytest.param({"cron": "* * * * * * *"}, "cron", id="seven-fields"),
        pytest.param({"cron": "0 25 * * *"}, "cron", id="hour-out-of-range"),
        pytest.param({"every": 0}, "every", id="zero-seconds"),
        pytest.param({"every": -1}, "every", id="negative-seconds"),
        pytest.param({"every": 1e-9}, "every", id="below-a-microsecond"),
        pytest.param({"every": timedelta(0)}, "every", id="zero-timedelta"),
        pytest.param({"every": "5m"}, "every", id="string-interval"),
        pytest.param({"every": float("inf")}, "every", id="infinite"),
        pytest.param({"cron": "* * * * *", "timezone": "Nowhere/Land"}, "timezone", id="zone"),
        pytest.param({"every": 60, "timezone": NEW_YORK}, "timezone", id="interval-in-a-zone"),
        pytest.param({"cron": "* * * * *", "dst_gap": "SHIFT"}, "dst_gap", id="gap-case"),
        pytest.param({"cron": "* * * * *", "dst_fold": None}, "dst_fold", id="fold-none"),
        pytest.param(
            {"every": 60, "start_at": datetime(2026, 1, 1)}, "start_at", id="naive-start_at"
        ),
        pytest.param({"every": 60, "end_at": datetime(2026, 1, 1)}, "end_at", id="naive-end_at"),
        pytest.param({"every": 60, "anchor": datetime(2026, 1, 1)}, "anchor", id="naive-anchor"),
        pytest.param(
            {"every": 60, "start_at": AFTER, "end_at": AFTER - timedelta(seconds=1)},
            "end_at",
            id="end_at-before-start_at",
        ),
        pytest.param(
            {"cron": "* * * * *", "start_at": AFTER, "end_at": AFTER},
            "end_at",
            id="end_at-equals-start_at",
        ),
    ],
)
def test_make_rule_names_the_bad_argument(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make_rule(**kwargs)
    assert caught.value.field == field


def test_a_rule_built_directly_is_validated_and_normalized() -> None:
    rule = Rule(cron="  0  9 * * mon ", timezone="Europe/Paris")
    assert rule.cron == "0 9 * * MON"
    assert (rule.dst_gap, rule.dst_fold) == (DstGap.SHIFT, DstFold.ONCE)
    assert Rule(every=90).every == timedelta(seconds=90)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as caught:
        Rule(every=timedelta(seconds=-1))
    assert caught.value.field == "every"
    with pytest.raises(ValidationError) as caught:
        Rule(cron="* * * * *", start_at=datetime(2026, 1, 1))
    assert caught.value.field == "start_at"


def test_a_cron_rule_has_no_anchor() -> None:
    assert make_rule(cron="* * * * *", anchor=AFTER).anchor is None


def test_slots_refuse_naive_bounds() -> None:
    rule = make_rule(cron="* * * * *")
    with pytest.raises(ValidationError) as caught:
        rule.slots(datetime(2026, 1, 1))
    assert caught.value.field == "after"
    with pytest.raises(ValidationError) as caught:
        rule.slots(AFTER, datetime(2027, 1, 1))
    assert caught.value.field == "until"


# -- properties -------------------------------------------------------------------------------

EXPRESSIONS = [
    "30 2 * * *",
    "15,45 1,2 * * *",
    "*/15 1-2 * * *",
    "*/7 * * * *",
    "0 0 * * *",
    "30 23 * * *",
    "0 9 * * MON-FRI",
    "*/20 */7 0-3 * * *",
    "0 */2 * 3,4,9,10,11 SUN",
]
#: Zones with their 2026 DST changes (the interesting places to start from), and UTC.
CHANGES = [
    (zone, datetime.fromisoformat(change))
    for zone, change in (
        (NEW_YORK, "2026-03-08T07:00:00Z"),
        (NEW_YORK, "2026-11-01T06:00:00Z"),
        ("Europe/London", "2026-03-29T01:00:00Z"),
        ("Europe/London", "2026-10-25T01:00:00Z"),
        ("Australia/Lord_Howe", "2026-04-04T15:00:00Z"),
        ("Australia/Lord_Howe", "2026-10-03T15:30:00Z"),
        ("America/Santiago", "2026-04-05T03:00:00Z"),
        ("America/Santiago", "2026-09-06T04:00:00Z"),
        ("UTC", "2026-01-01T00:00:00Z"),
    )
]


def _near(draw: st.DrawFn, base: datetime, hours: int = 36) -> datetime:
    """An instant within ``hours`` of ``base``, sometimes off the whole second."""
    minutes = draw(st.integers(-hours * 60, hours * 60))
    micro = draw(st.sampled_from([0, 0, 0, 1, 500_000, 999_999]))
    return base + timedelta(minutes=minutes, microseconds=micro)


@st.composite
def cron_cases(draw: st.DrawFn) -> tuple[Rule, datetime]:
    """A cron rule in a zone, and an ``after`` near one of that zone's DST changes."""
    zone, change = draw(st.sampled_from(CHANGES))
    start_at = _near(draw, change, 10) if draw(st.booleans()) else None
    end_at = None
    if draw(st.booleans()):
        low = start_at if start_at is not None else change
        end_at = low + timedelta(minutes=draw(st.integers(1, 2000)))
    rule = make_rule(
        cron=draw(st.sampled_from(EXPRESSIONS)),
        timezone=zone,
        dst_gap=draw(st.sampled_from(DstGap)),
        dst_fold=draw(st.sampled_from(DstFold)),
        start_at=start_at,
        end_at=end_at,
    )
    # Often within a few hours of the change: resuming inside a fold is the hard case.
    return rule, _near(draw, change, draw(st.sampled_from([3, 36])))


@st.composite
def interval_cases(draw: st.DrawFn) -> tuple[Rule, datetime]:
    """An interval rule (a microsecond to 11 days), and an ``after`` near its bounds."""
    base = draw(st.sampled_from(CHANGES))[1]
    start_at = _near(draw, base) if draw(st.booleans()) else None
    end_at = None
    if start_at is not None and draw(st.booleans()):
        end_at = start_at + timedelta(seconds=draw(st.integers(1, 10**6)))
    rule = make_rule(
        every=timedelta(microseconds=draw(st.integers(1, 10**12))),
        start_at=start_at,
        end_at=end_at,
        anchor=_near(draw, base) if draw(st.booleans()) else None,
    )
    return rule, _near(draw, base)


def _check_sequence(rule: Rule, after: datetime, taken: int) -> None:
    slots = list(islice(rule.slots(after), taken))
    assert all(slot.tzinfo is UTC for slot in slots)
    assert all(a < b for a, b in pairwise(slots)), "strictly increasing"
    assert all(slot > after for slot in slots)
    if rule.start_at is not None:
        assert all(slot >= rule.start_at for slot in slots)
    if rule.end_at is not None:
        assert all(slot <= rule.end_at for slot in slots)
    # `until` cuts the same sequence.
    if slots:
        until = slots[len(slots) // 2]
        assert list(rule.slots(after, until)) == [s for s in slots if s <= until]
    # Resuming strictly after any slot yields exactly the rest: a watermark is enough.
    # Every slot is tried: inside a `twice` fold only some resume points are hard.
    for index, mark in enumerate(slots):
        rest = slots[index + 1 :]
        assert list(islice(rule.slots(mark), len(rest))) == rest, mark.isoformat()


@settings(max_examples=200, deadline=None)
@given(case=cron_cases())
def test_cron_slots_are_increasing_bounded_and_resumable(case: tuple[Rule, datetime]) -> None:
    rule, after = case
    _check_sequence(rule, after, 30)


@settings(max_examples=200, deadline=None)
@given(case=interval_cases())
def test_interval_slots_are_increasing_bounded_and_resumable(case: tuple[Rule, datetime]) -> None:
    rule, after = case
    _check_sequence(rule, after, 20)
    assert rule.every is not None
    assert rule.anchor is not None
    for slot in islice(rule.slots(after), 20):
        assert (slot - rule.anchor) % rule.every == timedelta(0), "on the anchor's grid"


def _stored(**fields: Any) -> Any:
    """What rule_of reads of a stored schedule."""
    defaults = {
        "cron": None,
        "every": None,
        "timezone": "UTC",
        "dst_gap": DstGap.SHIFT,
        "dst_fold": DstFold.ONCE,
        "start_at": None,
        "end_at": None,
        "created_at": AFTER,
    }
    return SimpleNamespace(**(defaults | fields))


def test_schedules_with_one_cron_expression_share_one_rule() -> None:
    first = rule_of(_stored(cron="7 * * * *", created_at=AFTER))
    second = rule_of(_stored(cron="7 * * * *", created_at=AFTER + timedelta(days=3)))
    assert first is second
    assert first == make_rule(cron="7 * * * *")
    assert rule_of(_stored(cron="8 * * * *")) != first


def test_intervals_created_at_other_times_keep_their_own_anchor() -> None:
    later = AFTER + timedelta(seconds=7)
    first = rule_of(_stored(every=timedelta(minutes=1), created_at=AFTER))
    second = rule_of(_stored(every=timedelta(minutes=1), created_at=later))
    assert (first.anchor, second.anchor) == (AFTER, later)
    assert next(second.slots(AFTER)) == later


# -- remembered runs (a materializer's batch asks the same question many times) -----------


@settings(max_examples=200, deadline=None)
@given(
    expr=st.sampled_from(["0 * * * *", "*/7 * * * *", "30 2 * * *", "0 0 29 2 *", "15 1 * 3 SUN"]),
    timezone=st.sampled_from(["UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe"]),
    start=st.datetimes(
        min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
    ),
    hours=st.integers(min_value=0, max_value=24 * 40),
)
def test_a_remembered_run_is_the_run(expr: str, timezone: str, start: datetime, hours: int) -> None:
    """Asked twice (the second answer comes from memory when the run is short), a rule
    gives the slots cronsim gives, and its first slot is the run's first."""
    rule = make_rule(cron=expr, timezone=timezone)

    def walk(after: datetime, until: datetime, rule: Rule = rule) -> list[datetime]:
        return list(
            cron_slots(
                rule.cron or "",
                zone(rule.timezone),
                gap=rule.dst_gap,
                fold=rule.dst_fold,
                after=after,
                until=until,
            )
        )

    until = start + timedelta(hours=hours)
    walked = walk(start, until)
    assert list(rule.slots(start, until)) == walked
    assert list(rule.slots(start, until)) == walked
    # The same start with another end is another run, not the one remembered.
    later = until + timedelta(hours=5)
    assert list(rule.slots(start, later)) == [*walked, *walk(until, later)]
    # The same run in another zone is another run too.
    elsewhere = make_rule(cron=expr, timezone="Asia/Kolkata")
    assert list(elsewhere.slots(start, until)) == walk(start, until, elsewhere)
    first = next(iter(rule.slots(start)), None)
    assert first_slot(rule, start) == first
    assert first_slot(rule, start) == first


def test_a_first_slot_more_than_a_year_away_is_found() -> None:
    """A leap day's rule fires once in four years: the bounded (remembered) look finds
    nothing within the year, and the walk goes on."""
    rule = make_rule(cron="0 0 29 2 *")
    assert first_slot(rule, datetime(2025, 3, 1, tzinfo=UTC)) == datetime(2028, 2, 29, tzinfo=UTC)

"""Cron slots across DST changes, by name, for both policies of the gap and of the fold.

Expected slots are written as local wall times with their UTC offset, which pins
the exact instant; each test checks both the instant and the wall time. The
dates are 2026's transitions (checked against zoneinfo in
``test_the_2026_transitions_are_the_ones_these_tests_assume``):

* America/New_York: 02:00 EST -> 03:00 EDT on 8 March; 02:00 EDT -> 01:00 EST on 1 November.
* Europe/London: 01:00 GMT -> 02:00 BST on 29 March; 02:00 BST -> 01:00 GMT on 25 October.
* Australia/Lord_Howe (half-hour DST): 02:00 -> 02:30 (+11:00) on 4 October;
  02:00 -> 01:30 (+10:30) on 5 April.
* America/Santiago changes at midnight; its dates are looked up, not assumed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from fencepost.timing.rules import Rule, make_rule

GAPS = ("shift", "skip")
FOLDS = ("once", "twice")

NEW_YORK = "America/New_York"
LONDON = "Europe/London"
LORD_HOWE = "Australia/Lord_Howe"
SANTIAGO = "America/Santiago"


def _slots(rule: Rule, after: str, until: str) -> list[datetime]:
    return list(rule.slots(datetime.fromisoformat(after), datetime.fromisoformat(until)))


def _assert_slots(slots: list[datetime], tz: str, expected: list[str]) -> None:
    """``slots`` are exactly ``expected`` (local ISO strings with offsets): instants and walls."""
    assert all(slot.tzinfo is UTC for slot in slots)
    assert slots == [datetime.fromisoformat(e) for e in expected]
    assert [slot.astimezone(ZoneInfo(tz)).isoformat() for slot in slots] == expected


def _spring(gap: str, tz: str, expr: str, after: str, until: str) -> list[datetime]:
    """The slots under gap policy ``gap``, checked to be the same under either fold policy."""
    once, twice = (
        _slots(make_rule(cron=expr, timezone=tz, dst_gap=gap, dst_fold=fold), after, until)
        for fold in FOLDS
    )
    assert once == twice
    return once


def _fall(fold: str, tz: str, expr: str, after: str, until: str) -> list[datetime]:
    """The slots under fold policy ``fold``, checked to be the same under either gap policy."""
    shift, skip = (
        _slots(make_rule(cron=expr, timezone=tz, dst_gap=gap, dst_fold=fold), after, until)
        for gap in GAPS
    )
    assert shift == skip
    return shift


def test_the_2026_transitions_are_the_ones_these_tests_assume() -> None:
    expected = {
        NEW_YORK: [
            ("2026-03-08T07:00:00+00:00", "01:59:59-05:00", "03:00:00-04:00"),
            ("2026-11-01T06:00:00+00:00", "01:59:59-04:00", "01:00:00-05:00"),
        ],
        LONDON: [
            ("2026-03-29T01:00:00+00:00", "00:59:59+00:00", "02:00:00+01:00"),
            ("2026-10-25T01:00:00+00:00", "01:59:59+01:00", "01:00:00+00:00"),
        ],
        LORD_HOWE: [
            ("2026-04-04T15:00:00+00:00", "01:59:59+11:00", "01:30:00+10:30"),
            ("2026-10-03T15:30:00+00:00", "01:59:59+10:30", "02:30:00+11:00"),
        ],
    }
    for name, changes in expected.items():
        tz = ZoneInfo(name)
        found = [
            (
                t.isoformat(),
                (t - timedelta(seconds=1)).astimezone(tz).isoformat()[11:],
                t.astimezone(tz).isoformat()[11:],
            )
            for t in _transitions(tz, 2026)
        ]
        assert found == changes, name


# -- a daily job at a wall time in (or next to) the gap ---------------------------------------

SPRING_DAILY = [
    # New York: 02:30 does not exist on 8 March.
    (
        NEW_YORK,
        "30 2 * * *",
        "shift",
        [
            ("2026-03-07T07:30:00+00:00", "2026-03-07T02:30:00-05:00"),
            ("2026-03-08T07:00:00+00:00", "2026-03-08T03:00:00-04:00"),
            ("2026-03-09T06:30:00+00:00", "2026-03-09T02:30:00-04:00"),
        ],
    ),
    (
        NEW_YORK,
        "30 2 * * *",
        "skip",
        [
            ("2026-03-07T07:30:00+00:00", "2026-03-07T02:30:00-05:00"),
            ("2026-03-09T06:30:00+00:00", "2026-03-09T02:30:00-04:00"),
        ],
    ),
    # London's gap is 01:00-02:00: 02:30 is untouched, 01:30 is in it.
    (
        LONDON,
        "30 2 * * *",
        "shift",
        [
            ("2026-03-28T02:30:00+00:00", "2026-03-28T02:30:00+00:00"),
            ("2026-03-29T01:30:00+00:00", "2026-03-29T02:30:00+01:00"),
            ("2026-03-30T01:30:00+00:00", "2026-03-30T02:30:00+01:00"),
        ],
    ),
    (
        LONDON,
        "30 2 * * *",
        "skip",
        [
            ("2026-03-28T02:30:00+00:00", "2026-03-28T02:30:00+00:00"),
            ("2026-03-29T01:30:00+00:00", "2026-03-29T02:30:00+01:00"),
            ("2026-03-30T01:30:00+00:00", "2026-03-30T02:30:00+01:00"),
        ],
    ),
    (
        LONDON,
        "30 1 * * *",
        "shift",
        [
            ("2026-03-28T01:30:00+00:00", "2026-03-28T01:30:00+00:00"),
            ("2026-03-29T01:00:00+00:00", "2026-03-29T02:00:00+01:00"),
            ("2026-03-30T00:30:00+00:00", "2026-03-30T01:30:00+01:00"),
        ],
    ),
    (
        LONDON,
        "30 1 * * *",
        "skip",
        [
            ("2026-03-28T01:30:00+00:00", "2026-03-28T01:30:00+00:00"),
            ("2026-03-30T00:30:00+00:00", "2026-03-30T01:30:00+01:00"),
        ],
    ),
    # Lord Howe's gap is half an hour, 02:00-02:30: 02:30 exists, 02:15 does not.
    (
        LORD_HOWE,
        "30 2 * * *",
        "shift",
        [
            ("2026-10-02T16:00:00+00:00", "2026-10-03T02:30:00+10:30"),
            ("2026-10-03T15:30:00+00:00", "2026-10-04T02:30:00+11:00"),
            ("2026-10-04T15:30:00+00:00", "2026-10-05T02:30:00+11:00"),
        ],
    ),
    (
        LORD_HOWE,
        "30 2 * * *",
        "skip",
        [
            ("2026-10-02T16:00:00+00:00", "2026-10-03T02:30:00+10:30"),
            ("2026-10-03T15:30:00+00:00", "2026-10-04T02:30:00+11:00"),
            ("2026-10-04T15:30:00+00:00", "2026-10-05T02:30:00+11:00"),
        ],
    ),
    (
        LORD_HOWE,
        "15 2 * * *",
        "shift",
        [
            ("2026-10-02T15:45:00+00:00", "2026-10-03T02:15:00+10:30"),
            ("2026-10-03T15:30:00+00:00", "2026-10-04T02:30:00+11:00"),
            ("2026-10-04T15:15:00+00:00", "2026-10-05T02:15:00+11:00"),
        ],
    ),
    (
        LORD_HOWE,
        "15 2 * * *",
        "skip",
        [
            ("2026-10-02T15:45:00+00:00", "2026-10-03T02:15:00+10:30"),
            ("2026-10-04T15:15:00+00:00", "2026-10-05T02:15:00+11:00"),
        ],
    ),
]

SPRING_WINDOWS = {
    NEW_YORK: ("2026-03-07T00:00:00-05:00", "2026-03-09T23:59:59-04:00"),
    LONDON: ("2026-03-28T00:00:00+00:00", "2026-03-30T23:59:59+01:00"),
    LORD_HOWE: ("2026-10-03T00:00:00+10:30", "2026-10-05T23:59:59+11:00"),
}


def _daily_id(zone: str, expr: str, season: str, policy: str) -> str:
    place = zone.split("/")[-1].lower()
    minute, hour = expr.split()[:2]
    return f"{place}-{season}-{minute}_{hour}-{policy}"


@pytest.mark.parametrize(
    ("zone", "expr", "gap", "expected"),
    [
        pytest.param(*case, id=_daily_id(case[0], case[1], "spring", case[2]))
        for case in SPRING_DAILY
    ],
)
def test_daily_across_spring_forward(
    zone: str, expr: str, gap: str, expected: list[tuple[str, str]]
) -> None:
    slots = _spring(gap, zone, expr, *SPRING_WINDOWS[zone])
    assert [slot.isoformat() for slot in slots] == [utc for utc, _ in expected]
    _assert_slots(slots, zone, [local for _, local in expected])


# -- a daily job at a wall time in (or next to) the fold --------------------------------------

FALL_DAILY = [
    # New York's fold is 01:00-02:00 on 1 November: 01:30 happens twice, 02:30 once.
    (
        NEW_YORK,
        "30 2 * * *",
        "once",
        [
            ("2026-10-31T06:30:00+00:00", "2026-10-31T02:30:00-04:00"),
            ("2026-11-01T07:30:00+00:00", "2026-11-01T02:30:00-05:00"),
            ("2026-11-02T07:30:00+00:00", "2026-11-02T02:30:00-05:00"),
        ],
    ),
    (
        NEW_YORK,
        "30 2 * * *",
        "twice",
        [
            ("2026-10-31T06:30:00+00:00", "2026-10-31T02:30:00-04:00"),
            ("2026-11-01T07:30:00+00:00", "2026-11-01T02:30:00-05:00"),
            ("2026-11-02T07:30:00+00:00", "2026-11-02T02:30:00-05:00"),
        ],
    ),
    (
        NEW_YORK,
        "30 1 * * *",
        "once",
        [
            ("2026-10-31T05:30:00+00:00", "2026-10-31T01:30:00-04:00"),
            ("2026-11-01T05:30:00+00:00", "2026-11-01T01:30:00-04:00"),
            ("2026-11-02T06:30:00+00:00", "2026-11-02T01:30:00-05:00"),
        ],
    ),
    (
        NEW_YORK,
        "30 1 * * *",
        "twice",
        [
            ("2026-10-31T05:30:00+00:00", "2026-10-31T01:30:00-04:00"),
            ("2026-11-01T05:30:00+00:00", "2026-11-01T01:30:00-04:00"),
            ("2026-11-01T06:30:00+00:00", "2026-11-01T01:30:00-05:00"),
            ("2026-11-02T06:30:00+00:00", "2026-11-02T01:30:00-05:00"),
        ],
    ),
    # London's fold is 01:00-02:00 on 25 October.
    (
        LONDON,
        "30 2 * * *",
        "once",
        [
            ("2026-10-24T01:30:00+00:00", "2026-10-24T02:30:00+01:00"),
            ("2026-10-25T02:30:00+00:00", "2026-10-25T02:30:00+00:00"),
            ("2026-10-26T02:30:00+00:00", "2026-10-26T02:30:00+00:00"),
        ],
    ),
    (
        LONDON,
        "30 2 * * *",
        "twice",
        [
            ("2026-10-24T01:30:00+00:00", "2026-10-24T02:30:00+01:00"),
            ("2026-10-25T02:30:00+00:00", "2026-10-25T02:30:00+00:00"),
            ("2026-10-26T02:30:00+00:00", "2026-10-26T02:30:00+00:00"),
        ],
    ),
    (
        LONDON,
        "30 1 * * *",
        "once",
        [
            ("2026-10-24T00:30:00+00:00", "2026-10-24T01:30:00+01:00"),
            ("2026-10-25T00:30:00+00:00", "2026-10-25T01:30:00+01:00"),
            ("2026-10-26T01:30:00+00:00", "2026-10-26T01:30:00+00:00"),
        ],
    ),
    (
        LONDON,
        "30 1 * * *",
        "twice",
        [
            ("2026-10-24T00:30:00+00:00", "2026-10-24T01:30:00+01:00"),
            ("2026-10-25T00:30:00+00:00", "2026-10-25T01:30:00+01:00"),
            ("2026-10-25T01:30:00+00:00", "2026-10-25T01:30:00+00:00"),
            ("2026-10-26T01:30:00+00:00", "2026-10-26T01:30:00+00:00"),
        ],
    ),
    # Lord Howe's fold is half an hour, 01:30-02:00 on 5 April: 01:45 twice, 02:30 once.
    (
        LORD_HOWE,
        "30 2 * * *",
        "once",
        [
            ("2026-04-03T15:30:00+00:00", "2026-04-04T02:30:00+11:00"),
            ("2026-04-04T16:00:00+00:00", "2026-04-05T02:30:00+10:30"),
            ("2026-04-05T16:00:00+00:00", "2026-04-06T02:30:00+10:30"),
        ],
    ),
    (
        LORD_HOWE,
        "30 2 * * *",
        "twice",
        [
            ("2026-04-03T15:30:00+00:00", "2026-04-04T02:30:00+11:00"),
            ("2026-04-04T16:00:00+00:00", "2026-04-05T02:30:00+10:30"),
            ("2026-04-05T16:00:00+00:00", "2026-04-06T02:30:00+10:30"),
        ],
    ),
    (
        LORD_HOWE,
        "45 1 * * *",
        "once",
        [
            ("2026-04-03T14:45:00+00:00", "2026-04-04T01:45:00+11:00"),
            ("2026-04-04T14:45:00+00:00", "2026-04-05T01:45:00+11:00"),
            ("2026-04-05T15:15:00+00:00", "2026-04-06T01:45:00+10:30"),
        ],
    ),
    (
        LORD_HOWE,
        "45 1 * * *",
        "twice",
        [
            ("2026-04-03T14:45:00+00:00", "2026-04-04T01:45:00+11:00"),
            ("2026-04-04T14:45:00+00:00", "2026-04-05T01:45:00+11:00"),
            ("2026-04-04T15:15:00+00:00", "2026-04-05T01:45:00+10:30"),
            ("2026-04-05T15:15:00+00:00", "2026-04-06T01:45:00+10:30"),
        ],
    ),
]

FALL_WINDOWS = {
    NEW_YORK: ("2026-10-31T00:00:00-04:00", "2026-11-02T23:59:59-05:00"),
    LONDON: ("2026-10-24T00:00:00+01:00", "2026-10-26T23:59:59+00:00"),
    LORD_HOWE: ("2026-04-04T00:00:00+11:00", "2026-04-06T23:59:59+10:30"),
}


@pytest.mark.parametrize(
    ("zone", "expr", "fold", "expected"),
    [pytest.param(*case, id=_daily_id(case[0], case[1], "fall", case[2])) for case in FALL_DAILY],
)
def test_daily_across_fall_back(
    zone: str, expr: str, fold: str, expected: list[tuple[str, str]]
) -> None:
    slots = _fall(fold, zone, expr, *FALL_WINDOWS[zone])
    assert [slot.isoformat() for slot in slots] == [utc for utc, _ in expected]
    _assert_slots(slots, zone, [local for _, local in expected])


# -- quarter hours through the fold: repeated ones twice, in UTC order, or once -------------


def _quarters(day: str, hours: str, offset: str) -> list[str]:
    return [f"{day}T{h}:{m}:00{offset}" for h in hours.split() for m in ("00", "15", "30", "45")]


QUARTERS = {
    # zone: (day, window, [(hours, offset) in UTC order] for once, and for twice)
    NEW_YORK: (
        ("2026-11-01T00:00:00-04:00", "2026-11-01T03:00:00-05:00"),
        _quarters("2026-11-01", "01", "-04:00") + _quarters("2026-11-01", "02", "-05:00"),
        _quarters("2026-11-01", "01", "-04:00") + _quarters("2026-11-01", "01 02", "-05:00"),
    ),
    LONDON: (
        ("2026-10-25T00:00:00+01:00", "2026-10-25T03:00:00+00:00"),
        _quarters("2026-10-25", "01", "+01:00") + _quarters("2026-10-25", "02", "+00:00"),
        _quarters("2026-10-25", "01", "+01:00") + _quarters("2026-10-25", "01 02", "+00:00"),
    ),
    LORD_HOWE: (
        ("2026-04-05T00:00:00+11:00", "2026-04-05T03:00:00+10:30"),
        _quarters("2026-04-05", "01", "+11:00") + _quarters("2026-04-05", "02", "+10:30"),
        # Only 01:30 and 01:45 repeat: the fold is half an hour.
        [
            *_quarters("2026-04-05", "01", "+11:00"),
            "2026-04-05T01:30:00+10:30",
            "2026-04-05T01:45:00+10:30",
            *_quarters("2026-04-05", "02", "+10:30"),
        ],
    ),
}


@pytest.mark.parametrize(
    ("zone", "fold"),
    [
        pytest.param(zone, fold, id=f"{zone.split('/')[-1].lower()}-fall-quarters_1-2-{fold}")
        for zone in QUARTERS
        for fold in FOLDS
    ],
)
def test_quarter_hours_through_the_fold(zone: str, fold: str) -> None:
    window, once, twice = QUARTERS[zone]
    slots = _fall(fold, zone, "*/15 1-2 * * *", *window)
    assert slots == sorted(set(slots)), "strictly increasing, no duplicates"
    _assert_slots(slots, zone, once if fold == "once" else twice)


# -- wall times shifted out of one gap land on one instant: one slot -------------------------

GAP_SHIFTS = [
    # New York: 02:00, 02:15, 02:30 and 02:45 all shift to 03:00 EDT.
    pytest.param(
        NEW_YORK,
        "*/15 2 * * *",
        "shift",
        ["2026-03-08T03:00:00-04:00"],
        id="new_york-spring-quarters_2-shift",
    ),
    pytest.param(NEW_YORK, "*/15 2 * * *", "skip", [], id="new_york-spring-quarters_2-skip"),
    # ... and onto the real 03:00 too.
    pytest.param(
        NEW_YORK,
        "0,30 2,3 * * *",
        "shift",
        ["2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"],
        id="new_york-spring-0,30_2,3-shift",
    ),
    pytest.param(
        NEW_YORK,
        "0,30 2,3 * * *",
        "skip",
        ["2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"],
        id="new_york-spring-0,30_2,3-skip",
    ),
    pytest.param(
        LONDON,
        "*/15 1 * * *",
        "shift",
        ["2026-03-29T02:00:00+01:00"],
        id="london-spring-quarters_1-shift",
    ),
    pytest.param(LONDON, "*/15 1 * * *", "skip", [], id="london-spring-quarters_1-skip"),
    # Lord Howe: 02:00 and 02:15 shift to 02:30, which also exists in its own right.
    pytest.param(
        LORD_HOWE,
        "*/15 2 * * *",
        "shift",
        ["2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"],
        id="lord_howe-spring-quarters_2-shift",
    ),
    pytest.param(
        LORD_HOWE,
        "*/15 2 * * *",
        "skip",
        ["2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"],
        id="lord_howe-spring-quarters_2-skip",
    ),
]

SPRING_DAYS = {
    NEW_YORK: ("2026-03-08T00:00:00-05:00", "2026-03-08T23:59:59-04:00"),
    LONDON: ("2026-03-29T00:00:00+00:00", "2026-03-29T23:59:59+01:00"),
    LORD_HOWE: ("2026-10-04T00:00:00+10:30", "2026-10-04T23:59:59+11:00"),
}


@pytest.mark.parametrize(("zone", "expr", "gap", "expected"), GAP_SHIFTS)
def test_wall_times_shifted_onto_one_instant_fire_once(
    zone: str, expr: str, gap: str, expected: list[str]
) -> None:
    _assert_slots(_spring(gap, zone, expr, *SPRING_DAYS[zone]), zone, expected)


# -- seconds fields ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gap", "expected"),
    [
        pytest.param(
            "shift",
            [
                "2026-03-08T01:30:00-05:00",
                "2026-03-08T01:30:20-05:00",
                "2026-03-08T01:30:40-05:00",
                "2026-03-08T03:00:00-04:00",  # 02:30:00, 02:30:20 and 02:30:40, shifted
                "2026-03-08T03:30:00-04:00",
                "2026-03-08T03:30:20-04:00",
                "2026-03-08T03:30:40-04:00",
            ],
            id="new_york-spring-seconds-shift",
        ),
        pytest.param(
            "skip",
            [
                "2026-03-08T01:30:00-05:00",
                "2026-03-08T01:30:20-05:00",
                "2026-03-08T01:30:40-05:00",
                "2026-03-08T03:30:00-04:00",
                "2026-03-08T03:30:20-04:00",
                "2026-03-08T03:30:40-04:00",
            ],
            id="new_york-spring-seconds-skip",
        ),
    ],
)
def test_seconds_expression_across_the_gap(gap: str, expected: list[str]) -> None:
    slots = _spring(gap, NEW_YORK, "*/20 30 1-3 * * *", *SPRING_DAYS[NEW_YORK])
    _assert_slots(slots, NEW_YORK, expected)


@pytest.mark.parametrize(
    ("fold", "expected"),
    [
        pytest.param(
            "once",
            ["2026-11-01T01:59:00-04:00", "2026-11-01T01:59:30-04:00"],
            id="new_york-fall-seconds-once",
        ),
        pytest.param(
            "twice",
            [
                "2026-11-01T01:59:00-04:00",
                "2026-11-01T01:59:30-04:00",
                "2026-11-01T01:59:00-05:00",
                "2026-11-01T01:59:30-05:00",
            ],
            id="new_york-fall-seconds-twice",
        ),
    ],
)
def test_seconds_expression_across_the_fold(fold: str, expected: list[str]) -> None:
    the_day = ("2026-11-01T00:00:00-04:00", "2026-11-01T23:59:59-05:00")
    slots = _fall(fold, NEW_YORK, "*/30 59 1 * * *", *the_day)
    _assert_slots(slots, NEW_YORK, expected)


# -- Santiago: DST changes at midnight --------------------------------------------------------


def _santiago_2026() -> tuple[datetime, datetime]:
    """Santiago's 2026 fall-back and spring-forward instants, checked to be at midnight."""
    tz = ZoneInfo(SANTIAGO)
    fall, spring = _transitions(tz, 2026)
    # Fall back: 24:00 -03 becomes 23:00 -04 on the same date (its last hour happens twice).
    before, after = (fall - timedelta(seconds=1)).astimezone(tz), fall.astimezone(tz)
    assert before.isoformat()[10:] == "T23:59:59-03:00"
    assert after.isoformat()[10:] == "T23:00:00-04:00"
    assert after.date() == before.date()
    # Spring forward: 24:00 -04 becomes 01:00 -03 the next day (midnight does not happen).
    before, after = (spring - timedelta(seconds=1)).astimezone(tz), spring.astimezone(tz)
    assert before.isoformat()[10:] == "T23:59:59-04:00"
    assert after.isoformat()[10:] == "T01:00:00-03:00"
    assert after.date() == before.date() + timedelta(days=1)
    return fall, spring


def _santiago_window(around: datetime) -> tuple[str, str]:
    """From noon two days before ``around`` (local time) to noon two days after."""
    window = timedelta(days=2, hours=12)
    return (around - window).isoformat(), (around + window - timedelta(days=1)).isoformat()


def _local(slots: list[datetime]) -> list[str]:
    assert all(slot.tzinfo is UTC for slot in slots)
    return [slot.astimezone(ZoneInfo(SANTIAGO)).isoformat() for slot in slots]


def _day(instant: datetime, days: int) -> str:
    """The local date ``days`` after the one in force just before ``instant``, in Santiago."""
    before = (instant - timedelta(seconds=1)).astimezone(ZoneInfo(SANTIAGO))
    return (before.date() + timedelta(days=days)).isoformat()


@pytest.mark.parametrize("gap", GAPS, ids=lambda gap: f"santiago-spring-0_0-{gap}")
def test_midnight_job_on_santiagos_spring_forward(gap: str) -> None:
    _, spring = _santiago_2026()
    slots = _spring(gap, SANTIAGO, "0 0 * * *", *_santiago_window(spring))
    the_day = [f"{_day(spring, 1)}T01:00:00-03:00"] if gap == "shift" else []
    assert _local(slots) == [
        f"{_day(spring, -1)}T00:00:00-04:00",
        f"{_day(spring, 0)}T00:00:00-04:00",
        *the_day,  # midnight does not exist: the end of the gap, or nothing
        f"{_day(spring, 2)}T00:00:00-03:00",
    ]


@pytest.mark.parametrize("fold", FOLDS, ids=lambda fold: f"santiago-fall-0_0-{fold}")
def test_midnight_job_on_santiagos_fall_back(fold: str) -> None:
    fall, _ = _santiago_2026()
    slots = _fall(fold, SANTIAGO, "0 0 * * *", *_santiago_window(fall))
    # The repeated hour is the one before midnight, so midnight happens once either way.
    assert _local(slots) == [
        f"{_day(fall, -1)}T00:00:00-03:00",
        f"{_day(fall, 0)}T00:00:00-03:00",
        f"{_day(fall, 1)}T00:00:00-04:00",
        f"{_day(fall, 2)}T00:00:00-04:00",
    ]


@pytest.mark.parametrize("fold", FOLDS, ids=lambda fold: f"santiago-fall-30_23-{fold}")
def test_late_evening_job_in_santiagos_repeated_hour(fold: str) -> None:
    fall, _ = _santiago_2026()
    slots = _fall(fold, SANTIAGO, "30 23 * * *", *_santiago_window(fall))
    again = [f"{_day(fall, 0)}T23:30:00-04:00"] if fold == "twice" else []
    assert _local(slots) == [
        f"{_day(fall, -2)}T23:30:00-03:00",
        f"{_day(fall, -1)}T23:30:00-03:00",
        f"{_day(fall, 0)}T23:30:00-03:00",
        *again,  # the same wall time an hour later, after the clocks fell back
        f"{_day(fall, 1)}T23:30:00-04:00",
    ]


# -- resuming inside a fold -------------------------------------------------------------------


@pytest.mark.parametrize("fold", FOLDS, ids=lambda fold: f"new_york-fall-resume-{fold}")
def test_resuming_from_a_slot_inside_the_fold(fold: str) -> None:
    rule = make_rule(cron="*/15 1-2 * * *", timezone=NEW_YORK, dst_fold=fold)
    everything = _slots(rule, *FALL_WINDOWS[NEW_YORK])
    for index, slot in enumerate(everything):
        rest = list(islice(rule.slots(slot), len(everything) - index - 1))
        assert rest == everything[index + 1 :], slot.isoformat()


def _transitions(tz: ZoneInfo, year: int) -> list[datetime]:
    """The instants in ``year`` at which ``tz`` changes its UTC offset, to the second."""
    step = timedelta(hours=1)  # no offset in these zones lasts less than an hour
    probe = datetime(year, 1, 1, tzinfo=UTC)
    found: list[datetime] = []
    while probe.year == year:
        following = probe + step
        if following.astimezone(tz).utcoffset() != probe.astimezone(tz).utcoffset():
            low, high = probe, following
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high.replace(microsecond=0))  # transitions fall on whole seconds
        probe = following
    return found


# -- against a brute-force scan of the UTC timeline -------------------------------------------

MINUTE_EXPRESSIONS = [
    "30 2 * * *",
    "*/15 1-2 * * *",
    "*/10 0-3 * * *",
    "0,45 0,1,2,23 * * *",
    "*/7 * * * *",
    "59 1 * * *",
]
#: Each zone with its 2026 DST changes (checked in the first test of this module).
CHANGES_2026 = [
    (zone, datetime.fromisoformat(change))
    for zone, change in (
        (NEW_YORK, "2026-03-08T07:00:00Z"),
        (NEW_YORK, "2026-11-01T06:00:00Z"),
        (LONDON, "2026-03-29T01:00:00Z"),
        (LONDON, "2026-10-25T01:00:00Z"),
        (LORD_HOWE, "2026-04-04T15:00:00Z"),
        (LORD_HOWE, "2026-10-03T15:30:00Z"),
        (SANTIAGO, "2026-04-05T03:00:00Z"),
        (SANTIAGO, "2026-09-06T04:00:00Z"),
    )
]


@settings(max_examples=80, deadline=None)
@given(
    expr=st.sampled_from(MINUTE_EXPRESSIONS),
    change=st.sampled_from(CHANGES_2026),
    gap=st.sampled_from(GAPS),
    fold=st.sampled_from(FOLDS),
    shift=st.integers(-8 * 3600, 2 * 3600),
)
def test_slots_match_a_scan_of_every_utc_minute(
    expr: str, change: tuple[str, datetime], gap: str, fold: str, shift: int
) -> None:
    """The policies restated from the UTC side, minute by minute, and compared.

    A whole-minute instant fires if its wall time matches (and, under ``once``, it
    is that wall time's first occurrence); a spring-forward instant fires under
    ``shift`` if any wall time the clocks skipped there matches.
    """
    zone, around = change
    tz = ZoneInfo(zone)
    after = around + timedelta(seconds=shift)
    until = after + timedelta(hours=10)
    minute = timedelta(minutes=1)
    expected: list[datetime] = []
    instant = after.replace(second=0, microsecond=0) + minute
    while instant <= until:
        wall = instant.astimezone(tz).replace(tzinfo=None)
        first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC) == instant
        fires = _matches(expr, wall) and (first or fold == "twice")
        previous = (instant - minute).astimezone(tz).replace(tzinfo=None)
        if gap == "shift" and wall - previous > minute:  # the clocks sprang forward here
            skipped = previous + minute
            while skipped < wall and not fires:
                fires = _matches(expr, skipped)
                skipped += minute
        if fires:
            expected.append(instant)
        instant += minute
    rule = make_rule(cron=expr, timezone=zone, dst_gap=gap, dst_fold=fold)
    assert list(rule.slots(after, until)) == expected


def _matches(expr: str, wall: datetime) -> bool:
    return next(CronSim(expr, wall - timedelta(seconds=1))) == wall


def _utc_offset(at: datetime, zone: str) -> timedelta:
    offset = at.astimezone(ZoneInfo(zone)).utcoffset()
    assert offset is not None
    return offset


#: The fall-backs of CHANGES_2026: the offset after them is lower.
FALL_BACKS_2026 = [
    (zone, at)
    for zone, at in CHANGES_2026
    if _utc_offset(at, zone) < _utc_offset(at - timedelta(seconds=1), zone)
]


def test_the_offset_bound_covers_26_hours_from_any_instant_of_a_shared_step() -> None:
    """The smallest offset ahead is sampled once per half-hour step and zone, and shared.

    Whatever instant of its step ``after`` is, the shared samples must still reach a
    fall-back 26 hours after it (the 30-minute one of Lord Howe too): the wall time
    cron starts from is at or below ``after`` read with the lowest offset in force
    over those 26 hours, found here minute by minute.
    """
    from fencepost.timing import slots

    assert len(FALL_BACKS_2026) == 4
    window = timedelta(hours=26)
    for zone, change in FALL_BACKS_2026:
        tz = ZoneInfo(zone)
        for minutes in range(-45, 46, 4):  # the fall-back 26 h after `after`, give or take
            after = change - window + timedelta(minutes=minutes, seconds=17)
            lowest = min(
                _utc_offset(after + timedelta(minutes=m), zone) for m in range(26 * 60 + 1)
            )
            expected_at_most = after.replace(tzinfo=None) + lowest - timedelta(seconds=1)
            assert slots._earliest_wall(after, tz) <= expected_at_most, (zone, after)


class _OneFallBack(tzinfo):
    """UTC+2, then UTC+1 from ``at`` on: a fall-back at any instant, not only on a half hour."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def utcoffset(self, dt: datetime | None) -> timedelta:
        assert dt is not None
        wall = dt.replace(tzinfo=None)
        late = wall >= (self.at + timedelta(hours=2)).replace(tzinfo=None) or (
            dt.fold == 1 and wall >= (self.at + timedelta(hours=1)).replace(tzinfo=None)
        )
        return timedelta(hours=1 if late else 2)

    def dst(self, dt: datetime | None) -> timedelta:
        return self.utcoffset(dt) - timedelta(hours=1)

    def fromutc(self, dt: datetime) -> datetime:
        utc = dt.replace(tzinfo=UTC)
        if utc < self.at:
            return (utc + timedelta(hours=2)).replace(tzinfo=self)
        wall = (utc + timedelta(hours=1)).replace(tzinfo=self)
        return wall.replace(fold=1) if wall.utcoffset() != timedelta(hours=1) else wall


def test_the_offset_bound_reaches_a_fall_back_that_is_not_on_a_half_hour() -> None:
    from fencepost.timing import slots

    change = datetime(2026, 10, 25, 1, 17, 23, tzinfo=UTC)
    tz = _OneFallBack(change)
    assert (change - timedelta(seconds=1)).astimezone(tz).utcoffset() == timedelta(hours=2)
    assert change.astimezone(tz).utcoffset() == timedelta(hours=1)
    for seconds in range(0, 1800, 61):  # the fall-back just under 26 h after `after`
        after = change - timedelta(hours=26) + timedelta(seconds=seconds)
        bound = slots._earliest_wall(after, tz)  # type: ignore[arg-type]
        assert bound < after.replace(tzinfo=None) + timedelta(hours=1), (after, bound)


def test_planning_many_schedules_at_one_watermark_probes_the_zone_once() -> None:
    from fencepost.timing import slots

    after = datetime(2026, 6, 1, 12, 7, tzinfo=UTC)
    tz = ZoneInfo(NEW_YORK)
    slots._lowest_offset_from.cache_clear()
    for second in range(100):
        slots._earliest_wall(after + timedelta(seconds=second), tz)
    info = slots._lowest_offset_from.cache_info()
    assert (info.misses, info.hits) == (1, 99)

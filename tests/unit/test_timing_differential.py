"""Differential test: fencepost's cron slots against croniter, an independent implementation.

Random expressions from a small grammar, in a mix of fixed-offset and DST zones,
compared over spans that contain no UTC-offset change in that zone (checked with
zoneinfo): there both must agree exactly, instant for instant. DST behaviour is
ours by design and is tested by name in ``test_timing_dst.py``.

Features left out of the grammar because the two libraries disagree on purpose:

* day-of-month and day-of-week both restricted when either starts with ``*``
  (``*/2 * MON``): cronsim follows Debian/Vixie cron and ANDs them, croniter ORs
  them. Both restricted without a leading ``*`` (``1,15 * MON``) is ORed by both
  and is generated.
* an open-ended step in day-of-week (``1/2``, ``5/1``): cronsim steps up to 7,
  which is Sunday again (``1/2`` = Mon, Wed, Fri, Sun), croniter stops at 6.
* a range with equal ends (``5-5``, ``NOV-11``): croniter deliberately reads it as
  the whole field, cronsim (like cron) as the one value.
* ``L``, ``W``, ``#`` and hashed (``H``) fields: dialect extensions.
"""

from __future__ import annotations

import bisect
import random
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import islice
from zoneinfo import ZoneInfo

from croniter import croniter  # type: ignore[import-untyped]

from fencepost import ValidationError
from fencepost.timing.cron import parse_cron
from fencepost.timing.rules import make_rule

CASES = 2400
SLOTS = 20
SEED = 20260308

#: Zones without DST over the span (one whole-hour, some odd offsets) and zones with it,
#: including half-hour DST (Lord Howe), a 45-minute offset (Chatham) and irregular
#: transitions (Casablanca suspends DST for Ramadan).
ZONES = [
    "UTC",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Asia/Tokyo",
    "America/Phoenix",
    "Asia/Tehran",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/St_Johns",
    "Pacific/Chatham",
    "Africa/Casablanca",
]

#: Starts are drawn from this range; offsets are scanned to its end plus a margin.
FIRST = datetime(2024, 1, 1, tzinfo=UTC)
LAST = datetime(2030, 1, 1, tzinfo=UTC)
SCANNED_TO = datetime(2032, 1, 1, tzinfo=UTC)

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def test_slots_match_croniter_where_the_offset_is_constant() -> None:
    rng = random.Random(SEED)
    differences: list[str] = []
    compared = empty = 0
    while compared < CASES:
        expr = _expression(rng)
        try:
            parse_cron(expr)
        except ValidationError:  # e.g. "0 0 30 FEB *": never fires
            continue
        name = rng.choice(ZONES)
        tz = ZoneInfo(name)
        start = _start(rng)
        end = _next_transition(name, start) - timedelta(microseconds=1)
        assert start.astimezone(tz).utcoffset() == end.astimezone(tz).utcoffset()
        ours = list(islice(make_rule(cron=expr, timezone=name).slots(start, end), SLOTS))
        theirs = _croniter_slots(expr, start.astimezone(tz), end)
        compared += 1
        empty += not ours
        if ours != theirs:
            differences.append(
                f"{expr!r} in {name} after {start.isoformat()}:\n"
                f"  fencepost {[t.isoformat() for t in ours[:5]]}\n"
                f"  croniter  {[t.isoformat() for t in theirs[:5]]}"
            )
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences[:10])
    # Most spans are months long; the comparison must not be vacuous.
    assert empty < CASES // 5


def _croniter_slots(expr: str, start: datetime, end: datetime) -> list[datetime]:
    """croniter's fire instants strictly after the aware local ``start``, up to ``end``."""
    it = croniter(expr, start, second_at_beginning=len(expr.split()) == 6)
    found: list[datetime] = []
    while len(found) < SLOTS:
        instant = it.get_next(datetime).astimezone(UTC)
        if instant > end:
            break
        found.append(instant)
    return found


def _start(rng: random.Random) -> datetime:
    seconds = rng.randrange(int((LAST - FIRST).total_seconds()))
    start = FIRST + timedelta(seconds=seconds)
    # Often on a whole minute, so that "strictly after" meets starts that match.
    return start.replace(second=0) if rng.random() < 0.5 else start


@cache
def _transitions(name: str) -> list[datetime]:
    """Every instant in [FIRST, SCANNED_TO) at which ``name`` changes its UTC offset."""
    tz = ZoneInfo(name)
    step = timedelta(hours=1)  # no offset in these zones lasts less than an hour
    found: list[datetime] = []
    probe = FIRST
    offset = probe.astimezone(tz).utcoffset()
    while probe < SCANNED_TO:
        following = probe + step
        if following.astimezone(tz).utcoffset() != offset:
            low, high = probe, following
            while high - low > timedelta(seconds=1):
                middle = low + (high - low) / 2
                if middle.astimezone(tz).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            found.append(high.replace(microsecond=0))
            offset = following.astimezone(tz).utcoffset()
        probe = following
    return found


def _next_transition(name: str, start: datetime) -> datetime:
    """The first offset change after ``start``, or the end of the scanned range."""
    changes = _transitions(name)
    index = bisect.bisect_right(changes, start)
    return changes[index] if index < len(changes) else SCANNED_TO


def _expression(rng: random.Random) -> str:
    fields = [
        _field(rng, 0, 59),  # minute
        _field(rng, 0, 23),  # hour
        # Day-of-month and month are left open more often, so that most expressions
        # fire within a span (spans end at the next DST change, months away).
        _field(rng, 1, 31, dom=True, star=0.5),
        _field(rng, 1, 12, names=MONTHS, first=1, star=0.6),
        _field(rng, 0, 7, names=DAYS, first=0, dow=True),
    ]
    dom, dow = fields[2], fields[4]
    if dom != "*" and dow != "*" and (dom.startswith("*") or dow.startswith("*")):
        fields[4] = "*"  # AND (cronsim) versus OR (croniter): see the module docstring
    if rng.random() < 0.3:
        fields.insert(0, _field(rng, 0, 59))  # seconds
    return " ".join(fields)


def _field(
    rng: random.Random,
    low: int,
    high: int,
    *,
    names: list[str] | None = None,
    first: int = 0,
    dom: bool = False,
    dow: bool = False,
    star: float = 0.35,
) -> str:
    """One field: ``*``, ``*/s``, or a list of values, ranges and steps."""
    roll = rng.random()
    if roll < star:
        return "*"
    if roll < star + 0.15:
        return f"*/{rng.randint(1, high - low + 1)}"
    terms = [
        _term(rng, low, high, names, first, dom, dow) for _ in range(rng.choice([1, 1, 1, 2, 3]))
    ]
    return ",".join(terms)


def _term(
    rng: random.Random,
    low: int,
    high: int,
    names: list[str] | None,
    first: int,
    dom: bool,
    dow: bool,
) -> str:
    if dom:
        # Mostly days every month has, so that most expressions fire within a span.
        high = 28 if rng.random() < 0.9 else 31

    def value(v: int) -> str:
        if names is not None and v - first < len(names) and rng.random() < 0.4:
            return names[v - first]
        return str(v)

    kind = rng.choice(["value", "range", "range_step", "start_step"])
    if kind == "start_step" and dow:
        kind = "range_step"  # cronsim steps to 7 (Sunday), croniter to 6
    a = rng.randint(low, high)
    if kind == "value":
        return value(a)
    if kind == "start_step":
        return f"{a}/{rng.randint(1, high - low + 1)}"
    if a == high:
        return value(a)
    b = rng.randint(a + 1, high)  # croniter reads an equal range ("5-5") as the whole field
    if kind == "range":
        return f"{value(a)}-{value(b)}"
    return f"{value(a)}-{value(b)}/{rng.randint(1, high - low + 1)}"

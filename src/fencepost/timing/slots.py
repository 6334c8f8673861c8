"""Slot generators: the instants at which a cron expression or an interval fires.

Both are lazy, yield aware UTC instants in strictly increasing order, strictly
after ``after`` and, when ``until`` is given, at or before it. They hold no more
than a DST fold's worth of pending instants, so a schedule that fires every
second can be walked for a year without building a list.

A generator is a pure function of its arguments: restarted strictly after any
slot it yielded, it continues with the same sequence. A materializer's
watermark relies on exactly that.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from fencepost.domain.policies import DstFold, DstGap
from fencepost.timing.cron import wall_times
from fencepost.timing.zones import instants

#: How far ahead of ``after`` an offset can still matter, and how densely it is sampled.
#: Offsets lie within UTC-12 to UTC+14, so an instant more than 26 hours after
#: ``after`` can never show an earlier wall time than ``after`` does; no tzdata
#: period is shorter than the sampling step, so sampling sees every offset in between.
_OFFSET_WINDOW = timedelta(hours=26)
_OFFSET_STEP = timedelta(minutes=30)
#: The last instant that can be probed without leaving the calendar.
_LAST_PROBE = datetime.max.replace(tzinfo=UTC) - _OFFSET_WINDOW - _OFFSET_STEP
_FIRST_PROBE = datetime.min.replace(tzinfo=UTC)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def interval_slots(
    every: timedelta, anchor: datetime, after: datetime, until: datetime | None
) -> Iterator[datetime]:
    """``anchor + k * every`` for integer ``k``, strictly after ``after`` and ``<= until``.

    ``every`` is a fixed duration on the UTC timeline; DST never moves these slots.
    """
    # timedelta // timedelta is exact integer floor division on microseconds.
    k = (after - anchor) // every + 1
    while True:
        try:
            slot = anchor + k * every
        except OverflowError:  # past datetime.max: the timeline ends
            return
        if until is not None and slot > until:
            return
        yield slot
        k += 1


def cron_slots(
    expr: str,
    tz: ZoneInfo,
    *,
    gap: DstGap,
    fold: DstFold,
    after: datetime,
    until: datetime | None,
) -> Iterator[datetime]:
    """The instants at which the normalized cron ``expr`` fires in ``tz`` under the DST policies.

    Wall times come from cronsim in increasing order and are placed on the UTC
    timeline by :func:`~fencepost.timing.zones.instants`. Two things break the
    one-to-one, in-order correspondence, and are handled here:

    * several wall times can land on one instant (02:00, 02:15 and 02:30 all
      shifted to the end of one gap): a slot is an instant, so it is yielded once;
    * with ``twice``, the second occurrence of a wall time in a fold comes *after*
      the first occurrences of the wall times that follow it. Instants wait in a
      small heap until no later wall time can produce an earlier one.

    The heap's release rule rests on one fact: the *first* instant of a wall time
    (its first occurrence, or the end of the gap that swallowed it) never
    decreases as the wall time increases. So once a wall time's first instant is
    known, every pending instant at or before it is final.
    """
    pending: list[datetime] = []
    last = after  # everything yielded, and everything at or before `after`, is <= last
    try:
        start = _earliest_wall(after, tz)
    except OverflowError:  # `after` is within hours of the end of the calendar
        return
    for wall in _walls(expr, start):
        try:
            found = instants(wall, tz, gap=gap, fold=fold)
        except OverflowError:  # a wall time on the last day of year 9999
            break
        if not found:  # skipped in a gap: it does not fire, but it may show we are done
            if until is not None and _gap_bound(wall, tz) > until:
                return
            continue
        for instant in found:
            if instant > last:
                heapq.heappush(pending, instant)
        floor = found[0]
        while pending and pending[0] <= floor:
            instant = heapq.heappop(pending)
            if instant <= last:  # the same instant from another wall time
                continue
            if until is not None and instant > until:
                return
            last = instant
            yield instant
        if until is not None and floor > until:
            return
    # cronsim found no match within 50 years (or the calendar ended): drain the heap.
    while pending:
        instant = heapq.heappop(pending)
        if instant <= last:
            continue
        if until is not None and instant > until:
            return
        last = instant
        yield instant


def _earliest_wall(after: datetime, tz: ZoneInfo) -> datetime:
    """A naive wall time at or before every wall time whose instants can fall after ``after``.

    An instant ``i > after`` shows the wall time ``i + offset(i) > after +
    offset(i)``, so the smallest offset in force soon after ``after`` bounds them
    all. It is below ``after``'s own wall time only when the clocks fall back
    soon: then the repeated wall times must be iterated again, for ``twice``.
    """
    lowest = min(_offset(after, tz), _lowest_offset_soon(after, tz))
    # One second of slack: cronsim starts strictly after this wall time.
    slack = lowest - timedelta(seconds=1)
    naive = after.replace(tzinfo=None)
    return naive + slack if naive - datetime.min > -slack else datetime.min


def _lowest_offset_soon(after: datetime, tz: ZoneInfo) -> timedelta:
    """The smallest offset of ``tz`` sampled over at least ``_OFFSET_WINDOW`` after ``after``.

    Sampled from ``after`` rounded down to a whole ``_OFFSET_STEP`` since the Unix
    epoch, one step further: the samples cover the window, and every ``after``
    of one step shares them. A materializer plans a batch of schedules whose
    watermarks mostly lie in one step, so the 53 zone lookups are made once a
    step and zone, not once a schedule (they were most of a plan's time).
    """
    into_step = (after - _EPOCH) % _OFFSET_STEP
    if after - _FIRST_PROBE < into_step:  # the step began before the calendar did
        return _lowest_offset_from(after, tz)
    return _lowest_offset_from(after - into_step, tz)


@lru_cache(maxsize=4096)
def _lowest_offset_from(start: datetime, tz: ZoneInfo) -> timedelta:
    lowest = _offset(start, tz)
    probe = start
    while probe < _LAST_PROBE and probe - start <= _OFFSET_WINDOW:
        probe += _OFFSET_STEP
        lowest = min(lowest, _offset(probe, tz))
    return lowest


def _gap_bound(wall: datetime, tz: ZoneInfo) -> datetime:
    """An instant at or before the end of the gap that swallowed ``wall``.

    Read with the offset from after the gap (``fold=1``), a wall time in the gap
    lands before the gap's end; and no later wall time fires before that end.
    Without this, a rule whose every match is skipped (``30 2 * 3 SUN#2`` in New
    York) would search to year 9999 even when ``until`` is close.
    """
    return wall.replace(tzinfo=tz, fold=1).astimezone(UTC)


def _offset(instant: datetime, tz: ZoneInfo) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None  # a ZoneInfo always has an offset for an aware instant
    return offset


def _walls(expr: str, start: datetime) -> Iterator[datetime]:
    """cronsim's wall times after ``start``, ending quietly at the end of the calendar."""
    walls = wall_times(expr, start)
    while True:
        try:
            yield next(walls)
        except (StopIteration, OverflowError, ValueError):
            # StopIteration: no match within 50 years. OverflowError/ValueError: cronsim
            # stepped past year 9999. Either way there is nothing more to fire.
            return

"""Firing rules: *what* fires — a cron expression in a time zone, or a fixed interval.

A :class:`Rule` turns into slots (aware UTC instants) with :meth:`Rule.slots`;
:func:`fire_times` is the public one-shot helper. The generators themselves
live in :mod:`fencepost.timing.slots`.

* **Cron** is evaluated on local wall times in ``timezone``; a wall time in a DST
  gap fires at the end of the gap (``shift``) or not at all (``skip``), one in a
  fold at its first occurrence (``once``) or at both (``twice``). Wall times that
  land on one instant fire once: a slot is an instant.
* **Intervals** are fixed durations on the UTC timeline: the slots are
  ``anchor + k * every`` for every integer ``k``, untouched by DST. The anchor
  sets only the phase (``every=15 min`` anchored at the Unix epoch fires at
  :00, :15, :30 and :45 UTC).
* ``start_at`` and ``end_at`` bound either kind, both inclusive.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING

from fencepost.domain.durations import as_aware_utc, as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.policies import DstFold, DstGap, parse_policy
from fencepost.timing.cron import parse_cron
from fencepost.timing.slots import cron_slots, interval_slots
from fencepost.timing.zones import zone

if TYPE_CHECKING:
    from fencepost.domain.models import Schedule

#: The default anchor of an interval rule without ``start_at``.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: The most instants :func:`fire_times` computes in one call.
MAX_FIRE_TIMES = 10_000

#: The resolution of ``datetime``: ``start_at`` is inclusive, ``after`` exclusive.
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, kw_only=True)
class Rule:
    """What fires: exactly one of ``cron`` and ``every``, optionally bounded.

    Build one with :func:`make_rule`, which also accepts seconds and policy
    names; constructing a ``Rule`` directly validates the same way. Every
    datetime is stored aware, in UTC.
    """

    #: A normalized cron expression (5 fields, or 6 with leading seconds), or ``None``.
    cron: str | None = None
    #: A fixed interval (> 0), or ``None``.
    every: timedelta | None = None
    #: The IANA zone a cron expression is evaluated in; ``"UTC"`` for an interval.
    timezone: str = "UTC"
    #: What a cron wall time in a DST gap does (no effect on intervals).
    dst_gap: DstGap = DstGap.SHIFT
    #: What a cron wall time in a DST fold does (no effect on intervals).
    dst_fold: DstFold = DstFold.ONCE
    #: An interval's phase: its slots are ``anchor + k * every``. Defaults to
    #: ``start_at``, else the Unix epoch; always ``None`` for a cron rule, whose
    #: fields set its own phase.
    anchor: datetime | None = None
    #: No slot before this instant (inclusive bound), or ``None``.
    start_at: datetime | None = None
    #: No slot after this instant (inclusive bound), or ``None``.
    end_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.cron is None and self.every is None:
            raise ValidationError("cron", "give a cron expression or an interval (every)")
        if self.cron is not None and self.every is not None:
            raise ValidationError("every", "give a cron expression or an interval, not both")
        if self.cron is not None:
            self._set("cron", parse_cron(self.cron, "cron"))
        else:
            # as_duration refuses zero, and anything that would round to zero.
            self._set("every", as_duration(self.every, field="every"))
        zone(self.timezone)
        if self.every is not None and self.timezone != "UTC":
            # Refused rather than ignored: "every day in Paris" would drift an hour
            # at each DST change, which is what a cron rule is for.
            raise ValidationError(
                "timezone",
                f"an interval runs on the UTC timeline; a time zone applies to cron only, "
                f"got {self.timezone!r}",
            )
        self._set("dst_gap", parse_policy(DstGap, self.dst_gap, "dst_gap"))
        self._set("dst_fold", parse_policy(DstFold, self.dst_fold, "dst_fold"))
        for name in ("start_at", "end_at", "anchor"):
            value = getattr(self, name)
            if value is not None:
                self._set(name, as_aware_utc(value, field=name))
        if self.start_at is not None and self.end_at is not None and self.end_at <= self.start_at:
            raise ValidationError("end_at", f"must be after start_at ({self.start_at.isoformat()})")
        if self.cron is not None:
            # A cron expression fixes its own phase; callers may pass an anchor for
            # every kind of rule (a schedule's creation time) without asking which.
            self._set("anchor", None)
        elif self.anchor is None:
            self._set("anchor", self.start_at if self.start_at is not None else EPOCH)

    def _set(self, name: str, value: object) -> None:
        # Normalizing a frozen instance in __post_init__ is the documented way.
        object.__setattr__(self, name, value)

    def slots(self, after: datetime, until: datetime | None = None) -> Iterator[datetime]:
        """The slots strictly after ``after`` and at or before ``until``, lazily, in order.

        Each slot is an aware UTC instant, yielded once, and the sequence is
        strictly increasing. It respects ``start_at`` and ``end_at`` and ends
        after ``end_at`` (or when a cron expression matches nothing within 50
        years). Restarted strictly after any slot it yielded, it continues with
        the same sequence: a materializer's watermark is enough to resume.

        Raises ValidationError on ``after`` or ``until`` if either is naive.
        """
        low = as_aware_utc(after, field="after")
        high = None if until is None else as_aware_utc(until, field="until")
        if self.start_at is not None and self.start_at > low:
            low = self.start_at - _TICK  # strictly after this: at or after start_at
        if self.end_at is not None and (high is None or self.end_at < high):
            high = self.end_at
        if high is not None and high <= low:
            return iter(())
        if self.cron is not None:
            return _cron_run(self.cron, self.timezone, self.dst_gap, self.dst_fold, low, high)
        # Both set by __post_init__ for an interval rule.
        assert self.every is not None
        assert self.anchor is not None
        return interval_slots(self.every, self.anchor, low, high)


def first_slot(rule: Rule, after: datetime) -> datetime | None:
    """The first slot strictly after ``after`` (``None``: the rule never fires again).

    Remembered for cron rules, as short runs are (see :func:`_cron_run`): a batch of
    schedules of one rule planned at one instant all ask for the same first slot.
    """
    if getattr(rule, "cron", None) is None:  # an interval (or a stand-in with slots alone)
        return next(iter(rule.slots(after)), None)
    return _first_cron_slot(rule, after)


@lru_cache(maxsize=16_384)
def _first_cron_slot(rule: Rule, after: datetime) -> datetime | None:
    return next(iter(rule.slots(after)), None)


#: Cron runs of at most this many slots are remembered (see _cron_run).
_SHORT_RUN = 64


def _cron_run(
    expr: str,
    timezone: str,
    gap: DstGap,
    fold: DstFold,
    after: datetime,
    until: datetime | None,
) -> Iterator[datetime]:
    """The cron slots in ``(after, until]``, remembered when there are few of them.

    A materializer plans schedules in batches, and schedules of one rule that were
    planned together share their watermark and horizon (a million hourly schedules
    use sixty rules): the same short run of slots, computed by cronsim once instead
    of once a schedule (it was half of a plan's time). Slots are a pure function of
    these arguments, so a remembered run is the run. A long run (a schedule off for a
    month) is walked lazily, as is an unbounded walk.
    """
    if until is not None:
        short = _short_cron_run(expr, timezone, gap, fold, after, until)
        if short is not None:
            return iter(short)
    return cron_slots(expr, zone(timezone), gap=gap, fold=fold, after=after, until=until)


@lru_cache(maxsize=16_384)
def _short_cron_run(
    expr: str, timezone: str, gap: DstGap, fold: DstFold, after: datetime, until: datetime
) -> tuple[datetime, ...] | None:
    """The run of :func:`_cron_run` if it holds at most ``_SHORT_RUN`` slots, else None."""
    walk = cron_slots(expr, zone(timezone), gap=gap, fold=fold, after=after, until=until)
    head = tuple(islice(walk, _SHORT_RUN + 1))
    return head if len(head) <= _SHORT_RUN else None


def make_rule(
    *,
    cron: str | None = None,
    every: timedelta | float | None = None,
    timezone: str = "UTC",
    dst_gap: DstGap | str = "shift",
    dst_fold: DstFold | str = "once",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    anchor: datetime | None = None,
) -> Rule:
    """A validated :class:`Rule`; every problem is a ValidationError naming its argument.

    ``every`` may be seconds or a ``timedelta``; the policies may be members or
    their names. Datetimes must be aware. An interval's ``timezone`` must be
    ``"UTC"``; an ``anchor`` given with ``cron`` is ignored (a cron expression
    fixes its own phase).
    """
    return Rule(
        cron=cron,
        every=None if every is None else as_duration(every, field="every"),
        timezone=timezone,
        dst_gap=parse_policy(DstGap, dst_gap, "dst_gap"),
        dst_fold=parse_policy(DstFold, dst_fold, "dst_fold"),
        start_at=start_at,
        end_at=end_at,
        anchor=anchor,
    )


def fire_times(
    rule: str | timedelta,
    *,
    timezone: str = "UTC",
    after: datetime,
    count: int,
    dst_gap: DstGap | str = "shift",
    dst_fold: DstFold | str = "once",
) -> list[datetime]:
    """The first ``count`` fire instants strictly after ``after``, as aware UTC datetimes.

    ``rule`` is a cron string (evaluated in ``timezone`` under the DST policies)
    or a ``timedelta`` (a fixed interval on the UTC timeline, anchored at the
    Unix epoch; ``timezone`` must then be ``"UTC"``). Fewer than ``count`` come
    back only if the rule stops firing. ``count`` is 1 to 10,000. Raises
    ValidationError naming the argument at fault.

    >>> fire_times("0 9 * * MON", timezone="Europe/Paris", count=1,
    ...            after=datetime(2026, 3, 24, tzinfo=UTC))
    [datetime.datetime(2026, 3, 30, 7, 0, tzinfo=datetime.timezone.utc)]
    """
    if isinstance(rule, str):
        built = make_rule(
            cron=parse_cron(rule, "rule"), timezone=timezone, dst_gap=dst_gap, dst_fold=dst_fold
        )
    elif isinstance(rule, timedelta):
        if rule <= timedelta(0):
            raise ValidationError("rule", f"an interval must be > 0, got {rule}")
        built = make_rule(every=rule, timezone=timezone, dst_gap=dst_gap, dst_fold=dst_fold)
    else:
        raise ValidationError("rule", f"must be a cron string or a timedelta, got {rule!r}")
    start = as_aware_utc(after, field="after")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_FIRE_TIMES:
        raise ValidationError(
            "count", f"must be an integer from 1 to {MAX_FIRE_TIMES}, got {count!r}"
        )
    return list(islice(built.slots(start), count))


def rule_of(schedule: Schedule) -> Rule:
    """The firing rule of a stored schedule (intervals anchor at ``start_at`` or creation).

    Rules are immutable and few schedules have a rule of their own (a million
    hourly ones share 60 cron expressions), so equal rules are built once: a
    materializer asks for one per schedule it plans, and building means parsing.
    """
    interval = schedule.every is not None
    return _shared_rule(
        schedule.cron,
        schedule.every,
        schedule.timezone,
        schedule.dst_gap,
        schedule.dst_fold,
        schedule.start_at,
        schedule.end_at,
        # A cron rule has no anchor: leaving the creation time out lets them share.
        (schedule.start_at or schedule.created_at) if interval else None,
    )


@lru_cache(maxsize=4096)
def _shared_rule(
    cron: str | None,
    every: timedelta | None,
    timezone: str,
    dst_gap: DstGap,
    dst_fold: DstFold,
    start_at: datetime | None,
    end_at: datetime | None,
    anchor: datetime | None,
) -> Rule:
    return make_rule(
        cron=cron,
        every=every,
        timezone=timezone,
        dst_gap=dst_gap,
        dst_fold=dst_fold,
        start_at=start_at,
        end_at=end_at,
        anchor=anchor,
    )

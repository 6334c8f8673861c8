"""History for charts: per-minute counters rolled up from finished executions.

The console's charts read stored history, not what an open page sampled. A store
keeps one row of additive counters per ``(minute, job, queue)`` (the *minute rows*),
rolled up from the executions that reached a terminal state and from the throttle
records; prune deletes executions, never these rows before :data:`RETENTION`. Reading
a window sums the minute rows of each step in SQL and derives the percentiles and
burn rates here. This module is the pure part of it: what a finished execution adds
to which minute (:func:`increments`), the lateness histogram and its percentiles,
the windows, and the burn rates.

What one finished execution adds (each counter is a count of executions):

* to the minute of its **finish** (the ``updated_at`` of its terminal row):
  ``succeeded``, ``dead`` (FAILED, a dead letter), ``cancelled`` or ``skipped`` by
  its state; ``retried`` when it took more than one attempt; ``timed_out`` when an
  attempt of it timed out (:attr:`~fencepost.domain.slo.Mark.TIMED_OUT`); and the
  finish objective's verdict (``finish_counted``, ``finish_missed``);
* to the minute of its **first claim** (its finish, if it was never claimed):
  ``claims``, its claim lateness (``first claim - planned time``, at least zero) in
  one bucket of the histogram (:data:`LATENESS_BOUNDS`; backfills left out: they
  were planned in the past on purpose), and the claim objective's verdict
  (``claim_counted``, ``claim_missed``).

The verdicts are :mod:`fencepost.domain.slo`'s at the default objectives, as the
execution's row settles them (:func:`settled_at`): ``*_counted`` counts those met or
missed, ``*_missed`` the misses; exclusions (backfill, replay, throttled) and
executions not counted (:func:`~fencepost.domain.slo.counted`) add to neither.

A replayed dead letter finishes twice: its second finish adds its outcome
(``succeeded``, ``dead``, ... and ``retried``) again, as it happened again, but
not its claim, its lateness or ``timed_out``, which its first finish added.

Throttled time is the ``held`` of each throttle record, added to the minute of the
record's ``at`` under its execution's job and queue (as ``stats`` counts it).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TypedDict, TypeVar

from fencepost.domain.errors import ValidationError
from fencepost.domain.slo import (
    DEFAULT_CLAIM_TARGET,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_TARGET,
    DEFAULT_FINISH_WITHIN,
    MISSES,
    SloFacts,
    SloMark,
    Verdict,
    claim_verdict,
    counted,
    finish_verdict,
)
from fencepost.domain.states import State

_E = TypeVar("_E", bound=StrEnum)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
_US = timedelta(microseconds=1)

#: Upper bounds of the claim lateness histogram (a lateness equal to a bound is in
#: its bucket), log-spaced from a busy worker's poll interval to an hour, with the
#: claim objective's 10 s as one of them; a last bucket holds what is later. Stored
#: as the columns ``late_0`` .. ``late_17``: never change them, only add a migration.
LATENESS_BOUNDS: tuple[timedelta, ...] = tuple(
    timedelta(seconds=s)
    for s in (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
)
_BOUNDS_US = tuple(b // _US for b in LATENESS_BOUNDS)
#: How many buckets the histogram has: one per bound and the one past the last.
BUCKETS = len(LATENESS_BOUNDS) + 1

#: The counters of a minute row, in the order of its columns (``late_i`` for bucket
#: ``i`` of the lateness histogram; ``throttled_us`` in microseconds).
COLUMNS: tuple[str, ...] = (
    "succeeded",
    "dead",
    "retried",
    "timed_out",
    "cancelled",
    "skipped",
    "claims",
    *(f"late_{i}" for i in range(BUCKETS)),
    "throttled_us",
    "claim_counted",
    "claim_missed",
    "finish_counted",
    "finish_missed",
)
_INDEX = {name: i for i, name in enumerate(COLUMNS)}
_LATE = _INDEX["late_0"]
_THROTTLED = _INDEX["throttled_us"]

#: How long after its finish a row is first read by the roll-up: a transaction that
#: stamped a row (PostgreSQL's ``clock_timestamp()``, a SQLite process's clock)
#: and commits within this much later is still counted; later than that, it is not.
GRACE = timedelta(seconds=60)
#: How long minute rows are kept: ``prune`` deletes older ones (a week's chart and a
#: day to spare). The roll-up does not read executions that finished before it either.
RETENTION = timedelta(days=8)
#: Finished executions one roll-up transaction reads at most, by default.
ROLL_UP_ROWS = 10_000
#: Finished executions a chart read rolls up first (``GET /history``, ``App.history``):
#: one transaction, a few milliseconds, that shows work just finished.
READ_ROLL_UP_ROWS = 2000
#: The most a caller may ask one roll-up to read.
MAX_ROLL_UP_ROWS = 100_000


class Window(StrEnum):
    """A chart's span: the last hour, day or week."""

    #: 60 points of one minute.
    HOUR = "hour"
    #: 96 points of 15 minutes.
    DAY = "day"
    #: 168 points of one hour.
    WEEK = "week"


class HistoryOptions(TypedDict, total=False):
    """What a history chart shows, declared once: ``history`` of ``Store``,
    ``AsyncStore``, ``App``, ``Client`` and ``AsyncClient`` takes these as keywords
    typed by this. ``window`` (default the last hour), and only ``job``'s and/or
    ``queue``'s executions when given, as :meth:`Store.history
    <fencepost.store.history.HistoryVerbs.history>` says.
    """

    window: Window | str
    job: str | None
    queue: str | None


@dataclass(frozen=True, slots=True)
class Steps:
    """How a window is cut into points: ``count`` steps of ``step``."""

    step: timedelta
    count: int

    @property
    def minutes(self) -> int:
        """Minute rows per point."""
        return self.step // MINUTE


WINDOWS: Mapping[Window, Steps] = {
    Window.HOUR: Steps(timedelta(seconds=60), 60),
    Window.DAY: Steps(timedelta(seconds=900), 96),
    Window.WEEK: Steps(timedelta(seconds=3600), 168),
}


#: The lengths of the stored rows, in minutes: one per window's step. Each minute's
#: counts are added into a row of each length (its minute's, its quarter hour's, its
#: hour's), so a window reads one row per step and key instead of summing minutes.
SPANS: tuple[int, ...] = tuple(sorted({steps.minutes for steps in WINDOWS.values()}))


class SummaryBy(StrEnum):
    """What a summary groups the window's counters by."""

    JOB = "job"
    QUEUE = "queue"


def require_window(value: object, field: str = "window") -> Window:
    """A :class:`Window` from itself or its name (``hour``, ``day``, ``week``)."""
    return _choice(Window, value, field)


def require_by(value: object, field: str = "by") -> SummaryBy:
    """A :class:`SummaryBy` from itself or its name (``job``, ``queue``)."""
    return _choice(SummaryBy, value, field)


def require_filter(value: object, field: str) -> str | None:
    """A ``job`` or ``queue`` filter of a chart: None (all) or a string."""
    if value is not None and not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {value!r}")
    return value


def _choice(kind: type[_E], value: object, field: str) -> _E:
    if isinstance(value, str):
        for member in kind:
            if value == member.value:
                return member
    names = ", ".join(m.value for m in kind)
    shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
    raise ValidationError(field, f"must be one of {names}, got {shown}")


def minute_number(instant: datetime) -> int:
    """Minutes since 1970-01-01 UTC of the minute holding ``instant`` (a row's ``minute``)."""
    return (instant - EPOCH) // MINUTE


def minute_start(minute: int) -> datetime:
    """The first instant of minute number ``minute``."""
    return EPOCH + minute * MINUTE


def span(window: Window, now: datetime) -> tuple[datetime, datetime]:
    """``[start, end)`` of ``window`` at ``now``: whole steps, the last one holding ``now``
    (an hour's chart at 10:30:20 runs from 09:31 to 10:31)."""
    steps = WINDOWS[window]
    end = EPOCH + ((now - EPOCH) // steps.step + 1) * steps.step
    return end - steps.count * steps.step, end


# -- rolling up ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Finished:
    """One execution in a terminal state, as the roll-up reads its row."""

    job: str
    queue: str
    attempt: int
    #: When it reached its terminal state (its row's ``updated_at``).
    finished_at: datetime
    #: Its SLO facts (:class:`~fencepost.domain.slo.SloFacts`), state included.
    facts: SloFacts


@dataclass(frozen=True, kw_only=True, slots=True)
class ThrottledMinute:
    """Throttled time of one ``(minute, job, queue)``: the summed ``held`` of its records."""

    minute: int
    job: str
    queue: str
    held: timedelta


#: What a minute's counts are keyed by: ``(minute, job, queue)``.
Key = tuple[int, str, str]
#: A stored row's key: ``(span in minutes, its first minute, job, queue)``.
RowKey = tuple[int, int, str, str]

_REPLAYED, _TIMED_OUT, _BACKFILL = (
    int(SloMark.REPLAYED),
    int(SloMark.TIMED_OUT),
    int(SloMark.BACKFILL),
)
_OUTCOMES = {
    State.SUCCEEDED: _INDEX["succeeded"],
    State.FAILED: _INDEX["dead"],
    State.CANCELLED: _INDEX["cancelled"],
    State.SKIPPED: _INDEX["skipped"],
}


def settled_at(row: Finished) -> datetime:
    """The instant a finished execution's verdicts are taken at: its finish, or once both
    objectives' time has passed if that is later (nothing it still waits for will come:
    a claimed execution cancelled before it finished misses the finish objective, as the
    SLO report finds once that time is past)."""
    last = row.facts.planned_at + max(DEFAULT_CLAIM_WITHIN, DEFAULT_FINISH_WITHIN) + _US
    return max(row.finished_at, last)


def lateness_bucket(lateness: timedelta) -> int:
    """The histogram bucket of a claim ``lateness``: the first bound at or above it
    (:data:`BUCKETS` - 1 past the last); a negative lateness counts as zero."""
    return bisect_left(_BOUNDS_US, max(lateness // _US, 0))


def increments(
    rows: Iterable[Finished], held: Iterable[ThrottledMinute] = ()
) -> dict[Key, list[int]]:
    """What ``rows`` and ``held`` add to the minute rows: counters in :data:`COLUMNS`
    order by ``(minute, job, queue)``, only the keys something adds to (see the module
    doc for which minute each counter goes to)."""
    out: dict[Key, list[int]] = {}

    def at(minute: int, job: str, queue: str) -> list[int]:
        key = (minute, job, queue)
        found = out.get(key)
        if found is None:
            found = out[key] = [0] * len(COLUMNS)
        return found

    for row in rows:
        facts = row.facts
        finish = at(minute_number(row.finished_at), row.job, row.queue)
        outcome = _OUTCOMES.get(facts.state)
        if outcome is not None:
            finish[outcome] += 1
        if row.attempt > 1:
            finish[_INDEX["retried"]] += 1
        marks = int(facts.marks)  # plain int bit tests: IntFlag's cost per row adds up
        replayed = marks & _REPLAYED
        claimed = facts.first_claimed_at
        claim = finish if claimed is None else at(minute_number(claimed), row.job, row.queue)
        if not replayed:
            if marks & _TIMED_OUT:
                finish[_INDEX["timed_out"]] += 1
            if claimed is not None:
                claim[_INDEX["claims"]] += 1
                if not marks & _BACKFILL:
                    claim[_LATE + lateness_bucket(claimed - facts.planned_at)] += 1
        if not counted(facts):
            continue
        when = settled_at(row)
        verdicts = (
            (claim, "claim", claim_verdict(facts, when, DEFAULT_CLAIM_WITHIN)),
            (
                finish,
                "finish",
                finish_verdict(facts, when, DEFAULT_FINISH_WITHIN, DEFAULT_CLAIM_WITHIN),
            ),
        )
        for counters, objective, verdict in verdicts:
            if verdict is Verdict.MET or verdict in MISSES:
                counters[_INDEX[f"{objective}_counted"]] += 1
                counters[_INDEX[f"{objective}_missed"]] += verdict in MISSES
    for h in held:
        at(h.minute, h.job, h.queue)[_THROTTLED] += h.held // _US
    return out


def spread(added: Mapping[Key, Sequence[int]]) -> dict[RowKey, list[int]]:
    """Each minute's counters added into the row of every span (:data:`SPANS`) that
    holds the minute: what a roll-up adds to the stored rows."""
    out: dict[RowKey, list[int]] = {}
    for (minute, job, queue), counters in added.items():
        for length in SPANS:
            key = (length, minute - minute % length, job, queue)
            into = out.get(key)
            if into is None:
                out[key] = list(counters)
            else:
                for i, n in enumerate(counters):
                    into[i] += n
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class RollUp:
    """What one roll-up transaction did."""

    #: Finished executions read (and added to the minute rows).
    executions: int
    #: Everything that finished (and every throttle record) before this instant is
    #: rolled up; None before the first roll-up.
    rolled_up_to: datetime | None
    #: Whether it reached ``now - GRACE``: False when it stopped at its row or time
    #: bound, and another roll-up has more to read.
    caught_up: bool


# -- reading -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Totals:
    """Counters summed over minute rows (:data:`COLUMNS`, by name)."""

    succeeded: int = 0
    dead: int = 0
    retried: int = 0
    timed_out: int = 0
    cancelled: int = 0
    skipped: int = 0
    claims: int = 0
    #: The lateness histogram: counts per bucket (:data:`LATENESS_BOUNDS`).
    lateness: tuple[int, ...] = (0,) * BUCKETS
    throttled: timedelta = timedelta(0)
    claim_counted: int = 0
    claim_missed: int = 0
    finish_counted: int = 0
    finish_missed: int = 0

    @classmethod
    def of(cls, values: Sequence[int | None]) -> Totals:
        """Totals from sums in :data:`COLUMNS` order (a NULL sum is 0)."""
        v = [int(x or 0) for x in values]
        if len(v) != len(COLUMNS):
            raise ValueError(f"expected {len(COLUMNS)} counters, got {len(v)}")
        named = {name: v[i] for i, name in enumerate(COLUMNS) if not name.startswith("late_")}
        throttled = timedelta(microseconds=named.pop("throttled_us"))
        return cls(lateness=tuple(v[_LATE : _LATE + BUCKETS]), throttled=throttled, **named)


def percentile(histogram: Sequence[int], fraction: float) -> timedelta | None:
    """The nearest-rank percentile ``fraction`` of a lateness histogram, as a bucket bound.

    The rank is ``ceil(fraction * total)`` (1-based); the answer is the upper bound of
    the bucket holding it: the true value is at most that much (and above the bound
    before). Past the last bound it is the last bound (the value is at least that).
    None for an empty histogram.
    """
    total = sum(histogram)
    if not total:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for i, n in enumerate(histogram):
        seen += n
        if seen >= rank:
            return LATENESS_BOUNDS[min(i, len(LATENESS_BOUNDS) - 1)]
    raise AssertionError("unreachable: the rank is at most the total")  # pragma: no cover


def burn(missed: int, decided: int, target: float) -> float | None:
    """The burn rate of an error budget: the missed share over ``1 - target`` (1.0
    spends the budget exactly); None when nothing was decided."""
    return (missed / decided) / (1.0 - target) if decided else None


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryPoint:
    """One step of a chart: what the minute rows of ``[at, at + step)`` add up to."""

    at: datetime
    succeeded: int
    dead: int
    retried: int
    timed_out: int
    cancelled: int
    skipped: int
    claims: int
    #: Nearest-rank claim lateness percentiles, as bucket bounds (:func:`percentile`).
    lateness_p50: timedelta | None
    lateness_p99: timedelta | None
    throttled: timedelta
    claim_counted: int
    claim_missed: int
    finish_counted: int
    finish_missed: int
    #: Burn rates at the default targets (:func:`burn`); None with nothing decided.
    claim_burn: float | None
    finish_burn: float | None


def point(at: datetime, totals: Totals) -> HistoryPoint:
    """The chart point at ``at`` of ``totals``."""
    return HistoryPoint(
        at=at,
        succeeded=totals.succeeded,
        dead=totals.dead,
        retried=totals.retried,
        timed_out=totals.timed_out,
        cancelled=totals.cancelled,
        skipped=totals.skipped,
        claims=totals.claims,
        lateness_p50=percentile(totals.lateness, 0.5),
        lateness_p99=percentile(totals.lateness, 0.99),
        throttled=totals.throttled,
        claim_counted=totals.claim_counted,
        claim_missed=totals.claim_missed,
        finish_counted=totals.finish_counted,
        finish_missed=totals.finish_missed,
        claim_burn=burn(totals.claim_missed, totals.claim_counted, DEFAULT_CLAIM_TARGET),
        finish_burn=burn(totals.finish_missed, totals.finish_counted, DEFAULT_FINISH_TARGET),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class History:
    """A window's chart: one point per step, oldest first, every step present."""

    window: Window
    step: timedelta
    start: datetime
    end: datetime
    job: str | None
    queue: str | None
    #: What the minute rows cover: :attr:`RollUp.rolled_up_to` when read.
    rolled_up_to: datetime | None
    points: list[HistoryPoint] = field(default_factory=list)


def history(
    window: Window,
    now: datetime,
    job: str | None,
    queue: str | None,
    rolled_up_to: datetime | None,
    sums: Mapping[int, Totals],
) -> History:
    """The chart of ``window`` at ``now`` from ``sums`` (by step index from the window's
    start, as the stores group the minute rows; missing steps are zero)."""
    steps = WINDOWS[window]
    start, end = span(window, now)
    return History(
        window=window,
        step=steps.step,
        start=start,
        end=end,
        job=job,
        queue=queue,
        rolled_up_to=rolled_up_to,
        points=[point(start + i * steps.step, sums.get(i, Totals())) for i in range(steps.count)],
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class SummaryRow:
    """One job's or queue's totals over a window."""

    name: str
    succeeded: int
    dead: int
    retried: int
    claims: int
    lateness_p50: timedelta | None
    lateness_p99: timedelta | None
    throttled: timedelta


@dataclass(frozen=True, kw_only=True, slots=True)
class HistorySummary:
    """A window's totals per job or per queue, by name."""

    window: Window
    by: SummaryBy
    start: datetime
    end: datetime
    rolled_up_to: datetime | None
    rows: list[SummaryRow] = field(default_factory=list)


def summary(
    window: Window,
    by: SummaryBy,
    now: datetime,
    rolled_up_to: datetime | None,
    sums: Mapping[str, Totals],
) -> HistorySummary:
    """The summary of ``window`` at ``now`` from ``sums`` by name (names with nothing
    in the window are left out)."""
    start, end = span(window, now)
    return HistorySummary(
        window=window,
        by=by,
        start=start,
        end=end,
        rolled_up_to=rolled_up_to,
        rows=[
            SummaryRow(
                name=name,
                succeeded=t.succeeded,
                dead=t.dead,
                retried=t.retried,
                claims=t.claims,
                lateness_p50=percentile(t.lateness, 0.5),
                lateness_p99=percentile(t.lateness, 0.99),
                throttled=t.throttled,
            )
            for name, t in sorted(sums.items())
        ],
    )

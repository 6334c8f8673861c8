"""The service-level objectives as the design defines them: measured from the planned
time, every miss attributed to one error class, exclusions counted, an error budget.

Every execution keeps the facts its verdicts are decided from, on its own row
(:class:`SloFacts`): its **planned time** (the slot of a schedule's occurrence, the
requested execution time of a submit; retries, takeovers and replays never move it),
its first claim, its first finish (SUCCEEDED or FAILED), the time limits held it
back (throttled), and :class:`SloMark` bits for what went wrong on the way. Each store
writes them in the transaction that changes the execution; the report only counts.

Two objectives, each decided per execution (:func:`claim_verdict`,
:func:`finish_verdict`):

* **claim**: the first claim at most ``claim_within`` (10 s) after the planned time;
* **finish**: the first SUCCEEDED or FAILED (an explicit dead letter) at most
  ``finish_within`` (5 min) after it.

A verdict is one :class:`Verdict`: ``met``, a miss of one :class:`ErrorClass`, or an
exclusion (``backfill``, ``replay``, or ``throttled``: late only by the time a rate
or concurrency limit or a paused queue held it, so excused). Misses count against
the budget; exclusions are counted and shown, never silently dropped.

The SQL stores compute the same verdicts in SQL (``slo_verdicts`` in each dialect's
queries); the memory store calls the functions here. Both feed :func:`build_report`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import IntFlag, StrEnum
from typing import Any, TypedDict

from fencepost.domain.checks import require_int
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.filters import checked
from fencepost.domain.machine import stale_reason
from fencepost.domain.states import Event, State


class ErrorClass(StrEnum):
    """Why an objective was missed: one class per miss (the names every surface uses)."""

    #: The first claim came late (or has not come): no worker took it in time.
    LATE_CLAIM = "late_claim"
    #: A lease was lost while running: a heartbeat refused, the lease expired and was
    #: reaped, or another worker took it over.
    RENEWAL_FAILED = "renewal_failed"
    #: An attempt ran past its job's timeout.
    TIMED_OUT = "timed_out"
    #: The handler failed: retried, or dead-lettered too late.
    HANDLER_FAILED = "handler_failed"
    #: A worker's completion or failure was refused as stale (its lease was replaced).
    STALE_COMPLETION_REFUSED = "stale_completion_refused"
    #: Held back by a rate or concurrency limit or a paused queue: excused, not counted
    #: against the budget (the capacity an operator chose), but shown.
    THROTTLED = "throttled"
    #: Claimed on time and nothing failed, but the handler ran past the objective.
    RAN_LONG = "ran_long"


class Exclusion(StrEnum):
    """Why an execution is left out of both objectives (counted, and shown)."""

    #: Created by an operator or a caller for a time already past (a schedule's
    #: backfill, a submit with a past ``run_at``): nobody asked for it on time.
    BACKFILL = "backfill"
    #: An operator replayed a dead letter.
    REPLAY = "replay"


class Verdict(StrEnum):
    """One execution's verdict on one objective."""

    MET = "met"
    LATE_CLAIM = ErrorClass.LATE_CLAIM.value
    RENEWAL_FAILED = ErrorClass.RENEWAL_FAILED.value
    TIMED_OUT = ErrorClass.TIMED_OUT.value
    HANDLER_FAILED = ErrorClass.HANDLER_FAILED.value
    STALE_COMPLETION_REFUSED = ErrorClass.STALE_COMPLETION_REFUSED.value
    THROTTLED = ErrorClass.THROTTLED.value
    RAN_LONG = ErrorClass.RAN_LONG.value
    BACKFILL = Exclusion.BACKFILL.value
    REPLAY = Exclusion.REPLAY.value


#: The verdicts that are misses counted against the budget.
MISSES = frozenset(
    {
        Verdict.LATE_CLAIM,
        Verdict.RENEWAL_FAILED,
        Verdict.TIMED_OUT,
        Verdict.HANDLER_FAILED,
        Verdict.STALE_COMPLETION_REFUSED,
        Verdict.RAN_LONG,
    }
)
#: The verdicts left out of an objective's total (shown as exclusions).
EXCLUDED = frozenset({Verdict.THROTTLED, Verdict.BACKFILL, Verdict.REPLAY})


class SloMark(IntFlag):
    """What happened to an execution on the way, kept on its row (``slo_marks``).

    Set, never cleared, in the transaction of the event. The bit values are stored:
    never renumber them.
    """

    NONE = 0
    #: A heartbeat was refused, or the lease ran out while running (LEASE_EXPIRED, or a
    #: claim that took it over).
    RENEWAL_FAILED = 1
    #: A complete or a fail was refused as stale (STALE_REFUSED of a non-heartbeat verb).
    STALE_COMPLETION = 2
    #: An attempt timed out (TIMED_OUT).
    TIMED_OUT = 4
    #: A handler reported a failure (FAILED, retried or final).
    HANDLER_FAILED = 8
    #: Created for a time already past by a caller (see :func:`is_backfill`).
    BACKFILL = 16
    #: Replayed by an operator.
    REPLAYED = 32


#: How far in the past a caller's requested time may lie and still count as "now":
#: a submitter's clock a little behind the store's does not make a backfill.
BACKFILL_SLACK = timedelta(seconds=1)

#: The objectives' defaults: the design's 99% within 10 s, 99.9% within 5 minutes.
DEFAULT_CLAIM_WITHIN = timedelta(seconds=10)
DEFAULT_FINISH_WITHIN = timedelta(minutes=5)
DEFAULT_CLAIM_TARGET = 0.99
DEFAULT_FINISH_TARGET = 0.999

#: Days since the epoch: how rollups name the UTC day of a planned time.
DAY = timedelta(days=1)

#: The burn-rate windows reported beside the budget (the SRE workbook's multiwindow
#: alert pairs a fast 1 h burn with a slower 6 h one).
BURN_WINDOWS = (timedelta(hours=1), timedelta(hours=6))


#: The states whose first reaching is an execution's finish (``first_finished_at``).
FINISHED_STATES = (State.SUCCEEDED, State.FAILED)

#: The audit reason of a refused heartbeat: a renewal failure, not a stale completion.
_HEARTBEAT_REFUSED = stale_reason("heartbeat")


def refusal_mark(verb: str) -> SloMark:
    """What a refused fenced ``verb`` (its STALE_REFUSED audit) marks on the execution:
    a refused heartbeat is a renewal failed; any other verb a stale completion refused."""
    return mark_for(Event.STALE_REFUSED, None, stale_reason(verb))


def mark_for(event: Event, from_state: State | None, reason: str | None) -> SloMark:
    """The :class:`SloMark` an audit transition sets (``SloMark.NONE`` for most).

    LEASE_EXPIRED, a claim from RUNNING (a takeover) and a refused heartbeat:
    RENEWAL_FAILED; any other refused call: STALE_COMPLETION; TIMED_OUT: TIMED_OUT;
    FAILED: HANDLER_FAILED; REPLAYED: REPLAYED.
    """
    if event is Event.LEASE_EXPIRED or (event is Event.CLAIMED and from_state is State.RUNNING):
        return SloMark.RENEWAL_FAILED
    if event is Event.STALE_REFUSED:
        return SloMark.RENEWAL_FAILED if reason == _HEARTBEAT_REFUSED else SloMark.STALE_COMPLETION
    return _EVENT_MARKS.get(event, SloMark.NONE)


_EVENT_MARKS = {
    Event.TIMED_OUT: SloMark.TIMED_OUT,
    Event.FAILED: SloMark.HANDLER_FAILED,
    Event.REPLAYED: SloMark.REPLAYED,
}


def is_backfill(planned_at: datetime, created_at: datetime) -> bool:
    """Whether an execution a caller created (a submit, a schedule's backfill; never the
    materializer's own occurrences) is a backfill: planned more than
    :data:`BACKFILL_SLACK` before it was created."""
    return planned_at < created_at - BACKFILL_SLACK


@dataclass(frozen=True, kw_only=True, slots=True)
class SloFacts:
    """What an execution's row keeps for its verdicts."""

    state: State
    planned_at: datetime
    first_claimed_at: datetime | None
    #: The first SUCCEEDED or FAILED; None until then.
    first_finished_at: datetime | None
    #: The time limits held it back before its first claim: the largest throttle
    #: record of that wait (a resume's and the claim's measure the same wait).
    held: timedelta
    marks: SloMark


def counted(facts: SloFacts) -> bool:
    """Whether the execution was meant to run: not SKIPPED, not CANCELLED before a claim."""
    if facts.state is State.SKIPPED:
        return False
    return not (facts.state is State.CANCELLED and facts.first_claimed_at is None)


def _excluded(facts: SloFacts) -> Verdict | None:
    if facts.marks & SloMark.BACKFILL:
        return Verdict.BACKFILL
    if facts.marks & SloMark.REPLAYED:
        return Verdict.REPLAY
    return None


def _timed(
    facts: SloFacts, at: datetime, within: timedelta, happened: datetime | None
) -> Verdict | None:
    """What both objectives decide alike, for the event at ``happened`` (None: not yet):
    None while undecided, an exclusion, MET, THROTTLED; LATE_CLAIM for a miss whose
    class the objective still has to choose."""
    if happened is None and at - facts.planned_at <= within:
        return None
    excluded = _excluded(facts)
    if excluded is not None:
        return excluded
    late = (happened if happened is not None else at) - facts.planned_at
    if late <= within:
        return Verdict.MET
    if late - facts.held <= within:
        return Verdict.THROTTLED
    return Verdict.LATE_CLAIM


def claim_verdict(facts: SloFacts, at: datetime, within: timedelta) -> Verdict | None:
    """The claim objective's verdict at ``at``; None while undecided.

    Decided once claimed, or once ``at - planned_at > within`` (unclaimed: a miss).
    Late is ``first claim - planned_at`` (``at - planned_at`` while unclaimed):
    ``<= within`` is met; late only by the held time (``late - held <= within``) is
    THROTTLED; else LATE_CLAIM. The held time is known once claimed (a claim records
    it), so an execution a limit still holds counts as LATE_CLAIM until its claim.
    """
    return _timed(facts, at, within, facts.first_claimed_at)


def finish_verdict(
    facts: SloFacts, at: datetime, within: timedelta, claim_within: timedelta
) -> Verdict | None:
    """The finish objective's verdict at ``at``; None while undecided.

    Decided once SUCCEEDED or FAILED (the first time), or once ``at - planned_at >
    within``. Met, THROTTLED and the lateness as for the claim (from the first
    finish). A miss takes the first class that applies, in this order: RENEWAL_FAILED,
    STALE_COMPLETION_REFUSED, TIMED_OUT, HANDLER_FAILED (its marks), LATE_CLAIM (the
    claim objective missed, ``claim_within``), else RAN_LONG.
    """
    verdict = _timed(facts, at, within, facts.first_finished_at)
    if verdict is not Verdict.LATE_CLAIM:
        return verdict
    marks = facts.marks
    for mark, cls in _FINISH_MARKS:
        if marks & mark:
            return cls
    if _timed(facts, at, claim_within, facts.first_claimed_at) is Verdict.LATE_CLAIM:
        return Verdict.LATE_CLAIM
    return Verdict.RAN_LONG


#: The marks that name a finish miss's class, in the order they are tried.
_FINISH_MARKS = (
    (SloMark.RENEWAL_FAILED, Verdict.RENEWAL_FAILED),
    (SloMark.STALE_COMPLETION, Verdict.STALE_COMPLETION_REFUSED),
    (SloMark.TIMED_OUT, Verdict.TIMED_OUT),
    (SloMark.HANDLER_FAILED, Verdict.HANDLER_FAILED),
)


def window_start(at: datetime, window: timedelta) -> datetime:
    """The first instant of the window ending at ``at``: a report counts the executions
    planned in ``[start, at]``.

    A window of a day or more starts at the UTC midnight at or before ``at -
    window``: the daily rollups prune writes cannot split a day, and every report,
    rolled up or not, counts the same whole days. Shorter windows (the burn
    windows) start exactly ``window`` before ``at`` and count stored executions
    only.
    """
    start = at - window
    if window < timedelta(days=1):
        return start
    start = start.astimezone(UTC)
    return start.replace(hour=0, minute=0, second=0, microsecond=0)


def day_number(instant: datetime) -> int:
    """The UTC day of ``instant`` as days since 1970-01-01 (the rollups' ``day``)."""
    return (instant - datetime(1970, 1, 1, tzinfo=UTC)) // DAY


#: The window of the service-level report unless told otherwise: the last 30 days.
DEFAULT_SLO_WINDOW = timedelta(days=30)
#: The most executions the report lists as the worst claimed.
MAX_WORST = 10_000


class SloOptions(TypedDict, total=False):
    """The service-level report's options, declared once.

    ``Store.slo``, ``AsyncStore.slo``, ``Client.slo`` and ``AsyncClient.slo`` take them
    as keywords typed by this; each may be left out (:func:`slo_arguments` gives its
    default). What each means is :meth:`Store.slo
    <fencepost.store.reporting.ReportVerbs.slo>`'s.
    """

    window: float | timedelta
    claim_within: float | timedelta
    finish_within: float | timedelta
    claim_target: float
    finish_target: float
    worst: int


def slo_arguments(options: SloOptions) -> dict[str, Any]:
    """``options`` checked, with the defaults of those left out: the report's window
    and objectives as timedeltas, the targets as floats, ``worst`` as an int.

    A :class:`ValidationError` names the first option refused: ``window`` > 0,
    ``claim_within`` and ``finish_within`` >= 0 (seconds or timedeltas), targets
    strictly between 0 and 1, ``0 <= worst <= 10000``; a name that is not an option is
    a TypeError, as for a call.
    """
    checked(options, SloOptions, "slo")
    get = options.get
    return {
        "window": as_duration(get("window", DEFAULT_SLO_WINDOW), field="window"),
        "claim_within": as_duration(
            get("claim_within", DEFAULT_CLAIM_WITHIN), field="claim_within", allow_zero=True
        ),
        "finish_within": as_duration(
            get("finish_within", DEFAULT_FINISH_WITHIN), field="finish_within", allow_zero=True
        ),
        "claim_target": require_target(get("claim_target", DEFAULT_CLAIM_TARGET), "claim_target"),
        "finish_target": require_target(
            get("finish_target", DEFAULT_FINISH_TARGET), "finish_target"
        ),
        "worst": require_int(get("worst", 10), "worst", low=0, high=MAX_WORST),
    }


def require_target(value: object, field: str) -> float:
    """A target share: a number strictly between 0 and 1 (else ValidationError)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"must be a number between 0 and 1, got {value!r}")
    target = float(value)
    if not 0.0 < target < 1.0:  # NaN fails both comparisons
        raise ValidationError(field, f"must be between 0 and 1 (exclusive), got {value!r}")
    return target


@dataclass(frozen=True, kw_only=True, slots=True)
class Tally:
    """Verdict counts of one objective over one window: ``{verdict: count}``."""

    counts: Mapping[Verdict, int] = field(default_factory=dict)

    @property
    def met(self) -> int:
        return self.counts.get(Verdict.MET, 0)

    @property
    def misses(self) -> int:
        return sum(n for v, n in self.counts.items() if v in MISSES)

    @property
    def total(self) -> int:
        """Decided and counted: met plus misses (exclusions are not in it)."""
        return self.met + self.misses


def tally(verdicts: Iterable[Verdict | None]) -> Tally:
    """Count ``verdicts`` (None, undecided, left out)."""
    counts: dict[Verdict, int] = {}
    for v in verdicts:
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    return Tally(counts=counts)


def merge(*tallies: Tally) -> Tally:
    """The sum of several tallies (live rows and rollups)."""
    counts: dict[Verdict, int] = {}
    for t in tallies:
        for v, n in t.counts.items():
            counts[v] = counts.get(v, 0) + n
    return Tally(counts=counts)


@dataclass(frozen=True, kw_only=True, slots=True)
class BurnRate:
    """How fast the budget burned over a recent window: the miss share over ``1 - target``
    (1.0 spends exactly the budget over the report's window; None with nothing decided)."""

    window: timedelta
    met: int
    total: int
    rate: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Objective:
    """One objective over the report's window, with its error budget."""

    name: str  #: "claim" or "finish"
    within: timedelta
    target: float
    met: int
    total: int  #: decided and counted: met plus misses
    share: float | None  #: ``met / total``; None when ``total`` is 0
    #: Misses by class (every :class:`ErrorClass` but THROTTLED, zeros included).
    misses: dict[ErrorClass, int]
    #: Left out of ``total``: backfill, replay and throttled (zeros included).
    excluded: dict[str, int]
    #: The misses the budget allows over the window: ``(1 - target) * total``.
    budget: float
    #: Misses so far (``total - met``).
    consumed: int
    #: ``budget - consumed`` (negative once overspent).
    remaining: float
    burn: list[BurnRate]  #: over :data:`BURN_WINDOWS`, shortest first

    @property
    def missed(self) -> bool:
        """Whether the objective is missed: a share below the target."""
        return self.share is not None and self.share < self.target


#: Each objective's error classes, in report order (THROTTLED is an exclusion).
CLAIM_CLASSES = (ErrorClass.LATE_CLAIM,)
FINISH_CLASSES = (
    ErrorClass.LATE_CLAIM,
    ErrorClass.RENEWAL_FAILED,
    ErrorClass.TIMED_OUT,
    ErrorClass.HANDLER_FAILED,
    ErrorClass.STALE_COMPLETION_REFUSED,
    ErrorClass.RAN_LONG,
)
#: Exclusions in report order.
EXCLUSIONS = (Verdict.BACKFILL.value, Verdict.REPLAY.value, Verdict.THROTTLED.value)


def objective(
    name: str,
    within: timedelta,
    target: float,
    whole: Tally,
    recent: Mapping[timedelta, Tally],
) -> Objective:
    """An :class:`Objective` from the report window's tally and the burn windows'."""
    classes = CLAIM_CLASSES if name == "claim" else FINISH_CLASSES
    budget = (1.0 - target) * whole.total
    burn = []
    for w in BURN_WINDOWS:
        t = recent.get(w, Tally())
        rate = (t.misses / t.total) / (1.0 - target) if t.total else None
        burn.append(BurnRate(window=w, met=t.met, total=t.total, rate=rate))
    return Objective(
        name=name,
        within=within,
        target=target,
        met=whole.met,
        total=whole.total,
        share=whole.met / whole.total if whole.total else None,
        misses={c: whole.counts.get(Verdict(c.value), 0) for c in classes},
        excluded={e: whole.counts.get(Verdict(e), 0) for e in EXCLUSIONS},
        budget=budget,
        consumed=whole.misses,
        remaining=budget - whole.misses,
        burn=burn,
    )


def rollup_verdicts(facts: SloFacts, at: datetime) -> list[tuple[str, Verdict]]:
    """What prune adds to the rollups for one execution it deletes at ``at``:
    ``(objective, verdict)`` pairs at the default objectives, undecided ones and
    executions not counted (:func:`counted`) left out."""
    if not counted(facts):
        return []
    out = []
    claim = claim_verdict(facts, at, DEFAULT_CLAIM_WITHIN)
    if claim is not None:
        out.append(("claim", claim))
    finish = finish_verdict(facts, at, DEFAULT_FINISH_WITHIN, DEFAULT_CLAIM_WITHIN)
    if finish is not None:
        out.append(("finish", finish))
    return out

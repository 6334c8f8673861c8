"""What the store reports about itself: operating statistics and the service-level report.

Both are computed from what the store already keeps (execution rows and the
audit trail), at the store's now; nothing is sampled or kept in memory between
calls. The SQL backends aggregate in SQL; the helpers here are the same
definitions in Python, for the memory backend and for reading the SQL results.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from fencepost.domain.catalogue import served_by
from fencepost.domain.limits import ThrottleCount
from fencepost.domain.nodes import SCHEDULER, Node
from fencepost.domain.slo import ErrorClass, Objective, SloMark, Verdict, mark_for
from fencepost.domain.states import Event, State

_T = TypeVar("_T")

#: The percentiles a :class:`Lateness` reports, as fractions.
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True, kw_only=True, slots=True)
class Lateness:
    """How late claims were: count and nearest-rank percentiles (None when count is 0).

    The percentile of fraction ``f`` (0.5, 0.9, 0.99) of ``n`` sorted values is
    the value at rank ``ceil(f * n)`` (1-based): always one of the values, never
    interpolated (of the lateness values 1 s .. 100 s, p50 is 50 s and p99 99 s).
    Every backend computes ``f * n`` in double precision, as PostgreSQL's
    ``percentile_disc`` does, so all pick the same value.
    """

    count: int
    p50: timedelta | None
    p90: timedelta | None
    p99: timedelta | None
    max: timedelta | None


#: The :class:`Lateness` of no claims at all.
NO_LATENESS = Lateness(count=0, p50=None, p90=None, p99=None, max=None)


@dataclass(frozen=True, kw_only=True, slots=True)
class Stats:
    """The store at one instant, and what happened in the window before it.

    Counts by state cover every execution the store holds (pruned ones are gone).
    Window figures count audit transitions with ``at`` in ``(at - window, at]``.
    """

    at: datetime  #: the store's now when the figures were taken
    window: timedelta
    by_state: dict[State, int]  #: every state, zeros included
    by_job: dict[str, dict[State, int]]  #: per job (by name), every state, zeros included
    #: Per queue (by name), every state, zeros included.
    by_queue: dict[str, dict[State, int]] = field(default_factory=dict)
    #: Waiting executions (SCHEDULED, RETRY_WAIT) with ``due_at <= at``: claimable now and
    #: not yet claimed. Occurrences held by an overlap policy are not due.
    due_backlog: int
    #: CLAIMED transitions in the window: ``claim at - due_at``, at least zero, where
    #: ``due_at`` is the execution's current one (that of its latest attempt; an earlier
    #: claim of a retried execution counts as on time). A takeover of an expired lease is
    #: late by the time since the execution fell due. Throttled claims are left out (a
    #: limit or a paused queue held them, by design: they are counted in ``throttled``):
    #: those of an execution with a throttle record at or after its ``due_at`` and no
    #: later than the claim, recorded in ``(at - 2 * window, at]``.
    claim_lateness: Lateness
    stale_refused: int  #: STALE_REFUSED transitions in the window (stale workers refused)
    #: Leases that ran out in the window: LEASE_EXPIRED transitions (the reaper) plus
    #: takeovers (CLAIMED from RUNNING).
    lease_expiries: int
    #: Throttle records in the window, per scope (by scope; scopes with none left out):
    #: executions a limit or a paused queue held past their due time, and for how long.
    #: Each is one scope's; see :class:`~fencepost.domain.limits.ThrottleCount`.
    throttled: list[ThrottleCount] = field(default_factory=list)
    #: The error classes of the window (:data:`STATS_ERROR_CLASSES`, zeros included),
    #: the names every surface uses (:class:`~fencepost.domain.slo.ErrorClass`), each
    #: counting events with ``at`` in ``(at - window, at]``:
    #:
    #: * ``renewal_failed``: leases lost while running: refused heartbeats
    #:   (STALE_REFUSED of verb heartbeat), LEASE_EXPIRED, takeovers (CLAIMED from
    #:   RUNNING);
    #: * ``stale_completion_refused``: the other STALE_REFUSED (complete, fail,
    #:   release, snooze, abort...);
    #: * ``timed_out``: TIMED_OUT transitions (a worker stopped an attempt for
    #:   running past its job's timeout);
    #: * ``handler_failed``: FAILED transitions (retried or dead-lettered);
    #: * ``throttled``: the window's throttle records (``throttled``, summed);
    #: * ``late_claim``: first claims in the window (an execution's
    #:   ``first_claimed_at``) more than ``DEFAULT_CLAIM_WITHIN`` (10 s) after its
    #:   planned time net of the time limits held it, backfills and replays left out:
    #:   the claim objective's misses, as they happen.
    #:
    #: Each transition counts in the class :func:`event_class` gives it. Empty only in
    #: a Stats built by hand.
    errors: dict[ErrorClass, int] = field(default_factory=dict)
    #: Due work and schedules no live process serves (``Store.unserved``, read just after
    #: the other figures). ``Store.stats`` always fills it; None only in a Stats built
    #: by hand or by a backend's ``_stats``.
    unserved: Unserved | None = None


#: The error classes :attr:`Stats.errors` counts: every one but RAN_LONG, which is a
#: finish verdict (claimed on time, nothing failed, the handler ran long), not an event.
STATS_ERROR_CLASSES = tuple(c for c in ErrorClass if c is not ErrorClass.RAN_LONG)

#: The error class of each mark an audit transition sets (see :func:`event_class`).
_MARK_CLASSES: Mapping[SloMark, ErrorClass] = {
    SloMark.RENEWAL_FAILED: ErrorClass.RENEWAL_FAILED,
    SloMark.STALE_COMPLETION: ErrorClass.STALE_COMPLETION_REFUSED,
    SloMark.TIMED_OUT: ErrorClass.TIMED_OUT,
    SloMark.HANDLER_FAILED: ErrorClass.HANDLER_FAILED,
}


def event_class(event: Event, from_state: State | None, reason: str | None) -> ErrorClass | None:
    """The error class an audit transition counts in for :attr:`Stats.errors` (None for
    most): the class of the :class:`~fencepost.domain.slo.Mark` it sets on its execution
    (:func:`~fencepost.domain.slo.mark_for`), so that ``stats`` and the SLO's verdicts
    name an event alike."""
    return _MARK_CLASSES.get(mark_for(event, from_state, reason))


def error_counts(counted: Mapping[ErrorClass, int]) -> dict[ErrorClass, int]:
    """:attr:`Stats.errors` from the counts a backend read: every class, zeros included."""
    return {c: int(counted.get(c, 0)) for c in STATS_ERROR_CLASSES}


@dataclass(frozen=True, kw_only=True, slots=True)
class DueCount:
    """How many due executions of one job wait: those pinned to ``job_version``, or
    (``job_version`` None) those that run on any version of it."""

    job: str
    job_version: int | None  #: None: not pinned, any version of the job runs it
    count: int

    @property
    def label(self) -> str:
        """``report`` (unpinned) or ``ship-order v5`` (pinned): how reports name it."""
        return self.job if self.job_version is None else f"{self.job} v{self.job_version}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Unserved:
    """Work waiting for a process that is not running, at the store's now ``at``.

    * A due execution (SCHEDULED or RETRY_WAIT, ``due_at <= at``, not held) is
      *served* when a live node registered a ``(job, version)`` pair a claim of it
      would accept, as :meth:`Store.claim` filters by ``versions``: one pinned to
      ``job_version`` v needs a node serving ``(job, v)``; an unpinned one, a node
      serving any version of the job. Nodes record neither queues nor the buckets
      of each job, so a live worker of the job serves it whatever queues it claims
      from; bucket holes are :meth:`Store.bucket_report`'s. A process that claims
      without registering its jobs serves nothing here.
    * An active schedule (not paused, with a slot still to come) is served while a
      live node of kind ``"scheduler"`` (a running materializer) exists.
    """

    at: datetime  #: the store's now when the due executions were counted
    #: Every due ``(job, job_version)`` group, by job, then version (unpinned first).
    due: list[DueCount]
    #: The groups of ``due`` that no live node serves, in the same order.
    executions: list[DueCount]
    active_schedules: int  #: schedules not paused and not finished
    schedulers: list[str]  #: live nodes of kind ``"scheduler"``, by id

    @property
    def due_unserved(self) -> int:
        """How many due executions no live node serves (the sum over ``executions``)."""
        return sum(group.count for group in self.executions)

    @property
    def schedules(self) -> int:
        """Active schedules that will not fire: all of them while no scheduler lives, else 0."""
        return 0 if self.schedulers else self.active_schedules

    def due_of(self, job: str) -> tuple[int, int]:
        """``(due, unserved)``: the due executions of ``job`` and how many of them no
        live node serves."""
        due = sum(g.count for g in self.due if g.job == job)
        return due, sum(g.count for g in self.executions if g.job == job)


def unserved_work(
    at: datetime, due: Iterable[DueCount], nodes: Iterable[Node], active_schedules: int
) -> Unserved:
    """The :class:`Unserved` report from the due groups and the *live* ``nodes``."""
    live = list(nodes)
    serving = served_by(live)
    jobs = {job for job, _ in serving}

    def served(group: DueCount) -> bool:
        if group.job_version is None:
            return group.job in jobs
        return (group.job, group.job_version) in serving

    ordered = sorted(due, key=lambda g: (g.job, g.job_version is not None, g.job_version or 0))
    return Unserved(
        at=at,
        due=ordered,
        executions=[group for group in ordered if not served(group)],
        active_schedules=active_schedules,
        schedulers=sorted(n.id for n in live if n.kind == SCHEDULER),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class JobCounts:
    """The executions of each job created in a window, by their current state.

    Created, not updated: each execution is counted once, in the window it was
    submitted (or materialized) in, whatever happened to it since — "of last day's
    runs of this job, how many succeeded" — and the window is a range of the
    time-ordered ids, so the store answers it without an index on the hot table.
    """

    at: datetime  #: the store's now when the counts were taken
    window: timedelta  #: created in ``(at - window, at]``
    #: Per job (by name), every state, zeros included; jobs without executions in the
    #: window are left out.
    by_job: dict[str, dict[State, int]]


@dataclass(frozen=True, kw_only=True, slots=True)
class SloOffender:
    """One of the executions claimed latest (or not claimed yet) in an SLO window."""

    execution_id: str
    job: str
    planned_at: datetime  #: its planned time (see :mod:`fencepost.domain.slo`)
    claimed_at: datetime | None  #: its first claim; None while never claimed
    #: ``claimed_at - planned_at`` (at least zero), or ``at - planned_at`` while unclaimed.
    lateness: timedelta
    state: State
    #: Its claim objective's verdict (``met``, ``late_claim``, ``throttled``,
    #: ``backfill``, ``replay``); None while undecided.
    verdict: Verdict | None


@dataclass(frozen=True, kw_only=True, slots=True)
class SloReport:
    """The service-level report: both objectives over the window, with their budgets.

    Executions planned in ``[start, at]`` and meant to run (not SKIPPED, not
    CANCELLED before a claim) are decided as :mod:`fencepost.domain.slo` defines;
    the undecided are left out. Executions ``prune`` deleted count through its daily
    rollups (``rolled_up`` of them), which hold the verdicts at the default
    objectives (10 s, 5 min): a report at other ``within`` values counts only the
    executions still stored (``rolled_up`` is then 0).
    """

    at: datetime  #: the store's now when the report was taken
    window: timedelta
    #: The window's first instant: executions planned in ``[start, at]`` count;
    #: ``at - window``, at a UTC midnight for windows of a day or more (see
    #: :func:`~fencepost.domain.slo.window_start`).
    start: datetime
    claimed: Objective
    finished: Objective
    #: Executions by claim lateness, latest first (then by planned time, then id):
    #: stored ones only (pruned ones are counted, not listed).
    worst: list[SloOffender]
    #: Executions counted from prune's rollups (no longer stored).
    rolled_up: int = 0

    @property
    def claim_within(self) -> timedelta:
        return self.claimed.within

    @property
    def finish_within(self) -> timedelta:
        return self.finished.within

    @property
    def missed(self) -> bool:
        """Whether either objective is below its target."""
        return self.claimed.missed or self.finished.missed


def nearest_rank(ordered: Sequence[_T], fraction: float) -> _T:
    """The nearest-rank percentile of ``fraction`` of ascending, non-empty ``ordered``."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def lateness(values: Iterable[timedelta]) -> Lateness:
    """Count and nearest-rank percentiles of claim lateness values (see :class:`Lateness`)."""
    ordered = sorted(values)
    if not ordered:
        return NO_LATENESS
    p50, p90, p99 = (nearest_rank(ordered, p) for p in PERCENTILES)
    return Lateness(count=len(ordered), p50=p50, p90=p90, p99=p99, max=ordered[-1])


def counts_by_state(found: Mapping[State, int]) -> dict[State, int]:
    """Every state in declaration order, with the count found (zero if absent)."""
    return {state: found.get(state, 0) for state in State}


def tabulate(
    rows: Iterable[tuple[str, State, int]],
) -> tuple[dict[State, int], dict[str, dict[State, int]]]:
    """``(name, state, count)`` rows -> (by state, by name), every state listed, names
    sorted; the name is a job's (``by_job``) or a queue's (``by_queue``)."""
    per_job: dict[str, dict[State, int]] = {}
    totals: dict[State, int] = {}
    for job, state, count in rows:
        per_job.setdefault(job, {})[state] = per_job.get(job, {}).get(state, 0) + count
        totals[state] = totals.get(state, 0) + count
    by_job = {job: counts_by_state(per_job[job]) for job in sorted(per_job)}
    return counts_by_state(totals), by_job

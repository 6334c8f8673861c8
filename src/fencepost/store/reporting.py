"""The store contract's reports: executions per bucket, the operating figures, what no
live process serves, the service-level report and the executions per job.

Each verb checks its arguments and leaves the one read behind it to its backend's
hook, which computes it at one store now.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Unpack

from fencepost.domain.checks import require_name
from fencepost.domain.durations import as_duration
from fencepost.domain.nodes import Node
from fencepost.domain.reports import DueCount, JobCounts, SloReport, Stats, Unserved, unserved_work
from fencepost.domain.slo import (
    SloOptions,
    slo_arguments,
)
from fencepost.domain.states import State
from fencepost.store.core import StoreCore
from fencepost.store.values import (
    DEFAULT_JOB_COUNTS_WINDOW,
    DEFAULT_STATS_WINDOW,
    UNFINISHED_STATES,
    states_of,
)
from fencepost.store.verbs.reports import SloRequest


class ReportVerbs(StoreCore):
    """Verbs of :class:`~fencepost.store.base.Store` that report (see their docstrings)."""

    @abstractmethod
    def nodes(self, *, live_only: bool = True) -> list[Node]:
        """The registered nodes (:meth:`OperatingVerbs.nodes
        <fencepost.store.operating.OperatingVerbs.nodes>`), which :meth:`unserved` reads."""

    def bucket_counts(
        self, *, states: State | str | Iterable[State | str] | None = None
    ) -> dict[int, int]:
        """How many executions each bucket holds, in one aggregate query.

        Restricted to ``states`` (one state or several; default: the unfinished
        ones, SCHEDULED, RETRY_WAIT and RUNNING). Only buckets holding at least one
        such execution appear, in bucket order. No states: ``{}``.
        """
        chosen = UNFINISHED_STATES if states is None else (states_of(states, "states") or ())
        if not chosen:
            return {}
        return dict(sorted(self._bucket_counts(tuple(sorted(set(chosen)))).items()))

    @abstractmethod
    def _bucket_counts(self, states: tuple[State, ...]) -> dict[int, int]:
        """Executions per bucket in ``states`` (non-empty): one GROUP BY, zero counts left out."""

    def stats(self, *, window: float | timedelta = DEFAULT_STATS_WINDOW) -> Stats:
        """Operating figures at the store's now ``at``, and over ``(at - window, at]``.

        * ``by_state``, ``by_job`` and ``by_queue``: executions by state (every
          state listed, zeros included), in total, per job and per queue.
        * ``due_backlog``: SCHEDULED and RETRY_WAIT executions with ``due_at <= at``
          (``due_at == at`` counts), not counting occurrences held by an overlap
          policy (``due_at >= fencepost.timing.planning.HELD``).
        * From the audit trail, transitions with ``at - window < t.at <= at``:
          ``claim_lateness`` over CLAIMED transitions (``t.at - due_at``, clamped at
          zero, against the execution's *current* ``due_at``: for a retried
          execution that is the latest attempt's due time, so earlier claims count
          as on time; a takeover is late by the time since the execution fell due),
          leaving out *throttled* claims: those of an execution with a throttle
          record (:meth:`throttled`) at or after its current ``due_at`` and no later
          than the claim, recorded in ``(at - 2 * window, at]`` (a limit or a paused
          queue held it on purpose; a paused queue's records are written when it
          is resumed, so one of its executions claimed in the window after a resume
          at or before ``at - 2 * window`` counts as late);
          ``stale_refused`` (STALE_REFUSED transitions); ``lease_expiries``
          (LEASE_EXPIRED transitions plus takeovers: CLAIMED from RUNNING).
        * ``throttled``: the throttle records with ``at - window < record <= at``,
          per scope (scopes without one left out): how many, and the seconds held.
        * ``errors``: the window's events by error class
          (:attr:`~fencepost.domain.reports.Stats.errors`, every class but RAN_LONG,
          zeros included): refused heartbeats, LEASE_EXPIRED and takeovers are
          ``renewal_failed``; the other refusals ``stale_completion_refused``;
          TIMED_OUT ``timed_out``; FAILED ``handler_failed``; the throttle records
          ``throttled``; first claims (``first_claimed_at`` in the window) more than
          ``DEFAULT_CLAIM_WITHIN`` after the planned time net of the held time,
          backfills and replays left out, ``late_claim``.

        * ``unserved``: :meth:`unserved`, read just after the figures above.

        Percentiles are nearest-rank (see :class:`~fencepost.domain.reports.Lateness`).
        Transitions of pruned executions are gone and not counted. ``window`` is
        seconds or a timedelta, > 0.
        """
        figures = self._stats(as_duration(window, field="window"))
        return replace(figures, unserved=self.unserved())

    @abstractmethod
    def _stats(self, window: timedelta) -> Stats:
        """Compute :meth:`stats` for a validated ``window``, all figures at one store now."""

    def unserved(self) -> Unserved:
        """Due work and schedules that no live process serves: what would wait forever.

        At the store's now ``at``:

        * ``due``: the due executions — SCHEDULED and RETRY_WAIT with ``due_at <=
          at``, held occurrences left out, exactly :meth:`stats`'s ``due_backlog`` —
          counted by ``(job, job_version)`` in one grouped query.
        * ``executions``: the groups no live node (:meth:`nodes`) serves. A node
          serves the ``(job, version)`` pairs it registered (``register_node(...,
          jobs=...)``); an execution pinned to version v is served by a node serving
          ``(job, v)``, an unpinned one by a node serving any version of its job —
          the rule :meth:`claim` applies to ``versions``. Queues and buckets are not
          considered (nodes do not record which queues they claim from; buckets no
          live node covers are :meth:`bucket_report`'s).
        * ``active_schedules``: schedules not paused whose ``next_due`` is not
          ``NEVER`` (a slot is still to come); ``schedulers``: the live nodes of kind
          ``"scheduler"`` (running materializers). While none lives, every active
          schedule is unserved (``Unserved.schedules``).

        The counts come from one read; the nodes from a second one just after it.
        """
        at, groups, active = self._due_groups()
        return unserved_work(at, groups, self.nodes(live_only=True), active)

    @abstractmethod
    def _due_groups(self) -> tuple[datetime, list[DueCount], int]:
        """One read at the store's now: that now, the due executions by ``(job,
        job_version)`` (zero counts left out, any order) and the active schedules
        (see :meth:`unserved`)."""

    def slo(self, **options: Unpack[SloOptions]) -> SloReport:
        """The service-level report at the store's now ``at``: both objectives over the
        window, each miss in its error class, the exclusions, the error budgets and
        their burn rates (see :mod:`fencepost.domain.slo` for every rule).

        * Counted: executions planned in ``[start, at]``
          (:func:`~fencepost.domain.slo.window_start`: ``at - window``, at a UTC
          midnight for a window of a day or more), not SKIPPED, not CANCELLED
          before a claim; each decided per objective, the undecided left out.
        * ``claimed``: the first claim at most ``claim_within`` after the planned
          time; ``finished``: the first SUCCEEDED or FAILED at most
          ``finish_within`` after it. ``share = met / total`` (None when 0);
          ``missed`` when below ``claim_target`` / ``finish_target``.
        * Budget: ``(1 - target) * total`` misses, ``consumed``, ``remaining``; burn
          rates over the last 1 h and 6 h (stored executions only).
        * Executions ``prune`` deleted count through its daily rollups when the
          objectives are the defaults (10 s, 5 min): the report equals the one taken
          before the prune.
        * ``worst``: up to ``worst`` stored executions by claim lateness, largest
          first (then planned time, then id).

        The options (:class:`~fencepost.domain.slo.SloOptions`), their defaults and
        bounds: ``window`` 30 days (> 0), ``claim_within`` 10 s and ``finish_within``
        5 min (>= 0; seconds or timedeltas), ``claim_target`` 0.99 and ``finish_target``
        0.999 (strictly between 0 and 1), ``worst`` 10 (0 to 10,000); else
        :class:`ValidationError` naming the option.
        """
        return self._slo(SloRequest(**slo_arguments(options)))

    @abstractmethod
    def _slo(self, request: SloRequest) -> SloReport:
        """Compute :meth:`slo` with validated arguments, at one store now."""

    def job_counts(
        self, *, window: float | timedelta = DEFAULT_JOB_COUNTS_WINDOW, job: str | None = None
    ) -> JobCounts:
        """The executions of each job created in ``(at - window, at]``, by current state.

        ``at`` is the store's now. Every state is listed for a job, zeros included;
        a job with no execution created in the window is left out. ``job`` restricts
        the counts to that job. One grouped query over the window's range of
        time-ordered ids (the primary key): the cost grows with the executions
        created in the window, not with the table. Ids are read from
        :data:`~fencepost.store.values.ID_CLOCK_SLACK` (5 minutes) before the
        window's start and ``created_at`` decides, so an execution whose submitter's
        clock ran more than that behind the store's is missed at the window's start.
        Pruned executions are gone and not counted. ``window`` is seconds or a
        timedelta, > 0.
        """
        return self._job_counts(
            as_duration(window, field="window"),
            None if job is None else require_name(job, "job", max_len=1024),
        )

    @abstractmethod
    def _job_counts(self, window: timedelta, job: str | None) -> JobCounts:
        """Compute :meth:`job_counts` for validated arguments, at one store now."""

"""The store contract, part two: nodes, reports, housekeeping and the operator's verbs."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.buckets import MAX_NUM_BUCKETS
from fencepost.domain.bulk import (
    DEFAULT_BATCH,
    Action,
    BulkResult,
    Deletion,
    DeletionPage,
    deletion_cursor,
)
from fencepost.domain.checks import MAX_ERROR_CHARS, require_int, require_name
from fencepost.domain.durations import as_aware_utc, as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.events import (
    ExecutionCancelled,
    ExecutionEvent,
    ExecutionReplayed,
    ExecutionRescheduled,
)
from fencepost.domain.models import Execution
from fencepost.domain.nodes import SCHEDULER, BucketReport, Node, Registration, ownership
from fencepost.domain.reports import (
    DueCount,
    JobCounts,
    SloReport,
    Stats,
    Unserved,
    unserved_work,
)
from fencepost.domain.slo import (
    DEFAULT_CLAIM_TARGET,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_TARGET,
    DEFAULT_FINISH_WITHIN,
    require_target,
)
from fencepost.domain.states import State
from fencepost.store import bulk
from fencepost.store.catalogue import CatalogueVerbs
from fencepost.store.values import (
    DEFAULT_JOB_COUNTS_WINDOW,
    DEFAULT_SLO_WINDOW,
    DEFAULT_STATS_WINDOW,
    DEFAULT_TTL,
    MAX_LIMIT,
    MAX_PRUNE_BATCH,
    PRUNE_YIELD_CAP,
    UNFINISHED_STATES,
    BucketsResized,
    default_node_id,
    states_of,
    versions_of,
)
from fencepost.store.verbs.reports import SloRequest


class OperatingVerbs(CatalogueVerbs):
    """Verbs of :class:`~fencepost.store.base.Store` for operating it (see their docstrings)."""

    # -- nodes -----------------------------------------------------------------------------

    def register_node(
        self,
        node_id: str | None = None,
        *,
        kind: str = "worker",
        buckets: Iterable[int] | None = None,
        ttl: float | timedelta = DEFAULT_TTL,
        jobs: Iterable[tuple[str, int]] = (),
    ) -> Node:
        """Register (or renew) a live node; call again before ``ttl`` runs out to stay live.

        ``node_id`` defaults to ``host:pid``. ``buckets`` are the buckets the node
        claims from (None: any). ``jobs`` are the ``(job, version)`` pairs it serves
        (a worker's; stored in the given order, repeats dropped), so the catalogue
        can say which live nodes serve each version
        (:func:`fencepost.domain.catalogue.served_by`), and work of those jobs
        submitted before they were published takes their defaults
        (:meth:`adopt_unpublished`). A renewal keeps
        ``started_at`` and replaces the declared buckets and jobs. The node is live
        while ``now < expires_at = now + ttl``.
        """
        try:
            served = tuple(dict.fromkeys(versions_of(jobs)))
        except ValidationError as exc:
            raise ValidationError("jobs", exc.message) from None
        node = self._register_node(
            Registration(
                node_id=require_name(
                    node_id if node_id is not None else default_node_id(), "node_id"
                ),
                kind=require_name(kind, "kind"),
                buckets=None if buckets is None else self._buckets(buckets),
                ttl=as_duration(ttl, field="ttl"),
                jobs=served,
            )
        )
        if served:
            # Work submitted by a process that had not yet seen the jobs published takes
            # their defaults within a heartbeat (one indexed read when none waits).
            self.adopt_unpublished({name for name, _ in served})
        return node

    @abstractmethod
    def _register_node(self, registration: Registration) -> Node:
        """Upsert a checked registration (see :meth:`register_node`)."""

    @abstractmethod
    def deregister_node(self, node_id: str) -> None:
        """Forget a node at once (a clean shutdown); unknown ids are ignored."""

    def clock_offset(self, written_at: datetime) -> float | None:
        """How far this process's clock is from the store's own record of a write, in seconds.

        ``written_at`` is the time this store's clock gave to a write that this
        process has just committed (a node registration's ``heartbeat_at``).
        Positive: this process's clock is ahead. None where this process's clock
        does not arbitrate leases: PostgreSQL uses the server's clock, and the
        memory store lives in one process. Workers refuse to reap or take over
        leases while the offset exceeds a lease length (see the README's clock rule).
        """
        return None

    @abstractmethod
    def nodes(self, *, live_only: bool = True) -> list[Node]:
        """Registered nodes by id: the live ones (by the store's clock) unless told otherwise."""

    def live_schedulers(self) -> list[Node]:
        """The live materializers, by id: live nodes of kind ``"scheduler"``.

        Every running :class:`~fencepost.scheduler.materializer.Materializer` (in
        ``fencepost serve``, ``fencepost worker --with-scheduler``, an ``App``'s)
        registers as one under its owner and renews it while it runs. None live means
        that no schedule fires: its slots wait until a materializer runs again.
        """
        return [n for n in self.nodes(live_only=True) if n.kind == SCHEDULER]

    def bucket_report(
        self, *, orphaned_after: float | timedelta = 300, limit: int = 1000
    ) -> BucketReport:
        """Buckets declared by two live workers, buckets no live worker covers, and orphans.

        Only nodes of kind ``"worker"`` own or cover buckets (a materializer claims
        nothing). Orphans are unfinished executions (SCHEDULED, RUNNING, RETRY_WAIT)
        in an unowned bucket whose row has not changed for ``orphaned_after``: work
        that nobody will pick up. At most ``limit`` of them, oldest change first.
        """
        # The count the store records now: another process may have resized it since
        # this one opened (this process's own count is then out of date).
        report = ownership(self.nodes(live_only=True), self._recorded_num_buckets())
        if not report.unowned:
            return report
        orphans = self._orphans(
            tuple(report.unowned),
            older_than=as_duration(orphaned_after, field="orphaned_after", allow_zero=True),
            limit=require_int(limit, "limit", low=1, high=MAX_LIMIT),
        )
        return replace(report, orphans=orphans)

    def _recorded_num_buckets(self) -> int:
        """The bucket count the store records now (this store's own, where none is)."""
        return self.config.num_buckets

    def resize_buckets(self, num_buckets: int, *, force: bool = False) -> BucketsResized:
        """Record a new bucket count, and move every unfinished execution to its bucket
        under it, in one transaction.

        Each SCHEDULED, RETRY_WAIT and RUNNING execution gets ``bucket_for(bucket_key
        or id, num_buckets)``: the bucket a submit under the new count gives it (a
        lease held keeps running; only its bucket changes). Finished executions keep
        the bucket they ran in; schedules carry none (an occurrence gets one when it
        is stored). No transition is recorded: no state changes. Every store opened
        afterwards runs with the new count (see :func:`fencepost.connect`), and so
        does this one.

        Other processes keep the count they opened with until they are restarted, and
        go on submitting and claiming by it. So while live nodes are registered
        (workers, services, materializers; a crashed one until its registration
        expires) a change of count is refused — :class:`ValidationError` on
        ``num_buckets`` naming them, nothing changed — unless ``force``: then it goes
        ahead and :attr:`~fencepost.store.values.BucketsResized.live_nodes` names
        them, to restart. A process that registers no node (a script that only
        submits) is not seen: restart it too.

        The count already recorded changes nothing recorded, and live nodes are no
        reason to refuse it; executions whose bucket does not match it (put there by a
        process with another count before counts were recorded) are moved.
        ``num_buckets`` is an int from 1 to 65536; ``force`` a bool; else
        :class:`ValidationError`, before anything is written. On the memory store
        the count lives and dies with the store.
        """
        count = require_int(num_buckets, "num_buckets", low=1, high=MAX_NUM_BUCKETS)
        if not isinstance(force, bool):
            raise ValidationError("force", f"must be True or False, got {force!r}")
        resized = self._resize_buckets(count, force=force)
        self.config = replace(self.config, num_buckets=count)
        return resized

    @abstractmethod
    def _resize_buckets(self, num_buckets: int, *, force: bool) -> BucketsResized:
        """:meth:`resize_buckets` with checked arguments, in one transaction: refuse while
        live nodes are registered and the count changes, unless ``force``
        (:func:`~fencepost.store.values.live_nodes_refusal`); move the unfinished
        executions (:func:`~fencepost.store.values.rebucketed`); record the count."""

    @abstractmethod
    def _orphans(
        self, buckets: tuple[int, ...], *, older_than: timedelta, limit: int
    ) -> list[Execution]:
        """Unfinished executions in ``buckets`` with ``updated_at <= now - older_than``."""

    # -- reports ---------------------------------------------------------------------

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

    def slo(
        self,
        *,
        window: float | timedelta = DEFAULT_SLO_WINDOW,
        claim_within: float | timedelta = DEFAULT_CLAIM_WITHIN,
        finish_within: float | timedelta = DEFAULT_FINISH_WITHIN,
        claim_target: float = DEFAULT_CLAIM_TARGET,
        finish_target: float = DEFAULT_FINISH_TARGET,
        worst: int = 10,
    ) -> SloReport:
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

        ``window`` > 0, ``claim_within`` and ``finish_within`` >= 0 (seconds or
        timedeltas), targets strictly between 0 and 1, ``0 <= worst <= 10000``; else
        :class:`ValidationError` naming the argument.
        """
        return self._slo(
            SloRequest(
                window=as_duration(window, field="window"),
                claim_within=as_duration(claim_within, field="claim_within", allow_zero=True),
                finish_within=as_duration(finish_within, field="finish_within", allow_zero=True),
                claim_target=require_target(claim_target, "claim_target"),
                finish_target=require_target(finish_target, "finish_target"),
                worst=require_int(worst, "worst", low=0, high=MAX_LIMIT),
            )
        )

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

    # -- housekeeping ----------------------------------------------------------------

    def prune(
        self,
        *,
        older_than: float | timedelta,
        batch: int = 1000,
        dry_run: bool = False,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Delete finished executions last changed at least ``older_than`` ago; return how many.

        Eligible: SUCCEEDED, FAILED, CANCELLED or SKIPPED executions with
        ``updated_at <= cutoff``, where ``cutoff`` is the store's now when the call
        starts minus ``older_than`` (fixed for the whole call, so a prune ends even
        while workers keep finishing executions). Each goes with its audit trail,
        its payload row and its commands; afterwards :meth:`get`,
        :meth:`transitions` and :meth:`commands` raise :class:`NotFound` for it.

        On PostgreSQL, whole days of history whose executions all qualify are
        detached and dropped first (see ``fencepost.store.postgres.history``); then,
        and elsewhere, rows are deleted oldest first (by ``updated_at``; on SQLite by
        creation, walking the time-ordered ids), in batches of at most ``batch``, each
        batch its own short transaction: claims and completions carry on between
        (and, on PostgreSQL, beside) them. After each full batch the call pauses
        as long as the batch took (at most 0.1 s), so that writers waiting for
        SQLite's lock get it. On PostgreSQL, rows a concurrent
        transaction holds (a replay) are skipped and left for a later prune; a
        replay that comes second finds the execution gone (:class:`NotFound`).
        Throttle records at or before the cutoff go too, with the token buckets of
        keys that are full again (a missing bucket is a full one), and the records of
        executions deleted at or before it (:meth:`deletions`).
        First, the history charts' roll-up reads every execution finished at or
        before the cutoff (:meth:`roll_up_history`, in batches), so the charts keep
        counting what prune deletes; last, minute rows older than
        :data:`~fencepost.domain.history.RETENTION` (8 days) go.
        ``on_batch(deleted_so_far)`` is called after each batch that deleted
        something; if it raises, the batches already done stay done. The call ends
        after a batch deletes fewer than ``batch``.

        ``dry_run=True`` deletes nothing and returns how many are eligible (one
        count; ``on_batch`` is not called). ``older_than`` is seconds or a
        timedelta, >= 0; ``1 <= batch <= 100000``; else :class:`ValidationError`.
        """
        age = as_duration(older_than, field="older_than", allow_zero=True)
        size = require_int(batch, "batch", low=1, high=MAX_PRUNE_BATCH)
        if on_batch is not None and not callable(on_batch):
            raise ValidationError("on_batch", f"must be callable, got {on_batch!r}")
        cutoff = self._store_now() - age
        if dry_run:
            return self._count_prunable(cutoff)
        self._roll_up_before_prune(cutoff)
        total = self._prune_whole(cutoff, on_batch)
        while True:
            started = time.monotonic()
            deleted = self._prune_batch(cutoff, size)
            total += deleted
            if deleted and on_batch is not None:
                on_batch(total)
            if deleted < size:
                self._prune_flow(cutoff)
                self._prune_deletions(cutoff)
                self._prune_history_rows(cutoff + age)
                return total
            # Step aside as long as the batch took: a claim waiting for SQLite's write
            # lock polls with growing sleeps and would otherwise find the next batch
            # holding it again and again. bench/prune_under_load.py: claim p99 during
            # a 1,000,000-execution prune 130 ms without the pause, 21 ms with it.
            time.sleep(min(PRUNE_YIELD_CAP, time.monotonic() - started))

    @abstractmethod
    def _roll_up_before_prune(self, cutoff: datetime) -> None:
        """Roll the history charts up through ``cutoff`` (store.history.HistoryVerbs)."""

    @abstractmethod
    def _prune_history_rows(self, now: datetime) -> None:
        """Delete the charts' minute rows past their retention (store.history.HistoryVerbs)."""

    @abstractmethod
    def _prune_flow(self, cutoff: datetime) -> None:
        """With a prune: delete throttle records at or before ``cutoff``, and the token
        buckets that are full again and held nothing back since (see store.flow)."""

    @abstractmethod
    def _store_now(self) -> datetime:
        """The store's now (on PostgreSQL the server's clock unless a test pins it)."""

    @abstractmethod
    def _count_prunable(self, cutoff: datetime) -> int:
        """How many finished executions have ``updated_at <= cutoff``."""

    def _prune_whole(self, cutoff: datetime, on_batch: Callable[[int], None] | None) -> int:
        """Drop whole stretches of prunable history at once, where the backend keeps
        history in partitions (PostgreSQL); return how many executions went.

        Called before the row-by-row batches, which then delete only the edges.
        """
        return 0

    @abstractmethod
    def _prune_batch(self, cutoff: datetime, batch: int) -> int:
        """Delete up to ``batch`` prunable executions (oldest first) in one transaction.

        With each: its transitions, its ``execution_data`` row and its commands.
        Returns how many executions were deleted.
        """

    # -- operator verbs --------------------------------------------------------------

    def cancel(self, execution_id: str, *, actor: str = "client") -> Execution:
        """Cancel an execution that has not started: SCHEDULED/RETRY_WAIT -> CANCELLED.

        Raises :class:`NotFound`, or :class:`InvalidTransition` in any other state.
        """
        return self._transition(execution_id, self._cancelled(actor))

    @staticmethod
    def _cancelled(actor: str) -> ExecutionEvent:
        """:meth:`cancel`'s event, its argument validated."""
        return ExecutionCancelled(actor=require_name(actor, "actor"))

    def replay(self, execution_id: str, *, actor: str = "operator") -> Execution:
        """Revive a dead letter: FAILED -> SCHEDULED, due now, with a fresh attempt budget.

        Same execution id; the epoch keeps increasing. The audit records ``actor``.
        Raises :class:`NotFound`, or :class:`InvalidTransition` if not FAILED.
        """
        return self._transition(execution_id, self._replayed(actor))

    @staticmethod
    def _replayed(actor: str) -> ExecutionEvent:
        """:meth:`replay`'s event, its argument validated."""
        return ExecutionReplayed(actor=require_name(actor, "actor"))

    def reschedule(
        self,
        execution_id: str,
        due_at: datetime,
        *,
        actor: str = "scheduler",
        reason: str = "rescheduled",
    ) -> Execution:
        """Move a waiting execution's ``due_at`` (audited as RESCHEDULED with ``reason``).

        What an overlap policy uses to release a held occurrence (SCHEDULED), and a
        retry now (:meth:`act`) to make a SCHEDULED or RETRY_WAIT execution due at
        once. Raises :class:`NotFound`, or :class:`InvalidTransition` in any other state.
        """
        return self._transition(execution_id, self._rescheduled(due_at, actor, reason))

    @staticmethod
    def _rescheduled(due_at: datetime, actor: str, reason: str) -> ExecutionEvent:
        """:meth:`reschedule`'s event, its arguments validated."""
        return ExecutionRescheduled(
            due_at=as_aware_utc(due_at, field="due_at"),
            actor=require_name(actor, "actor"),
            reason=require_name(reason, "reason", max_len=MAX_ERROR_CHARS),
        )

    @abstractmethod
    def _transition(self, execution_id: str, event: ExecutionEvent) -> Execution:
        """Apply a caller's event (cancel, replay, reschedule) to one execution, in one
        transaction, through :func:`fencepost.domain.machine.apply` (which refuses what
        the state machine does not allow)."""

    # -- acting on many --------------------------------------------------------------------

    #: Executions a bulk action (:meth:`act`) changes per transaction. Where writers
    #: proceed side by side (PostgreSQL) a claim skips the rows a group holds.
    bulk_group = 50
    #: The pause after each such group is as long as the group took, as prune's between
    #: its batches, and at least this long.
    bulk_pause = 0.0

    def act(
        self,
        action: Action | str,
        *,
        ids: Iterable[str] | None = None,
        filter: Mapping[str, Any] | None = None,
        actor: str,
        dry_run: bool = False,
        limit: int = DEFAULT_BATCH,
        after: str | None = None,
    ) -> BulkResult:
        """Apply ``action`` to one batch of executions, named by ``ids`` or matching ``filter``.

        The actions (:class:`~fencepost.domain.bulk.Action`, or their values) and whom
        each applies to: ``replay`` FAILED executions (as :meth:`replay`);
        ``cancel`` SCHEDULED and RETRY_WAIT ones at once and RUNNING ones by a cancel
        command (as :meth:`request`); ``retry_now`` SCHEDULED and RETRY_WAIT ones due
        after now, whose ``due_at`` becomes now (as :meth:`reschedule`, reason
        ``retry now``; an occurrence an overlap policy holds is left to its policy);
        ``delete`` SUCCEEDED, FAILED, CANCELLED and SKIPPED ones (as :meth:`delete`).
        Each execution acted on gets its own audit record naming ``actor`` (a
        transition, a command, or a :class:`~fencepost.domain.bulk.Deletion`).

        The selection: exactly one of ``ids`` (1 to 10,000 execution ids) and
        ``filter`` (:meth:`query`'s filter arguments as a mapping, ``{}`` for every
        execution; an unknown key is a :class:`ValidationError` on ``filter.<key>``,
        and so is a bad value). A batch takes at most ``limit`` (1 to 10,000) of the
        selection in id order, ids strictly after ``after``; the caller repeats with
        the result's ``next_cursor`` until it is None. A filtered batch reads only
        executions the action may apply to (its states, and for a retry now a due time
        after now): ``matched`` counts those.

        Each execution is checked again and changed in a short transaction of a few
        executions (never one long write over the batch), so claims go on between
        them; one that the action does not apply to, that changed meanwhile, or (by
        id) that does not exist is ``skipped``, never an error.

        ``dry_run=True`` writes nothing: ``matched`` is how many executions of the
        whole selection the action applies to now, and ``preview`` the first 20 of
        them after ``after``, in id order. Bad arguments raise :class:`ValidationError`
        naming the field before anything is written.
        """
        return bulk.act(
            self,  # type: ignore[arg-type]  # a Store: OperatingVerbs is one of its parts
            action,
            ids=ids,
            filter=filter,
            actor=actor,
            dry_run=dry_run,
            limit=limit,
            after=after,
        )

    def _act_group(
        self, action: Action, execution_ids: Sequence[str], actor: str, now: datetime
    ) -> list[str]:
        """Apply ``action`` to a few executions (one short transaction where the backend
        can); return the ids it was applied to, skipping the others. ``now``: the
        store's now when the batch began (a backend may read its own instead).

        Here, one verb call per execution (each its own transaction); the SQL stores
        change a group in one transaction, each execution checked under its lock.
        """
        return bulk.one_by_one(self, action, execution_ids, actor, now)  # type: ignore[arg-type]

    def delete(self, execution_id: str, *, actor: str) -> Deletion:
        """Delete a finished execution and every row of it, in one transaction.

        Only SUCCEEDED, FAILED, CANCELLED or SKIPPED executions (else
        :class:`InvalidTransition`; unknown ids :class:`NotFound`). Its audit trail,
        payloads, commands, idempotency key and throttle records go with it, as
        :meth:`prune` deletes them (its service-level verdicts are rolled up first,
        so the SLO report does not change); afterwards :meth:`get`,
        :meth:`transitions` and :meth:`commands` raise :class:`NotFound`. What is
        left is a :class:`~fencepost.domain.bulk.Deletion` naming ``actor``
        (returned, and listed by :meth:`deletions` until :meth:`prune` removes
        records older than its cutoff).
        """
        if not isinstance(execution_id, str):
            raise ValidationError("execution_id", f"must be a string, got {execution_id!r}")
        return self._delete(execution_id, require_name(actor, "actor"))

    @abstractmethod
    def _delete(self, execution_id: str, actor: str) -> Deletion:
        """Delete a finished execution (checked ``actor``; see :meth:`delete`), or raise."""

    def deletions(self, *, limit: int = 100, after: str | None = None) -> DeletionPage:
        """Records of deleted executions (:meth:`delete`), oldest first.

        At most ``limit`` (1 to 10,000); ``after`` is the ``next_cursor`` of the
        previous page (else a :class:`ValidationError` on ``after``).
        """
        count = require_int(limit, "limit", low=1, high=MAX_LIMIT)
        return self._deletions(count, None if after is None else deletion_cursor(after))

    @abstractmethod
    def _deletions(self, limit: int, after: int | None) -> DeletionPage:
        """At most ``limit`` deletion records after the one numbered ``after``, in order."""

    @abstractmethod
    def _prune_deletions(self, cutoff: datetime) -> None:
        """With a prune: delete the deletion records made at or before ``cutoff``."""

"""The store contract, part two: nodes, housekeeping and the operator's verbs."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Unpack

from fencepost.domain.buckets import MAX_NUM_BUCKETS
from fencepost.domain.bulk import (
    Action,
    ActOptions,
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
from fencepost.store import bulk
from fencepost.store.catalogue import CatalogueVerbs
from fencepost.store.values import (
    DEFAULT_TTL,
    MAX_LIMIT,
    MAX_PRUNE_BATCH,
    PRUNE_YIELD_CAP,
    BucketsResized,
    default_node_id,
    versions_of,
)


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

    def act(self, action: Action | str, *, actor: str, **options: Unpack[ActOptions]) -> BulkResult:
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
        # a Store: OperatingVerbs is one of its parts
        return bulk.act(self, action, actor=actor, options=options)  # type: ignore[arg-type]

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

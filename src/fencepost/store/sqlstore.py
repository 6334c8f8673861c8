"""The base of the SQL backends: each verb once, as a plan, on a dialect's hooks.

The verbs' plans are in :mod:`fencepost.store.verbs`, one module a section of the
contract (``sql_reading``, ``sql_leasing``, ``sql_outcomes``, ``sql_materializing``,
...), built from sub-plans (``_get_steps``, ``_now_steps``,
``sql_changes.persist_steps``, ...); a verb here makes its plan and runs it with
:meth:`~fencepost.store.dialect.SqlDialect._run` on the store's own connection (an
AsyncStore runs the same plan on its own executor). What a dialect is, and nothing
that decides, is declared in :mod:`fencepost.store.dialect`: its SQL (both ``.sql``
files use the same names for the same statement), connections and clock, binding,
capabilities and the audit of a refused fenced call. Row locks are block names too:
``lock_execution``, ``lock_schedule`` and ``share_schedule`` lock a row on
PostgreSQL; on SQLite the write transaction already holds the whole file, so its
dialect maps them to the plain reads.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

from fencepost.domain.bulk import Action, Deletion, DeletionPage
from fencepost.domain.catalogue import JobEntry
from fencepost.domain.errors import (
    NotFound,
    StaleLease,
)
from fencepost.domain.events import (
    ExecutionEvent,
    LeaseExpired,
)
from fencepost.domain.history import RollUp, SummaryBy, Totals, Window
from fencepost.domain.limits import Limit
from fencepost.domain.machine import Change, apply, holds
from fencepost.domain.models import (
    Command,
    Execution,
    Fence,
    Lease,
    Page,
    Schedule,
    SchedulePage,
    Transition,
)
from fencepost.domain.nodes import Node, Registration
from fencepost.domain.reports import DueCount, JobCounts, SloReport, Stats
from fencepost.domain.schedules import NewOccurrence, ScheduleSpec
from fencepost.domain.states import CommandKind, State
from fencepost.store import sqlflow, sqlhistory
from fencepost.store.base import Store
from fencepost.store.dialect import SqlDialect
from fencepost.store.executors import Plan, Statement, Steps, run
from fencepost.store.flow import (
    FlowChange,
    FlowView,
    Throttle,
    ThrottleCount,
    applying,
    claim_limited,
)
from fencepost.store.values import (
    BucketsResized,
    ClaimArguments,
    Decide,
    ExecutionFilter,
    Materialization,
    Outcome,
    ScheduleFilter,
    result_refused,
)
from fencepost.store.verbs import (
    sql_bulk,
    sql_catalogue,
    sql_changes,
    sql_commands,
    sql_leasing,
    sql_materializing,
    sql_operating,
    sql_outcomes,
    sql_reading,
    sql_reports,
    sql_schedules,
)
from fencepost.store.verbs.reports import SloRequest

T = TypeVar("T")


class SqlStore(Store, SqlDialect):
    """The verbs both SQL backends share; a dialect subclasses it (see the module doc)."""

    #: This process's view of the limits, read again at most once a second (set by the
    #: dialect as it connects).
    _flow_view: FlowView

    # -- reading ---------------------------------------------------------------------------

    def _run_read(self, plan: Callable[[], Plan[T]], what: str) -> T:
        """A read-only verb: its plan, made afresh for each attempt, run (see _retried)."""
        return self._retried(lambda again: self._run(plan()), what)

    def get(self, execution_id: str) -> Execution:
        return self._run_read(lambda: self._get_plan(execution_id), "get")

    def _get_plan(self, execution_id: str) -> Plan[Execution]:
        """``Store.get`` as a plan (a dialect may wrap it: PostgreSQL's prune window)."""
        return sql_reading.get_plan(self, execution_id)

    def _get(self, conn: Any, execution_id: str, *, lock: bool = False) -> Execution:
        """The execution (held by this transaction with ``lock``), or :class:`NotFound`."""
        return run(self._get_steps(execution_id, lock=lock), self._executor(conn))

    def _get_steps(self, execution_id: str, *, lock: bool = False) -> Steps[Execution]:
        """:meth:`_get` as steps of a plan."""
        if not self._can_name(execution_id):
            raise NotFound(execution_id)
        query = self._q("lock_execution" if lock else "get_execution")
        row = yield Statement(query, {"id": execution_id}, "one")
        if row is None:
            raise NotFound(execution_id)
        return self.rows.execution(row)

    def _find(self, idempotency_key: str) -> Execution | None:
        return self._run_read(lambda: sql_reading.find_plan(self, idempotency_key), "find")

    def _query(self, filters: ExecutionFilter) -> Page:
        return self._run_read(lambda: self._query_plan(filters), "query")

    def _query_plan(self, filters: ExecutionFilter) -> Plan[Page]:
        """``Store.query`` as a plan (a dialect may answer some without a round trip:
        PostgreSQL, a cursor that is no UUID)."""
        return sql_reading.query_plan(self, filters)

    def _count_by_state(self, filters: ExecutionFilter) -> dict[State, int]:
        return self._run_read(
            lambda: sql_reading.count_by_state_plan(self, filters), "count_by_state"
        )

    def transitions(self, execution_id: str) -> list[Transition]:
        return self._run_read(
            lambda: sql_reading.transitions_plan(self, execution_id), "transitions"
        )

    def commands(self, execution_id: str) -> list[Command]:
        return self._run(sql_reading.commands_plan(self, execution_id))

    # -- leasing ---------------------------------------------------------------------------

    # -- flow control (see store.flow and store.sqlflow) ------------------------------------

    def _set_limit(self, limit: Limit) -> Limit:
        return self._run(sqlflow.set_limit_plan(self, limit))

    def _read_limits(self) -> list[Limit]:
        return self._run_read(lambda: sqlflow.read_limits_plan(self), "limits")

    def _remove_limit(self, scope: str, actor: str) -> bool:
        return self._run(sqlflow.remove_limit_plan(self, scope, actor))

    def _pause_queue(self, queue: str, actor: str, paused: bool) -> Limit:
        return self._run(sqlflow.pause_plan(self, queue, actor, paused))

    def _declare_limits(self, limits: Sequence[Limit]) -> None:
        self._run(sqlflow.declare_plan(self, limits))

    def _flow_changes(self, limit: int) -> list[FlowChange]:
        return self._run_read(lambda: sqlflow.changes_plan(self, limit), "flow_changes")

    def _throttled(self, window: timedelta | None) -> list[ThrottleCount]:
        return self._run_read(lambda: sqlflow.throttled_plan(self, window), "throttled")

    def _throttles_of(self, execution_id: str) -> list[Throttle]:
        return self._run_read(lambda: sqlflow.throttles_plan(self, execution_id), "throttles")

    def _flow_candidates(
        self, conn: Any, params: dict[str, Any], request: ClaimArguments
    ) -> list[tuple[Any, ...]]:
        """The rows of ``flow_candidates`` for a limited claim (a dialect may ask in parts)."""
        return list(
            run(
                sqlflow.fetched(Statement(self._text(conn, "flow_candidates"), params, "all")),
                self._executor(conn),
            )
        )

    def _prune_flow(self, cutoff: datetime) -> None:
        self._run(sqlflow.prune_plan(self, cutoff))

    @abstractmethod
    def _write_flow(
        self,
        conn: Any,
        buckets: Sequence[tuple[str, str, float, datetime, datetime, datetime | None]],
        throttles: Sequence[Throttle],
    ) -> None:
        """Store a limited claim's buckets (upsert, with their ``ready_at``) and throttle
        records, in its transaction."""

    # -- changes through the state machine -----------------------------------------------

    def _persist(self, conn: Any, change: Change, now: datetime) -> None:
        """Write a change decided by the state machine, with its audit transition."""
        run(sql_changes.persist_steps(self, change, now), self._executor(conn))

    def _transition(self, execution_id: str, event: ExecutionEvent) -> Execution:
        return self._run(self._transition_plan(execution_id, event))

    def _transition_plan(self, execution_id: str, event: ExecutionEvent) -> Plan[Execution]:
        """:meth:`_transition` as a plan."""

        def steps() -> Steps[Execution]:
            now = yield from self._now_steps()
            change = apply((yield from self._get_steps(execution_id, lock=True)), event, now)
            yield from sql_changes.persist_steps(self, change, now)
            return change.execution

        return Plan(steps())

    def _fenced_apply(
        self,
        conn: Any,
        fence: Fence,
        verb: str,
        decide: Decide,
        now: datetime,
        *,
        again: bool = False,
    ) -> Execution | StaleLease:
        """:meth:`_fenced_apply_steps` on ``conn``, in the caller's transaction."""
        steps = self._fenced_apply_steps(fence, verb, decide, now, again=again)
        return run(steps, self._executor(conn))

    def _fenced_apply_steps(
        self, fence: Fence, verb: str, decide: Decide, now: datetime, *, again: bool = False
    ) -> Steps[Execution | StaleLease]:
        """Hold the row, check the fence, apply the decided event, as steps of a plan.

        ``again``: an earlier attempt of this same call may have committed (its
        connection was lost during COMMIT). If the fence no longer holds because that
        attempt ended the lease, the execution it left is returned, not a refusal.
        """
        try:
            current = yield from self._get_steps(fence.execution_id, lock=True)
        except NotFound:
            return sql_changes.stale(fence)
        if not holds(current, fence.owner, fence.epoch, now):
            if again and (yield from self._ended_steps([fence], sql_changes.ENDED_BY[verb])):
                return current  # the row is held: as the earlier attempt left it
            yield from self._refuse_steps([fence], verb, self._t(now), again=again)
            return sql_changes.stale(fence)
        change = apply(current, decide(current, now), now)
        yield from sql_changes.persist_steps(self, change, now)
        return change.execution

    def _fail_invalid_steps(
        self, outcome: Outcome, now: datetime, *, again: bool = False
    ) -> Steps[StaleLease | None]:
        """Fail an execution whose result was refused: permanently, through the machine
        (``again``: see :meth:`_fenced_apply_steps`)."""
        assert outcome.invalid is not None
        decide = result_refused(outcome.lease, outcome.invalid)
        done = yield from self._fenced_apply_steps(
            outcome.lease, "complete", decide, now, again=again
        )
        return done if isinstance(done, StaleLease) else None

    def _fenced_change(self, fence: Fence, verb: str, decide: Decide) -> Execution:
        def attempt(again: bool) -> Execution:
            with self._write() as conn:
                now = self._tx_now(conn)
                outcome = self._fenced_apply(conn, fence, verb, decide, now, again=again)
            if isinstance(outcome, StaleLease):
                raise outcome
            return outcome

        return self._retried(attempt, verb)

    # -- leasing ---------------------------------------------------------------------------

    def _claim(self, request: ClaimArguments) -> list[Lease]:
        if request.ids is not None:
            ids = tuple(i for i in request.ids if self._can_name(i))  # others name no row
            if not ids:
                return []
            request = replace(request, ids=ids)
        # A claim is retried only when it failed before a statement reached the server
        # (no connection could be had). After that its outcome is unknown: it may have
        # leased rows and lost the answer. Claiming again would lease other rows on top;
        # the lost leases simply expire (their ttl) and are claimed again, as any
        # abandoned lease is. So the caller gets StoreUnavailable.
        #
        # Whether any limit could hold this claim: this process's view, read again at
        # most once a second (a limit set elsewhere holds within that second; set
        # through this store, at once). Reading the limits in every claim cost a plain
        # claim of one execution 3-5%. A limited claim reads them again, in its
        # transaction.
        if applying(self._flow_view.get(self._read_limits), request):
            leases, self._flow_wait = self._retried(
                lambda again: self._claim_limited(request), "claim", only_unsent=True
            )
            return leases
        self._flow_wait = None
        leases, unreadable = self._retried(
            lambda again: self._run(sql_leasing.claim_plan(self, request)),
            "claim",
            only_unsent=True,
        )
        if not unreadable:
            return leases
        # Set aside in a transaction of its own (the claim may have run in autocommit):
        # a crash in between leaves only those leases to expire, and the next claim to
        # take them sets them aside. The rest of the batch is delivered either way.
        return self._run(sql_leasing.set_aside_plan(self, leases, unreadable))

    def _claim_limited(self, request: ClaimArguments) -> tuple[list[Lease], float | None]:
        """A claim some limit or paused queue may hold (see store.flow): one transaction
        that holds the limits, reads their state, chooses, leases and spends; with the
        seconds until a rate that held work back has a token again."""
        with self._write() as conn:
            now: datetime | None = None
            if self._now_after_lock:
                # The process's clock, read once the write lock is held, and checked.
                now = self._tx_now(conn)
                if not self._may_judge_leases(now):
                    return [], None
            # Else the limits are locked first, and now read after (by flow.state): a
            # claim that waited for another must not stamp its starts earlier.
            flow = sqlflow.SqlFlow(self, conn, now, self._lease_in)
            limits = applying(flow.locked_limits(), request)
            if not limits:  # removed since this process last looked
                now = self._tx_now(conn) if now is None else now
                return self._lease_in(conn, request, now), None
            return claim_limited(flow, request, limits)

    def _lease_in(self, conn: Any, request: ClaimArguments, now: datetime) -> list[Lease]:
        """Claim in the caller's transaction at ``now`` (a limited claim's lease of the
        executions it chose), setting aside those whose inputs cannot be read."""
        text = ""  # only where one statement claims, and then the text for ``conn``
        if self._claims_in_one_statement:
            text = self._text(conn, sql_leasing.claim_block(request))
        execute = self._executor(conn)
        leases, unreadable = run(sql_leasing.lease_steps(self, request, now, text), execute)
        if not unreadable:
            return leases
        return run(sql_leasing.set_aside_steps(self, leases, unreadable, now), execute)

    def _heartbeat(
        self, beats: Sequence[tuple[Fence, str | None]], *, ttl: timedelta
    ) -> list[datetime | StaleLease]:
        # Retried as it is after a lost connection: a heartbeat that had committed
        # only extends the same lease again (never earlier than promised), and one
        # whose lease ended meanwhile is refused, as it would have been.
        def attempt(again: bool) -> list[datetime | StaleLease]:
            return self._run(sql_leasing.heartbeat_plan(self, beats, ttl=ttl, again=again))

        return self._retried(attempt, "heartbeat")

    # -- outcomes ----------------------------------------------------------------------

    def _complete(self, outcomes: Sequence[Outcome]) -> list[StaleLease | None]:
        # Retried after a lost connection: a completion the earlier attempt committed
        # is recognised as its own (see sql_outcomes.complete_plan).
        def attempt(again: bool) -> list[StaleLease | None]:
            return self._run(sql_outcomes.complete_plan(self, outcomes, again=again))

        return self._retried(attempt, "complete")

    def _complete_one(self, outcome: Outcome) -> Execution:
        def attempt(again: bool) -> Execution | StaleLease:
            return self._run(sql_outcomes.complete_one_plan(self, outcome, again=again))

        done = self._retried(attempt, "complete")
        if isinstance(done, StaleLease):
            raise done  # after its audit committed
        return done

    def _reap_expired(self, *, limit: int) -> int:
        with self._write() as conn:
            now = self._tx_now(conn)
            if not self._may_judge_leases(now):
                return 0
            expired = conn.execute(
                self._q("expired_leases"), {"now": self._t(now), "limit": limit}
            ).fetchall()
            for row in expired:
                current = self.rows.execution(row)
                # Due as it was: claimable now, in the order a takeover would have it.
                event = LeaseExpired(retry_at=current.due_at)
                self._persist(conn, apply(current, event, now), now)
        return len(expired)

    def _may_judge_leases(self, now: datetime) -> bool:
        """Whether ``now``, read inside a claim's or reap's transaction, may decide which
        leases have expired. Always, where the database's clock decides (PostgreSQL);
        SQLite, where each process's clock does, checks that clock first."""
        return True

    # -- commands --------------------------------------------------------------------------

    def _request(
        self, execution_id: str, kind: CommandKind, *, actor: str, command_id: str
    ) -> Command:
        return self._run(
            sql_commands.request_plan(self, execution_id, kind, actor=actor, command_id=command_id)
        )

    def _claim_commands(
        self, owner: str, execution_ids: tuple[str, ...], *, ttl: timedelta, limit: int
    ) -> list[Command]:
        return self._run(
            sql_commands.claim_commands_plan(self, owner, execution_ids, ttl=ttl, limit=limit)
        )

    def _complete_command(self, command: Command, lease: Fence) -> Command | None:
        return self._run(sql_commands.complete_command_plan(self, command, lease))

    def _release_command(self, command: Command) -> None:
        self._run(sql_commands.release_command_plan(self, command))

    # -- acting on many and deleting (see store.bulk) ---------------------------------------

    def _act_group(
        self, action: Action, execution_ids: Sequence[str], actor: str, now: datetime
    ) -> list[str]:
        return self._run(sql_bulk.act_group_plan(self, action, execution_ids, actor))

    def _delete(self, execution_id: str, actor: str) -> Deletion:
        return self._run(sql_bulk.delete_plan(self, execution_id, actor))

    @abstractmethod
    def _delete_steps(self, current: Execution, actor: str, now: datetime) -> Steps[Deletion]:
        """Delete ``current`` (finished, held by this transaction) and every row of it, as
        prune deletes one (its verdicts rolled up first), its throttle records too, and
        record the deletion by ``actor`` at ``now``; return the record."""

    def _deletions(self, limit: int, after: int | None) -> DeletionPage:
        return self._run_read(lambda: sql_bulk.deletions_plan(self, limit, after), "deletions")

    def _prune_deletions(self, cutoff: datetime) -> None:
        with self._write() as conn:
            conn.execute(self._q("prune_deletions"), {"cutoff": self._t(cutoff)})

    # -- nodes and reports -----------------------------------------------------------------

    def deregister_node(self, node_id: str) -> None:
        self._run(sql_operating.deregister_node_plan(self, node_id))

    def _count_prunable(self, cutoff: datetime) -> int:
        return self._run_read(lambda: sql_operating.count_prunable_plan(self, cutoff), "prune")

    #: Where this store's prune stopped: its cutoff and the last id of its last full
    #: batch, on a dialect that walks ids (see sql_operating.prune_batch_plan).
    _prune_cursor: tuple[datetime | None, str] = (None, "")

    def _prune_batch(self, cutoff: datetime, batch: int) -> int:
        after = self._prune_cursor[1] if self._prune_cursor[0] == cutoff else ""
        plan = sql_operating.prune_batch_plan(self, cutoff, batch, after=after)
        deleted, last = self._run(plan)
        # A short batch ends the prune call (Store.prune stops there): the next call,
        # even with the same cutoff, walks from the start again. Set once committed:
        # a batch that failed is walked again.
        self._prune_cursor = (None, "") if last is None else (cutoff, last)
        return deleted

    def _resize_buckets(self, num_buckets: int, *, force: bool) -> BucketsResized:
        return self._run(sql_operating.resize_buckets_plan(self, num_buckets, force=force))

    def _register_node(self, r: Registration) -> Node:
        return self._run(sql_operating.register_node_plan(self, r))

    def nodes(self, *, live_only: bool = True) -> list[Node]:
        return self._run(sql_operating.nodes_plan(self, live_only=live_only))

    def _orphans(
        self, buckets: tuple[int, ...], *, older_than: timedelta, limit: int
    ) -> list[Execution]:
        return self._run(
            sql_operating.orphans_plan(self, buckets, older_than=older_than, limit=limit)
        )

    def _recorded_num_buckets(self) -> int:
        return self._run(sql_operating.recorded_num_buckets_plan(self))

    def _store_now(self) -> datetime:
        return self._run(Plan(self._now_steps(), atomic=False))

    def _bucket_counts(self, states: tuple[State, ...]) -> dict[int, int]:
        return self._run(sql_reports.bucket_counts_plan(self, states))

    def _stats(self, window: timedelta) -> Stats:
        return self._run(sql_reports.stats_plan(self, window))

    def _due_groups(self) -> tuple[datetime, list[DueCount], int]:
        return self._run_read(lambda: sql_reports.due_groups_plan(self), "unserved")

    def _job_counts(self, window: timedelta, job: str | None) -> JobCounts:
        with self._read() as conn:
            return run(sql_reports.job_counts_steps(self, window, job), self._executor(conn))

    def _slo(self, request: SloRequest) -> SloReport:
        # One snapshot: the counts, the offenders and the rollups agree (a prune that
        # commits in between moves rows into rollups, which a later read would count
        # twice or not at all).
        with self._snapshot() as conn:
            return run(sql_reports.slo_steps(self, request), self._executor(conn))

    # -- the history charts (see store.sqlhistory) --------------------------------------

    def _roll_up_history(self, max_rows: int, *, wait: bool) -> RollUp:
        # Retried after a lost connection: the retry reads the watermark again, so a
        # roll-up whose COMMIT went through is never added twice.
        return self._retried(
            lambda again: self._run(sqlhistory.roll_up_plan(self, max_rows, wait=wait)),
            "roll_up_history",
        )

    def _history_sums(
        self, window: Window, job: str | None, queue: str | None
    ) -> tuple[datetime, datetime | None, dict[int, Totals]]:
        return self._run_read(lambda: sqlhistory.sums_plan(self, window, job, queue), "history")

    def _summary_sums(
        self, window: Window, by: SummaryBy
    ) -> tuple[datetime, datetime | None, dict[str, Totals]]:
        return self._run_read(lambda: sqlhistory.summary_plan(self, window, by), "history_summary")

    def _prune_history(self, before: int) -> None:
        self._run(sqlhistory.prune_plan(self, before))

    # -- the job catalogue -----------------------------------------------------------------

    def _publish(self, entries: Sequence[JobEntry]) -> list[JobEntry]:
        return self._run(sql_catalogue.publish_plan(self, entries))

    def _unpublished_jobs(self) -> set[str]:
        return self._run(sql_catalogue.unpublished_jobs_plan(self))

    def _adopt_defaults(self, entry: JobEntry) -> int:
        return self._run(sql_catalogue.adopt_defaults_plan(self, entry))

    def _mark_schedule_unset(self, schedule_id: str, unset: str) -> None:
        self._run(sql_catalogue.mark_schedule_unset_plan(self, schedule_id, unset))

    def _read_catalogue(self) -> list[JobEntry]:
        return self._run(sql_catalogue.read_catalogue_plan(self))

    def _catalogue_keys(self) -> set[tuple[str, int]]:
        return self._run(sql_catalogue.catalogue_keys_plan(self))

    # -- schedules -------------------------------------------------------------------------

    def get_schedule(self, schedule_id: str) -> Schedule:
        return self._run(sql_schedules.get_schedule_plan(self, schedule_id))

    def _list_schedules(self, filters: ScheduleFilter) -> SchedulePage:
        return self._run(sql_schedules.list_schedules_plan(self, filters))

    def _schedule_cursor(self, after: str | None) -> str | None:
        """The ``after`` bound of ``list_schedules`` for a validated cursor."""
        return after

    def _materialize(self, items: Sequence[Materialization]) -> list[list[Execution] | StaleLease]:
        out, inserted = self._run(sql_materializing.materialize_plan(self, items))
        self._count_inserts(inserted)
        return out

    def _add_occurrences(
        self, schedule_id: str, occurrences: tuple[NewOccurrence, ...]
    ) -> list[Execution]:
        plan = sql_materializing.add_occurrences_plan(self, schedule_id, occurrences)
        executions, inserted = self._run(plan)
        self._count_inserts(inserted)
        return executions

    def _acquire_schedules(self, owner: str, *, limit: int, ttl: timedelta) -> list[Schedule]:
        return self._run(sql_schedules.acquire_schedules_plan(self, owner, limit=limit, ttl=ttl))

    def _add_schedule(self, spec: ScheduleSpec, schedule_id: str) -> Schedule:
        return self._run(sql_schedules.add_schedule_plan(self, spec, schedule_id))

    def _release_schedules(self, schedules: Sequence[Schedule]) -> None:
        self._run(sql_schedules.release_schedules_plan(self, schedules))

    def _change_schedule(
        self,
        schedule_id: str,
        decide: Callable[[Schedule, datetime], Schedule | None],
        *,
        actor: str = "client",
    ) -> Schedule:
        return self._run(sql_schedules.change_schedule_plan(self, schedule_id, decide, actor=actor))

    def delete_schedule(self, schedule_id: str) -> None:
        self._run(sql_schedules.delete_schedule_plan(self, schedule_id))

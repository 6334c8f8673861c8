"""The in-memory backend: a real store that passes the same contract, kept in dicts.

Every change goes through :func:`fencepost.domain.machine.apply`. Payloads are
round-tripped through JSON on the way in, so what a caller reads back is what a
serializing backend would give (tuples become lists, and so on). Nothing
survives the process; use it for tests and for trying things out.

It stays a reference model beside the SQL stores rather than a peer of
:class:`~fencepost.store.sqlstore.SqlStore`: what the verbs decide is already shared
(validation and the fail, release and abort decisions in :class:`Store`, every
transition in ``domain.machine``, commands in ``domain.commands``, schedules in
``domain.schedules``), and what is left is how rows are found and kept, which for
dicts is a few lines where SQL needs a statement. Emulating the SQL hooks over dicts
would cost more code than it saves. Where it differs from the SQL stores, on purpose:

* one lock serializes every verb (no concurrency to skip locked rows around);
* the claim, the bucket cap and every filter are Python over all rows, not index scans;
* ``prune`` deletes oldest ``updated_at`` first (SQLite walks ids; PostgreSQL skips
  rows a concurrent transaction holds);
* the audit ``seq`` is one counter for the store; ``clock_offset`` is None (one process).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any

from fencepost.domain import payloads
from fencepost.domain import schedules as plans
from fencepost.domain.bulk import DELETED, Action, Deletion, DeletionPage
from fencepost.domain.catalogue import JobDefaults, JobEntry
from fencepost.domain.commands import claimable, may_complete, new_command, on_request
from fencepost.domain.errors import (
    CatalogueConflict,
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    StaleLease,
)
from fencepost.domain.events import (
    ExecutionCancelled,
    ExecutionClaimed,
    ExecutionCompleted,
    ExecutionEvent,
    ExecutionSkipped,
    LeaseExpired,
)
from fencepost.domain.history import Finished, RollUp, SummaryBy, Totals, Window
from fencepost.domain.limits import NO_KEY, Candidate, Held, Limit, TokenBucket, held_for
from fencepost.domain.limits import pair as flow_pair
from fencepost.domain.machine import (
    Change,
    apply,
    ending_events,
    holds,
    lease_is_live,
    stale_reason,
)
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
from fencepost.domain.reports import (
    DueCount,
    JobCounts,
    SloOffender,
    SloReport,
    Stats,
    event_class,
    lateness,
    tabulate,
)
from fencepost.domain.schedules import NewOccurrence, ScheduleSpec
from fencepost.domain.slo import (
    BURN_WINDOWS,
    DAY,
    DEFAULT_CLAIM_WITHIN,
    FINISHED_STATES,
    ErrorClass,
    SloFacts,
    SloMark,
    Tally,
    Verdict,
    claim_verdict,
    counted,
    day_number,
    finish_verdict,
    is_backfill,
    mark_for,
    merge,
    rollup_verdicts,
    tally,
)
from fencepost.domain.states import (
    TERMINAL_STATES,
    WAITING_STATES,
    CommandKind,
    CommandState,
    Event,
    State,
)
from fencepost.domain.submission import NewExecution
from fencepost.store.base import Store
from fencepost.store.flow import (
    FlowChange,
    Pair,
    Throttle,
    ThrottleCount,
    applying,
    claim_limited,
    describe,
    ready_at,
)
from fencepost.store.history import MinuteRows
from fencepost.store.values import (
    UNFINISHED_STATES,
    BucketsResized,
    ClaimArguments,
    Decide,
    ExecutionFilter,
    Materialization,
    Outcome,
    ScheduleFilter,
    StoreConfig,
    always,
    live_nodes_refusal,
    rebucketed,
    result_refused,
    stale_schedule,
)
from fencepost.store.verbs.reports import SloRequest, burn_key, stats_report, throttle_lookback
from fencepost.store.waiting import HintedWatcher, Watcher, timed_out
from fencepost.timing.planning import HELD, NEVER

_ZERO = timedelta(0)


@dataclass(slots=True)
class _Facts:
    """What the SQL stores keep on an execution's row for the SLO (see domain.slo)."""

    first_claimed_at: datetime | None = None
    first_finished_at: datetime | None = None
    held: timedelta = _ZERO
    marks: SloMark = SloMark.NONE

    def of(self, e: Execution) -> SloFacts:
        assert e.planned_at is not None  # every stored execution has one
        return SloFacts(
            state=e.state,
            planned_at=e.planned_at,
            first_claimed_at=self.first_claimed_at,
            first_finished_at=self.first_finished_at,
            held=self.held,
            marks=self.marks,
        )


class MemoryStore(Store):
    """Executions in process memory, guarded by one lock."""

    def __init__(self, config: StoreConfig | None = None) -> None:
        super().__init__(config or StoreConfig())
        self._lock = threading.RLock()
        #: Notified (under the lock) whenever an execution becomes terminal.
        self._finished = threading.Condition(self._lock)
        #: Coroutines' waits (Store._wait_async), told of every terminal change.
        self._watcher = HintedWatcher(self._terminal_or_fresh, name="fencepost-memory-wait")
        self._rows: dict[str, Execution] = {}
        self._request_hashes: dict[str, str | None] = {}
        #: Stored trace contexts by execution id (only executions submitted traced).
        self._trace_contexts: dict[str, str] = {}
        #: What the submitters of work of unpublished jobs left out, by execution id and
        #: by schedule id (see CatalogueVerbs.adopt_unpublished).
        self._unset: dict[str, str] = {}
        self._schedule_unset: dict[str, str] = {}
        self._by_key: dict[str, str] = {}
        self._audit: dict[str, list[Transition]] = {}
        self._nodes: dict[str, Node] = {}
        #: The job catalogue by (name, version).
        self._jobs: dict[tuple[str, int], JobEntry] = {}
        #: Commands by execution id, then by command id (in request order).
        self._commands: dict[str, dict[str, Command]] = {}
        self._schedules: dict[str, Schedule] = {}
        #: The fingerprint of each schedule's add_schedule arguments.
        self._schedule_hashes: dict[str, str] = {}
        self._seq = 0
        #: Flow control: limits and paused queues by scope, token buckets by (scope,
        #: key), throttled claims and the audit of changes (see store.flow).
        self._limits: dict[str, Limit] = {}
        self._flow_buckets: dict[Pair, TokenBucket] = {}
        self._throttles: list[Throttle] = []
        #: Every throttle ever recorded per scope: [count, seconds held] (never pruned).
        self._throttle_totals: dict[str, list[float]] = {}
        self._flow_log: list[FlowChange] = []
        #: The SLO's facts by execution id, and prune's rollups: (day, job, objective,
        #: verdict) -> count (see fencepost.domain.slo).
        self._facts: dict[str, _Facts] = {}
        self._rollups: Counter[tuple[int, str, str, Verdict]] = Counter()
        #: The history charts' minute rows and their watermark (see store.history).
        self._minutes = MinuteRows()
        #: Held by the roll-up under way (one at a time; store.history).
        self._rolling_up = threading.Lock()
        #: Records of deleted executions, numbered (from the audit's counter), in order.
        self._deletion_log: list[tuple[int, Deletion]] = []

    # -- writing helpers -----------------------------------------------------------------

    def _record(self, transition: Transition) -> None:
        self._audit.setdefault(transition.execution_id, []).append(transition)
        # The SLO's facts, kept as the SQL stores keep them on the row: set by the
        # event that changes them, never recomputed from a trail prune may delete.
        facts = self._facts.setdefault(transition.execution_id, _Facts())
        facts.marks |= mark_for(transition.event, transition.from_state, transition.reason)
        if transition.event is Event.CLAIMED and facts.first_claimed_at is None:
            facts.first_claimed_at = transition.at
        if transition.to_state in FINISHED_STATES and facts.first_finished_at is None:
            facts.first_finished_at = transition.at

    def _mark_backfill(self, execution: Execution, now: datetime) -> None:
        """Mark a caller's execution planned for a time already past (domain.slo)."""
        if execution.planned_at is not None and is_backfill(execution.planned_at, now):
            self._facts.setdefault(execution.id, _Facts()).marks |= SloMark.BACKFILL

    def _record_submitted(self, execution_id: str, at: datetime, actor: str | None = None) -> None:
        """The SUBMITTED transition of a new execution (the SQL stores insert it with the row)."""
        self._record(
            Transition(
                execution_id=execution_id,
                seq=self._next_seq(),
                event=Event.SUBMITTED,
                from_state=None,
                to_state=State.SCHEDULED,
                epoch=0,
                actor=actor,
                reason=None,
                at=at,
            )
        )

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _commit(self, change: Change, now: datetime) -> Execution:
        self._rows[change.execution.id] = change.execution
        self._record(change.transition(self._next_seq(), now))
        if change.execution.state.is_terminal:
            self._finished.notify_all()
            self._watcher.hint([change.execution.id])
        return change.execution

    def _apply(self, execution_id: str, event: ExecutionEvent, now: datetime) -> Execution:
        return self._commit(apply(self._row(execution_id), event, now), now)

    def _row(self, execution_id: str) -> Execution:
        try:
            return self._rows[execution_id]
        except KeyError:
            raise NotFound(execution_id) from None

    def _refuse(self, lease: Fence, verb: str, now: datetime) -> StaleLease:
        current = self._rows.get(lease.execution_id)
        if current is not None:
            self._record(
                Transition(
                    execution_id=lease.execution_id,
                    seq=self._next_seq(),
                    event=Event.STALE_REFUSED,
                    from_state=current.state,
                    to_state=current.state,
                    epoch=lease.epoch,
                    actor=lease.owner,
                    reason=stale_reason(verb),
                    at=now,
                )
            )
        return StaleLease(lease.execution_id, lease.owner, lease.epoch)

    def _fenced(self, lease: Fence, verb: str, now: datetime) -> Execution | StaleLease:
        current = self._rows.get(lease.execution_id)
        if current is None or not holds(current, lease.owner, lease.epoch, now):
            return self._refuse(lease, verb, now)
        return current

    # -- the contract ----------------------------------------------------------------------

    def _insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        from fencepost.store.callers import refuse_memory

        raise refuse_memory(connection)

    def _insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        with self._lock:
            # Resolve idempotency for the whole batch before writing anything.
            pending: dict[str, NewExecution] = {}
            chosen: list[NewExecution | str] = []
            for new in batch:
                key = new.idempotency_key
                if key is None:
                    chosen.append(new)
                    continue
                existing_id = self._by_key.get(key)
                if existing_id is not None:
                    if self._request_hashes[existing_id] != new.request_hash:
                        raise IdempotencyConflict(key, existing_id)
                    chosen.append(existing_id)
                elif key in pending:
                    if pending[key].request_hash != new.request_hash:
                        raise IdempotencyConflict(key, pending[key].id)
                    chosen.append(pending[key].id)
                else:
                    pending[key] = new
                    chosen.append(new)
            out: list[Execution] = []
            for item in chosen:
                if isinstance(item, str):
                    out.append(self._rows[item])
                    continue
                execution = replace(item.to_execution(), inputs=payloads.decode(item.inputs_json))
                self._rows[item.id] = execution
                self._request_hashes[item.id] = item.request_hash
                if item.trace_context is not None:
                    self._trace_contexts[item.id] = item.trace_context
                if item.unset_defaults is not None:
                    self._unset[item.id] = item.unset_defaults
                if item.idempotency_key is not None:
                    self._by_key[item.idempotency_key] = item.id
                self._record_submitted(item.id, item.created_at, item.actor)
                self._mark_backfill(execution, item.created_at)
                out.append(replace(execution, inputs=item.inputs))
            return out

    def get(self, execution_id: str) -> Execution:
        with self._lock:
            return self._row(execution_id)

    def _wait(self, execution_id: str, seconds: float | None) -> Execution:
        # A condition: every terminal change notifies it, under the store's lock.
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._finished:
            while not (current := self._row(execution_id)).state.is_terminal:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise timed_out(execution_id, seconds)
                self._finished.wait(None if left is None else min(left, 60.0))
            return current

    def _waits(self) -> Watcher:
        return self._watcher

    def _terminal_or_fresh(
        self, watched: Sequence[str], fresh: Sequence[str]
    ) -> dict[str, Execution]:
        with self._lock:
            found = {i: self._rows[i] for i in watched if i in self._rows}
        news = set(fresh)
        return {i: e for i, e in found.items() if e.state.is_terminal or i in news}

    def _find(self, idempotency_key: str) -> Execution | None:
        with self._lock:
            found = self._by_key.get(idempotency_key)
            return None if found is None else self._rows[found]

    def _query(self, filters: ExecutionFilter) -> Page:
        with self._lock:
            rows = sorted(self._matching(filters), key=lambda e: e.id, reverse=filters.newest_first)
        items = rows[: filters.limit]
        more = len(rows) > filters.limit
        return Page(items=items, next_cursor=items[-1].id if more else None)

    def _count_by_state(self, filters: ExecutionFilter) -> dict[State, int]:
        counts = dict.fromkeys(State, 0)
        with self._lock:
            for e in self._matching(replace(filters, after=None)):
                counts[e.state] += 1
        return counts

    def _matching(self, filters: ExecutionFilter) -> Iterator[Execution]:
        """The executions ``filters`` keep (under the lock), in no order."""
        ending = None if filters.outcome is None else ending_events(filters.outcome)
        for e in self._rows.values():
            if _matches(e, filters) and (
                ending is None or _ended_with(self._audit.get(e.id, ()), ending)
            ):
                yield e

    def transitions(self, execution_id: str) -> list[Transition]:
        with self._lock:
            self._row(execution_id)
            return list(self._audit.get(execution_id, []))

    def _claim(self, request: ClaimArguments) -> list[Lease]:
        with self._lock:
            now = self.clock.now()
            limits = applying(list(self._limits.values()), request)
            if not limits:
                self._flow_wait = None
                return self._claim_now(request, now)
            leases, self._flow_wait = claim_limited(_MemoryFlow(self, now), request, limits)
            return leases

    def _claimable_now(self, request: ClaimArguments, now: datetime) -> list[Execution]:
        """The executions ``request`` admits, in claim order (queues' rooms not applied)."""
        jobs, ids, buckets, versions = request.jobs, request.ids, request.buckets, request.versions
        rooms = None if request.queues is None else dict(request.queues)
        return sorted(
            (
                e
                for e in self._rows.values()
                if _claimable(e, now)
                and (jobs is None or e.job in jobs)
                and (ids is None or e.id in ids)
                and (buckets is None or e.bucket in buckets)
                and (rooms is None or e.queue in rooms)
                and (
                    versions is None or e.job_version is None or (e.job, e.job_version) in versions
                )
            ),
            key=lambda e: (-e.priority, e.due_at, e.id),
        )

    def _claim_now(self, request: ClaimArguments, now: datetime) -> list[Lease]:
        """Claim under the lock, at ``now``, without limits."""
        ordered = self._claimable_now(request, now)
        if request.max_per_bucket is not None:
            ordered = self._within_cap(ordered, request.max_per_bucket)
        if request.queues is not None:
            ordered = _within_rooms(ordered, dict(request.queues))
        event = ExecutionClaimed(owner=request.owner, lease_until=now + request.ttl)
        return [
            _lease(self._apply(e.id, event, now), self._trace_contexts.get(e.id))
            for e in ordered[: request.limit]
        ]

    def _within_cap(self, ordered: list[Execution], cap: int) -> list[Execution]:
        running = Counter(e.bucket for e in self._rows.values() if e.state is State.RUNNING)
        chosen = []
        for e in ordered:
            if e.state is State.RUNNING:  # a takeover: already counted
                chosen.append(e)
            elif running[e.bucket] < cap:
                running[e.bucket] += 1
                chosen.append(e)
        return chosen

    def _heartbeat(
        self, beats: Sequence[tuple[Fence, str | None]], *, ttl: timedelta
    ) -> list[datetime | StaleLease]:
        with self._lock:
            now = self.clock.now()
            out: list[datetime | StaleLease] = []
            for lease, progress in beats:
                current = self._fenced(lease, "heartbeat", now)
                if isinstance(current, StaleLease):
                    out.append(current)
                    continue
                # A heartbeat only ever extends a lease; it never ends earlier than promised.
                until = max(now + ttl, current.lease_until or now)
                renewed = replace(current, lease_until=until, updated_at=now)
                if progress is not None:
                    renewed = replace(renewed, progress=payloads.decode(progress))
                self._rows[lease.execution_id] = renewed
                out.append(until)
            return out

    def _complete(self, outcomes: Sequence[Outcome]) -> list[StaleLease | None]:
        with self._lock:
            now = self.clock.now()
            out: list[StaleLease | None] = []
            for o in outcomes:
                current = self._fenced(o.lease, "complete", now)
                if isinstance(current, StaleLease):
                    out.append(current)
                    continue
                decide = _completed(o) if o.invalid is None else result_refused(o.lease, o.invalid)
                self._apply(current.id, decide(current, now), now)
                out.append(None)
            return out

    def _complete_one(self, outcome: Outcome) -> Execution:
        return self._fenced_change(outcome.lease, "complete", _completed(outcome))

    def _fenced_change(self, fence: Fence, verb: str, decide: Decide) -> Execution:
        with self._lock:
            now = self.clock.now()
            current = self._fenced(fence, verb, now)
            if isinstance(current, StaleLease):
                raise current
            return self._apply(current.id, decide(current, now), now)

    def _reap_expired(self, *, limit: int) -> int:
        with self._lock:
            now = self.clock.now()
            expired = sorted(
                (
                    e
                    for e in self._rows.values()
                    if e.state is State.RUNNING and not lease_is_live(e.lease_until, now)
                ),
                key=lambda e: (e.lease_until, e.id),
            )[:limit]
            for e in expired:  # due as it was: claimable now, in a takeover's order
                self._apply(e.id, LeaseExpired(retry_at=e.due_at), now)
            return len(expired)

    def _transition(self, execution_id: str, event: ExecutionEvent) -> Execution:
        with self._lock:
            return self._apply(execution_id, event, self.clock.now())

    # -- flow control ----------------------------------------------------------------------

    def _set_limit(self, limit: Limit) -> Limit:
        with self._lock:
            now = self.clock.now()
            old = self._limits.get(limit.scope)
            stored = replace(limit, paused=old is not None and old.paused, updated_at=now)
            self._limits[limit.scope] = stored
            self._log_flow(now, stored.updated_by, "set", stored.scope, describe(stored))
            return stored

    def _read_limits(self) -> list[Limit]:
        with self._lock:
            return list(self._limits.values())

    def _remove_limit(self, scope: str, actor: str) -> bool:
        with self._lock:
            old = self._limits.get(scope)
            if old is None or (old.rate is None and old.concurrency is None):
                return False
            now = self.clock.now()
            if old.paused:
                self._limits[scope] = Limit(
                    scope=scope, paused=True, updated_by=old.updated_by, updated_at=old.updated_at
                )
            else:
                del self._limits[scope]
            self._log_flow(now, actor, "remove", scope, describe(old))
            return True

    def _pause_queue(self, queue: str, actor: str, paused: bool) -> Limit:
        scope = f"queue:{queue}"
        with self._lock:
            now = self.clock.now()
            old = self._limits.get(scope)
            if paused:
                if old is not None and old.paused:
                    return old
                new = replace(
                    old or Limit(scope=scope), paused=True, updated_by=actor, updated_at=now
                )
                self._limits[scope] = new
                self._log_flow(now, actor, "pause", scope, "")
                return new
            if old is None or not old.paused:
                return old or Limit(scope=scope)
            since = old.updated_at or now
            self._record_throttles(
                [
                    Throttle(e.id, scope, held_for(now, max(e.due_at, since)), now)
                    for e in self._rows.values()
                    if e.queue == queue and e.state in WAITING_STATES and e.due_at <= now
                ]
            )
            self._log_flow(now, actor, "resume", scope, "")
            if old.rate is None and old.concurrency is None:
                del self._limits[scope]
                return Limit(scope=scope)
            new = replace(old, paused=False, updated_by=actor, updated_at=now)
            self._limits[scope] = new
            return new

    def _declare_limits(self, limits: Sequence[Limit]) -> None:
        with self._lock:
            now = self.clock.now()
            for limit in limits:
                old = self._limits.get(limit.scope)
                if old is not None and (old.source != "code" or old.paused):
                    continue
                if old is not None and replace(old, updated_at=None, updated_by=None) == replace(
                    limit, updated_at=None, updated_by=None
                ):
                    continue
                self._limits[limit.scope] = replace(limit, updated_at=now)
                self._log_flow(
                    now, limit.updated_by or "publisher", "declare", limit.scope, describe(limit)
                )

    def _prune_flow(self, cutoff: datetime) -> None:
        with self._lock:
            now = self.clock.now()
            self._throttles = [t for t in self._throttles if t.at > cutoff]
            for key, bucket in list(self._flow_buckets.items()):
                lim = self._limits.get(key[0])
                if bucket.denied_at is not None and bucket.denied_at > cutoff:
                    continue
                full = (
                    lim is None
                    or lim.rate is None
                    or lim.burst is None
                    or bucket.level(now, lim.rate.per_second, lim.burst) >= lim.burst
                )
                if full:
                    del self._flow_buckets[key]

    def _flow_changes(self, limit: int) -> list[FlowChange]:
        with self._lock:
            return list(reversed(self._flow_log[-limit:]))

    def _record_throttles(self, throttles: Sequence[Throttle]) -> None:
        self._throttles.extend(throttles)
        for t in throttles:
            # Before the first claim only (epoch 0 waiting at a resume, epoch 1 just
            # leased), the larger record: see the SQL stores' flow_hold.
            e = self._rows.get(t.execution_id)
            if e is not None and (e.epoch == 0 or (e.epoch == 1 and e.state is State.RUNNING)):
                facts = self._facts.setdefault(t.execution_id, _Facts())
                facts.held = max(facts.held, t.held)
            total = self._throttle_totals.setdefault(t.scope, [0, 0.0])
            total[0] += 1
            total[1] += t.held.total_seconds()

    def _throttled(self, window: timedelta | None) -> list[ThrottleCount]:
        with self._lock:
            if window is None:
                return [
                    ThrottleCount(s, int(c), timedelta(seconds=h))
                    for s, (c, h) in sorted(self._throttle_totals.items())
                ]
            since = self.clock.now() - window
            counts: dict[str, list[float]] = {}
            for t in self._throttles:
                if t.at >= since:
                    got = counts.setdefault(t.scope, [0, 0.0])
                    got[0] += 1
                    got[1] += t.held.total_seconds()
            return [
                ThrottleCount(s, int(c), timedelta(seconds=h))
                for s, (c, h) in sorted(counts.items())
            ]

    def _throttles_of(self, execution_id: str) -> list[Throttle]:
        with self._lock:
            self._row(execution_id)
            found = [t for t in self._throttles if t.execution_id == execution_id]
            return sorted(found, key=lambda t: t.at)

    def _log_flow(
        self, now: datetime, actor: str | None, action: str, scope: str, detail: str
    ) -> None:
        self._flow_log.append(FlowChange(now, actor or "operator", action, scope, detail))

    # -- commands --------------------------------------------------------------------------

    def _request(
        self, execution_id: str, kind: CommandKind, *, actor: str, command_id: str
    ) -> Command:
        with self._lock:
            now = self.clock.now()
            state = on_request(self._row(execution_id), kind)
            if state is CommandState.DONE:
                self._apply(execution_id, ExecutionCancelled(actor=actor), now)
            command = new_command(command_id, execution_id, kind, state, actor, now)
            self._commands.setdefault(execution_id, {})[command_id] = command
            return command

    def _claim_commands(
        self, owner: str, execution_ids: tuple[str, ...], *, ttl: timedelta, limit: int
    ) -> list[Command]:
        with self._lock:
            now = self.clock.now()
            open_ = sorted(
                (
                    c
                    for eid in execution_ids
                    for c in self._commands.get(eid, {}).values()
                    if claimable(c, now)
                ),
                key=lambda c: (c.requested_at, c.id),
            )[:limit]
            claimed = []
            for c in open_:
                taken = replace(c, state=CommandState.CLAIMED, owner=owner, claim_until=now + ttl)
                self._commands[c.execution_id][c.id] = taken
                claimed.append(taken)
            return claimed

    def _complete_command(self, command: Command, lease: Fence) -> Command | None:
        with self._lock:
            now = self.clock.now()
            row = self._commands.get(command.execution_id, {}).get(command.id)
            execution = self._rows.get(command.execution_id)
            if row is None or execution is None:
                return None
            if not may_complete(row, command, lease, execution, now):
                return None
            done = replace(
                row, state=CommandState.DONE, claim_until=None, epoch=lease.epoch, done_at=now
            )
            self._commands[command.execution_id][command.id] = done
            return done

    def _release_command(self, command: Command) -> None:
        with self._lock:
            row = self._commands.get(command.execution_id, {}).get(command.id)
            if row is not None and row.state is CommandState.CLAIMED and row.owner == command.owner:
                self._commands[command.execution_id][command.id] = replace(
                    row, state=CommandState.PENDING, owner=None, claim_until=None
                )

    def commands(self, execution_id: str) -> list[Command]:
        with self._lock:
            self._row(execution_id)
            found = self._commands.get(execution_id, {}).values()
            return sorted(found, key=lambda c: (c.requested_at, c.id))

    # -- nodes -----------------------------------------------------------------------------

    def _register_node(self, r: Registration) -> Node:
        with self._lock:
            now = self.clock.now()
            previous = self._nodes.get(r.node_id)
            node = Node(
                id=r.node_id,
                kind=r.kind,
                buckets=r.buckets,
                started_at=previous.started_at if previous is not None else now,
                heartbeat_at=now,
                expires_at=now + r.ttl,
                jobs=r.jobs,
            )
            self._nodes[r.node_id] = node
            return node

    # -- the job catalogue -----------------------------------------------------------------

    def _publish(self, entries: Sequence[JobEntry]) -> list[JobEntry]:
        with self._lock:
            now = self.clock.now()
            out = []
            for entry in entries:  # every conflict first: nothing is written with one
                stored = self._jobs.get(entry.key)
                if stored is not None and stored.digest != entry.digest:
                    raise CatalogueConflict(entry.name, entry.version, stored.digest, entry.digest)
            for entry in entries:
                stored = self._jobs.get(entry.key)
                if stored is None:
                    stored = self._jobs[entry.key] = replace(entry, published_at=now)
                out.append(stored)
            return out

    def _unpublished_jobs(self) -> set[str]:
        with self._lock:
            jobs = {self._rows[i].job for i in self._unset}
            return jobs | {self._schedules[i].job for i in self._schedule_unset}

    def _adopt_defaults(self, entry: JobEntry) -> int:
        d = entry.defaults
        with self._lock:
            adopted = 0
            for execution_id, unset in list(self._unset.items()):
                e = self._rows[execution_id]
                if e.job != entry.name:
                    continue
                del self._unset[execution_id]
                if e.state in TERMINAL_STATES:
                    continue  # finished executions keep what they ran with
                changes = _adopted(d, unset, ("max_attempts", "timeout", "priority", "queue"))
                if "max_attempts" in changes:  # never fewer than the attempt it is on
                    changes["max_attempts"] = max(changes["max_attempts"], e.attempt)
                self._rows[execution_id] = replace(e, **changes)
                adopted += 1
            for schedule_id, unset in list(self._schedule_unset.items()):
                s = self._schedules[schedule_id]
                if s.job != entry.name:
                    continue
                del self._schedule_unset[schedule_id]
                changes = _adopted(d, unset, ("max_attempts", "priority", "queue"))
                self._schedules[schedule_id] = replace(s, **changes)
                adopted += 1
            return adopted

    def _mark_schedule_unset(self, schedule_id: str, unset: str) -> None:
        with self._lock:
            s = self._schedules.get(schedule_id)
            if s is not None and s.job_version is None:
                self._schedule_unset[schedule_id] = unset

    def _read_catalogue(self) -> list[JobEntry]:
        with self._lock:
            return list(self._jobs.values())

    def deregister_node(self, node_id: str) -> None:
        with self._lock:
            self._nodes.pop(node_id, None)

    def nodes(self, *, live_only: bool = True) -> list[Node]:
        with self._lock:
            now = self.clock.now()
            return sorted(
                (n for n in self._nodes.values() if not live_only or n.is_live(now)),
                key=lambda n: n.id,
            )

    def _resize_buckets(self, num_buckets: int, *, force: bool) -> BucketsResized:
        # Nothing to record: the count is this store's config, which lives as long as it.
        with self._lock:
            previous = self.config.num_buckets
            now = self.clock.now()
            live = sorted(n.id for n in self._nodes.values() if n.is_live(now))
            changes = num_buckets != previous
            if live and changes and not force:
                raise live_nodes_refusal(live, num_buckets)
            unfinished = [e for e in self._rows.values() if e.state in UNFINISHED_STATES]
            moves = rebucketed(((e.id, e.bucket_key, e.bucket) for e in unfinished), num_buckets)
            for execution_id, bucket in moves:
                self._rows[execution_id] = replace(self._rows[execution_id], bucket=bucket)
            return BucketsResized(
                previous=previous,
                num_buckets=num_buckets,
                unfinished=len(unfinished),
                moved=len(moves),
                live_nodes=tuple(live) if changes else (),
            )

    def _orphans(
        self, buckets: tuple[int, ...], *, older_than: timedelta, limit: int
    ) -> list[Execution]:
        with self._lock:
            cutoff = self.clock.now() - older_than
            stuck = (
                e
                for e in self._rows.values()
                if not e.state.is_terminal and e.bucket in buckets and e.updated_at <= cutoff
            )
            return sorted(stuck, key=lambda e: (e.updated_at, e.id))[:limit]

    # -- reports and housekeeping ----------------------------------------------------------

    def _bucket_counts(self, states: tuple[State, ...]) -> dict[int, int]:
        with self._lock:
            return dict(Counter(e.bucket for e in self._rows.values() if e.state in states))

    def _stats(self, window: timedelta) -> Stats:
        with self._lock:
            now = self.clock.now()
            start = now - window
            counts = [(e.job, e.queue, e.state, 1) for e in self._rows.values()]
            backlog = sum(
                1
                for e in self._rows.values()
                if e.state in WAITING_STATES and e.due_at <= now and e.due_at < HELD
            )
            late: list[timedelta] = []
            refused = expiries = 0
            errors: Counter[ErrorClass] = Counter()
            # Throttle records read back to tell throttled claims from late ones.
            lookback = throttle_lookback(now, window)
            throttled_at: dict[str, list[datetime]] = {}
            held: dict[str, tuple[int, timedelta]] = {}
            for th in self._throttles:
                if lookback < th.at <= now:
                    throttled_at.setdefault(th.execution_id, []).append(th.at)
                if start < th.at <= now:
                    n, total = held.get(th.scope, (0, _ZERO))
                    held[th.scope] = (n + 1, total + th.held)
            for trail in self._audit.values():
                for t in trail:
                    if not start < t.at <= now:
                        continue
                    error = event_class(t.event, t.from_state, t.reason)
                    if error is not None:
                        errors[error] += 1
                    if t.event is Event.STALE_REFUSED:
                        refused += 1
                    elif t.event is Event.LEASE_EXPIRED:
                        expiries += 1
                    elif t.event is Event.CLAIMED:
                        due_at = self._rows[t.execution_id].due_at
                        expiries += t.from_state is State.RUNNING
                        marks = throttled_at.get(t.execution_id, ())
                        if not any(due_at <= mark <= t.at for mark in marks):
                            late.append(max(t.at - due_at, _ZERO))
            # Late first claims, from the facts the SLO keeps (as the SQL stores read
            # them off the row): the claim objective's verdict at its default.
            for execution_id, facts in self._facts.items():
                claimed = facts.first_claimed_at
                row = self._rows.get(execution_id)
                if row is None or claimed is None or not start < claimed <= now:
                    continue
                verdict = claim_verdict(facts.of(row), now, DEFAULT_CLAIM_WITHIN)
                errors[ErrorClass.LATE_CLAIM] += verdict is Verdict.LATE_CLAIM
        throttled = [(scope, n, total) for scope, (n, total) in held.items()]
        return stats_report(
            now, window, counts, backlog, lateness(late), refused, expiries, throttled, errors
        )

    def _due_groups(self) -> tuple[datetime, list[DueCount], int]:
        with self._lock:
            now = self.clock.now()
            groups = Counter(
                (e.job, e.job_version)
                for e in self._rows.values()
                if e.state in WAITING_STATES and e.due_at <= now and e.due_at < HELD
            )
            active = sum(1 for s in self._schedules.values() if not s.paused and s.next_due < NEVER)
        due = [DueCount(job=job, job_version=v, count=n) for (job, v), n in groups.items()]
        return now, due, active

    def _job_counts(self, window: timedelta, job: str | None) -> JobCounts:
        with self._lock:
            now = self.clock.now()
            found = [
                (e.job, e.state, 1)
                for e in self._rows.values()
                if now - window < e.created_at <= now and (job is None or e.job == job)
            ]
        return JobCounts(at=now, window=window, by_job=tabulate(found)[1])

    def _slo(self, request: SloRequest) -> SloReport:
        with self._lock:
            now = self.clock.now()
            start = request.start(now)
            recent = {w: now - w for w in BURN_WINDOWS}
            since = min(start, *recent.values())
            rows = [
                (e, self._facts.get(e.id, _Facts()).of(e))
                for e in self._rows.values()
                if e.planned_at is not None and since <= e.planned_at <= now
            ]
            rolled = (
                [
                    (objective, verdict, n)
                    for (day, _, objective, verdict), n in self._rollups.items()
                    if day_number(start) <= day <= day_number(now)
                ]
                if request.at_defaults and request.window >= DAY
                else []
            )
        verdicts: dict[str, list[Verdict | None]] = {}
        offenders = []
        for e, facts in rows:
            if not counted(facts):
                continue
            claim = claim_verdict(facts, now, request.claim_within)
            finish = finish_verdict(facts, now, request.finish_within, request.claim_within)
            for objective, verdict in (("claim", claim), ("finish", finish)):
                names = [objective] if facts.planned_at >= start else []
                names += [
                    burn_key(objective, w) for w, at in recent.items() if facts.planned_at >= at
                ]
                for name in names:
                    verdicts.setdefault(name, []).append(verdict)
            if facts.planned_at < start:
                continue
            claimed_at = facts.first_claimed_at
            offenders.append(
                SloOffender(
                    execution_id=e.id,
                    job=e.job,
                    planned_at=facts.planned_at,
                    claimed_at=claimed_at,
                    lateness=max(
                        (now if claimed_at is None else claimed_at) - facts.planned_at, _ZERO
                    ),
                    state=e.state,
                    verdict=claim,
                )
            )
        offenders.sort(key=lambda o: (-o.lateness, o.planned_at, o.execution_id))
        tallies = {name: tally(vs) for name, vs in verdicts.items()}
        from_rollups: dict[str, Counter[Verdict]] = {"claim": Counter(), "finish": Counter()}
        for objective, verdict, n in rolled:
            from_rollups[objective][verdict] += n
        for name, counts in from_rollups.items():
            tallies[name] = merge(tallies.get(name, Tally()), Tally(counts=counts))
        rolled_up = sum(from_rollups["claim"].values())
        return request.report(now, tallies, offenders[: request.worst], rolled_up)

    def _roll_up_history(self, max_rows: int, *, wait: bool) -> RollUp:
        if not self._rolling_up.acquire(blocking=wait):  # another thread is rolling up
            with self._lock:
                mark = self._minutes.mark
            return RollUp(executions=0, rolled_up_to=mark.rolled_up_to, caught_up=False)
        try:
            with self._lock:
                return self._roll_up_locked(max_rows)
        finally:
            self._rolling_up.release()

    def _roll_up_locked(self, max_rows: int) -> RollUp:
        """One roll-up, under the store's lock (see store.history.MinuteRows)."""
        reading = self._minutes.range(self.clock.now())
        finished = [
            (
                e.id,
                Finished(
                    job=e.job,
                    queue=e.queue,
                    attempt=e.attempt,
                    finished_at=e.updated_at,
                    facts=self._facts.get(e.id, _Facts()).of(e),
                ),
            )
            for e in self._rows.values()
            if e.state.is_terminal
        ]
        throttles = [
            (t.at, t.held, e.job, e.queue)
            for t in self._throttles
            if (e := self._rows.get(t.execution_id)) is not None
        ]
        return self._minutes.roll_up(reading, finished, throttles, max_rows)

    def _history_sums(
        self, window: Window, job: str | None, queue: str | None
    ) -> tuple[datetime, datetime | None, dict[int, Totals]]:
        with self._lock:
            now = self.clock.now()
            sums = self._minutes.sums(window, now, job, queue)
            return now, self._minutes.mark.rolled_up_to, sums

    def _summary_sums(
        self, window: Window, by: SummaryBy
    ) -> tuple[datetime, datetime | None, dict[str, Totals]]:
        with self._lock:
            now = self.clock.now()
            sums = self._minutes.by_name(window, now, by)
            return now, self._minutes.mark.rolled_up_to, sums

    def _prune_history(self, before: int) -> None:
        with self._lock:
            self._minutes.prune(before)

    def _store_now(self) -> datetime:
        return self.clock.now()

    def _count_prunable(self, cutoff: datetime) -> int:
        with self._lock:
            return sum(1 for e in self._rows.values() if _prunable(e, cutoff))

    def _prune_batch(self, cutoff: datetime, batch: int) -> int:
        with self._lock:
            doomed = sorted(
                (e for e in self._rows.values() if _prunable(e, cutoff)),
                key=lambda e: (e.updated_at, e.id),
            )[:batch]
            now = self.clock.now()
            for e in doomed:
                self._forget(e, now)
            return len(doomed)

    def _forget(self, e: Execution, now: datetime) -> None:
        """Delete a finished execution and what is kept of it (prune, delete)."""
        # Its verdicts outlive it, in the day's rollups (domain.slo).
        facts = self._facts.pop(e.id, _Facts()).of(e)
        for objective, verdict in rollup_verdicts(facts, now):
            self._rollups[(day_number(facts.planned_at), e.job, objective, verdict)] += 1
        del self._rows[e.id]
        del self._request_hashes[e.id]
        self._trace_contexts.pop(e.id, None)
        self._unset.pop(e.id, None)
        if e.idempotency_key is not None:
            del self._by_key[e.idempotency_key]
        self._audit.pop(e.id, None)
        self._commands.pop(e.id, None)

    # -- acting on many --------------------------------------------------------------------

    def _act_group(
        self, action: Action, execution_ids: Sequence[str], actor: str, now: datetime
    ) -> list[str]:
        with self._lock:  # each check and its change at once, as a transaction would
            return super()._act_group(action, execution_ids, actor, now)

    def _delete(self, execution_id: str, actor: str) -> Deletion:
        with self._lock:
            e = self._row(execution_id)
            if not e.state.is_terminal:
                raise InvalidTransition(e.id, e.state, DELETED)
            now = self.clock.now()
            self._forget(e, now)
            self._throttles = [t for t in self._throttles if t.execution_id != e.id]
            deletion = Deletion(
                execution_id=e.id, job=e.job, queue=e.queue, state=e.state, actor=actor, at=now
            )
            self._deletion_log.append((self._next_seq(), deletion))
            return deletion

    def _deletions(self, limit: int, after: int | None) -> DeletionPage:
        with self._lock:
            found = [(n, d) for n, d in self._deletion_log if after is None or n > after]
        more = len(found) > limit
        found = found[:limit]
        return DeletionPage(
            items=[d for _, d in found], next_cursor=str(found[-1][0]) if more else None
        )

    def _prune_deletions(self, cutoff: datetime) -> None:
        with self._lock:
            self._deletion_log = [(n, d) for n, d in self._deletion_log if d.at > cutoff]

    # -- schedules -------------------------------------------------------------------------

    def _add_schedule(self, spec: ScheduleSpec, schedule_id: str) -> Schedule:
        with self._lock:
            existing = self._schedules.get(schedule_id)
            fingerprint = spec.fingerprint()
            if existing is not None:
                if self._schedule_hashes[schedule_id] != fingerprint:
                    raise IdempotencyConflict(schedule_id, schedule_id, subject="schedule")
                return existing
            schedule = plans.new_schedule(spec, id=schedule_id, now=self.clock.now())
            self._schedules[schedule_id] = schedule
            self._schedule_hashes[schedule_id] = fingerprint
            return schedule

    def get_schedule(self, schedule_id: str) -> Schedule:
        with self._lock:
            return self._schedule(schedule_id)

    def _schedule(self, schedule_id: str) -> Schedule:
        try:
            return self._schedules[schedule_id]
        except KeyError:
            raise NotFound(schedule_id, subject="schedule") from None

    def _list_schedules(self, filters: ScheduleFilter) -> SchedulePage:
        after, job, paused, due_before = (
            filters.after,
            filters.job,
            filters.paused,
            filters.due_before,
        )
        with self._lock:
            found = sorted(
                (
                    s
                    for s in self._schedules.values()
                    if (after is None or s.id > after)
                    and (job is None or s.job == job)
                    and (paused is None or s.paused == paused)
                    and (due_before is None or s.next_due <= due_before)
                ),
                key=lambda s: s.id,
            )
        items = found[: filters.limit]
        more = len(found) > filters.limit
        return SchedulePage(items=items, next_cursor=items[-1].id if more else None)

    def _change_schedule(
        self,
        schedule_id: str,
        decide: Callable[[Schedule, datetime], Schedule | None],
        *,
        actor: str = "client",
    ) -> Schedule:
        with self._lock:
            current = self._schedule(schedule_id)
            now = self.clock.now()
            changed = decide(current, now)
            if changed is None:
                return current
            self._schedules[schedule_id] = changed
            if plans.pauses(current, changed):
                skipped = ExecutionSkipped(reason=plans.PAUSED, actor=actor)
                unstarted = sorted(
                    e.id
                    for e in self._rows.values()
                    if e.schedule_id == schedule_id and plans.skipped_by_pause(e)
                )
                for execution_id in unstarted:
                    self._apply(execution_id, skipped, now)
            return changed

    def delete_schedule(self, schedule_id: str) -> None:
        with self._lock:
            self._schedule(schedule_id)
            now = self.clock.now()
            waiting = sorted(
                e.id
                for e in self._rows.values()
                if e.schedule_id == schedule_id and e.state in WAITING_STATES
            )
            for execution_id in waiting:
                self._apply(execution_id, ExecutionCancelled(actor=plans.SCHEDULE_DELETED), now)
            del self._schedules[schedule_id]
            self._schedule_unset.pop(schedule_id, None)
            del self._schedule_hashes[schedule_id]

    def _acquire_schedules(self, owner: str, *, limit: int, ttl: timedelta) -> list[Schedule]:
        with self._lock:
            now = self.clock.now()
            due = sorted(
                (
                    s
                    for s in self._schedules.values()
                    if s.next_due <= now and not lease_is_live(s.lease_until, now)
                ),
                key=lambda s: (s.next_due, s.id),
            )[:limit]
            acquired = []
            for s in due:
                leased = replace(s, materializer=owner, lease_until=now + ttl)
                self._schedules[s.id] = leased
                acquired.append(leased)
            return acquired

    def _materialize(self, items: Sequence[Materialization]) -> list[list[Execution] | StaleLease]:
        with self._lock:
            now = self.clock.now()
            out: list[list[Execution] | StaleLease] = []
            for item in items:
                stored = self._schedules.get(item.schedule.id)
                if stored is None or not plans.holds_lease(stored, item.schedule, now):
                    out.append(stale_schedule(item.schedule))
                    continue
                found = self._insert_occurrences(stored, item.unique(), now)
                self._schedules[stored.id] = replace(
                    stored,
                    watermark=max(stored.watermark, item.watermark),
                    next_due=item.next_due,
                    materializer=None,
                    lease_until=None,
                )
                out.append(item.results(found))
            return out

    def _add_occurrences(
        self, schedule_id: str, occurrences: tuple[NewOccurrence, ...]
    ) -> list[Execution]:
        with self._lock:
            schedule = self._schedule(schedule_id)
            found = self._insert_occurrences(
                schedule, occurrences, self.clock.now(), by_caller=True
            )
            return [found[o.idempotency_key] for o in occurrences]

    def _insert_occurrences(
        self,
        schedule: Schedule,
        occurrences: Sequence[NewOccurrence],
        now: datetime,
        *,
        by_caller: bool = False,
    ) -> dict[str, Execution]:
        """Insert the occurrences whose key is new; every one's execution by key.

        ``by_caller``: a caller's (a backfill, a run now), not the materializer's own:
        one planned in the past is a backfill for the SLO.
        """
        found: dict[str, Execution] = {}
        for o in occurrences:
            existing_id = self._by_key.get(o.idempotency_key)
            if existing_id is not None:
                found[o.idempotency_key] = self._rows[existing_id]
                continue
            execution = o.to_execution(schedule, now)
            self._rows[o.id] = execution
            self._request_hashes[o.id] = None
            self._by_key[o.idempotency_key] = o.id
            self._record_submitted(o.id, now, o.actor)
            if by_caller and o.slot is not None:  # a run now has no slot: never a backfill
                self._mark_backfill(execution, now)
            if o.skipped is not None:
                execution = self._apply(o.id, ExecutionSkipped(reason=o.skipped), now)
            found[o.idempotency_key] = execution
        return found

    def _release_schedules(self, schedules: Sequence[Schedule]) -> None:
        with self._lock:
            for s in schedules:
                stored = self._schedules.get(s.id)
                if (
                    stored is not None
                    and stored.materializer == s.materializer
                    and stored.lease_until == s.lease_until
                ):
                    self._schedules[s.id] = replace(stored, materializer=None, lease_until=None)

    def close(self) -> None:
        """Stop the waits' watcher thread, if one runs; nothing else to release."""
        self._watcher.close()


def _completed(outcome: Outcome) -> Decide:
    """The success of a completion with a valid result (the result as a store reads it back)."""
    return always(
        ExecutionCompleted(owner=outcome.lease.owner, result=payloads.decode(outcome.result_json))
    )


def _claimable(e: Execution, now: datetime) -> bool:
    if e.state in WAITING_STATES:
        return e.due_at <= now
    return (
        e.state is State.RUNNING
        and not lease_is_live(e.lease_until, now)
        and e.attempt < e.max_attempts
    )


def _within_rooms(ordered: list[Execution], rooms: dict[str, int]) -> list[Execution]:
    """The first executions of each queue in ``ordered``, at most its room of each."""
    taken: Counter[str] = Counter()
    chosen = []
    for e in ordered:
        if taken[e.queue] < rooms[e.queue]:
            taken[e.queue] += 1
            chosen.append(e)
    return chosen


def _prunable(e: Execution, cutoff: datetime) -> bool:
    return e.state in TERMINAL_STATES and e.updated_at <= cutoff


def _ended_with(trail: Iterable[Transition], ending: frozenset[Event]) -> bool:
    """Whether an attempt in ``trail`` ended with the outcome of ``ending``
    (:func:`~fencepost.domain.machine.ending_events`)."""
    return any(t.from_state is State.RUNNING and t.event in ending for t in trail)


def _matches(e: Execution, f: ExecutionFilter) -> bool:
    return (
        (f.after is None or (e.id < f.after if f.newest_first else e.id > f.after))
        and (f.states is None or e.state in f.states)
        and (f.job is None or e.job == f.job)
        and (f.queue is None or e.queue == f.queue)
        and (f.schedule is None or e.schedule_id == f.schedule)
        and (f.bucket is None or e.bucket == f.bucket)
        and (f.buckets is None or e.bucket in f.buckets)
        and (f.due_after is None or e.due_at >= f.due_after)
        and (f.due_before is None or e.due_at < f.due_before)
        and (f.limit_key is None or e.limit_key == f.limit_key)
        and (f.owner is None or (e.state is State.RUNNING and e.lease_owner == f.owner))
        and (f.created_after is None or e.created_at >= f.created_after)
        and (f.created_before is None or e.created_at < f.created_before)
        and f.matches_finished(e.state, e.updated_at)
        and f.matches_error(e.error)
    )


#: What a claim delivers beside the fence's id and owner: fields a lease and an
#: execution both have, under the same names.
_DELIVERED = tuple(
    f.name for f in fields(Lease) if f.name not in ("execution_id", "owner", "trace_context")
)


def _lease(e: Execution, trace_context: str | None) -> Lease:
    assert e.lease_owner is not None
    assert e.lease_until is not None
    delivered = {name: getattr(e, name) for name in _DELIVERED}
    return Lease(execution_id=e.id, owner=e.lease_owner, trace_context=trace_context, **delivered)


def _adopted(defaults: JobDefaults, unset: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """The ``fields`` a job's ``defaults`` give where ``unset`` lists them (and it has one)."""
    listed = unset.split(",")
    return {
        name: getattr(defaults, name)
        for name in fields
        if name in listed and getattr(defaults, name) is not None
    }


class _MemoryFlow:
    """The memory store's side of a limited claim (see store.flow.FlowTransaction),
    under the store's lock."""

    def __init__(self, store: MemoryStore, now: datetime) -> None:
        self.store, self.now = store, now

    def state(self, limits: Sequence[Limit]) -> tuple[dict[Pair, int], dict[Pair, TokenBucket]]:
        counted = [lim for lim in limits if lim.concurrency is not None]
        return self.running(counted), self.buckets(limits, None)

    def running(self, limits: Sequence[Limit]) -> dict[Pair, int]:
        counts: Counter[tuple[str, str]] = Counter()
        for e in self.store._rows.values():
            if e.state is not State.RUNNING or not lease_is_live(e.lease_until, self.now):
                continue
            for lim in limits:
                if lim.applies_to(e.job, e.queue):
                    counts[flow_pair(lim, e.limit_key)] += 1
        return dict(counts)

    def buckets(
        self, limits: Sequence[Limit], pairs: Iterable[Pair] | None
    ) -> dict[Pair, TokenBucket]:
        stored = self.store._flow_buckets
        if pairs is not None:
            return {p: stored[p] for p in pairs if p in stored}
        by_scope = {lim.scope: lim for lim in limits}
        out = {}
        for (scope, key), bucket in stored.items():
            lim = by_scope.get(scope)
            if lim is None:
                continue
            if key == NO_KEY or ready_at(lim, bucket) > self.now:
                out[(scope, key)] = bucket
        return out

    def candidates(self, request: ClaimArguments, held: Held, n: int) -> list[Candidate]:
        jobs, queues = set(held.jobs), set(held.queues)
        job_keys, queue_keys = set(held.job_keys), set(held.queue_keys)
        cap = request.max_per_bucket
        running: Counter[int] = Counter()
        if cap is not None:
            running.update(e.bucket for e in self.store._rows.values() if e.state is State.RUNNING)
        out = []
        for e in self.store._claimable_now(request, self.now):
            key = e.limit_key or NO_KEY
            if (
                e.job in jobs
                or e.queue in queues
                or (e.job, key) in job_keys
                or (e.queue, key) in queue_keys
                # The claim's cap: none of a bucket already at it (takeovers are counted).
                or (cap is not None and e.state is not State.RUNNING and running[e.bucket] >= cap)
            ):
                continue
            out.append(Candidate(e.id, e.job, e.queue, e.limit_key, e.due_at))
            if len(out) >= n:
                break
        return out

    def lease(self, request: ClaimArguments) -> list[Lease]:
        return self.store._claim_now(request, self.now)

    def write(self, buckets: dict[Pair, TokenBucket], throttles: Sequence[Throttle]) -> None:
        self.store._flow_buckets.update(buckets)
        self.store._record_throttles(throttles)

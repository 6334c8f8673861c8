"""The memory store's state, shared by its sections, and submitting and reading."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from fencepost.domain import payloads
from fencepost.domain.bulk import Deletion
from fencepost.domain.catalogue import JobEntry
from fencepost.domain.errors import (
    IdempotencyConflict,
    NotFound,
    StaleLease,
)
from fencepost.domain.events import (
    ExecutionEvent,
)
from fencepost.domain.limits import Limit, TokenBucket
from fencepost.domain.machine import (
    Change,
    apply,
    ending_events,
    holds,
    stale_reason,
)
from fencepost.domain.models import (
    Command,
    Execution,
    Fence,
    Page,
    Schedule,
    Transition,
)
from fencepost.domain.nodes import Node
from fencepost.domain.slo import (
    FINISHED_STATES,
    SloFacts,
    SloMark,
    Verdict,
    is_backfill,
    mark_for,
)
from fencepost.domain.states import (
    Event,
    State,
)
from fencepost.domain.submission import NewExecution
from fencepost.store.base import Store
from fencepost.store.flow import (
    FlowChange,
    Pair,
    Throttle,
)
from fencepost.store.history import MinuteRows
from fencepost.store.values import (
    ExecutionFilter,
    StoreConfig,
)
from fencepost.store.waiting import HintedWatcher, Watcher, timed_out

_ZERO = timedelta(0)


class RowFacts:
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


class MemoryCore(Store):
    """The memory store's state and what every section shares: the writing
    helpers, submitting and reading (see the package's docstring)."""

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
        self._facts: dict[str, RowFacts] = {}
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
        facts = self._facts.setdefault(transition.execution_id, RowFacts())
        facts.marks |= mark_for(transition.event, transition.from_state, transition.reason)
        if transition.event is Event.CLAIMED and facts.first_claimed_at is None:
            facts.first_claimed_at = transition.at
        if transition.to_state in FINISHED_STATES and facts.first_finished_at is None:
            facts.first_finished_at = transition.at

    def _mark_backfill(self, execution: Execution, now: datetime) -> None:
        """Mark a caller's execution planned for a time already past (domain.slo)."""
        if execution.planned_at is not None and is_backfill(execution.planned_at, now):
            self._facts.setdefault(execution.id, RowFacts()).marks |= SloMark.BACKFILL

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

    def _record_throttles(self, throttles: Sequence[Throttle]) -> None:
        self._throttles.extend(throttles)
        for t in throttles:
            # Before the first claim only (epoch 0 waiting at a resume, epoch 1 just
            # leased), the larger record: see the SQL stores' flow_hold.
            e = self._rows.get(t.execution_id)
            if e is not None and (e.epoch == 0 or (e.epoch == 1 and e.state is State.RUNNING)):
                facts = self._facts.setdefault(t.execution_id, RowFacts())
                facts.held = max(facts.held, t.held)
            total = self._throttle_totals.setdefault(t.scope, [0, 0.0])
            total[0] += 1
            total[1] += t.held.total_seconds()

    def close(self) -> None:
        """Stop the waits' watcher thread, if one runs; nothing else to release."""
        self._watcher.close()


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

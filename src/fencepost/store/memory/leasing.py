"""The memory store's hot path: claims (limited or not), heartbeats, outcomes, expiry,
and the commands sent to running executions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace
from datetime import datetime, timedelta

from fencepost.domain import payloads
from fencepost.domain.commands import claimable, may_complete, new_command, on_request
from fencepost.domain.errors import (
    StaleLease,
)
from fencepost.domain.events import (
    ExecutionCancelled,
    ExecutionClaimed,
    ExecutionCompleted,
    ExecutionEvent,
    LeaseExpired,
)
from fencepost.domain.limits import NO_KEY, Candidate, Held, Limit, TokenBucket
from fencepost.domain.limits import pair as flow_pair
from fencepost.domain.machine import (
    lease_is_live,
)
from fencepost.domain.models import (
    Command,
    Execution,
    Fence,
    Lease,
)
from fencepost.domain.states import (
    WAITING_STATES,
    CommandKind,
    CommandState,
    State,
)
from fencepost.store.flow import (
    Pair,
    Throttle,
    applying,
    claim_limited,
    ready_at,
)
from fencepost.store.memory.core import MemoryCore
from fencepost.store.values import (
    ClaimArguments,
    Decide,
    Outcome,
    always,
    result_refused,
)


class MemoryLeasing(MemoryCore):
    """Claims, heartbeats, outcomes, expiry and the commands to running executions."""

    def _claim(self, request: ClaimArguments) -> list[Lease]:
        with self._lock:
            now = self.clock.now()
            limits = applying(list(self._limits.values()), request)
            if not limits:
                self._flow_wait = None
                return self._claim_now(request, now)
            leases, self._flow_wait = claim_limited(LimitedClaim(self, now), request, limits)
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


class LimitedClaim:
    """The memory store's side of a limited claim (see store.flow.FlowTransaction),
    under the store's lock."""

    def __init__(self, store: MemoryLeasing, now: datetime) -> None:
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

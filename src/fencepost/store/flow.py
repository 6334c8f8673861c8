"""The store contract, flow control: limits, paused queues, and the limited claim.

The verbs (:class:`FlowVerbs`) validate and hand a backend what to write; the limited
claim (:func:`claim_limited`) is written once here for every backend, which supplies
only a :class:`FlowTransaction` — its reads and writes inside the claim's own
transaction. The decisions are pure (:mod:`fencepost.domain.limits`).

A claim takes the limited path only when some limit or paused queue could apply to
it; otherwise it is the claim it always was, at the same cost. A backend whose claim
is one autocommit statement (PostgreSQL) learns that there are limits from a view it
refreshes at most every :data:`FLOW_REFRESH` seconds, so a limit set anywhere takes
effect on every worker within that time.
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol, Unpack

from fencepost.domain.checks import INT32_MAX, MAX_QUEUE, require_name
from fencepost.domain.errors import NotFound
from fencepost.domain.filters import checked
from fencepost.domain.limits import (
    CANDIDATES_PER_SLOT,
    NO_KEY,
    Candidate,
    Decision,
    FlowChange,
    FlowState,
    Held,
    Limit,
    LimitOptions,
    ThrottleCount,
    TokenBucket,
    choose,
    held,
    held_for,
    new_limit,
    next_start_in,
    scope_of,
    spend,
    throttled,
)
from fencepost.domain.models import Lease
from fencepost.store.core import StoreCore
from fencepost.store.values import ClaimArguments

#: Seconds a backend that caches "are there limits?" trusts its answer.
FLOW_REFRESH = 1.0
#: A held-back scope's "denied" time is rewritten at most this often (seconds): often
#: enough to tell throttled claims from late ones, rarely enough that a thousand held
#: keys do not cost a thousand writes a claim.
DENIED_RESOLUTION = timedelta(seconds=1)
#: A limited claim reads candidates again, leaving out what the last round found
#: held, at most this many times.
CANDIDATE_ROUNDS = 3
#: The most candidates a limited claim reads beyond its limit in one round.
CANDIDATE_MARGIN = 64
#: The longest actor name a flow change records.
MAX_ACTOR = 200

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Throttle:
    """One claimed execution that waited on a limit or a paused queue."""

    execution_id: str
    scope: str
    held: timedelta
    at: datetime


class FlowTransaction(Protocol):
    """What :func:`claim_limited` needs from a backend, inside one write transaction
    that serializes limited claims (a lock on the limits, SQLite's one writer, the
    memory store's lock)."""

    #: The store's now for this claim, read once the transaction serializes it.
    now: datetime

    def state(self, limits: Sequence[Limit]) -> tuple[dict[Pair, int], dict[Pair, TokenBucket]]:
        """:meth:`running` and ``buckets(limits, None)`` together (a backend may read
        both, and its ``now``, in one round trip)."""

    def running(self, limits: Sequence[Limit]) -> dict[Pair, int]:
        """Live leases (RUNNING, ``lease_until > now``) per ``(scope, key)`` of the
        ``limits`` with a concurrency (key :data:`NO_KEY` unless the limit is per key)."""

    def buckets(
        self, limits: Sequence[Limit], pairs: Iterable[Pair] | None
    ) -> dict[Pair, TokenBucket]:
        """Stored buckets: of ``pairs``, or (None) every whole-scope bucket of ``limits``
        and every per-key one that is empty now (``ready_at > now``)."""

    def candidates(self, request: ClaimArguments, held: Held, n: int) -> list[Candidate]:
        """Up to ``n`` claimable executions (takeovers included) in claim order, that the
        claim's filters admit and ``held`` does not leave out."""

    def lease(self, request: ClaimArguments) -> list[Lease]:
        """Lease the executions ``request.ids`` names, as a plain claim would."""

    def write(self, buckets: dict[Pair, TokenBucket], throttles: Sequence[Throttle]) -> None:
        """Store these buckets (upsert) and throttle records."""


def claim_limited(
    tx: FlowTransaction, request: ClaimArguments, limits: list[Limit]
) -> tuple[list[Lease], float | None]:
    """A claim under ``limits`` (those that apply to it), in the caller's transaction.

    Returns the leases and, when a rate held work back, the seconds until the next
    token (a worker sleeps that long rather than claiming again at once).
    """
    state = FlowState(limits=limits)
    state.running, state.buckets = tx.state(limits)
    now = tx.now
    rooms = None if request.queues is None else dict(request.queues)
    # A window wider than the claim, so that rows of held scopes passed over do not
    # leave it short; at most CANDIDATE_MARGIN wider (more rounds read on if needed).
    n = request.limit + min(request.limit * (CANDIDATES_PER_SLOT - 1), CANDIDATE_MARGIN)
    excluded = held(state, now)
    chosen: list[Candidate] = []  # the leased ones
    leases: list[Lease] = []
    denied: set[Pair] = _held_pairs(excluded, state)
    tried: set[str] = set()
    rounds = 0
    for _ in range(CANDIDATE_ROUNDS):
        rounds += 1
        read = tx.candidates(request, excluded, n)
        found = [c for c in read if c.id not in tried]
        if rooms is not None:
            found = _within_rooms(found, rooms, chosen)
        _load_keys(tx, state, found, now)
        decision = choose(found, _after(state, chosen, now), request.limit - len(chosen), now)
        tried.update(c.id for c in decision.chosen)
        # Leased round by round: one the lease passes over (its bucket at the claim's
        # max_per_bucket, or locked by another claim) spends nothing and leaves its
        # place, and its queue's room, to the next round's candidates.
        got = _lease(tx, request, decision.chosen)
        leases.extend(got)
        leased = {lease.execution_id for lease in got}
        chosen.extend(c for c in decision.chosen if c.id in leased)
        denied |= decision.denied
        passed_over = len(leased) < len(decision.chosen)
        if len(chosen) >= request.limit or (
            not passed_over and (len(read) < n or not decision.denied)
        ):
            break
        excluded = _merge(excluded, decision.denied, state)
    leased_ids = {lease.execution_id for lease in leases}
    taken = chosen
    if rounds == 1 and not passed_over:  # the usual claim: its one choice, all leased
        buckets = dict(decision.spent)
    else:
        buckets = spend(_decision_of(state, chosen, now), state, leased_ids, now)
    for key in denied:
        old = buckets.get(key) or state.buckets.get(key)
        if (
            old is not None
            and old.denied_at is not None
            and now - old.denied_at < DENIED_RESOLUTION
        ):
            continue
        base = old or _level_now(state, key, now)
        buckets[key] = replace(base, denied_at=now)
    for key, bucket in list(buckets.items()):
        if bucket.denied_at is None and key in state.buckets:
            buckets[key] = replace(bucket, denied_at=state.buckets[key].denied_at)
    # Held back by an earlier claim, after it was due: this claim's own refusals say
    # nothing of the executions it took (they were not waiting on them).
    marks = {k: b.denied_at for k, b in state.buckets.items() if b.denied_at is not None}
    by_id = {c.id: c for c in taken}
    records = [
        Throttle(execution_id=i, scope=s, held=held_for(now, by_id[i].due_at), at=now)
        for i, s in throttled(taken, state, marks).items()
    ]
    if buckets or records:
        tx.write(buckets, records)
    after = FlowState(limits=state.limits, buckets={**state.buckets, **buckets})
    return leases, next_start_in(after, denied, now, request.limit)


def _lease(
    tx: FlowTransaction, request: ClaimArguments, chosen: Sequence[Candidate]
) -> list[Lease]:
    """Lease ``chosen`` (ids) as the claim would, its other filters and cap included."""
    if not chosen:
        return []
    ids = tuple(c.id for c in chosen)
    return tx.lease(replace(request, ids=ids, limit=len(ids), queues=None))


def _held_pairs(excluded: Held, state: FlowState) -> set[Pair]:
    pairs = {(scope, NO_KEY) for scope in excluded.scopes()}
    pairs |= {(scope_of("job", j), k) for j, k in excluded.job_keys}
    pairs |= {(scope_of("queue", q), k) for q, k in excluded.queue_keys}
    return pairs


def _merge(excluded: Held, pairs: set[Pair], state: FlowState) -> Held:
    """``excluded`` plus the ``(scope, key)`` pairs a round found held."""
    jobs, queues = set(excluded.jobs), set(excluded.queues)
    job_keys, queue_keys = set(excluded.job_keys), set(excluded.queue_keys)
    per_key = {lim.scope for lim in state.limits if lim.per_key}
    for scope, key in pairs:
        kind, _, name = scope.partition(":")
        if scope in per_key:
            (job_keys if kind == "job" else queue_keys).add((name, key))
        else:
            (jobs if kind == "job" else queues).add(name)
    return Held(
        jobs=tuple(sorted(jobs)),
        queues=tuple(sorted(queues)),
        job_keys=tuple(sorted(job_keys)),
        queue_keys=tuple(sorted(queue_keys)),
    )


def _within_rooms(
    found: list[Candidate], rooms: dict[str, int], chosen: Sequence[Candidate]
) -> list[Candidate]:
    """The candidates a claim restricted to queues may take, each queue up to its room."""
    used: dict[str, int] = {}
    for c in chosen:
        used[c.queue] = used.get(c.queue, 0) + 1
    out = []
    for c in found:
        if used.get(c.queue, 0) < rooms.get(c.queue, 0):
            used[c.queue] = used.get(c.queue, 0) + 1
            out.append(c)
    return out


def _load_keys(
    tx: FlowTransaction, state: FlowState, found: Sequence[Candidate], now: datetime
) -> None:
    """Read the stored buckets of the per-key pairs ``found`` touches, not yet read."""
    wanted: set[Pair] = set()
    for c in found:
        for lim in state.limits:
            if lim.per_key and lim.applies_to(c.job, c.queue):
                key = (lim.scope, c.limit_key or NO_KEY)
                if key not in state.buckets:
                    wanted.add(key)
    if wanted:
        state.buckets.update(tx.buckets(state.limits, sorted(wanted)))


def _after(state: FlowState, chosen: Sequence[Candidate], now: datetime) -> FlowState:
    """``state`` as it is once ``chosen`` have started (for a later round's choice)."""
    if not chosen:
        return state
    spent = _decision_of(state, chosen, now)
    running = dict(state.running)
    for c in chosen:
        for lim in state.limits:
            if lim.concurrency is not None and lim.applies_to(c.job, c.queue):
                key = (lim.scope, (c.limit_key or NO_KEY) if lim.per_key else NO_KEY)
                running[key] = running.get(key, 0) + 1
    return FlowState(limits=state.limits, buckets={**state.buckets, **spent.spent}, running=running)


def _decision_of(state: FlowState, chosen: Sequence[Candidate], now: datetime) -> Decision:
    """The decision that took exactly ``chosen`` (their spending, recomputed): they
    fit already, so only the rates' tokens are counted, not places."""
    return choose(chosen, replace(state, running={}), max(1, len(chosen)), now)


def _level_now(state: FlowState, key: Pair, now: datetime) -> TokenBucket:
    """A pair's bucket as it stands now (full if never stored)."""
    lim = next((x for x in state.limits if x.scope == key[0]), None)
    if lim is None or lim.rate is None or lim.burst is None:
        # Kept for its denied_at only (a concurrency or a pause held it): nothing was
        # spent, so a rate set on the scope later starts with a full bucket.
        return TokenBucket(tokens=float(INT32_MAX), at=now)
    stored = state.buckets.get(key)
    level = (
        float(lim.burst) if stored is None else stored.level(now, lim.rate.per_second, lim.burst)
    )
    return TokenBucket(tokens=level, at=now)


def ready_at(limit: Limit | None, bucket: TokenBucket) -> datetime:
    """When a bucket holds a token again (its ``at`` if it holds one now)."""
    if limit is None or limit.rate is None or bucket.tokens >= 1:
        return bucket.at
    return bucket.at + timedelta(seconds=(1 - bucket.tokens) / limit.rate.per_second)


def applying(limits: Sequence[Limit], request: ClaimArguments) -> list[Limit]:
    """The ``limits`` that could hold an execution this claim may take."""
    jobs = None if request.jobs is None else set(request.jobs)
    queues = None if request.queues is None else {q for q, _ in request.queues}
    out = []
    for lim in limits:
        if (lim.kind == "job" and (jobs is None or lim.name in jobs)) or (
            lim.kind == "queue" and (queues is None or lim.name in queues)
        ):
            out.append(lim)
    return out


class FlowView:
    """A process's cached answer to "which limits are there?" (see :data:`FLOW_REFRESH`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limits: list[Limit] | None = None
        self._read_at = 0.0

    def get(self, read: Callable[[], list[Limit]]) -> list[Limit]:
        now = time.monotonic()
        with self._lock:
            if self._limits is not None and now - self._read_at < FLOW_REFRESH:
                return self._limits
        limits = read()
        with self._lock:
            self._limits, self._read_at = limits, time.monotonic()
        return limits

    def forget(self) -> None:
        with self._lock:
            self._limits = None


class FlowVerbs(StoreCore):
    """Limits and paused queues: the operator's verbs, written once for every backend."""

    #: Seconds until the last limited claim's held-back work may start (see
    #: :meth:`next_start_in`); set by the claim, per store object.
    _flow_wait: float | None = None

    def set_limit(
        self, scope: str, *, actor: str = "operator", **options: Unpack[LimitOptions]
    ) -> Limit:
        """Set (or replace) the limit of ``scope`` (``job:NAME`` or ``queue:NAME``).

        ``rate`` as ``"50/s"``, ``"3000/min"``, ``"100/h"`` (starts: claims, retries
        and takeovers); ``burst`` the bucket's size (default: a tenth of a second's
        worth, at least 1); ``concurrency`` the most executions leased at once;
        ``per_key``: each distinct ``limit_key`` gets its own allowance. At least one
        of ``rate`` and ``concurrency``. A queue's pause is kept. Takes effect for
        every claimer within a second; recorded with ``actor``. A limit declared with
        a job (``source = "code"``) is replaced by this one, and a worker publishing
        the job again does not bring the declaration back while this one stands.
        """
        who = flow_actor(actor)
        limit = new_limit(scope, **checked(options, LimitOptions, "set_limit"), updated_by=who)
        stored = self._set_limit(limit)
        self._flow_changed()
        return stored

    def limits(self) -> list[Limit]:
        """Every limit and paused queue, by scope."""
        return sorted(self._read_limits(), key=lambda lim: lim.scope)

    def remove_limit(self, scope: str, *, actor: str = "operator") -> None:
        """Remove the limit of ``scope``; :class:`NotFound` if it has none.

        A paused queue stays paused (only its rate and concurrency go). A limit
        declared with a job comes back when a worker next publishes that job.
        """
        from fencepost.domain.limits import require_scope

        name = require_scope(scope)
        if not self._remove_limit(name, flow_actor(actor)):
            raise NotFound(name, subject="limit")
        self._flow_changed()

    def pause_queue(self, name: str, *, actor: str = "operator") -> Limit:
        """Pause queue ``name``: no claimer starts its executions until it is resumed.

        Running ones finish; waiting ones stay due. Persistent, recorded with
        ``actor``; pausing a paused queue changes nothing. Returns the queue's limit.
        """
        queue = require_name(name, "name", max_len=MAX_QUEUE)
        stored = self._pause_queue(queue, flow_actor(actor), True)
        self._flow_changed()
        return stored

    def resume_queue(self, name: str, *, actor: str = "operator") -> Limit | None:
        """Resume queue ``name``; its waiting executions start again under its limits.

        Each execution the pause kept waiting past its due time is recorded as
        throttled by ``queue:NAME`` for that time. Returns the queue's remaining
        limit, if any. Resuming a queue that is not paused changes nothing.
        """
        queue = require_name(name, "name", max_len=MAX_QUEUE)
        stored = self._pause_queue(queue, flow_actor(actor), False)
        self._flow_changed()
        return stored

    def paused_queues(self) -> list[Limit]:
        """The paused queues' limits (``paused`` True), by scope."""
        return [lim for lim in self.limits() if lim.paused]

    def flow_changes(self, *, limit: int = 100) -> list[FlowChange]:
        """The latest changes to limits and queues, newest first."""
        from fencepost.domain.checks import require_int

        return self._flow_changes(require_int(limit, "limit", low=1, high=10_000))

    def throttled(self, *, window: float | timedelta | None = 3600.0) -> list[ThrottleCount]:
        """Claims that waited on a limit or a paused queue in the last ``window``,
        per scope, with the total time held.

        ``window=None``: every one ever recorded, from counters that only grow (a
        prune deletes old throttle records, not these totals).
        """
        from fencepost.domain.durations import as_duration

        return self._throttled(None if window is None else as_duration(window, field="window"))

    def throttles(self, execution_id: str) -> list[Throttle]:
        """The throttle records of one execution, oldest first; :class:`NotFound` if unknown.

        One record per claim that took it after a limit or a paused queue held it
        past its due time (``at`` the claim, ``held`` how long), and one per resume
        of a paused queue that had held it (``at`` the resume). A prune deletes the
        records at or before its cutoff, as it does for :meth:`throttled`.
        """
        return self._throttles_of(execution_id)

    def declare_limits(self, limits: Iterable[Limit], *, actor: str = "publisher") -> None:
        """Store limits declared with jobs (``source = "code"``), unless an operator
        set the scope's limit: a declaration replaces an earlier declaration only."""
        declared = [replace(lim, source="code", updated_by=flow_actor(actor)) for lim in limits]
        if declared:
            self._declare_limits(declared)
            self._flow_changed()

    def next_start_in(self) -> float | None:
        """Seconds until the rate that held back this store's last claim has a claim's
        worth of tokens again (as many as that claim asked for, at most its burst),
        or None (nothing held, or held by concurrency or a pause: a finish or a
        resume frees it, not time). A worker sleeps that long, at most a second."""
        return self._flow_wait

    def _flow_changed(self) -> None:
        """This process changed the limits: forget any cached view of them."""
        view = getattr(self, "_flow_view", None)
        if view is not None:
            view.forget()

    @abstractmethod
    def _set_limit(self, limit: Limit) -> Limit: ...

    @abstractmethod
    def _read_limits(self) -> list[Limit]: ...

    @abstractmethod
    def _remove_limit(self, scope: str, actor: str) -> bool: ...

    @abstractmethod
    def _pause_queue(self, queue: str, actor: str, paused: bool) -> Limit: ...

    @abstractmethod
    def _declare_limits(self, limits: Sequence[Limit]) -> None: ...

    @abstractmethod
    def _flow_changes(self, limit: int) -> list[FlowChange]: ...

    @abstractmethod
    def _throttled(self, window: timedelta | None) -> list[ThrottleCount]: ...

    @abstractmethod
    def _throttles_of(self, execution_id: str) -> list[Throttle]: ...


def flow_actor(actor: object) -> str:
    """The actor a flow change records, checked (a name of at most MAX_ACTOR characters)."""
    return require_name(actor, "actor", max_len=MAX_ACTOR)


def describe(limit: Limit) -> str:
    """A limit in one line, as the audit records it (``rate=50/s burst=5 ...``)."""
    parts = []
    if limit.rate is not None:
        parts.append(f"rate={limit.rate} burst={limit.burst}")
    if limit.concurrency is not None:
        parts.append(f"concurrency={limit.concurrency}")
    if limit.per_key:
        parts.append("per_key")
    if limit.paused:
        parts.append("paused")
    return " ".join(parts) or "none"


__all__ = [
    "FLOW_REFRESH",
    "FlowChange",
    "FlowTransaction",
    "FlowVerbs",
    "FlowView",
    "Throttle",
    "ThrottleCount",
    "applying",
    "claim_limited",
    "describe",
    "ready_at",
]

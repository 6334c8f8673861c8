"""The store's leasing verbs: claims, heartbeats, outcomes and expiry (a part of
:class:`~fencepost.store.base.Store`).

The conventions of :mod:`fencepost.store.base` hold for every verb here.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Unpack, overload

from fencepost.domain import payloads
from fencepost.domain.checks import (
    INT32_MAX,
    MAX_ERROR_CHARS,
    require_int,
    require_name,
    require_text,
)
from fencepost.domain.claims import ClaimOptions
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import NotFound, ResultInvalid, StaleLease, ValidationError
from fencepost.domain.events import ExecutionAborted, ExecutionEvent, ExecutionReleased
from fencepost.domain.filters import checked
from fencepost.domain.machine import (
    DEFAULT_MAX_SNOOZES,
    MAX_SNOOZE_REASON,
    MAX_SNOOZES_LIMIT,
    snooze_delay,
    snoozed,
    snoozes_so_far,
)
from fencepost.domain.models import (
    JSON,
    Execution,
    Fence,
    Lease,
    LiveFence,
)
from fencepost.domain.states import State
from fencepost.store.catalogue import CatalogueVerbs
from fencepost.store.observers import (
    LeasesClaimed,
    LeasesExpired,
    tell_completions,
    tell_ended,
    tell_renewals,
)
from fencepost.store.values import (
    DEFAULT_TTL,
    MAX_LIMIT,
    RESULT_INVALID,
    ClaimArguments,
    Decide,
    Outcome,
    always,
    check_fences,
    failure,
    names_of,
    queues_of,
    renewed,
    result_refused,
    versions_of,
)

__all__ = ["LeasingVerbs"]


class LeasingVerbs(CatalogueVerbs):
    """Leasing: the fenced verbs a worker drives an attempt with."""

    # -- leasing ---------------------------------------------------------------------

    def claim(
        self, owner: str, *, ids: Iterable[str] | None = None, **options: Unpack[ClaimOptions]
    ) -> list[Lease]:
        """Atomically lease up to ``limit`` (default 1) claimable executions to ``owner``
        for ``ttl`` (default 30 s); the options: :class:`~fencepost.domain.claims.ClaimOptions`.

        Claimable, by the store's clock ``now``:

        * SCHEDULED or RETRY_WAIT with ``due_at <= now``;
        * RUNNING with ``lease_until <= now`` (expired) and ``attempt < max_attempts``
          (a takeover; the old attempt ends TIMED_OUT). Expired ones without
          attempts left are for :meth:`reap_expired` to fail; one it reaped with
          attempts left is RETRY_WAIT, due as it was, so claimable still.

        Restricted to ``jobs``, ``buckets`` and execution ``ids`` when given (``ids``
        serves a claim of one known execution, such as one occurrence of a schedule;
        it is not meant for long lists). With ``versions`` — the
        ``(job, job_version)`` pairs the claimer can run — an execution pinned to a
        version (``job_version`` not None) is claimable only if its pair is listed;
        unpinned executions run on any version and are not affected. Highest ``priority``
        first, then oldest ``due_at``, then id. Each claimed execution gets
        ``epoch + 1``, ``attempt + 1``, ``lease_owner = owner`` and
        ``lease_until = now + ttl``, and a CLAIMED transition. Executions locked
        by a concurrent claim are skipped, never waited for or taken twice.

        ``max_per_bucket`` caps RUNNING executions per bucket across every claimer
        that passes it (so one tenant's backlog cannot take every worker): a
        waiting execution is claimed only while its bucket has fewer RUNNING
        ones. Takeovers do not add to a bucket's count (the expired execution is
        already RUNNING). Claimers that pass no cap are not held to it.

        ``queues`` restricts the claim (takeovers included) to executions in
        these queues: a collection of names, or a mapping of name to N, which also
        takes at most N from that queue in this claim (a worker passes its free
        capacity per queue; 0 takes none). Across queues the order is the claim
        order above. None (the default) claims from every queue.
        """
        checked(options, ClaimOptions, "claim")
        who = require_name(owner, "owner")
        limit = require_int(options.get("limit", 1), "limit", low=1, high=MAX_LIMIT)
        jobs = options.get("jobs")
        buckets = options.get("buckets")
        versions = options.get("versions")
        cap = options.get("max_per_bucket")
        queues = options.get("queues")
        rooms = None if queues is None else queues_of(queues, limit)
        request = ClaimArguments(
            owner=who,
            limit=limit,
            ttl=as_duration(options.get("ttl", DEFAULT_TTL), field="ttl"),
            jobs=None if jobs is None else names_of(jobs, "jobs"),
            buckets=None if buckets is None else self._buckets(buckets),
            max_per_bucket=None
            if cap is None
            else require_int(cap, "max_per_bucket", low=1, high=INT32_MAX),
            versions=None if versions is None else versions_of(versions),
            ids=None if ids is None else names_of(ids, "ids"),
            queues=rooms,
        )
        if rooms == ():
            return []  # no queue has room: nothing to claim
        leases = self._claim(request)
        if leases and self.observers:
            self.observers.emit(LeasesClaimed(leases, request.ttl))
        return leases

    @abstractmethod
    def _claim(self, request: ClaimArguments) -> list[Lease]:
        """Claim with validated arguments (see :meth:`claim`)."""

    @overload
    def heartbeat(
        self, fence: Lease, *, ttl: float | timedelta = ..., progress: JSON = ...
    ) -> Lease: ...

    @overload
    def heartbeat(
        self, fence: Fence, *, ttl: float | timedelta = ..., progress: JSON = ...
    ) -> LiveFence: ...

    def heartbeat(
        self, fence: Fence, *, ttl: float | timedelta = DEFAULT_TTL, progress: JSON = None
    ) -> LiveFence:
        """Extend a live lease to ``now + ttl`` and return the renewed lease.

        A heartbeat never shortens a lease: ``lease_until`` becomes the later of
        its current value and ``now + ttl``. Given a :class:`Lease`, the answer is
        that lease with its new ``lease_until``; given a bare :class:`Fence`, a
        :class:`LiveFence`.

        Fenced: only if the row is RUNNING with this owner and epoch and
        ``now < lease_until``; otherwise :class:`StaleLease` (audited, nothing
        else changes). ``progress`` (JSON), when given, replaces the stored progress.
        """
        outcome = self._renew([(fence, progress)], ttl=ttl)[0]
        if isinstance(outcome, StaleLease):
            tell_renewals(self.observers, "heartbeat", [outcome])
            raise outcome
        return outcome

    @overload
    def heartbeat_many(
        self, beats: Sequence[tuple[Lease, JSON]], *, ttl: float | timedelta = ...
    ) -> list[Lease | StaleLease]: ...

    @overload
    def heartbeat_many(
        self, beats: Sequence[tuple[Fence, JSON]], *, ttl: float | timedelta = ...
    ) -> list[LiveFence | StaleLease]: ...

    def heartbeat_many(
        self,
        beats: Sequence[tuple[Fence, JSON]],
        *,
        ttl: float | timedelta = DEFAULT_TTL,
    ) -> Sequence[LiveFence | StaleLease]:
        """Renew many leases in one transaction; ``beats`` pairs a fence with its progress.

        Returns, in order, the renewed lease (as :meth:`heartbeat` answers) or the
        :class:`StaleLease` that refused it (each refusal audited). One stale
        lease does not stop the others.
        """
        renewals = self._renew(beats, ttl=ttl)
        tell_renewals(self.observers, "heartbeat_many", renewals)
        return renewals

    def _renew(
        self, beats: Sequence[tuple[Fence, JSON]], *, ttl: float | timedelta
    ) -> Sequence[LiveFence | StaleLease]:
        """:meth:`heartbeat_many`, untold: what ``heartbeat`` and it share."""
        duration = as_duration(ttl, field="ttl")
        check_fences(fence for fence, _ in beats)
        encoded = [
            (fence, None if p is None else self._encode(p, "progress")) for fence, p in beats
        ]
        return [
            renewed(fence, outcome) if isinstance(outcome, datetime) else outcome
            for (fence, _), outcome in zip(
                beats, self._heartbeat(encoded, ttl=duration), strict=True
            )
        ]

    @abstractmethod
    def _heartbeat(
        self, beats: Sequence[tuple[Fence, str | None]], *, ttl: timedelta
    ) -> list[datetime | StaleLease]:
        """Renew validated fences (progress already encoded) in one transaction.

        Returns, per beat, the new ``lease_until`` or the (audited) refusal.
        """

    def complete(self, fence: Fence, result: JSON = None) -> Execution:
        """Record success: RUNNING -> SUCCEEDED with ``result``, if the lease is live.

        Fenced like :meth:`heartbeat`: a stale lease raises :class:`StaleLease` and
        changes nothing. A result that is not JSON (or exceeds the payload limit)
        fails the execution permanently with error ``result_invalid: ...`` and
        raises :class:`ResultInvalid`. Returns the finished execution as the
        completion wrote it (what :meth:`get` reads afterwards).
        """
        check_fences((fence,))
        outcome = self._outcome(fence, result)
        if outcome.invalid is not None:
            refused = result_refused(fence, outcome.invalid)
            tell_ended(
                self.observers,
                "complete",
                "result_invalid",
                lambda: self._fenced_change(fence, "complete", refused),
            )
            raise ResultInvalid(fence.execution_id, outcome.invalid)
        return tell_ended(
            self.observers, "complete", "succeeded", lambda: self._complete_one(outcome)
        )

    @abstractmethod
    def _complete_one(self, outcome: Outcome) -> Execution:
        """Apply one completion with a valid result in one transaction, and return the
        execution as that transaction wrote it (read back inside it, never by a second
        read); if the fence does not hold, audit the refusal and raise :class:`StaleLease`.
        """

    def complete_many(self, results: Sequence[tuple[Fence, JSON]]) -> list[StaleLease | None]:
        """Complete many leases in one transaction; see :meth:`complete`.

        Returns, in order, ``None`` where the completion was accepted (the
        execution is SUCCEEDED, or FAILED with ``result_invalid``) or the
        :class:`StaleLease` that refused it. One stale lease does not stop the others.
        """
        check_fences(fence for fence, _ in results)
        outcomes = [self._outcome(fence, result) for fence, result in results]
        verdicts = self._complete(outcomes)
        tell_completions(self.observers, outcomes, verdicts)
        return verdicts

    def _outcome(self, fence: Fence, result: JSON) -> Outcome:
        try:
            text = payloads.encode(result, field="result", limit=self.config.max_payload_bytes)
        except ValidationError as exc:
            return Outcome(
                lease=fence, result=None, result_json=None, invalid=f"{RESULT_INVALID}: {exc}"
            )
        return Outcome(lease=fence, result=result, result_json=text, invalid=None)

    @abstractmethod
    def _complete(self, outcomes: Sequence[Outcome]) -> list[StaleLease | None]:
        """Apply prepared completions in one transaction (see :meth:`complete_many`)."""

    def fail(
        self,
        fence: Fence,
        error: str,
        *,
        retryable: bool = True,
        retry_in: float | timedelta | None = None,
        timed_out: bool = False,
    ) -> Execution:
        """Record a failed attempt, if the lease is live (else :class:`StaleLease`).

        Retryable with attempts left: RUNNING -> RETRY_WAIT, due after
        ``retry_in`` or the backoff (full jitter) for the attempt the stored row
        carries, read in the fenced transaction: the job's retry delays when the
        execution's ``(job, job_version)`` is catalogued with some, else the
        store's. Otherwise RUNNING -> FAILED, a dead letter. ``error`` is kept
        (truncated to 8,192 characters).

        ``timed_out=True`` says the worker stopped the attempt because it ran past
        the job's ``timeout``: the transition is TIMED_OUT instead of FAILED and the
        attempt ends TIMED_OUT (with ``error``); retries and dead letters as above.
        A stale lease is refused and audited (``STALE_REFUSED``) either way.
        """
        check_fences((fence,))
        error = require_text(error, "error", max_len=MAX_ERROR_CHARS)
        delay = (
            None if retry_in is None else as_duration(retry_in, field="retry_in", allow_zero=True)
        )
        retryable, timed_out = bool(retryable), bool(timed_out)

        if delay is None:
            self._current_catalogue()  # the job's backoff, read before the transaction

        def decide(current: Execution, now: datetime) -> ExecutionEvent:
            # The backoff grows with the stored attempt, read under the fence: the
            # caller need not know it (an HTTP worker sends only owner and epoch).
            wait = (
                self.retry_delay(current.attempt, current.job, current.job_version)
                if delay is None
                else delay
            )
            return failure(
                fence, error, retryable=retryable, timed_out=timed_out, retry_at=now + wait
            )

        ending = "timed_out" if timed_out else "failed"
        return tell_ended(
            self.observers, "fail", ending, lambda: self._fenced_change(fence, "fail", decide)
        )

    def release(self, fence: Fence, *, reason: str = "released") -> Execution:
        """Give a live lease back unfinished: RUNNING -> SCHEDULED, claimable at once.

        For a worker that stops (graceful shutdown) or cannot run the execution.
        The attempt ends ABANDONED and does not count against ``max_attempts``;
        the epoch keeps its value (the next claim raises it). Fenced like
        :meth:`complete`: a stale lease raises :class:`StaleLease`.
        """
        check_fences((fence,))
        event = ExecutionReleased(
            owner=fence.owner, reason=require_name(reason, "reason", max_len=MAX_ERROR_CHARS)
        )
        return tell_ended(
            self.observers,
            "release",
            "released",
            lambda: self._fenced_change(fence, "release", always(event)),
        )

    def snooze(
        self,
        fence: Fence,
        seconds: float | timedelta,
        *,
        reason: str | None = None,
        max_snoozes: int = DEFAULT_MAX_SNOOZES,
    ) -> Execution:
        """Give a live lease back until ``seconds`` from now: RUNNING -> SCHEDULED.

        For a handler that cannot make progress yet (``ctx.snooze``): the execution is
        due at the store's now plus ``seconds``, and the attempt ends SNOOZED without
        counting against ``max_attempts`` (the next claim gets the same attempt
        number); the epoch keeps its value. The audit records a SNOOZED transition,
        the lease owner as actor, and a reason saying for how long and which snooze
        it is (``snoozed for 30 s (2 of at most 100)``, then ``: reason`` if given).

        One execution may snooze ``max_snoozes`` times (default 100), counted in its
        audit trail since its submit or its last replay. A snooze past that is a
        failed attempt instead, with error ``snoozed too often: ...``: RETRY_WAIT
        after the usual backoff while attempts remain, else FAILED (a dead letter),
        so a handler that always snoozes still ends.

        ``seconds`` (int, float or ``timedelta``) must be > 0 and at most 30 days;
        ``reason`` at most 1,024 characters; ``max_snoozes`` from 0 to 1,000,000:
        else :class:`ValidationError` naming the argument, and nothing is written.
        Fenced like :meth:`complete`: a stale lease raises :class:`StaleLease`.
        """
        check_fences((fence,))
        delay = snooze_delay(seconds)
        if reason is not None:
            reason = require_name(reason, "reason", max_len=MAX_SNOOZE_REASON)
        bound = require_int(max_snoozes, "max_snoozes", low=0, high=MAX_SNOOZES_LIMIT)
        # Counted before the fenced transaction, and still exact when it commits: only
        # a holder writes a SNOOZED record, and a snooze ends its lease, so another one
        # after this read would leave the fence stale and this snooze refused.
        try:
            count = snoozes_so_far(self.transitions(fence.execution_id))
        except NotFound:
            count = 0  # the fenced change refuses it as stale, like every fenced verb
        if count >= bound:
            self._current_catalogue()  # past the bound it fails: the job's backoff

        def decide(current: Execution, now: datetime) -> ExecutionEvent:
            retry_at = now
            if count >= bound:
                retry_at += self.retry_delay(current.attempt, current.job, current.job_version)
            return snoozed(
                owner=fence.owner,
                delay=delay,
                reason=reason,
                snoozes=count,
                max_snoozes=bound,
                now=now,
                retry_at=retry_at,
            )

        def ending(snoozed: Execution) -> str:
            return "snoozed" if snoozed.state is State.SCHEDULED else "failed"  # past the bound

        return tell_ended(
            self.observers, "snooze", ending, lambda: self._fenced_change(fence, "snooze", decide)
        )

    def abort(self, fence: Fence, *, reason: str = "cancel requested") -> Execution:
        """Stop a running execution to honour a cancel: RUNNING -> CANCELLED, if the lease is live.

        For the worker holding the execution, once it has stopped the handler. The
        attempt ends CANCELLED; the lease is cleared; the audit records the lease
        owner as actor and ``reason``. Fenced like :meth:`complete`: a stale lease
        raises :class:`StaleLease` (audited ``STALE_REFUSED``) and changes nothing.

        Afterwards the lease no longer holds the execution, so a worker honouring a
        cancel *command* completes it (:meth:`complete_command`) before aborting.
        A client cancels an execution that has not started with :meth:`cancel`.
        """
        check_fences((fence,))
        event = ExecutionAborted(
            owner=fence.owner, reason=require_name(reason, "reason", max_len=MAX_ERROR_CHARS)
        )
        return tell_ended(
            self.observers,
            "abort",
            "cancelled",
            lambda: self._fenced_change(fence, "abort", always(event)),
        )

    @abstractmethod
    def _fenced_change(self, fence: Fence, verb: str, decide: Decide) -> Execution:
        """Apply ``decide(current, now)`` under the fence in one transaction, or raise.

        Read (and hold) the execution; if ``fence`` does not hold it
        (:func:`fencepost.domain.machine.holds`) audit a ``STALE_REFUSED`` for
        ``verb`` and raise :class:`StaleLease`; else apply the decided event
        through :func:`fencepost.domain.machine.apply` and return the result.
        """

    def retry_delay(
        self, attempt: int, job: str | None = None, version: int | None = None
    ) -> timedelta:
        """The backoff before retrying after failed attempt ``attempt`` (jittered).

        The job's retry delays when ``(job, version)`` is in the catalogue with
        delays of its own, else the store's policy.
        """
        policy = self.config.retry if job is None else self._job_retry(job, version)
        return policy.delay(attempt, self.config.rng)

    def reap_expired(self, *, limit: int = 1000) -> int:
        """Time out up to ``limit`` RUNNING executions whose lease expired (``lease_until <= now``).

        Each one's attempt ends TIMED_OUT (a LEASE_EXPIRED transition); it moves
        to RETRY_WAIT if attempts remain, else to FAILED. A RETRY_WAIT one keeps its
        ``due_at``, with no backoff: an expired lease is claimable from its expiry,
        whether the reaper got to it first or not, and in the order a takeover by
        :meth:`claim` would have it. Returns how many were reaped; call again while
        it returns ``limit``.
        """
        reaped = self._reap_expired(limit=limit)
        if reaped and self.observers:
            self.observers.emit(LeasesExpired(reaped))
        return reaped

    @abstractmethod
    def _reap_expired(self, *, limit: int) -> int:
        """Time out up to ``limit`` expired leases; how many (see :meth:`reap_expired`)."""

    def wait_for_work(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for new work; True if woken early.

        Backends that can be told about new work (PostgreSQL's LISTEN/NOTIFY)
        return as soon as it is submitted; the others just wait out the timeout.
        Either way a worker polls again afterwards: claim decides, not this.
        """
        time.sleep(max(0.0, timeout))
        return False

"""The store contract: the domain verbs every backend implements.

Each public method's docstring is its behavioural specification; the contract
suite in :mod:`fencepost.testing.contract` checks it against every backend.
Public verbs validate their arguments here, once, and hand typed values to the
backend's protected hooks (``_insert``, ``_claim``, ...), so backends never
re-implement validation and every backend rejects bad input the same way.

Conventions that hold for every verb:

* **Now is the store's now.** Backends read time only from their clock; no
  verb takes a "now" argument.
* A lease is **live** while ``now < lease_until``. At ``now == lease_until`` it
  has expired: fenced calls are refused and the execution may be claimed again.
* Every state change writes one audit :class:`Transition` in the same
  transaction. Refused fenced calls write a ``STALE_REFUSED`` record and change
  nothing else.
* Bad arguments raise :class:`ValidationError` naming the field, before anything
  is written.
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Unpack, overload

from fencepost import tracing
from fencepost.domain import payloads
from fencepost.domain.checks import (
    INT32_MAX,
    MAX_ERROR_CHARS,
    require_int,
    require_name,
    require_text,
    storable,
)
from fencepost.domain.claims import ClaimOptions
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import NotFound, ResultInvalid, StaleLease, ValidationError
from fencepost.domain.events import ExecutionAborted, ExecutionEvent, ExecutionReleased
from fencepost.domain.filters import StoreFilters, StoreQuery, checked
from fencepost.domain.machine import (
    DEFAULT_MAX_SNOOZES,
    MAX_SNOOZE_REASON,
    MAX_SNOOZES_LIMIT,
    attempts_from_transitions,
    snooze_delay,
    snoozed,
    snoozes_so_far,
)
from fencepost.domain.models import (
    JSON,
    Attempt,
    Command,
    Execution,
    Fence,
    Lease,
    LiveFence,
    Page,
    Transition,
)
from fencepost.domain.states import CommandKind, State
from fencepost.domain.submission import (
    NewExecution,
    SubmitOptions,
    canonical,
    check_arguments,
    prepare,
    submit_options,
)
from fencepost.store.catalogue import with_store_defaults
from fencepost.store.flow import FlowVerbs
from fencepost.store.history import HistoryVerbs
from fencepost.store.observers import (
    LeasesClaimed,
    LeasesExpired,
    tell_completions,
    tell_ended,
    tell_renewals,
)
from fencepost.store.operating import OperatingVerbs
from fencepost.store.reporting import ReportVerbs
from fencepost.store.scheduling import ScheduleVerbs
from fencepost.store.values import (
    DEFAULT_COMMAND_TTL,
    DEFAULT_TTL,
    MAX_LIMIT,
    RESULT_INVALID,
    ClaimArguments,
    Decide,
    ExecutionFilter,
    Outcome,
    always,
    check_fences,
    failure,
    names_of,
    queues_of,
    renewed,
    result_refused,
    unix_ms,
    versions_of,
)
from fencepost.store.verbs.reading import execution_filter
from fencepost.store.waiting import Watcher, await_on, block_on, timed_out, wait_seconds

__all__ = ["Store"]


#: Seconds between looks of a wait on a backend without a watcher.
WAIT_POLL = 0.05


def _waited_id(execution_id: object) -> str:
    """The id a wait names: text, or ValidationError on ``execution_id``."""
    if not isinstance(execution_id, str):
        raise ValidationError("execution_id", f"must be a string, got {execution_id!r}")
    return execution_id


class Store(HistoryVerbs, OperatingVerbs, ReportVerbs, ScheduleVerbs, FlowVerbs):
    """A durable home for executions and schedules, each handed out under a fenced lease.

    The verbs are grouped by section: submitting, reading, leasing and commands here;
    nodes, housekeeping and the operator's verbs, reports, schedules, flow control and
    the history charts in the classes it is made of, one module each (its bases).
    """

    # -- submitting ------------------------------------------------------------------

    def submit(
        self,
        job: str,
        inputs: JSON = None,
        *,
        connection: object = None,
        actor: str | None = None,
        **options: Unpack[SubmitOptions],
    ) -> Execution:
        """Store a new execution of ``job`` and return it (state SCHEDULED, epoch 0).

        It waits in ``queue``: a name like a job's, at most 100 characters; None
        means the job's catalogue entry's, else ``"default"``. Workers may claim from
        some queues only.

        ``execute_at`` (timezone-aware; naive is refused) or ``delay`` (seconds or
        timedelta from the store's now) set ``due_at``; neither means now.
        ``inputs`` must be a JSON object (a dict: a handler takes them as keywords)
        within ``max_payload_bytes``; ``None`` means ``{}``.
        ``version`` pins the execution to a version of its job (its ``job_version``);
        ``job_version=`` is its deprecated name (a :class:`DeprecationWarning`).

        With an ``idempotency_key``: if an execution with that key exists and was
        submitted with the same arguments, it is returned unchanged (whatever its
        state); with different arguments, :class:`IdempotencyConflict` is raised.

        The job catalogue decides the rest (see
        :class:`~fencepost.store.catalogue.CatalogueVerbs`): a published ``job`` is
        pinned to ``version`` (its latest when None; an unknown version is a
        :class:`ValidationError` on ``version`` listing the known ones), its
        ``inputs`` must match that version's schema (a :class:`ValidationError`
        naming ``inputs.<field>``), and ``max_attempts``, ``timeout`` and ``priority``
        left None take the job's defaults, else 3 attempts, no timeout, priority 0.
        A job no worker published is refused (naming ``job`` and listing the known
        jobs) when the store's ``unknown_jobs`` is ``refuse``; by default it is
        stored with the store's defaults, and what the caller left None takes the
        job's published defaults when a worker publishes it (see
        :meth:`~fencepost.store.catalogue.CatalogueVerbs.adopt_unpublished`). The
        comparison of an idempotent retry is made on the arguments so resolved.

        ``actor`` names the submitter in the execution's SUBMITTED audit record (the
        HTTP API passes the token's name, the CLI ``cli:user@host``); None leaves it
        unnamed. It is not part of an idempotent retry's comparison.

        ``limit_key`` (text of 1 to 200 characters, no control characters) is the key
        the limits of a per-key scope count it under: each distinct key of the scope
        gets its own rate and concurrency (see :meth:`set_limit`).

        ``connection`` submits inside the caller's open transaction instead of one of
        the store's own: a psycopg ``Connection`` (PostgreSQL store), a
        ``sqlite3.Connection`` on the store's file (SQLite store), or a SQLAlchemy
        ``Connection`` or ``Session`` over either. The execution then exists exactly
        when the caller commits (a rollback leaves nothing and wakes no worker);
        fencepost never commits nor rolls back that transaction, and on an error
        (:class:`IdempotencyConflict` included) leaves it as it was before the call.
        A connection to another database, in autocommit, closed, of the wrong kind
        or over an unsupported driver, and any connection given to the memory store,
        is refused with a :class:`ValidationError` on ``connection``
        (see :mod:`fencepost.store.callers`).
        """
        arguments = submit_options(inputs, options, stacklevel=2)
        return self._submit_or_find(job, arguments, connection, actor)[0]

    def submit_or_find(
        self,
        job: str,
        inputs: JSON = None,
        *,
        connection: object = None,
        actor: str | None = None,
        **options: Unpack[SubmitOptions],
    ) -> tuple[Execution, bool]:
        """:meth:`submit` (with its arguments), also saying whether this call created it.

        Returns ``(execution, created)``: ``created`` is False when an execution
        with the same ``idempotency_key`` (and the same arguments) already existed,
        including one stored by a concurrent submit an instant earlier, so of many
        racing submits with one key exactly one is told it created it.
        ``connection`` joins the caller's transaction, as for :meth:`submit`.
        """
        arguments = submit_options(inputs, options, verb="submit_or_find", stacklevel=2)
        return self._submit_or_find(job, arguments, connection, actor)

    def _submit_or_find(
        self,
        job: str,
        arguments: Mapping[str, Any],
        connection: object = None,
        actor: str | None = None,
    ) -> tuple[Execution, bool]:
        new = self._prepare_one(job, arguments, actor)
        execution = self._insert_traced([new], connection)[0]
        return execution, execution.id == new.id

    def submit_many(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        connection: object = None,
        actor: str | None = None,
    ) -> list[Execution]:
        """Submit a batch in one transaction; each mapping holds ``submit``'s arguments.

        Either every request is stored (or matched to an existing idempotent
        twin) or none is: a bad item raises :class:`ValidationError` with a field
        such as ``[3].inputs`` and nothing is written. Returns executions in
        request order. The batch is stored at one instant of the store's clock:
        it is every item's ``created_at`` and the origin of every ``delay``.
        ``connection`` joins the caller's transaction, and ``actor`` is audited as
        every item's submitter, as for :meth:`submit`.
        """
        batch = self._prepare_many(requests, actor)
        if not batch:
            return []
        return self._insert_traced(batch, connection)

    def _insert_traced(self, batch: list[NewExecution], connection: object) -> list[Execution]:
        """Insert ``batch`` (on the store's connection, or in the caller's transaction on
        ``connection``), in a ``fencepost.submit`` span when tracing is on."""
        if connection is None:
            return tracing.insert(self._insert, batch, self.location)
        return tracing.insert(lambda b: self._insert_in(b, connection), batch, self.location)

    def _prepare_one(
        self,
        job: object,
        arguments: Mapping[str, Any],
        actor: str | None = None,
        *,
        since: float | None = None,
    ) -> NewExecution:
        """One submit's request validated, at the store's now (see :meth:`_prepare`).

        ``since``: the catalogue is read again for a job it lacks unless it was read
        after this monotonic instant (None: now; see ``CatalogueVerbs._entry_of``).
        """
        actor = _submitter(actor)
        now = self.clock.now()
        catalogued = self._catalogued(job, arguments, since=since)
        return self._prepare(now, unix_ms(now), job, catalogued | {"actor": actor})

    def _prepare_many(
        self,
        requests: Iterable[Mapping[str, Any]],
        actor: str | None = None,
        *,
        since: float | None = None,
    ) -> list[NewExecution]:
        """A batch validated at one instant, a bad item named by its index (``since``:
        as for :meth:`_prepare_one`, once for the batch)."""
        actor = _submitter(actor)
        now = self.clock.now()
        instant = unix_ms(now)
        # Whether the catalogue has a say is asked once for the batch: 3% of a batch's
        # instructions went to asking it per item.
        catalogued = self._catalogue_applies()
        if since is None:  # an unknown job reads the catalogue again once per batch
            since = time.monotonic()
        batch: list[NewExecution] = []
        for index, request in enumerate(requests):
            check_arguments(request, index=index)
            try:
                # canonical() copies; only a request with the old name needs it.
                named = canonical(request) if "job_version" in request else dict(request)
                job = named.pop("job")
                arguments = (
                    self._catalogued(job, named, since=since)
                    if catalogued
                    else with_store_defaults(named, unpublished=isinstance(job, str))
                )
                arguments["actor"] = actor
                batch.append(self._prepare(now, instant, job, arguments))
            except ValidationError as exc:
                raise ValidationError(f"[{index}].{exc.field}", exc.message) from None
        return batch

    def _prepare(
        self, now: datetime, unix_ms: int, job: object, arguments: Mapping[str, Any]
    ) -> NewExecution:
        """Validate one request made at ``now`` (``unix_ms``: the same instant, for its id),
        its ``arguments`` already through the job catalogue's rules (:meth:`_catalogued`)."""
        return prepare(
            job,
            new_id=self._ids.new(unix_ms),
            now=now,
            max_payload_bytes=self.config.max_payload_bytes,
            num_buckets=self.config.num_buckets,
            **arguments,
        )

    @abstractmethod
    def _insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        """Insert validated executions in one transaction, each with a SUBMITTED transition.

        Idempotency: a new execution whose key already exists (in the store or
        earlier in ``batch``) is replaced by the existing one if ``request_hash``
        matches, else :class:`IdempotencyConflict` is raised and nothing of the
        batch is written.
        """

    def _insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        """:meth:`_insert` inside the caller's transaction on ``connection`` (see
        :meth:`submit`); a backend that cannot join one refuses it."""
        raise ValidationError(
            "connection", f"a {type(self).__name__} cannot join a caller's transaction"
        )

    # -- reading ---------------------------------------------------------------------

    @abstractmethod
    def get(self, execution_id: str) -> Execution:
        """The execution with this id, or :class:`NotFound`."""

    def wait(self, execution_id: str, *, timeout: float | timedelta | None = None) -> Execution:
        """The execution once it is terminal (SUCCEEDED, FAILED, CANCELLED or SKIPPED).

        Blocks until then, or raises the builtin :class:`TimeoutError` after ``timeout``
        (seconds, or a timedelta; None waits without bound; 0 looks once). An
        execution already terminal is returned at once; an unknown id raises
        :class:`NotFound` at once. A negative, NaN or infinite ``timeout``, or one
        that is not a number, raises :class:`ValidationError` on ``timeout`` (None,
        not ``inf``, means no bound).

        Waiters cost neither a thread nor a connection each: the backend's one
        watcher finds finished executions for all of them (PostgreSQL: woken by a
        notification sent with every terminal transition, from any process;
        SQLite: one query per poll for every watched id; memory: a condition).
        """
        seconds = wait_seconds(timeout)
        current = self.get(_waited_id(execution_id))
        if current.state.is_terminal:
            return current
        if seconds == 0:
            raise timed_out(execution_id, seconds)
        return self._wait(execution_id, seconds)

    def _wait(self, execution_id: str, seconds: float | None) -> Execution:
        """Wait for a known execution to finish (see :meth:`wait`); TimeoutError after ``seconds``.

        Through :meth:`_waits`'s watcher if the backend has one; else by reading it
        again every :data:`WAIT_POLL` seconds.
        """
        watcher = self._waits()
        if watcher is not None:
            return block_on(watcher, execution_id, seconds)
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            current = self.get(execution_id)
            if current.state.is_terminal:
                return current
            left = WAIT_POLL if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise timed_out(execution_id, seconds)
            time.sleep(min(WAIT_POLL, left))

    async def _wait_async(
        self, execution_id: str, *, timeout: float | timedelta | None = None
    ) -> Execution:
        """:meth:`wait` for a coroutine, with the same arguments, results and errors.

        It awaits a future the backend's watcher resolves from its thread: no
        thread and no connection per waiter (a backend without a watcher, or a
        ``timeout`` of 0, takes one look on a worker thread).
        """
        seconds = wait_seconds(timeout)
        execution_id = _waited_id(execution_id)
        watcher = self._waits()
        if watcher is None or seconds == 0:
            return await asyncio.to_thread(self.wait, execution_id, timeout=seconds)
        if not self._can_wait_for(execution_id):
            raise NotFound(execution_id)
        return await await_on(watcher, execution_id, seconds)

    def _waits(self) -> Watcher | None:
        """The backend's shared watcher of waited-for executions (None: :meth:`wait` polls)."""
        return None

    def _can_wait_for(self, execution_id: str) -> bool:
        """Whether ``execution_id`` can name an execution here (else a wait is NotFound)."""
        return storable(execution_id)

    def query(self, **query: Unpack[StoreQuery]) -> Page:
        """Executions matching every given filter, ordered by id (creation order).

        The arguments are :class:`~fencepost.domain.filters.StoreQuery`'s, each optional.

        ``state`` is one state or several; ``bucket`` one bucket, ``buckets`` any of
        several (each in ``[0, num_buckets)``; an empty collection matches nothing;
        giving both is a :class:`ValidationError` on ``buckets``);
        ``due_after <= due_at < due_before`` (aware datetimes; naive ones are a
        :class:`ValidationError` naming the argument); ``queue`` one queue's;
        ``outcome`` (an :class:`~fencepost.domain.states.AttemptOutcome` or its name,
        in any case) the executions any of whose attempts (:meth:`attempts`) ended
        with it, read from the audit trail (a transition from RUNNING with one of
        :func:`~fencepost.domain.machine.ending_events`; TIMED_OUT includes an
        expired lease reaped or taken over), the current attempt's or an earlier one's.
        ``limit_key`` the executions under that limit key; ``owner`` the RUNNING
        executions whose lease that owner holds (expired or not: until a claim takes
        it over or the reaper ends it); ``created_after <= created_at <
        created_before``; ``finished_after <= updated_at < finished_before`` of the
        finished executions (SUCCEEDED, FAILED, CANCELLED, SKIPPED: a finished row's
        ``updated_at`` is when it finished), either bound leaving out the unfinished
        ones; ``error`` (1 to 200 characters) the executions whose latest recorded
        error contains that text, ASCII letters in any case (other characters as
        written), ``%``, ``_`` and ``\\`` literal. Datetimes must be aware, else a
        :class:`ValidationError` naming the argument. A name filter (``job``,
        ``queue``, ``schedule``, ``limit_key``, ``owner``) that is not a string is a
        :class:`ValidationError`; one holding U+0000 or a lone surrogate, or an
        ``error`` that does, matches nothing (no stored text holds one).
        ``after`` is the ``next_cursor`` of the previous page (keyset pagination:
        ids strictly greater). ``next_cursor`` is None on the last page.
        ``newest_first`` orders by id descending instead (ids are time-ordered), and
        its cursor then means ids strictly smaller.
        """
        filters = self._query_filter(**checked(query, StoreQuery, "query"))
        return Page(items=[], next_cursor=None) if filters is None else self._query(filters)

    def count_by_state(self, **filters: Unpack[StoreFilters]) -> dict[State, int]:
        """How many executions :meth:`query` with these filters would list, by state:
        every :class:`State` is a key (0 where none match), in the enum's order.

        The filters and their checks are :meth:`query`'s (no ``limit``, ``after`` or
        order); a filter that matches nothing gives every state 0. The counts are
        one snapshot.
        """
        given = checked(filters, StoreFilters, "count_by_state")
        found_filters = self._query_filter(**given, limit=1)
        found = {} if found_filters is None else self._count_by_state(found_filters)
        return {s: found.get(s, 0) for s in State}

    def _query_filter(self, **arguments: Any) -> ExecutionFilter | None:
        """:meth:`query`'s arguments validated; None when no stored row can match."""
        return execution_filter(self.config.num_buckets, **arguments)

    @abstractmethod
    def _query(self, filters: ExecutionFilter) -> Page:
        """Run a validated query: at most ``limit`` items, ``next_cursor`` if more exist."""

    @abstractmethod
    def _count_by_state(self, filters: ExecutionFilter) -> dict[State, int]:
        """Count what a validated query matches, by state (states without any may be
        left out); ``limit``, ``after`` and the order are not used."""

    def find(self, idempotency_key: str) -> Execution | None:
        """The execution submitted (or materialized) under ``idempotency_key``, or None.

        A materialized occurrence's key is ``schedule_id:slot``
        (:func:`fencepost.domain.schedules.occurrence_key`).
        """
        return self._find(self._find_key(idempotency_key))

    @staticmethod
    def _find_key(idempotency_key: str) -> str:
        """:meth:`find`'s key, validated."""
        # Longer than a submit's key may be: occurrence keys carry a schedule id and a slot.
        return require_name(idempotency_key, "idempotency_key", max_len=1024)

    @abstractmethod
    def _find(self, idempotency_key: str) -> Execution | None:
        """Look up a validated key (see :meth:`find`)."""

    @abstractmethod
    def transitions(self, execution_id: str) -> list[Transition]:
        """The audit trail of one execution, oldest first; :class:`NotFound` if unknown."""

    def attempts(self, execution_id: str) -> list[Attempt]:
        """The attempts of one execution, oldest first (derived from its audit trail)."""
        return attempts_from_transitions(self.transitions(execution_id))

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

    # -- commands --------------------------------------------------------------------------

    def request(
        self, execution_id: str, kind: CommandKind | str, *, actor: str = "client"
    ) -> Command:
        """Ask a running execution to ``kind`` (cancel, pause, resume); return the command.

        ``kind`` is a :class:`CommandKind` or its value (``"cancel"``); anything else
        raises :class:`ValidationError` on ``kind``. Unknown ids raise :class:`NotFound`.
        By the execution's state, in one transaction:

        * RUNNING: a PENDING command is stored, for the worker holding the
          execution to claim (:meth:`claim_commands`) and complete.
        * SCHEDULED or RETRY_WAIT, and ``kind`` is cancel: the execution is
          cancelled at once (the transition :meth:`cancel` makes, by ``actor``)
          and the command is stored DONE (``done_at = now``, no ``owner`` or ``epoch``).
        * Otherwise — finished, or pause/resume of an execution that is not
          running — :class:`NotRunning` is raised and nothing is stored.
        """
        command_kind, arguments = self._requested(kind, actor)
        return self._request(execution_id, command_kind, **arguments)

    def _requested(self, kind: CommandKind | str, actor: str) -> tuple[CommandKind, dict[str, str]]:
        """:meth:`request`'s kind validated, and the keyword arguments of :meth:`_request`
        (the actor validated, a new command id)."""
        try:
            command_kind = CommandKind(kind)
        except ValueError:
            known = ", ".join(k.value for k in CommandKind)
            raise ValidationError("kind", f"unknown command {kind!r} (one of {known})") from None
        return command_kind, {
            "actor": require_name(actor, "actor"),
            "command_id": self._ids.new(int(self.clock.now().timestamp() * 1000)),
        }

    @abstractmethod
    def _request(
        self, execution_id: str, kind: CommandKind, *, actor: str, command_id: str
    ) -> Command:
        """Store a validated request under ``command_id`` (see :meth:`request`).

        Decide with :func:`fencepost.domain.commands.on_request` on the execution
        as locked by this transaction.
        """

    def claim_commands(
        self,
        owner: str,
        execution_ids: Iterable[str],
        *,
        ttl: float | timedelta = DEFAULT_COMMAND_TTL,
        limit: int = 100,
    ) -> list[Command]:
        """Atomically claim up to ``limit`` open commands of ``execution_ids`` for ``owner``.

        Claimable, by the store's clock ``now``: PENDING commands, and CLAIMED ones
        whose claim has expired (``claim_until <= now``). Oldest request first
        (``requested_at``, then id). Each becomes CLAIMED with ``owner`` and
        ``claim_until = now + ttl``. Commands locked by a concurrent claim are
        skipped. This does not check that ``owner`` holds the executions:
        :meth:`complete_command` does. No ``execution_ids``: ``[]``, without a
        round trip to the database.
        """
        owner = require_name(owner, "owner")
        duration = as_duration(ttl, field="ttl")
        count = require_int(limit, "limit", low=1, high=MAX_LIMIT)
        ids = names_of(execution_ids, "execution_ids")
        if not ids:
            return []
        return self._claim_commands(owner, tuple(dict.fromkeys(ids)), ttl=duration, limit=count)

    @abstractmethod
    def _claim_commands(
        self, owner: str, execution_ids: tuple[str, ...], *, ttl: timedelta, limit: int
    ) -> list[Command]:
        """Claim with validated arguments (see :meth:`claim_commands`), in request order."""

    def complete_command(self, command: Command, lease: Fence) -> Command:
        """Mark a claimed command delivered: CLAIMED -> DONE, fenced on both sides.

        Only if, by the store's clock ``now``, the stored command is still CLAIMED
        by ``command.owner`` with ``now < claim_until``; ``lease`` belongs to that
        owner and to the command's execution; and the lease holds the execution
        (RUNNING, same owner, same epoch, ``now < lease_until``). Then ``done_at =
        now`` and ``epoch = lease.epoch``, and the DONE command is returned.
        Otherwise :class:`StaleLease` is raised and nothing changes.
        """
        check_fences((lease,))
        if command.owner is None or command.owner != lease.owner:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        if command.execution_id != lease.execution_id:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        done = self._complete_command(command, lease)
        if done is None:
            raise StaleLease(command.execution_id, lease.owner, lease.epoch)
        return done

    @abstractmethod
    def _complete_command(self, command: Command, lease: Fence) -> Command | None:
        """Apply the fence of :meth:`complete_command`; the DONE command, or None if refused.

        ``command.owner == lease.owner`` and the execution ids already match.
        """

    def release_command(self, command: Command) -> None:
        """Give a claimed command back: CLAIMED by ``command.owner`` -> PENDING, claim cleared.

        For a worker that claimed a command and found it does not hold the
        execution: the holder can then claim it. A command no longer CLAIMED by
        ``command.owner`` (completed, or claimed by another) is left as it is.
        """
        if command.owner is not None:
            self._release_command(command)

    @abstractmethod
    def _release_command(self, command: Command) -> None:
        """Release a command claimed by ``command.owner`` (not None); else do nothing."""

    @abstractmethod
    def commands(self, execution_id: str) -> list[Command]:
        """Every command of one execution, oldest first; :class:`NotFound` if unknown."""


def _submitter(actor: object) -> str | None:
    """A submit's ``actor``, checked: None, or a name (its SUBMITTED record's actor)."""
    return None if actor is None else require_name(actor, "actor")

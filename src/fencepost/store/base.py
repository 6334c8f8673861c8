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
from typing import Any, Unpack

from fencepost import tracing
from fencepost.domain.checks import (
    require_name,
    storable,
)
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.filters import StoreFilters, StoreQuery, checked
from fencepost.domain.machine import (
    attempts_from_transitions,
)
from fencepost.domain.models import (
    JSON,
    Attempt,
    Execution,
    Page,
)
from fencepost.domain.states import State
from fencepost.domain.submission import (
    NewExecution,
    SubmitOptions,
    canonical,
    check_arguments,
    prepare,
    submit_options,
)
from fencepost.store.catalogue import with_store_defaults
from fencepost.store.commands import CommandVerbs
from fencepost.store.flow import FlowVerbs
from fencepost.store.history import HistoryVerbs
from fencepost.store.leasing import LeasingVerbs
from fencepost.store.operating import OperatingVerbs
from fencepost.store.reporting import ReportVerbs
from fencepost.store.scheduling import ScheduleVerbs
from fencepost.store.values import (
    ExecutionFilter,
    unix_ms,
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


class Store(
    LeasingVerbs, CommandVerbs, HistoryVerbs, OperatingVerbs, ReportVerbs, ScheduleVerbs, FlowVerbs
):
    """A durable home for executions and schedules, each handed out under a fenced lease.

    The verbs are grouped by section: submitting and reading here; leasing, commands,
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

    def attempts(self, execution_id: str) -> list[Attempt]:
        """The attempts of one execution, oldest first (derived from its audit trail)."""
        return attempts_from_transitions(self.transitions(execution_id))


def _submitter(actor: object) -> str | None:
    """A submit's ``actor``, checked: None, or a name (its SUBMITTED record's actor)."""
    return None if actor is None else require_name(actor, "actor")

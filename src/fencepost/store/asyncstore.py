"""The store's verbs as coroutines: :func:`connect_async` and :class:`AsyncStore`.

The pattern (docs/explanation/architecture.md, "One logic, two executors"): an
:class:`AsyncStore` holds the sync :class:`~fencepost.store.base.Store` of the same
URL, and has every verb it has (tests/unit/test_store_shape.py holds the two equal).
Every decision is the sync store's: its validation, the job catalogue's rules and
cache, the verb's *plan* (:mod:`fencepost.store.executors`). Where a verb runs is the
runner's, which the sync store gives (:mod:`fencepost.store.runners`):

* PostgreSQL: plans on psycopg's ``AsyncConnection``, from a pool of the AsyncStore's
  own configured as the sync store's (UTC, the store's schema, ids as text);
* SQLite: the sync store's own path on one dedicated thread that owns its connection
  to the file: sqlite3 is blocking and in-process, so there is no asynchronous
  protocol to speak; one thread keeps every write in one ``BEGIN IMMEDIATE`` after
  the other, as the sync store does;
* memory: on the event loop itself (nothing blocks).

Run as plans on PostgreSQL: submitting (``submit``, ``submit_or_find``,
``submit_many``); reading (``get``, ``find``, ``query``, ``count_by_state``,
``transitions``, ``attempts``, ``commands``; ``wait`` awaits the sync store's own
``_wait_async``); the operator's verbs (``cancel``, ``replay``, ``reschedule``,
``delete``, ``deletions``) and command requests (``request``); schedules
(``add_schedule``, ``get_schedule``, ``schedules``, ``update_schedule``,
``pause_schedule``, ``resume_schedule``, ``delete_schedule``); flow control
(``set_limit``, ``limits``, ``remove_limit``, ``pause_queue``, ``resume_queue``,
``paused_queues``, ``flow_changes``, ``throttled``, ``throttles``); the history charts
(``roll_up_history``, ``history``, ``history_summary``).

Every other verb — the worker's (claim, heartbeat, complete, ...), the scheduler's,
the catalogue's, the operating ones, and those that are many transactions or one
snapshot rather than one plan (``act``, ``slo``, ``run_schedule``) — is the sync
store's own method, run where the runner runs a call: on PostgreSQL a worker thread
with a connection of the sync store's pool. ``wait_for_work`` waits on a thread of its
own on every backend.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Unpack

from fencepost import tracing
from fencepost.domain.bulk import (
    Action,
    ActOptions,
    BulkResult,
    Deletion,
    DeletionPage,
    deletion_cursor,
)
from fencepost.domain.checks import require_int, require_name
from fencepost.domain.filters import StoreFilters, StoreQuery, checked
from fencepost.domain.history import (
    ROLL_UP_ROWS,
    History,
    HistoryOptions,
    HistorySummary,
    RollUp,
    SummaryBy,
    Window,
)
from fencepost.domain.machine import attempts_from_transitions
from fencepost.domain.models import (
    JSON,
    Attempt,
    Command,
    Execution,
    Page,
    Schedule,
    SchedulePage,
    Transition,
)
from fencepost.domain.reports import SloReport
from fencepost.domain.schedules import ScheduleOptions
from fencepost.domain.slo import (
    SloOptions,
)
from fencepost.domain.states import CommandKind, State
from fencepost.domain.submission import NewExecution, SubmitOptions, submit_options
from fencepost.store import sqlhistory
from fencepost.store.async_flow import AsyncFlowVerbs
from fencepost.store.base import Store
from fencepost.store.executors import Plan, returning
from fencepost.store.history import roll_up_arguments
from fencepost.store.values import MAX_LIMIT
from fencepost.store.verbs import sql_bulk, sql_commands, sql_reading, sql_schedules
from fencepost.store.verbs.schedules import schedule_filter

if TYPE_CHECKING:
    pass

T = TypeVar("T")
P = ParamSpec("P")


def connect_async(url: str, **options: Any) -> AsyncStore:
    """Open the store ``url`` names (as :func:`fencepost.connect`, same options) for
    coroutines. Opening is blocking, like :func:`~fencepost.connect` (it migrates):
    do it at start-up. ``async with connect_async(url) as store:`` closes it after."""
    from fencepost.store import connect

    return AsyncStore(connect(url, **options))


def _as_a_call(
    verb: Callable[Concatenate[Store, P], T], *, waits: bool = False
) -> Callable[Concatenate[AsyncStore, P], Coroutine[Any, Any, T]]:
    """``verb`` of the sync store as a coroutine of :class:`AsyncStore`, run by the
    runner (``waits``: on a thread of its own). The sync store's method is looked up by
    name on the store, so a backend's own override is the one that runs."""
    name = verb.__name__

    @functools.wraps(verb)
    async def run(self: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        def call(store: Store) -> T:
            found: T = getattr(store, name)(*args, **kwargs)
            return found

        if waits:
            return await asyncio.to_thread(call, self.store)
        return await self._runner.call(call)

    return run


class AsyncStore(AsyncFlowVerbs):
    """The store's verbs as coroutines, run on asynchronous executors (see the module doc).

    ``store`` is the sync store it validates with; the AsyncStore closes it.
    """

    # -- submitting ----------------------------------------------------------------------

    async def submit(
        self,
        job: str,
        inputs: JSON = None,
        *,
        connection: object = None,
        actor: str | None = None,
        **options: Unpack[SubmitOptions],
    ) -> Execution:
        """:meth:`Store.submit <fencepost.store.base.Store.submit>`, awaited.

        ``connection`` joins the caller's transaction on a psycopg ``AsyncConnection``
        or a SQLAlchemy ``AsyncConnection`` / ``AsyncSession`` (psycopg driver).
        """
        arguments = submit_options(inputs, options, stacklevel=2)
        return (await self._submit_or_find(job, arguments, connection, actor))[0]

    async def submit_or_find(
        self,
        job: str,
        inputs: JSON = None,
        *,
        connection: object = None,
        actor: str | None = None,
        **options: Unpack[SubmitOptions],
    ) -> tuple[Execution, bool]:
        """:meth:`Store.submit_or_find <fencepost.store.base.Store.submit_or_find>`, awaited."""
        arguments = submit_options(inputs, options, verb="submit_or_find", stacklevel=2)
        return await self._submit_or_find(job, arguments, connection, actor)

    async def submit_many(
        self,
        requests: Iterable[Mapping[str, Any]],
        *,
        connection: object = None,
        actor: str | None = None,
    ) -> list[Execution]:
        """:meth:`Store.submit_many <fencepost.store.base.Store.submit_many>`, awaited."""
        requests = list(requests)
        since = time.monotonic()
        await self._fresh_catalogue(r.get("job") for r in requests if isinstance(r, Mapping))
        batch = self.store._prepare_many(requests, actor, since=since)
        if not batch:
            return []
        return await self._insert(batch, connection)

    async def _submit_or_find(
        self,
        job: str,
        arguments: Mapping[str, Any],
        connection: object,
        actor: str | None = None,
    ) -> tuple[Execution, bool]:
        since = time.monotonic()
        await self._fresh_catalogue([job])
        new = self.store._prepare_one(job, arguments, actor, since=since)
        execution = (await self._insert([new], connection))[0]
        return execution, execution.id == new.id

    async def _insert(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        """Insert a validated batch, in a ``fencepost.submit`` span when tracing is on."""

        async def insert(traced: Sequence[NewExecution]) -> list[Execution]:
            return await self._insert_untraced(traced, connection)

        return await tracing.insert_async(insert, batch, self.location)

    async def _insert_untraced(
        self, batch: Sequence[NewExecution], connection: object
    ) -> list[Execution]:
        if connection is not None:
            return await self._runner.insert_in(batch, connection)
        return await self._runner.insert(batch)

    # -- reading -------------------------------------------------------------------------

    async def get(self, execution_id: str) -> Execution:
        """:meth:`Store.get <fencepost.store.base.Store.get>`, awaited."""
        return await self._verb(lambda s: s.get(execution_id), lambda s: s._get_plan(execution_id))

    async def find(self, idempotency_key: str) -> Execution | None:
        """:meth:`Store.find <fencepost.store.base.Store.find>`, awaited."""
        return await self._verb(
            lambda s: s.find(idempotency_key),
            lambda s: sql_reading.find_plan(s, s._find_key(idempotency_key)),
        )

    async def query(self, **query: Unpack[StoreQuery]) -> Page:
        """:meth:`Store.query <fencepost.store.base.Store.query>`, awaited."""

        def plan(store: Any) -> Plan[Page]:
            filters = store._query_filter(**checked(query, StoreQuery, "query"))
            if filters is None:
                return Plan(returning(Page(items=[], next_cursor=None)), atomic=False)
            found: Plan[Page] = store._query_plan(filters)
            return found

        return await self._verb(lambda s: s.query(**query), plan)

    async def count_by_state(self, **filters: Unpack[StoreFilters]) -> dict[State, int]:
        """:meth:`Store.count_by_state <fencepost.store.base.Store.count_by_state>`, awaited."""

        def plan(store: Any) -> Plan[dict[State, int]]:
            given = checked(filters, StoreFilters, "count_by_state")
            found_filters = store._query_filter(**given, limit=1)
            found: Plan[dict[State, int]] = (
                Plan(returning({}), atomic=False)
                if found_filters is None
                else sql_reading.count_by_state_plan(store, found_filters)
            )
            return found

        counted = await self._verb(lambda s: s.count_by_state(**filters), plan)
        return {s: counted.get(s, 0) for s in State}

    async def transitions(self, execution_id: str) -> list[Transition]:
        """:meth:`Store.transitions <fencepost.store.base.Store.transitions>`, awaited."""
        return await self._verb(
            lambda s: s.transitions(execution_id),
            lambda s: sql_reading.transitions_plan(s, execution_id),
        )

    async def attempts(self, execution_id: str) -> list[Attempt]:
        """:meth:`Store.attempts <fencepost.store.base.Store.attempts>`, awaited."""
        return attempts_from_transitions(await self.transitions(execution_id))

    async def commands(self, execution_id: str) -> list[Command]:
        """:meth:`Store.commands <fencepost.store.base.Store.commands>`, awaited."""
        return await self._verb(
            lambda s: s.commands(execution_id), lambda s: sql_reading.commands_plan(s, execution_id)
        )

    async def wait(
        self, execution_id: str, *, timeout: float | timedelta | None = None
    ) -> Execution:
        """:meth:`Store.wait <fencepost.store.base.Store.wait>`, awaited: a future the
        sync store's watcher resolves (no thread and no connection per waiter)."""
        return await self.store._wait_async(execution_id, timeout=timeout)

    # -- operator verbs and commands -----------------------------------------------------

    async def cancel(self, execution_id: str, *, actor: str = "client") -> Execution:
        """:meth:`Store.cancel <fencepost.store.base.Store.cancel>`, awaited."""
        return await self._verb(
            lambda s: s.cancel(execution_id, actor=actor),
            lambda s: s._transition_plan(execution_id, s._cancelled(actor)),
        )

    async def replay(self, execution_id: str, *, actor: str = "operator") -> Execution:
        """:meth:`Store.replay <fencepost.store.base.Store.replay>`, awaited."""
        return await self._verb(
            lambda s: s.replay(execution_id, actor=actor),
            lambda s: s._transition_plan(execution_id, s._replayed(actor)),
        )

    async def reschedule(
        self,
        execution_id: str,
        due_at: datetime,
        *,
        actor: str = "scheduler",
        reason: str = "rescheduled",
    ) -> Execution:
        """:meth:`Store.reschedule <fencepost.store.base.Store.reschedule>`, awaited."""
        return await self._verb(
            lambda s: s.reschedule(execution_id, due_at, actor=actor, reason=reason),
            lambda s: s._transition_plan(execution_id, s._rescheduled(due_at, actor, reason)),
        )

    async def act(
        self, action: Action | str, *, actor: str, **options: Unpack[ActOptions]
    ) -> BulkResult:
        """:meth:`Store.act <fencepost.store.operating.OperatingVerbs.act>`, awaited.

        A batch is many short transactions with pauses between them, not one plan: the
        sync store's own batch runs off the event loop (PostgreSQL: on a worker thread,
        on connections of the sync store's pool; SQLite: in the dedicated thread).
        """

        return await self._runner.call(lambda store: store.act(action, actor=actor, **options))

    async def delete(self, execution_id: str, *, actor: str) -> Deletion:
        """:meth:`Store.delete <fencepost.store.operating.OperatingVerbs.delete>`, awaited."""

        def plan(store: Any) -> Plan[Deletion]:
            if not isinstance(execution_id, str):
                store.delete(execution_id, actor=actor)  # refuses it, naming the argument
            return sql_bulk.delete_plan(store, execution_id, require_name(actor, "actor"))

        return await self._verb(lambda s: s.delete(execution_id, actor=actor), plan)

    async def deletions(self, *, limit: int = 100, after: str | None = None) -> DeletionPage:
        """:meth:`Store.deletions <fencepost.store.operating.OperatingVerbs.deletions>`,
        awaited."""

        def plan(store: Any) -> Plan[DeletionPage]:
            count = require_int(limit, "limit", low=1, high=MAX_LIMIT)
            cursor = None if after is None else deletion_cursor(after)
            return sql_bulk.deletions_plan(store, count, cursor)

        return await self._verb(lambda s: s.deletions(limit=limit, after=after), plan)

    async def request(
        self, execution_id: str, kind: CommandKind | str, *, actor: str = "client"
    ) -> Command:
        """:meth:`Store.request <fencepost.store.base.Store.request>`, awaited."""

        def plan(store: Any) -> Plan[Command]:
            command_kind, arguments = store._requested(kind, actor)
            found: Plan[Command] = sql_commands.request_plan(
                store, execution_id, command_kind, **arguments
            )
            return found

        return await self._verb(lambda s: s.request(execution_id, kind, actor=actor), plan)

    # -- schedules -----------------------------------------------------------------------

    async def add_schedule(self, job: str, **options: Unpack[ScheduleOptions]) -> Schedule:
        """:meth:`Store.add_schedule <fencepost.store.scheduling.ScheduleVerbs.add_schedule>`,
        awaited."""
        await self._fresh_catalogue()

        def plan(store: Any) -> Plan[Schedule]:
            spec, schedule_id = store._schedule_to_add(job, options, stacklevel=5)
            found: Plan[Schedule] = sql_schedules.add_schedule_plan(store, spec, schedule_id)
            return found

        schedule: Schedule = await self._verb(lambda s: s.add_schedule(job, **options), plan)
        if self._runner.runs_plans:  # else the sync verb noted it already
            given = {name: options.get(name) for name in ("max_attempts", "priority", "queue")}
            if schedule.job_version is None:  # a job not published: off the event loop
                await asyncio.to_thread(self.store._note_unpublished_schedule, schedule, given)
        return schedule

    async def get_schedule(self, schedule_id: str) -> Schedule:
        """:meth:`Store.get_schedule <fencepost.store.scheduling.ScheduleVerbs.get_schedule>`,
        awaited."""
        return await self._verb(
            lambda s: s.get_schedule(schedule_id),
            lambda s: sql_schedules.get_schedule_plan(s, schedule_id),
        )

    async def schedules(
        self,
        *,
        job: str | None = None,
        paused: bool | None = None,
        limit: int = 100,
        after: str | None = None,
        due_before: datetime | None = None,
    ) -> SchedulePage:
        """:meth:`Store.schedules <fencepost.store.scheduling.ScheduleVerbs.schedules>`,
        awaited."""
        arguments: dict[str, Any] = {
            "job": job,
            "paused": paused,
            "limit": limit,
            "after": after,
            "due_before": due_before,
        }
        return await self._verb(
            lambda s: s.schedules(**arguments),
            lambda s: sql_schedules.list_schedules_plan(s, schedule_filter(**arguments)),
        )

    async def update_schedule(
        self, schedule_id: str, /, *, actor: str = "client", **changes: Any
    ) -> Schedule:
        """:meth:`Store.update_schedule
        <fencepost.store.scheduling.ScheduleVerbs.update_schedule>`, awaited."""
        await self._fresh_catalogue()
        return await self._verb(
            lambda s: s.update_schedule(schedule_id, actor=actor, **changes),
            lambda s: sql_schedules.change_schedule_plan(
                s,
                schedule_id,
                s._schedule_update(dict(changes), stacklevel=5),
                actor=require_name(actor, "actor"),
            ),
        )

    async def pause_schedule(self, schedule_id: str, *, actor: str = "client") -> Schedule:
        """:meth:`Store.pause_schedule
        <fencepost.store.scheduling.ScheduleVerbs.pause_schedule>`, awaited."""
        return await self._verb(
            lambda s: s.pause_schedule(schedule_id, actor=actor),
            lambda s: sql_schedules.change_schedule_plan(
                s, schedule_id, s._pausing, actor=require_name(actor, "actor")
            ),
        )

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        """:meth:`Store.resume_schedule
        <fencepost.store.scheduling.ScheduleVerbs.resume_schedule>`, awaited."""
        return await self._verb(
            lambda s: s.resume_schedule(schedule_id),
            lambda s: sql_schedules.change_schedule_plan(s, schedule_id, s._resuming),
        )

    async def delete_schedule(self, schedule_id: str) -> None:
        """:meth:`Store.delete_schedule
        <fencepost.store.scheduling.ScheduleVerbs.delete_schedule>`, awaited."""
        await self._verb(
            lambda s: s.delete_schedule(schedule_id),
            lambda s: sql_schedules.delete_schedule_plan(s, schedule_id),
        )

    async def run_schedule(self, schedule_id: str, *, actor: str = "client") -> Execution:
        """:meth:`Store.run_schedule
        <fencepost.store.scheduling.ScheduleVerbs.run_schedule>`, awaited."""
        # Stored as a backfill stores occurrences, which is not one plan: the sync verb.
        return await self._runner.call(lambda s: s.run_schedule(schedule_id, actor=actor))

    # -- reports -------------------------------------------------------------------------

    async def slo(self, **options: Unpack[SloOptions]) -> SloReport:
        """:meth:`Store.slo <fencepost.store.reporting.ReportVerbs.slo>`, awaited."""
        # A few reads in one snapshot, not a plan: the sync store's own report.
        return await self._runner.call(lambda store: store.slo(**options))

    # -- the history charts --------------------------------------------------------------

    async def roll_up_history(self, *, max_rows: int = ROLL_UP_ROWS, wait: bool = True) -> RollUp:
        """:meth:`Store.roll_up_history
        <fencepost.store.history.HistoryVerbs.roll_up_history>`, awaited."""

        def plan(store: Any) -> Plan[RollUp]:
            rows, waits = roll_up_arguments(max_rows, wait)
            return sqlhistory.roll_up_plan(store, rows, wait=waits)

        return await self._verb(lambda s: s.roll_up_history(max_rows=max_rows, wait=wait), plan)

    async def history(self, **options: Unpack[HistoryOptions]) -> History:
        """:meth:`Store.history <fencepost.store.history.HistoryVerbs.history>`, awaited."""
        return await self._verb(
            lambda s: s.history(**options), lambda s: sqlhistory.history_plan(s, options)
        )

    async def history_summary(
        self, *, window: Window | str = Window.HOUR, by: SummaryBy | str = SummaryBy.JOB
    ) -> HistorySummary:
        """:meth:`Store.history_summary
        <fencepost.store.history.HistoryVerbs.history_summary>`, awaited."""
        return await self._verb(
            lambda s: s.history_summary(window=window, by=by),
            lambda s: sqlhistory.history_summary_plan(s, window, by),
        )

    # -- the verbs the sync store runs as itself ---------------------------------------
    # Each is the sync store's own method (its signature and its documentation), run
    # where the runner runs a call: PostgreSQL, a worker thread with a connection of the
    # sync store's pool; SQLite, the dedicated thread; memory, the event loop.
    # the worker's verbs
    claim = _as_a_call(Store.claim)
    heartbeat = _as_a_call(Store.heartbeat)
    heartbeat_many = _as_a_call(Store.heartbeat_many)
    complete = _as_a_call(Store.complete)
    complete_many = _as_a_call(Store.complete_many)
    fail = _as_a_call(Store.fail)
    release = _as_a_call(Store.release)
    snooze = _as_a_call(Store.snooze)
    abort = _as_a_call(Store.abort)
    retry_delay = _as_a_call(Store.retry_delay)
    reap_expired = _as_a_call(Store.reap_expired)
    claim_commands = _as_a_call(Store.claim_commands)
    complete_command = _as_a_call(Store.complete_command)
    release_command = _as_a_call(Store.release_command)
    # schedules, as the scheduler drives them
    acquire_schedules = _as_a_call(Store.acquire_schedules)
    materialize = _as_a_call(Store.materialize)
    add_occurrences = _as_a_call(Store.add_occurrences)
    release_schedules = _as_a_call(Store.release_schedules)
    # the job catalogue
    publish_jobs = _as_a_call(Store.publish_jobs)
    adopt_unpublished = _as_a_call(Store.adopt_unpublished)
    entry_for = _as_a_call(Store.entry_for)
    jobs = _as_a_call(Store.jobs)
    job = _as_a_call(Store.job)
    # flow control, as a worker declares it
    declare_limits = _as_a_call(Store.declare_limits)
    next_start_in = _as_a_call(Store.next_start_in)
    # operating
    register_node = _as_a_call(Store.register_node)
    deregister_node = _as_a_call(Store.deregister_node)
    clock_offset = _as_a_call(Store.clock_offset)
    nodes = _as_a_call(Store.nodes)
    live_schedulers = _as_a_call(Store.live_schedulers)
    bucket_report = _as_a_call(Store.bucket_report)
    resize_buckets = _as_a_call(Store.resize_buckets)
    bucket_counts = _as_a_call(Store.bucket_counts)
    stats = _as_a_call(Store.stats)
    unserved = _as_a_call(Store.unserved)
    job_counts = _as_a_call(Store.job_counts)
    prune = _as_a_call(Store.prune)
    # waits on a thread of its own (every backend): the runner's other verbs go on
    wait_for_work = _as_a_call(Store.wait_for_work, waits=True)


__all__ = ["AsyncStore", "connect_async"]

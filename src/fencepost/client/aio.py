"""``AsyncClient``: the client's verbs as coroutines, for code on an event loop.

A FastAPI route (or any coroutine) calling :class:`~fencepost.client.http.Client`
blocks its event loop for each round trip; ``AsyncClient`` does not::

    async with AsyncClient("http://scheduler:8080", token=token) as client:
        execution = await client.submit("report", {"day": "2026-11-29"})
        done = await client.wait(execution.id, timeout=60)

Its coroutines have the names, arguments, results and errors of the ``Client``'s
verbs for submitting, reading, cancelling, replaying, commands, schedules, jobs,
limits and queues, and waiting: both run the same descriptions
(:mod:`fencepost.client.verbs`), this one over an :class:`httpx.AsyncClient`. The
remote-worker protocol (claim, heartbeat, complete, fail, release, abort, commands'
claims, node registration, job publication) is the ``Client``'s only: a worker runs
on threads, not on an event loop.

Only this module imports anyio (through which it sleeps, so it runs under asyncio
or trio as httpx does); neither a worker nor the sync ``Client`` loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack

import anyio
import httpx

from fencepost.client import exchange, verbs, worker_verbs
from fencepost.client.retries import DEFAULT_RETRY_TIMEOUT, Retrying, retry_timeout_option
from fencepost.domain.bulk import ActOptions, BulkResult, DeletionPage
from fencepost.domain.filters import ExecutionFilters, ExecutionQuery
from fencepost.domain.history import History, HistoryOptions, HistorySummary, SummaryBy, Window
from fencepost.domain.jobviews import JobSummary, JobView
from fencepost.domain.limits import FlowChange, Limit, LimitOptions, ThrottleCount
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
from fencepost.domain.nodes import BucketReport, Node
from fencepost.domain.queueviews import QueueView
from fencepost.domain.reports import SloReport, Stats
from fencepost.domain.schedules import ScheduleOptions
from fencepost.domain.slo import (
    SloOptions,
)
from fencepost.domain.states import CommandKind, State
from fencepost.domain.submission import SubmitOptions
from fencepost.domain.timeline import Timeline

T = TypeVar("T")


class AsyncClient:
    """A connection to a fencepost service whose verbs are coroutines.

    ``token`` is sent as ``Authorization: Bearer``. ``http`` replaces the
    underlying :class:`httpx.AsyncClient` (tests pass one over an in-process
    ``httpx.ASGITransport``). Close it (``await client.aclose()``, or ``async
    with``) when done.

    Reads and keyed submits are sent again after a lost connection, a 503 and a 429
    (honouring ``Retry-After``), other requests only when no connection could be made,
    with capped, jittered backoff, all within ``retry_timeout`` seconds of the first
    try (0: never); see :mod:`fencepost.client.retries`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        #: Seconds within which every try of one request ends (0: no retries; see
        #: :mod:`fencepost.client.retries`).
        self.retry_timeout = retry_timeout_option(retry_timeout)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if http is None:
            http = httpx.AsyncClient(base_url=base_url, timeout=timeout)
        http.headers.update(headers)
        self.base_url = base_url
        self._http = http

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def close(self) -> None:
        """Close the connection pool (:meth:`aclose` by the ``Client``'s name)."""
        await self.aclose()

    # -- transport -------------------------------------------------------------------

    async def _run(self, verb: exchange.Verb[T]) -> T:
        """Run one verb: send each request it yields, sleep each pause, return its result.

        As ``Client._run`` does, over ``httpx.AsyncClient``; one frame deep, which
        ``verbs.CALLER`` counts.
        """
        try:
            step = next(verb)
            while True:
                try:
                    answer = await self._send(step)
                except Exception as exc:  # the verb's to handle or to raise
                    step = verb.throw(exc)
                else:
                    step = verb.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result

    async def _send(self, step: exchange.Request | exchange.Pause) -> Any:
        """One request; what the verb receives (see exchange.answer_for), or the error raised."""
        if isinstance(step, exchange.Pause):
            await anyio.sleep(step.seconds)
            return b""
        content = step.content()
        headers = step.header_fields(content)
        retrying = Retrying(step.method, headers, timeout=self.retry_timeout, retry=step.retry)
        while True:
            try:
                response = await self._http.request(
                    step.method,
                    step.path,
                    content=content,
                    params=step.query(),
                    headers=headers,
                    timeout=step.timeout(self._http.timeout),
                )
            except httpx.HTTPError as exc:
                pause = retrying.after_error(exc)
                if pause is None:
                    raise exchange.unreachable(self.base_url, exc) from exc
            else:
                pause = retrying.after_answer(
                    response.status_code, response.headers.get("Retry-After")
                )
                if pause is None:
                    return exchange.answer_for(step, response)
            await anyio.sleep(pause)

    # -- submitting and reading ----------------------------------------------

    async def submit(
        self, job: str, inputs: JSON = None, **options: Unpack[SubmitOptions]
    ) -> Execution:
        """Submit one execution (``POST /executions``); see ``Store.submit``.

        ``max_attempts``, ``timeout`` and ``priority`` None: the job's own (from
        the store's job catalogue), else the store's default. ``job_version`` is the deprecated
        name of ``version``. ``limit_key``: the key a per-key limit counts it under.
        """
        return await self._run(verbs.submit(job, inputs, **options))

    async def submit_many(self, requests: Iterable[Mapping[str, Any]]) -> list[Execution]:
        """Submit a batch in one transaction (``POST /executions/batch``): all or none.

        Each mapping holds :meth:`submit`'s arguments (``job`` included); one that
        does not raises :class:`ValidationError` naming it (``[3].job``), and
        nothing is sent.
        """
        return await self._run(verbs.submit_many(requests))

    async def get(self, execution_id: str) -> Execution:
        """One execution; :class:`NotFound` if unknown."""
        return await self._run(verbs.get(execution_id))

    async def wait(
        self, execution_id: str, *, timeout: float | timedelta | None = None
    ) -> Execution:
        """The execution once it is terminal (SUCCEEDED, FAILED, CANCELLED, SKIPPED).

        Long-polls ``GET /executions/{id}?wait=N`` in slices of at most 30 s (a
        service without long-poll is polled at a pace growing from 50 ms to 1 s).
        ``timeout`` None waits for ever; past it, :class:`TimeoutError`. A negative,
        NaN or infinite ``timeout`` is a :class:`ValidationError` naming it.
        """
        return await self._run(verbs.wait(execution_id, timeout=timeout))

    async def query(self, **query: Unpack[ExecutionQuery]) -> Page:
        """Executions matching every given filter, by id; see ``Store.query``
        (``due_after <= due_at < due_before``; ``outcome``: any attempt ended so;
        ``owner``: RUNNING under its lease; ``finished_*``: finished ones by finish
        time; ``error``: a piece of the latest error, ASCII letters in any case)."""
        return await self._run(verbs.query(**query))

    async def count_by_state(self, **filters: Unpack[ExecutionFilters]) -> dict[State, int]:
        """How many executions :meth:`query` with these filters lists, by state (every
        state a key); see ``Store.count_by_state``."""
        return await self._run(verbs.count_by_state(**filters))

    async def dead_letters(
        self, *, job: str | None = None, limit: int = 100, after: str | None = None
    ) -> Page:
        """FAILED executions, oldest first."""
        return await self._run(verbs.dead_letters(job=job, limit=limit, after=after))

    async def transitions(self, execution_id: str) -> list[Transition]:
        """The audit trail of one execution, oldest first."""
        return await self._run(verbs.transitions(execution_id))

    async def attempts(self, execution_id: str) -> list[Attempt]:
        """The attempts of one execution, oldest first."""
        return await self._run(verbs.attempts(execution_id))

    async def timeline(self, execution_id: str) -> Timeline:
        """One execution's leases, waits and marks (``GET /executions/{id}/timeline``;
        see :mod:`fencepost.domain.timeline`)."""
        return await self._run(verbs.timeline(execution_id))

    async def stats(self, *, window: float | timedelta = 3600.0) -> Stats:
        """Counts by state and job, backlog, and the window's lateness; see ``Store.stats``."""
        return await self._run(verbs.stats(window=window))

    async def jobs(self, *, window: float | timedelta = 86400.0) -> list[JobSummary]:
        """Every published job, by name: its latest version, the versions, the live nodes
        serving it, and its executions created in the last ``window`` by state.

        Unlike ``Store.jobs`` (every entry of the catalogue), one summary a job; see
        ``Store.job_counts`` for the counts.
        """
        return await self._run(verbs.jobs(window=window))

    async def job(self, name: str, *, window: float | timedelta = 86400.0) -> JobView:
        """The job ``name`` in full (every version, the nodes serving each, its executions
        created in the last ``window`` by state); :class:`NotFound` for a job no one
        published."""
        return await self._run(verbs.job(name, window=window))

    async def slo(self, **options: Unpack[SloOptions]) -> SloReport:
        """The service-level report (``GET /slo``): both objectives, their misses by
        error class, exclusions, error budgets and burn rates; see ``Store.slo``.

        An option ``Store.slo`` would refuse is refused before anything is sent, as a
        :class:`ValidationError` naming it.
        """
        return await self._run(verbs.slo(**options))

    async def history(self, **options: Unpack[HistoryOptions]) -> History:
        """A chart of the last hour, day or week (``GET /history``): per step, outcomes,
        first claims and their lateness, throttled time, SLO misses and burn rates; see
        ``Store.history``. The service rolls up what finished since its last roll-up
        first. A ``window`` that is not ``hour``, ``day`` or ``week`` is refused before
        anything is sent (:class:`ValidationError` naming it)."""
        return await self._run(verbs.history(**options))

    async def history_summary(
        self, *, window: Window | str = Window.HOUR, by: SummaryBy | str = SummaryBy.JOB
    ) -> HistorySummary:
        """The window's totals per job or per queue (``GET /history/summary``); see
        ``Store.history_summary``."""
        return await self._run(verbs.history_summary(window=window, by=by))

    async def bucket_report(
        self, *, orphaned_after: float | timedelta = 300, limit: int = 100
    ) -> BucketReport:
        """Buckets owned twice, holes, and orphans; see ``Store.bucket_report``."""
        return await self._run(verbs.bucket_report(orphaned_after=orphaned_after, limit=limit))

    # -- operator actions ----------------------------------------------------

    async def cancel(self, execution_id: str) -> Execution:
        """Cancel an execution that has not started (``DELETE /executions/{id}``)."""
        return await self._run(verbs.cancel(execution_id))

    async def request(self, execution_id: str, kind: CommandKind | str) -> Command:
        """Ask the worker running an execution to cancel, pause or resume it."""
        return await self._run(verbs.request(execution_id, kind))

    async def replay(self, execution_id: str) -> Execution:
        """Revive a dead letter (FAILED -> SCHEDULED, due now, fresh attempts)."""
        return await self._run(verbs.replay(execution_id))

    async def act(
        self, action: str, *, actor: str | None = None, **options: Unpack[ActOptions]
    ) -> BulkResult:
        """One batch of a bulk action (``POST /executions/actions``); see ``Store.act``.

        Repeat with the result's ``next_cursor`` as ``after`` until it is None. The
        service audits each execution with its token's name, not ``actor``.
        """
        return await self._run(verbs.act(action, **options))

    async def deletions(self, *, limit: int = 100, after: str | None = None) -> DeletionPage:
        """Records of deleted executions, oldest first (``GET /deletions``)."""
        return await self._run(verbs.deletions(limit=limit, after=after))

    # -- schedules -----------------------------------------------------------

    async def add_schedule(self, job: str, **options: Unpack[ScheduleOptions]) -> Schedule:
        """Add a schedule (``POST /schedules``); ``Store.add_schedule``'s arguments.

        ``version``, ``every`` and ``misfire_grace`` as the store names them
        (``limit_key`` too: every execution of it carries that key);
        ``job_version`` is the deprecated name of ``version``.
        """
        return await self._run(verbs.add_schedule(job, **options))

    async def get_schedule(self, schedule_id: str) -> Schedule:
        """One schedule; :class:`NotFound` if unknown."""
        return await self._run(verbs.get_schedule(schedule_id))

    async def schedules(
        self,
        *,
        job: str | None = None,
        paused: bool | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> SchedulePage:
        """Schedules by id, filtered; pass ``next_cursor`` as ``after``."""
        return await self._run(verbs.schedules(job=job, paused=paused, limit=limit, after=after))

    async def update_schedule(self, schedule_id: str, /, **changes: Any) -> Schedule:
        """Change a schedule (``PATCH /schedules/{id}``); ``Store.update_schedule``'s names."""
        return await self._run(verbs.update_schedule(schedule_id, **changes))

    async def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop materializing a schedule until resumed."""
        return await self._run(verbs.pause_schedule(schedule_id))

    async def resume_schedule(self, schedule_id: str) -> Schedule:
        """Materialize a paused schedule again."""
        return await self._run(verbs.resume_schedule(schedule_id))

    async def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule (its executions stay)."""
        return await self._run(verbs.delete_schedule(schedule_id))

    async def run_schedule(self, schedule_id: str) -> Execution:
        """Run a schedule once now, besides its slots (``POST /schedules/{id}/run``).

        The new execution is due now, with ``slot`` None and the key
        ``{schedule_id}:run:{execution id}``; the audit names the client's token. Each
        call runs it once more; a paused schedule runs too. See ``Store.run_schedule``.
        """
        return await self._run(verbs.run_schedule(schedule_id))

    async def preview(
        self, schedule_id: str, count: int = 10, *, after: datetime | None = None
    ) -> list[datetime]:
        """The next ``count`` fire times of a schedule, after ``after`` (default: now)."""
        return await self._run(verbs.preview(schedule_id, count, after=after))

    # -- flow control --------------------------------------------------------

    async def set_limit(self, scope: str, **options: Unpack[LimitOptions]) -> Limit:
        """Set (or replace) the limit of ``scope`` (``PUT /limits/{scope}``); see
        ``Store.set_limit``. The audit names the client's token."""
        return await self._run(verbs.set_limit(scope, **options))

    async def limits(self) -> list[Limit]:
        """Every limit and paused queue, by scope (``GET /limits``)."""
        return await self._run(verbs.limits())

    async def remove_limit(self, scope: str) -> None:
        """Remove the limit of ``scope``; :class:`NotFound` if it has none; see
        ``Store.remove_limit``."""
        return await self._run(verbs.remove_limit(scope))

    async def pause_queue(self, name: str) -> Limit:
        """Pause queue ``name``: nothing in it is claimed until it is resumed; see
        ``Store.pause_queue``."""
        return await self._run(verbs.pause_queue(name))

    async def resume_queue(self, name: str) -> Limit | None:
        """Resume queue ``name``; see ``Store.resume_queue``."""
        return await self._run(verbs.resume_queue(name))

    async def queues(self) -> list[QueueView]:
        """Every queue known (holding executions, or with a limit or a pause), by name,
        with its executions by state (``GET /queues``)."""
        return await self._run(verbs.queues())

    async def throttled(self, *, window: float | timedelta = 3600.0) -> list[ThrottleCount]:
        """Claims held back by a limit or a paused queue in the last ``window``, per
        scope; see ``Store.throttled``."""
        return await self._run(verbs.throttled(window=window))

    async def flow_changes(self, *, limit: int = 100) -> list[FlowChange]:
        """The latest changes to limits and queues, newest first; see ``Store.flow_changes``."""
        return await self._run(verbs.flow_changes(limit=limit))

    async def nodes(self) -> list[Node]:
        """The live nodes."""
        return await self._run(worker_verbs.nodes())

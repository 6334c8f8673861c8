"""``Client``: the store's verbs over HTTP, against a ``fencepost serve``.

The same names, arguments, return types and errors as
:class:`~fencepost.store.base.Store`, so code written against a store — a
submitter, an operator script, a :class:`~fencepost.worker.runtime.Worker` —
runs against the service unchanged::

    with Client("http://scheduler:8080", token=os.environ["FENCEPOST_TOKEN"]) as client:
        client.submit("report", {"day": "2026-11-29"}, idempotency_key="report:2026-11-29")

A network failure or a 5xx answer raises :class:`StoreUnavailable`, which a
worker treats as it treats a database outage: it stops claiming, keeps its
outcomes while their leases can still hold, and resumes by itself.

Each verb is described once, in :mod:`fencepost.client.verbs` (the worker protocol's in
:mod:`fencepost.client.worker_verbs`); this module runs those descriptions over an
:class:`httpx.Client` (and :mod:`fencepost.client.aio` over an :class:`httpx.AsyncClient`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack

import httpx

from fencepost.client import exchange, verbs, worker_verbs
from fencepost.client.retries import DEFAULT_RETRY_TIMEOUT, Retrying, retry_timeout_option
from fencepost.domain.bulk import ActOptions, BulkResult, DeletionPage
from fencepost.domain.catalogue import JobEntry
from fencepost.domain.claims import ClaimOptions
from fencepost.domain.defaults import DEFAULT_COMMAND_TTL, DEFAULT_TTL
from fencepost.domain.errors import StaleLease
from fencepost.domain.filters import ExecutionFilters, ExecutionQuery
from fencepost.domain.history import History, HistoryOptions, HistorySummary, SummaryBy, Window
from fencepost.domain.jobviews import JobSummary, JobView
from fencepost.domain.limits import FlowChange, Limit, LimitOptions, ThrottleCount
from fencepost.domain.models import (
    JSON,
    Attempt,
    Command,
    Execution,
    Lease,
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


class Client:
    """A connection to a fencepost service, mirroring the store's verbs.

    ``token`` is sent as ``Authorization: Bearer``. ``http`` replaces the
    underlying :class:`httpx.Client` (tests pass an in-process one). The client
    keeps one connection pool; close it (or use ``with``) when done.

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
        http: httpx.Client | None = None,
    ) -> None:
        #: Seconds within which every try of one request ends (0: no retries; see
        #: :mod:`fencepost.client.retries`).
        self.retry_timeout = retry_timeout_option(retry_timeout)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if http is None:
            http = httpx.Client(base_url=base_url, timeout=timeout)
        http.headers.update(headers)
        self.base_url = base_url
        self.location = base_url  #: where the worker's store is, for its start line
        self._http = http
        self._next_start_in: float | None = None  # the last claim's (see next_start_in)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # -- transport -------------------------------------------------------------------

    def _run(self, verb: exchange.Verb[T]) -> T:
        """Run one verb: send each request it yields, sleep each pause, return its result.

        An error of an answer is thrown into the verb, which may map it (a stale
        lease) or let it pass. Keep this one frame deep: ``verbs.CALLER`` counts it.
        """
        try:
            step = next(verb)
            while True:
                try:
                    answer = self._send(step)
                except Exception as exc:  # the verb's to handle or to raise
                    step = verb.throw(exc)
                else:
                    step = verb.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result

    def _send(self, step: exchange.Request | exchange.Pause) -> Any:
        """One request; what the verb receives (see exchange.answer_for), or the error raised."""
        if isinstance(step, exchange.Pause):
            time.sleep(step.seconds)
            return b""
        content = step.content()
        headers = step.header_fields(content)
        retrying = Retrying(step.method, headers, timeout=self.retry_timeout, retry=step.retry)
        while True:
            try:
                response = self._http.request(
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
            time.sleep(pause)

    # -- submitting and reading ----------------------------------------------

    def submit(self, job: str, inputs: JSON = None, **options: Unpack[SubmitOptions]) -> Execution:
        """Submit one execution (``POST /executions``); see ``Store.submit``.

        ``max_attempts``, ``timeout`` and ``priority`` None: the job's own (from
        the store's job catalogue), else the store's default. ``job_version`` is the deprecated
        name of ``version``. ``limit_key``: the key a per-key limit counts it under.
        """
        return self._run(verbs.submit(job, inputs, **options))

    def submit_many(self, requests: Iterable[Mapping[str, Any]]) -> list[Execution]:
        """Submit a batch in one transaction (``POST /executions/batch``): all or none.

        Each mapping holds :meth:`submit`'s arguments (``job`` included); one that
        does not raises :class:`ValidationError` naming it (``[3].job``), and
        nothing is sent.
        """
        return self._run(verbs.submit_many(requests))

    def get(self, execution_id: str) -> Execution:
        """One execution; :class:`NotFound` if unknown."""
        return self._run(verbs.get(execution_id))

    def wait(self, execution_id: str, *, timeout: float | timedelta | None = None) -> Execution:
        """The execution once it is terminal (SUCCEEDED, FAILED, CANCELLED, SKIPPED).

        Long-polls ``GET /executions/{id}?wait=N`` in slices of at most 30 s (a
        service without long-poll is polled at a pace growing from 50 ms to 1 s).
        ``timeout`` None waits for ever; past it, :class:`TimeoutError`. A negative,
        NaN or infinite ``timeout`` is a :class:`ValidationError` naming it.
        """
        return self._run(verbs.wait(execution_id, timeout=timeout))

    def query(self, **query: Unpack[ExecutionQuery]) -> Page:
        """Executions matching every given filter, by id; see ``Store.query``
        (``due_after <= due_at < due_before``; ``outcome``: any attempt ended so;
        ``owner``: RUNNING under its lease; ``finished_*``: finished ones by finish
        time; ``error``: a piece of the latest error, ASCII letters in any case)."""
        return self._run(verbs.query(**query))

    def count_by_state(self, **filters: Unpack[ExecutionFilters]) -> dict[State, int]:
        """How many executions :meth:`query` with these filters lists, by state (every
        state a key); see ``Store.count_by_state``."""
        return self._run(verbs.count_by_state(**filters))

    def dead_letters(
        self, *, job: str | None = None, limit: int = 100, after: str | None = None
    ) -> Page:
        """FAILED executions, oldest first."""
        return self._run(verbs.dead_letters(job=job, limit=limit, after=after))

    def transitions(self, execution_id: str) -> list[Transition]:
        """The audit trail of one execution, oldest first."""
        return self._run(verbs.transitions(execution_id))

    def attempts(self, execution_id: str) -> list[Attempt]:
        """The attempts of one execution, oldest first."""
        return self._run(verbs.attempts(execution_id))

    def timeline(self, execution_id: str) -> Timeline:
        """One execution's leases, waits and marks (``GET /executions/{id}/timeline``;
        see :mod:`fencepost.domain.timeline`)."""
        return self._run(verbs.timeline(execution_id))

    def stats(self, *, window: float | timedelta = 3600.0) -> Stats:
        """Counts by state and job, backlog, and the window's lateness; see ``Store.stats``."""
        return self._run(verbs.stats(window=window))

    def jobs(self, *, window: float | timedelta = 86400.0) -> list[JobSummary]:
        """Every published job, by name: its latest version, the versions, the live nodes
        serving it, and its executions created in the last ``window`` by state.

        Unlike ``Store.jobs`` (every entry of the catalogue), one summary a job; see
        ``Store.job_counts`` for the counts.
        """
        return self._run(verbs.jobs(window=window))

    def job(self, name: str, *, window: float | timedelta = 86400.0) -> JobView:
        """The job ``name`` in full (every version, the nodes serving each, its executions
        created in the last ``window`` by state); :class:`NotFound` for a job no one
        published."""
        return self._run(verbs.job(name, window=window))

    def slo(self, **options: Unpack[SloOptions]) -> SloReport:
        """The service-level report (``GET /slo``): both objectives, their misses by
        error class, exclusions, error budgets and burn rates; see ``Store.slo``.

        An option ``Store.slo`` would refuse is refused before anything is sent, as a
        :class:`ValidationError` naming it.
        """
        return self._run(verbs.slo(**options))

    def history(self, **options: Unpack[HistoryOptions]) -> History:
        """A chart of the last hour, day or week (``GET /history``): per step, outcomes,
        first claims and their lateness, throttled time, SLO misses and burn rates; see
        ``Store.history``. The service rolls up what finished since its last roll-up
        first. A ``window`` that is not ``hour``, ``day`` or ``week`` is refused before
        anything is sent (:class:`ValidationError` naming it)."""
        return self._run(verbs.history(**options))

    def history_summary(
        self, *, window: Window | str = Window.HOUR, by: SummaryBy | str = SummaryBy.JOB
    ) -> HistorySummary:
        """The window's totals per job or per queue (``GET /history/summary``); see
        ``Store.history_summary``."""
        return self._run(verbs.history_summary(window=window, by=by))

    def bucket_report(
        self, *, orphaned_after: float | timedelta = 300, limit: int = 100
    ) -> BucketReport:
        """Buckets owned twice, holes, and orphans; see ``Store.bucket_report``."""
        return self._run(verbs.bucket_report(orphaned_after=orphaned_after, limit=limit))

    # -- operator actions ----------------------------------------------------

    def cancel(self, execution_id: str) -> Execution:
        """Cancel an execution that has not started (``DELETE /executions/{id}``)."""
        return self._run(verbs.cancel(execution_id))

    def request(self, execution_id: str, kind: CommandKind | str) -> Command:
        """Ask the worker running an execution to cancel, pause or resume it."""
        return self._run(verbs.request(execution_id, kind))

    def replay(self, execution_id: str) -> Execution:
        """Revive a dead letter (FAILED -> SCHEDULED, due now, fresh attempts)."""
        return self._run(verbs.replay(execution_id))

    def act(
        self, action: str, *, actor: str | None = None, **options: Unpack[ActOptions]
    ) -> BulkResult:
        """One batch of a bulk action (``POST /executions/actions``); see ``Store.act``.

        Repeat with the result's ``next_cursor`` as ``after`` until it is None. The
        service audits each execution with its token's name, not ``actor``.
        """
        return self._run(verbs.act(action, **options))

    def deletions(self, *, limit: int = 100, after: str | None = None) -> DeletionPage:
        """Records of deleted executions, oldest first (``GET /deletions``)."""
        return self._run(verbs.deletions(limit=limit, after=after))

    # -- schedules -----------------------------------------------------------

    def add_schedule(self, job: str, **options: Unpack[ScheduleOptions]) -> Schedule:
        """Add a schedule (``POST /schedules``); ``Store.add_schedule``'s arguments.

        ``version``, ``every`` and ``misfire_grace`` as the store names them
        (``limit_key`` too: every execution of it carries that key);
        ``job_version`` is the deprecated name of ``version``.
        """
        return self._run(verbs.add_schedule(job, **options))

    def get_schedule(self, schedule_id: str) -> Schedule:
        """One schedule; :class:`NotFound` if unknown."""
        return self._run(verbs.get_schedule(schedule_id))

    def schedules(
        self,
        *,
        job: str | None = None,
        paused: bool | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> SchedulePage:
        """Schedules by id, filtered; pass ``next_cursor`` as ``after``."""
        return self._run(verbs.schedules(job=job, paused=paused, limit=limit, after=after))

    def update_schedule(self, schedule_id: str, /, **changes: Any) -> Schedule:
        """Change a schedule (``PATCH /schedules/{id}``); ``Store.update_schedule``'s names."""
        return self._run(verbs.update_schedule(schedule_id, **changes))

    def pause_schedule(self, schedule_id: str) -> Schedule:
        """Stop materializing a schedule until resumed."""
        return self._run(verbs.pause_schedule(schedule_id))

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Materialize a paused schedule again."""
        return self._run(verbs.resume_schedule(schedule_id))

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule (its executions stay)."""
        return self._run(verbs.delete_schedule(schedule_id))

    def run_schedule(self, schedule_id: str) -> Execution:
        """Run a schedule once now, besides its slots (``POST /schedules/{id}/run``).

        The new execution is due now, with ``slot`` None and the key
        ``{schedule_id}:run:{execution id}``; the audit names the client's token. Each
        call runs it once more; a paused schedule runs too. See ``Store.run_schedule``.
        """
        return self._run(verbs.run_schedule(schedule_id))

    def preview(
        self, schedule_id: str, count: int = 10, *, after: datetime | None = None
    ) -> list[datetime]:
        """The next ``count`` fire times of a schedule, after ``after`` (default: now)."""
        return self._run(verbs.preview(schedule_id, count, after=after))

    # -- flow control --------------------------------------------------------

    def set_limit(self, scope: str, **options: Unpack[LimitOptions]) -> Limit:
        """Set (or replace) the limit of ``scope`` (``PUT /limits/{scope}``); see
        ``Store.set_limit``. The audit names the client's token."""
        return self._run(verbs.set_limit(scope, **options))

    def limits(self) -> list[Limit]:
        """Every limit and paused queue, by scope (``GET /limits``)."""
        return self._run(verbs.limits())

    def remove_limit(self, scope: str) -> None:
        """Remove the limit of ``scope``; :class:`NotFound` if it has none; see
        ``Store.remove_limit``."""
        return self._run(verbs.remove_limit(scope))

    def pause_queue(self, name: str) -> Limit:
        """Pause queue ``name``: nothing in it is claimed until it is resumed; see
        ``Store.pause_queue``."""
        return self._run(verbs.pause_queue(name))

    def resume_queue(self, name: str) -> Limit | None:
        """Resume queue ``name``; see ``Store.resume_queue``."""
        return self._run(verbs.resume_queue(name))

    def queues(self) -> list[QueueView]:
        """Every queue known (holding executions, or with a limit or a pause), by name,
        with its executions by state (``GET /queues``)."""
        return self._run(verbs.queues())

    def throttled(self, *, window: float | timedelta = 3600.0) -> list[ThrottleCount]:
        """Claims held back by a limit or a paused queue in the last ``window``, per
        scope; see ``Store.throttled``."""
        return self._run(verbs.throttled(window=window))

    def flow_changes(self, *, limit: int = 100) -> list[FlowChange]:
        """The latest changes to limits and queues, newest first; see ``Store.flow_changes``."""
        return self._run(verbs.flow_changes(limit=limit))

    # -- the worker protocol -------------------------------------------------

    def claim(self, owner: str, **options: Unpack[ClaimOptions]) -> list[Lease]:
        """Lease up to ``limit`` due executions (``POST /claims``); see ``Store.claim``."""
        leases, self._next_start_in = self._run(worker_verbs.claimed(owner, **options))
        return leases

    def next_start_in(self) -> float | None:
        """Seconds until work this client's last claim saw held back by a rate limit
        may start, as the service's store said it (``Store.next_start_in``); None:
        nothing held by a rate, or a service that does not say. A remote worker
        sleeps that long (at most a second) rather than claiming again at once."""
        return self._next_start_in

    def claim_occurrence(
        self, schedule_id: str, slot: str, owner: str, *, ttl: float | timedelta = DEFAULT_TTL
    ) -> Lease:
        """Claim one occurrence of a schedule if it is due (``POST /jobs/{task}/{slot}/claim``)."""
        return self._run(worker_verbs.claim_occurrence(schedule_id, slot, owner, ttl=ttl))

    def complete_occurrence(
        self, schedule_id: str, slot: str, lease: Lease, result: JSON = None
    ) -> Execution:
        """Complete one occurrence under its lease (``POST /jobs/{task}/{slot}/complete``)."""
        return self._run(worker_verbs.complete_occurrence(schedule_id, slot, lease, result))

    def heartbeat(
        self, lease: Lease, *, ttl: float | timedelta = DEFAULT_TTL, progress: JSON = None
    ) -> Lease:
        """Renew a live lease; :class:`StaleLease` if it is no longer held."""
        return self._run(worker_verbs.heartbeat(lease, ttl=ttl, progress=progress))

    def heartbeat_many(
        self, beats: Sequence[tuple[Lease, JSON]], *, ttl: float | timedelta = DEFAULT_TTL
    ) -> list[Lease | StaleLease]:
        """Renew many leases in one round trip; per item the lease or its refusal."""
        return self._run(worker_verbs.heartbeat_many(beats, ttl=ttl))

    def complete(self, lease: Lease, result: JSON = None) -> Execution:
        """Record success; see ``Store.complete`` (a non-JSON result fails it for good)."""
        return self._run(worker_verbs.complete(lease, result))

    def complete_many(self, results: Sequence[tuple[Lease, JSON]]) -> list[StaleLease | None]:
        """Complete many leases in one round trip; per item None or its refusal.

        A result that is not JSON cannot be sent: that lease is failed for good
        with ``result_invalid``, as the store would, and counts as accepted.
        """
        return self._run(worker_verbs.complete_many(results))

    def fail(
        self,
        lease: Lease,
        error: str,
        *,
        retryable: bool = True,
        retry_in: float | timedelta | None = None,
        timed_out: bool = False,
    ) -> Execution:
        """Record a failed attempt; see ``Store.fail``."""
        failed = worker_verbs.fail(
            lease, error, retryable=retryable, retry_in=retry_in, timed_out=timed_out
        )
        return self._run(failed)

    def release(self, lease: Lease, *, reason: str = "released") -> Execution:
        """Give a live lease back unfinished; see ``Store.release``."""
        return self._run(worker_verbs.release(lease, reason=reason))

    def snooze(
        self, lease: Lease, seconds: float | timedelta, *, reason: str | None = None
    ) -> Execution:
        """Give a live lease back until ``seconds`` from now, the attempt not counted;
        see ``Store.snooze`` (the service's store applies its bound of snoozes)."""
        return self._run(worker_verbs.snooze(lease, seconds, reason=reason))

    def abort(self, lease: Lease, *, reason: str = "cancel requested") -> Execution:
        """Stop a running execution to honour a cancel; see ``Store.abort``."""
        return self._run(worker_verbs.abort(lease, reason=reason))

    def claim_commands(
        self,
        owner: str,
        execution_ids: Iterable[str],
        *,
        ttl: float | timedelta = DEFAULT_COMMAND_TTL,
        limit: int = 100,
    ) -> list[Command]:
        """Claim open commands addressed to these executions; see ``Store.claim_commands``."""
        return self._run(worker_verbs.claim_commands(owner, execution_ids, ttl=ttl, limit=limit))

    def complete_command(self, command: Command, lease: Lease) -> Command:
        """Mark a claimed command delivered under ``lease``; see ``Store.complete_command``."""
        return self._run(worker_verbs.complete_command(command, lease))

    def release_command(self, command: Command) -> None:
        """Give a claimed command back; see ``Store.release_command``."""
        return self._run(worker_verbs.release_command(command))

    def register_node(
        self,
        node_id: str | None = None,
        *,
        kind: str = "worker",
        buckets: Iterable[int] | None = None,
        ttl: float | timedelta = DEFAULT_TTL,
        jobs: Iterable[tuple[str, int]] = (),
    ) -> Node:
        """Register (or renew) this process as a live node; see ``Store.register_node``."""
        node = worker_verbs.register_node(node_id, kind=kind, buckets=buckets, ttl=ttl, jobs=jobs)
        return self._run(node)

    def publish_jobs(self, entries: Iterable[JobEntry]) -> list[JobEntry]:
        """Publish job versions to the service's catalogue (``POST /jobs``); see
        ``Store.publish_jobs``. A changed definition of a published version raises
        :class:`~fencepost.domain.errors.RemoteCatalogueConflict` (a ``CatalogueConflict``).
        """
        return self._run(worker_verbs.publish_jobs(entries))

    def declare_limits(self, limits: Iterable[Limit], *, actor: str = "publisher") -> None:
        """Declare the limits of the jobs this worker publishes (``POST /jobs/limits``);
        see ``Store.declare_limits``. ``job:NAME`` limits only. The service audits
        the declaration with its token's name, not ``actor``."""
        self._run(worker_verbs.declare_limits(limits))

    def deregister_node(self, node_id: str) -> None:
        """Forget a node at once (a clean shutdown)."""
        return self._run(worker_verbs.deregister_node(node_id))

    def nodes(self) -> list[Node]:
        """The live nodes."""
        return self._run(worker_verbs.nodes())

    def reap_expired(self, *, limit: int = 1000) -> int:
        """Nothing to do here: the service reaps expired leases itself. Returns 0."""
        return 0

    def wait_for_work(self, timeout: float) -> bool:
        """Wait ``timeout`` seconds (the service does not push); the worker then polls."""
        time.sleep(max(0.0, timeout))
        return False

    def clock_offset(self, written_at: datetime) -> float | None:
        """None: the service's store arbitrates leases by its own clock, not this process's."""
        return None

"""``fencepost.App``: register jobs, submit executions with checked inputs, run workers.

::

    app = fencepost.App("sqlite:///jobs.db")

    @app.job("nightly-report", version=3, max_attempts=5, timeout=600)
    def nightly_report(ctx, day: str) -> dict:
        ...
        ctx.checkpoint(progress={"rows": n})   # heartbeat + progress; raises Cancelled if asked
        return {"rows": n}

    app.submit("nightly-report", {"day": "2026-11-28"})   # inputs checked against the hints
    app.run_worker(concurrency=4)                          # until SIGTERM / SIGINT
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar, Unpack, cast

from fencepost.domain.bulk import (
    Action,
    ActOptions,
    BulkResult,
    Deletion,
    DeletionPage,
)
from fencepost.domain.errors import ValidationError
from fencepost.domain.filters import StoreFilters, StoreQuery
from fencepost.domain.history import (
    READ_ROLL_UP_ROWS,
    History,
    HistoryOptions,
    HistorySummary,
    SummaryBy,
    Window,
)
from fencepost.domain.limits import Limit, LimitOptions, ThrottleCount
from fencepost.domain.models import JSON, Command, Execution, Page
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.schedules import ScheduleOptions
from fencepost.domain.states import CommandKind, State
from fencepost.domain.submission import SubmitOptions, submit_options
from fencepost.jobs.catalogue import publish
from fencepost.jobs.registry import JobRegistry
from fencepost.jobs.spec import (
    DEFAULT_LEASE_TTL,
    JobSpec,
    declared_limit,
    retry_options,
    spec_from_function,
)
from fencepost.scheduler.handle import ScheduleHandle
from fencepost.scheduler.materializer import Materializer, MaterializerOptions
from fencepost.store import Store, connect
from fencepost.worker.runtime import Worker, WorkerOptions

F = TypeVar("F", bound=Callable[..., Any])


class App:
    """A set of jobs bound to one store.

    ``store`` is a URL for :func:`fencepost.connect` (opened on first use) or an
    open :class:`Store`. ``definitions`` loads job definition files from a
    directory (see :mod:`fencepost.jobs.definitions`).
    """

    def __init__(
        self,
        store: str | Store = "sqlite:///fencepost.db",
        *,
        definitions: str | Path | None = None,
        **connect_options: Any,
    ) -> None:
        self._url = store if isinstance(store, str) else None
        self._store = store if isinstance(store, Store) else None
        self._connect_options = connect_options
        self.registry = JobRegistry()
        #: How many of the registry's jobs this app has published (see _publish_jobs).
        self._published = 0
        if definitions is not None:
            self.load_definitions(definitions)

    @property
    def store(self) -> Store:
        """The store, connected on first use."""
        if self._store is None:
            assert self._url is not None
            self._store = connect(self._url, **self._connect_options)
        return self._store

    # -- jobs ------------------------------------------------------------------------

    def job(
        self,
        name: str | None = None,
        *,
        version: int = 1,
        inputs: Mapping[str, Any] | None = None,
        output: Any = None,
        max_attempts: int | None = None,
        timeout: float | timedelta | None = None,
        lease_ttl: float | timedelta = DEFAULT_LEASE_TTL,
        retry: RetryPolicy | Mapping[str, float] | None = None,
        priority: int | None = None,
        queue: str | None = None,
        rate_limit: str | None = None,
        rate_burst: int | None = None,
        concurrency: int | None = None,
        limit_per_key: bool = False,
    ) -> Callable[[F], F]:
        """Register the decorated function (or coroutine function) as a job version.

        ``name`` defaults to the function's name. The inputs are the function's
        keyword parameters (after an optional ``ctx``); their type hints give
        the input schema unless ``inputs`` (a JSON Schema) is given, and convert
        what the function receives (a ``datetime`` hint gets a ``datetime``, a
        pydantic model its instance). ``output`` is the result's JSON Schema or
        a type (its schema derived; results validated and dumped to JSON
        through it): a result that does not match fails with ``result_invalid``,
        not retried. The return annotation is not used unless given as
        ``output``. ``retry``
        is a :class:`RetryPolicy` or a mapping with ``base_delay``/``max_delay``
        (and optionally ``max_attempts``). ``priority`` and ``queue`` are what its
        executions get when a submit names none (else 0 and ``"default"``). The
        function is returned unchanged.

        ``rate_limit`` (``"50/s"``, ``"3000/min"``, ``"100/h"``: starts of its
        executions, across every worker), ``rate_burst`` (the rate's bucket) and
        ``concurrency`` (the most leased at once, across every worker) declare the
        job's limit; ``limit_per_key=True`` gives each ``limit_key`` its own. Checked
        here (a bad value raises :class:`ValidationError` naming it); a worker
        publishing the job declares it to the store, where an operator's limit on
        the job wins (see :func:`~fencepost.jobs.spec.declared_limit` and
        :meth:`~fencepost.store.flow.FlowVerbs.declare_limits`).
        """
        policy, attempts = retry_options(retry, max_attempts)
        limits = {
            "rate_limit": rate_limit,
            "rate_burst": rate_burst,
            "concurrency": concurrency,
            "limit_per_key": limit_per_key,
        }
        if name is not None:  # else checked once the function names the job
            declared_limit(name, **limits)

        def register(handler: F) -> F:
            job_name = name or handler.__name__
            self.registry.add(
                spec_from_function(
                    handler,
                    name=job_name,
                    version=version,
                    inputs=inputs,
                    output=output,
                    max_attempts=attempts,
                    retry=policy,
                    timeout=timeout,
                    lease_ttl=lease_ttl,
                    priority=priority,
                    queue=queue,
                    limit=declared_limit(job_name, **limits),
                )
            )
            return handler

        return register

    def add_job(self, spec: JobSpec) -> None:
        """Register a prepared :class:`JobSpec`."""
        self.registry.add(spec)

    def load_definitions(self, directory: str | Path) -> list[JobSpec]:
        """Register every job definition file in ``directory``; returns the specs loaded."""
        # Imported here: definition files bring YAML and HTTP clients that code-only apps skip.
        from fencepost.jobs.definitions import load_definitions

        specs = load_definitions(Path(directory))
        for spec in specs:
            self.registry.add(spec)
        return specs

    # -- submitting and steering -----------------------------------------------------

    def submit(
        self,
        job: str,
        inputs: JSON = None,
        *,
        actor: str | None = None,
        **options: Unpack[SubmitOptions],
    ) -> Execution:
        """Submit an execution of ``job``, by the store's one catalogue rule.

        This app's jobs are published to the store's job catalogue first (once), so
        a job it declares is checked and defaulted from its definition even before
        a worker starts. A published job is pinned to ``version`` (default: its
        latest), its inputs are checked against that version's schema (a mismatch
        raises :class:`ValidationError` naming the field, ``inputs.day``, and nothing
        is stored), and ``max_attempts``, ``timeout``, ``priority`` and ``queue``
        left None take the job's defaults. A job no one published follows the
        store's ``unknown_jobs`` (see :class:`~fencepost.store.catalogue.CatalogueVerbs`).
        ``actor`` names the submitter in the audit trail (a user of your application).
        ``limit_key`` is the key a per-key limit counts it under (a tenant, a host).
        """
        arguments = submit_options(inputs, options, stacklevel=2)
        self._publish_jobs()
        self._bind_locally(job, arguments.get("version"), inputs)
        return self.store.submit(job, actor=actor, **arguments)

    def _bind_locally(self, job: str, version: int | None, inputs: JSON) -> None:
        """Bind ``inputs`` to the handler's parameters as a run will, when this app holds
        the very version a submit would run: a value its hints cannot convert is refused
        now (naming ``inputs.<field>``), not at every attempt on a worker."""
        entry = self.store.entry_for(job, version) if isinstance(job, str) else None
        if entry is None:
            return
        try:
            spec = self.registry.get(entry.name, entry.version)
        except ValidationError:
            return  # another process's version: the catalogue's schema check is the rule
        # The same definition: this app published it, and a published version never
        # changes (publishing another under its name and version is refused).
        spec.check_inputs(inputs)

    def _publish_jobs(self) -> None:
        """Publish this app's jobs to the store's catalogue, each once (a no-op after)."""
        if self._published == len(self.registry):
            return
        publish(self.store, self.registry)
        self._published = len(self.registry)

    def act(self, action: Action | str, *, actor: str, **options: Unpack[ActOptions]) -> BulkResult:
        """Replay, cancel, retry now or delete one batch of executions named by ``ids`` or
        matching ``filter``: :meth:`Store.act
        <fencepost.store.operating.OperatingVerbs.act>` (repeat with ``next_cursor``)."""
        return self.store.act(action, actor=actor, **options)

    def delete(self, execution_id: str, *, actor: str) -> Deletion:
        """Delete a finished execution, leaving a record: :meth:`Store.delete
        <fencepost.store.operating.OperatingVerbs.delete>`."""
        return self.store.delete(execution_id, actor=actor)

    def deletions(self, *, limit: int = 100, after: str | None = None) -> DeletionPage:
        """Records of deleted executions, oldest first: :meth:`Store.deletions
        <fencepost.store.operating.OperatingVerbs.deletions>`."""
        return self.store.deletions(limit=limit, after=after)

    def request(
        self, execution_id: str, kind: CommandKind | str, *, actor: str = "client"
    ) -> Command:
        """Ask the worker running ``execution_id`` to cancel, pause or resume it."""
        return self.store.request(execution_id, kind, actor=actor)

    def query(self, **query: Unpack[StoreQuery]) -> Page:
        """Executions matching every given filter, by id: :meth:`Store.query
        <fencepost.store.base.Store.query>` (``due_after <= due_at < due_before``;
        ``outcome``: those any of whose attempts ended with it, e.g. ``timed_out``;
        ``owner``: RUNNING under that owner's lease; ``finished_*``: finished ones by
        finish time; ``error``: a piece of the latest error, in any case)."""
        return self.store.query(**query)

    def count_by_state(self, **filters: Unpack[StoreFilters]) -> dict[State, int]:
        """How many executions :meth:`query` with these filters lists, by state (every
        state a key): :meth:`Store.count_by_state
        <fencepost.store.base.Store.count_by_state>`."""
        return self.store.count_by_state(**filters)

    # -- schedules -------------------------------------------------------------------

    def schedule(self, job: str, **options: Unpack[ScheduleOptions]) -> ScheduleHandle:
        """Run ``job`` on a cron rule (in ``timezone``) or ``every`` interval; returns a handle.

        The inputs are checked against the job's schema and the schedule is
        pinned to ``version`` (default: the latest). ``id`` makes it idempotent:
        the same arguments again return the existing schedule. Each occurrence
        becomes an execution keyed ``schedule_id:slot``; see
        :mod:`fencepost.timing.planning` for the misfire and overlap policies.
        ``paused`` stores it paused (its slots are recorded SKIPPED until resumed).
        Every execution of it carries ``limit_key`` (the key a per-key limit counts).
        """
        self._publish_jobs()
        stored = self.store.add_schedule(job, **options)
        return ScheduleHandle(self.store, stored)

    def get_schedule(self, schedule_id: str) -> ScheduleHandle:
        """The stored schedule ``schedule_id`` (:class:`NotFound` if there is none)."""
        return ScheduleHandle(self.store, self.store.get_schedule(schedule_id))

    def run_schedule(self, schedule_id: str, *, actor: str = "client") -> Execution:
        """Run schedule ``schedule_id`` once now, besides its slots; the new execution.

        See :meth:`Store.run_schedule
        <fencepost.store.scheduling.ScheduleVerbs.run_schedule>`: due now, ``slot``
        None, audited as ``actor``; a paused schedule runs too.
        """
        return self.store.run_schedule(schedule_id, actor=actor)

    def materializer(self, **options: Any) -> Materializer:
        """A :class:`Materializer` over this app's store (see :class:`MaterializerOptions`)."""
        return Materializer(self.store, MaterializerOptions(**options))

    # -- flow control ----------------------------------------------------------------

    def set_limit(
        self, scope: str, *, actor: str = "operator", **options: Unpack[LimitOptions]
    ) -> Limit:
        """Set (or replace) the limit of ``scope`` (``job:NAME`` or ``queue:NAME``): a
        ``rate`` of starts (``"50/s"``), a ``concurrency`` or both; see
        :meth:`Store.set_limit <fencepost.store.flow.FlowVerbs.set_limit>`."""
        return self.store.set_limit(scope, actor=actor, **options)

    def limits(self) -> list[Limit]:
        """Every limit and paused queue of the store, by scope."""
        return self.store.limits()

    def remove_limit(self, scope: str, *, actor: str = "operator") -> None:
        """Remove the limit of ``scope``; :class:`NotFound` if it has none."""
        self.store.remove_limit(scope, actor=actor)

    def pause_queue(self, name: str, *, actor: str = "operator") -> Limit:
        """Pause queue ``name``: nothing in it is claimed until it is resumed."""
        return self.store.pause_queue(name, actor=actor)

    def resume_queue(self, name: str, *, actor: str = "operator") -> Limit | None:
        """Resume queue ``name``; its waiting executions start again under its limits."""
        return self.store.resume_queue(name, actor=actor)

    def throttled(self, *, window: float | timedelta = 3600.0) -> list[ThrottleCount]:
        """Claims held back by a limit or a paused queue in the last ``window``, per scope."""
        return self.store.throttled(window=window)

    # -- history charts --------------------------------------------------------------

    def history(self, **options: Unpack[HistoryOptions]) -> History:
        """A chart of the last hour, day or week from the store's stored history: per
        step, outcomes, first claims and their lateness, throttled time, SLO misses and
        burn rates (:meth:`Store.history <fencepost.store.history.HistoryVerbs.history>`).

        Rolls up first what finished since the last roll-up, a bounded amount and
        without waiting for another process's roll-up (as ``GET /history`` does), so a
        script that runs its own workers sees their work; ``rolled_up_to`` says how far
        the counts go.
        """
        self.store.roll_up_history(max_rows=READ_ROLL_UP_ROWS, wait=False)
        return self.store.history(**options)

    def history_summary(
        self, *, window: Window | str = Window.HOUR, by: SummaryBy | str = SummaryBy.JOB
    ) -> HistorySummary:
        """The window's totals per job or per queue, by name; rolls up first as
        :meth:`history` does."""
        self.store.roll_up_history(max_rows=READ_ROLL_UP_ROWS, wait=False)
        return self.store.history_summary(window=window, by=by)

    # -- workers ---------------------------------------------------------------------

    def worker(
        self,
        *,
        jobs: Iterable[str] | None = None,
        concurrency: int = 8,
        owner: str | None = None,
        buckets: Iterable[int] | None = None,
        max_per_bucket: int | None = None,
        grace: float = 30.0,
        **options: Any,
    ) -> Worker:
        """A :class:`Worker` for this app's jobs (``jobs`` restricts them by name)."""
        registry = self.registry if jobs is None else self.registry.restricted(jobs)
        return Worker(
            self.store,
            registry,
            WorkerOptions(
                owner=owner,
                concurrency=concurrency,
                buckets=None if buckets is None else tuple(buckets),
                max_per_bucket=max_per_bucket,
                grace=grace,
                **options,
            ),
        )

    def run_worker(
        self,
        *,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        with_scheduler: bool = False,
        **options: Any,
    ) -> Worker:
        """Run a worker in this thread until SIGTERM or SIGINT (see :meth:`worker`).

        It logs as ``fencepost worker`` does (INFO and up, the same text lines on
        stderr) unless the application has configured logging itself (the root
        logger has a handler, as after ``logging.basicConfig``): then it is left
        alone. ``metrics_port`` serves the worker's Prometheus metrics on
        ``metrics_host`` (see :meth:`Worker.serve_metrics`). ``with_scheduler`` also
        runs a materializer in this process, as ``fencepost worker --with-scheduler``
        does (owner ``<worker owner>:scheduler``), stopped with the worker; without
        one here or elsewhere, schedules never fire and the worker warns as it starts.
        """
        from fencepost.cli.logs import configure_unless_configured

        configure_unless_configured()
        worker = self.worker(**options)
        if metrics_port is not None:
            from fencepost.api.counters import meter_store

            worker.serve_metrics(metrics_port, metrics_host, meter=meter_store)
        materializer = None
        if with_scheduler:
            # Through the worker's store: with metrics, its occurrences are counted too.
            store = cast(Store, worker.store)
            materializer = Materializer(
                store, MaterializerOptions(owner=f"{worker.owner}:scheduler")
            )
            materializer.start()  # registered before the worker looks for a scheduler
        try:
            worker.run()
        finally:
            if materializer is not None:
                materializer.stop()
        return worker

    def close(self) -> None:
        """Close the store if this app opened it."""
        if self._store is not None and self._url is not None:
            self._store.close()
            self._store = None

"""The store contract, part three: schedules and their materialization."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Unpack

from fencepost.domain import schedules as plans
from fencepost.domain.checks import require_int, require_name, storable
from fencepost.domain.durations import as_aware_utc, as_duration
from fencepost.domain.errors import IdempotencyConflict, NotFound, StaleLease, ValidationError
from fencepost.domain.filters import checked
from fencepost.domain.models import Execution, Occurrence, Schedule, SchedulePage
from fencepost.domain.schedules import NewOccurrence, ScheduleOptions, ScheduleSpec
from fencepost.domain.submission import canonical
from fencepost.store.catalogue import CatalogueVerbs
from fencepost.store.observers import tell_stored
from fencepost.store.values import (
    DEFAULT_TTL,
    MAX_LIMIT,
    Materialization,
    ScheduleFilter,
)
from fencepost.store.verbs.schedules import schedule_filter
from fencepost.timing import specs

#: The changes of update_schedule that the job catalogue has a say in.
_CATALOGUED = frozenset({"job", "job_version", "inputs"})
#: The options of add_schedule that the job catalogue resolves.
_CATALOGUED_OPTIONS = ("version", "inputs", "max_attempts", "priority", "queue")


class ScheduleVerbs(CatalogueVerbs):
    """Verbs of :class:`~fencepost.store.base.Store` for schedules (see their docstrings)."""

    # -- schedules -------------------------------------------------------------------------

    def add_schedule(self, job: str, **options: Unpack[ScheduleOptions]) -> Schedule:
        """Store a schedule of ``job`` and return it.

        The rule is exactly one of ``cron`` (5 fields, or 6 with leading seconds,
        evaluated in the IANA ``timezone``) or ``every`` (seconds or a timedelta,
        > 0, on the UTC timeline: ``timezone`` must stay ``"UTC"``). Policies are
        given by name or enum member: ``misfire`` (``catch_up``, ``coalesce``,
        ``skip``) with ``misfire_grace`` (>= 0 s) and ``max_catch_up`` (>= 1);
        ``overlap`` (``allow``, ``skip``, ``buffer_one``, ``buffer_all``,
        ``replace``); ``dst_gap`` (``shift``, ``skip``), ``dst_fold`` (``once``,
        ``twice``). ``start_at`` and ``end_at`` are aware instants, ``end_at >
        start_at``. ``inputs`` must be a JSON object (``None`` means ``{}``); every
        materialized execution gets them, with ``max_attempts`` and ``priority``,
        and waits in ``queue`` (a name like a job's, at most 100 characters; None
        means the job's catalogue entry's, else ``"default"``);
        ``version`` pins them to a version of the job (``job_version=`` is its
        deprecated name, a :class:`DeprecationWarning`). Every materialized
        execution carries ``limit_key`` (None: none; else 1 to 200 characters without
        control characters), the key a per-key limit counts it under (see
        :meth:`~fencepost.store.flow.FlowVerbs.set_limit`). Bad arguments raise
        :class:`ValidationError` naming the field; nothing is written.

        The job catalogue's rules apply as for :meth:`~fencepost.store.base.Store.submit`:
        a published job's schedule is pinned to ``version`` (its latest when None),
        its ``inputs`` are checked against that version's schema, and
        ``max_attempts`` and ``priority`` left None take the job's defaults (else
        3 and 0); a job no one published is allowed or refused by ``unknown_jobs``.

        The new schedule's ``watermark`` is one microsecond before ``start_at``
        when that is in the future, else the store's now (slots strictly after
        the watermark are still to come); ``next_due`` is now, so a materializer
        looks at it at once; no materializer holds it.

        ``id`` (at most 200 characters) defaults to a new UUIDv7. If a schedule
        with that id exists and was added with the same arguments (after
        normalization: ``60`` and ``timedelta(seconds=60)`` are the same), it is
        returned unchanged, whatever happened to it since (updates, pauses);
        with different arguments :class:`IdempotencyConflict` is raised.
        """
        spec, schedule_id = self._schedule_to_add(job, options, stacklevel=3)
        schedule = self._add_schedule(spec, schedule_id)
        given = {name: options.get(name) for name in ("max_attempts", "priority", "queue")}
        self._note_unpublished_schedule(schedule, given)
        return schedule

    def _schedule_to_add(
        self, job: str, options: Mapping[str, Any], *, stacklevel: int
    ) -> tuple[ScheduleSpec, str]:
        """:meth:`add_schedule`'s options validated (through the job catalogue): the
        schedule's spec and its id. ``stacklevel`` places a deprecation warning."""
        a = dict(checked(options, ScheduleOptions, "add_schedule"))
        if "job_version" in a:
            if a.get("version") is None:
                a.pop("version", None)
            a = canonical(a, stacklevel=stacklevel)
        resolved = self._catalogued(
            job,
            {name: a.pop(name, None) for name in _CATALOGUED_OPTIONS},
            schedule=True,
        )
        schedule_id = a.pop("id", None)
        spec = specs.define(
            job,
            max_payload_bytes=self.config.max_payload_bytes,
            inputs=resolved["inputs"],
            job_version=resolved["version"],
            max_attempts=resolved["max_attempts"],
            priority=resolved["priority"],
            queue=resolved["queue"],
            **a,
        )
        if schedule_id is None:
            return spec, self._ids.new(int(self.clock.now().timestamp() * 1000))
        return spec, plans.check_schedule_id(schedule_id)

    @abstractmethod
    def _add_schedule(self, spec: ScheduleSpec, schedule_id: str) -> Schedule:
        """Insert ``plans.new_schedule(spec, id=schedule_id, now=<the store's now>)``.

        Store ``spec.fingerprint()`` with it. If ``schedule_id`` exists, return the
        stored schedule when its fingerprint equals ``spec.fingerprint()``, else raise
        ``IdempotencyConflict(schedule_id, schedule_id, subject="schedule")``.
        """

    @abstractmethod
    def get_schedule(self, schedule_id: str) -> Schedule:
        """The schedule with this id, or :class:`NotFound` (``subject="schedule"``)."""

    def schedules(
        self,
        *,
        job: str | None = None,
        paused: bool | None = None,
        limit: int = 100,
        after: str | None = None,
        due_before: datetime | None = None,
    ) -> SchedulePage:
        """Schedules matching every given filter, ordered by id (code point order).

        ``due_before`` keeps only schedules with ``next_due <= due_before`` (an
        aware instant): those a materializer would take up by then, lease or not.
        ``after`` is the ``next_cursor`` of the previous page (ids strictly
        greater); ``next_cursor`` is None on the last page.
        """
        return self._list_schedules(
            schedule_filter(job=job, paused=paused, limit=limit, after=after, due_before=due_before)
        )

    @abstractmethod
    def _list_schedules(self, filters: ScheduleFilter) -> SchedulePage:
        """List with validated filters: at most ``limit`` items, ``next_cursor`` if more exist."""

    def update_schedule(
        self, schedule_id: str, /, *, actor: str = "client", **changes: Any
    ) -> Schedule:
        """Change any of ``add_schedule``'s arguments except ``id``; return the schedule.

        The schedule after the change is validated as ``add_schedule`` would
        validate it (so a cron schedule switches to an interval with ``every=...,
        cron=None``; ``timezone`` then becomes ``"UTC"`` unless given). It takes
        effect for slots not yet materialized: the watermark is unchanged. Then
        ``next_due = now`` and the materializer lease is cleared, so a plan made
        from the old definition is refused (:meth:`materialize` answers it with
        :class:`StaleLease`) and a materializer plans again at once. The
        fingerprint that makes ``add_schedule`` idempotent stays that of the
        original arguments. Raises :class:`NotFound`, or :class:`ValidationError`
        (nothing written).

        A change of ``job``, ``version`` or ``inputs`` goes through the job catalogue
        as :meth:`add_schedule` does: the schedule is pinned again (a new ``job``
        without a ``version``: its latest) and its inputs checked against that
        version's schema.

        ``paused=True`` on a schedule that is not paused pauses it as
        :meth:`pause_schedule` does, the skips audited with ``actor``.
        """
        return self._change_schedule(
            schedule_id,
            self._schedule_update(changes, stacklevel=3),
            actor=require_name(actor, "actor"),
        )

    def _schedule_update(
        self, changes: dict[str, Any], *, stacklevel: int
    ) -> Callable[[Schedule, datetime], Schedule]:
        """:meth:`update_schedule`'s changes validated, as the decision of
        :meth:`_change_schedule`. ``stacklevel`` places a deprecation warning."""
        changes = canonical(changes, stacklevel=stacklevel)
        if "version" in changes:  # the verbs' name for the schedule's job_version
            changes["job_version"] = changes.pop("version")
        plans.check_changes(changes)
        limit = self.config.max_payload_bytes

        if changes.keys() & _CATALOGUED:
            self._current_catalogue()  # read before the transaction, not inside it

        def decide(current: Schedule, now: datetime) -> Schedule:
            return specs.amend(
                current, self._recatalogued(current, changes), now=now, max_payload_bytes=limit
            )

        return decide

    def _recatalogued(self, current: Schedule, changes: dict[str, Any]) -> dict[str, Any]:
        """``changes`` to ``current`` with the version and inputs the catalogue decides."""
        if not changes.keys() & _CATALOGUED:
            return changes
        job = changes.get("job", current.job)
        # Without a version, a new job's latest (the old job's versions are not its own).
        version = changes.get("job_version", None if "job" in changes else current.job_version)
        resolved = self._catalogued(
            job,
            {
                "version": version,
                "inputs": changes.get("inputs", current.inputs),
                "max_attempts": current.max_attempts,
                "priority": current.priority,
            },
            schedule=True,
        )
        return changes | {"job_version": resolved["version"], "inputs": resolved["inputs"]}

    def pause_schedule(self, schedule_id: str, *, actor: str = "client") -> Schedule:
        """Pause a schedule: nothing of it starts until it is resumed.

        In one transaction: the schedule is stored paused, ``next_due = now`` and the
        materializer lease is cleared (as for :meth:`update_schedule`), and every
        execution of it that has not started — SCHEDULED and never claimed
        (:func:`fencepost.domain.schedules.skipped_by_pause`: the occurrences stored
        ahead, up to a minute for an ``allow`` schedule, and those held by an overlap
        policy) — becomes SKIPPED with reason ``"paused"``, audited with ``actor``.
        RUNNING ones, and retries of started ones (RETRY_WAIT), go on. A claim racing
        the pause either takes an occurrence first (it runs) or finds it SKIPPED
        (never both). While paused, each slot is recorded SKIPPED ("paused") as it
        passes. :meth:`resume_schedule` brings none of these back.

        Pausing a paused schedule returns it unchanged and skips nothing.
        ``update_schedule(id, paused=True)`` pauses the same way. Raises
        :class:`NotFound`, or :class:`ValidationError` for a blank ``actor``.
        """
        return self._change_schedule(schedule_id, self._pausing, actor=require_name(actor, "actor"))

    @staticmethod
    def _pausing(current: Schedule, now: datetime) -> Schedule | None:
        """:meth:`pause_schedule`'s decision."""
        return plans.pause(current, now=now)

    def resume_schedule(self, schedule_id: str) -> Schedule:
        """Resume a paused schedule; ``next_due = now``, the materializer lease is cleared.

        The occurrences the pause skipped stay SKIPPED (a slot has one execution): the
        schedule runs again from its first slot after its watermark, late slots by its
        misfire policy. Resuming a schedule that is not paused returns it unchanged.
        Raises :class:`NotFound`.
        """
        return self._change_schedule(schedule_id, self._resuming)

    @staticmethod
    def _resuming(current: Schedule, now: datetime) -> Schedule | None:
        """:meth:`resume_schedule`'s decision."""
        return plans.resume(current, now=now)

    @abstractmethod
    def _change_schedule(
        self,
        schedule_id: str,
        decide: Callable[[Schedule, datetime], Schedule | None],
        *,
        actor: str = "client",
    ) -> Schedule:
        """Read-decide-write one schedule in one transaction.

        Read it (:class:`NotFound`) and hold it; ``decide(current, now)`` returns the
        schedule to store, or None to leave it unchanged (then return ``current``). A
        ValidationError from ``decide`` writes nothing. Store every field of the
        decided schedule except ``id``, ``watermark`` and ``created_at``.

        When the change pauses it (:func:`fencepost.domain.schedules.pauses`), apply
        ``ExecutionSkipped(reason=PAUSED, actor=actor)`` in the same transaction to
        each of its executions that :func:`~fencepost.domain.schedules.skipped_by_pause`
        (holding them, so that a concurrent claim takes each one before or not at all).
        """

    @abstractmethod
    def delete_schedule(self, schedule_id: str) -> None:
        """Remove a schedule and cancel its executions that have not started, in one transaction.

        Its SCHEDULED and RETRY_WAIT executions become CANCELLED (actor ``"schedule
        deleted"``); RUNNING and finished ones are left alone. A materializer holding
        it is refused afterwards (:class:`StaleLease`). Raises :class:`NotFound`.
        """

    def acquire_schedules(
        self, owner: str, *, limit: int = 100, ttl: float | timedelta = DEFAULT_TTL
    ) -> list[Schedule]:
        """Atomically lease up to ``limit`` due schedules to the materializer ``owner``.

        Eligible, by the store's clock ``now``: ``next_due <= now``, and no live
        materializer lease (``lease_until`` is None, or ``lease_until <= now``:
        at that instant a lease has expired). Paused schedules are eligible too
        (their slots are recorded SKIPPED). Oldest ``next_due`` first, then id.
        Each gets ``materializer = owner`` and ``lease_until = now + ttl``.
        Schedules locked by a concurrent acquire are skipped: two callers never
        get the same schedule. Returned in that order, as stored after the change.
        """
        return self._acquire_schedules(
            require_name(owner, "owner"),
            limit=require_int(limit, "limit", low=1, high=MAX_LIMIT),
            ttl=as_duration(ttl, field="ttl"),
        )

    @abstractmethod
    def _acquire_schedules(self, owner: str, *, limit: int, ttl: timedelta) -> list[Schedule]:
        """Acquire with validated arguments (see :meth:`acquire_schedules`)."""

    def materialize(
        self, batch: Sequence[tuple[Schedule, Sequence[Occurrence], datetime, datetime]]
    ) -> list[list[Execution] | StaleLease]:
        """Store the plans of acquired schedules, in one transaction for the whole batch.

        Each item is ``(schedule as acquired, occurrences, new_watermark, next_due)``.
        Fenced per schedule: only if the stored schedule still has this
        ``materializer`` and ``lease_until`` and ``now < lease_until``. Otherwise
        (lease expired, taken again, cleared by an update, pause or resume, or the
        schedule deleted) that item's answer is ``StaleLease(schedule.id,
        materializer, 0)`` and nothing is written for it; the other items are.

        A fenced item inserts each occurrence as an execution of the schedule's
        job, job_version, inputs, max_attempts and priority (as stored: the fence
        guarantees they did not change since the acquire), with ``schedule_id``,
        ``slot = slot_text(occurrence.slot)``, ``due_at = occurrence.due_at`` and
        ``idempotency_key = "{schedule_id}:{slot}"``; its bucket comes from its
        execution id, as for a submit without ``bucket_key``. Insert-if-absent:
        an execution with that key is left exactly as it is and returned (never
        :class:`IdempotencyConflict`: two materializers may plan one slot
        differently). An occurrence with ``skipped`` is stored SUBMITTED, then
        SKIPPED with that reason (audited, queryable, never claimed). Then
        ``watermark = max(watermark, new_watermark)``, ``next_due`` as given, and
        the lease is cleared.

        Returns, per item, its executions in occurrence order (a repeated slot
        repeats its execution), or the :class:`StaleLease`. A schedule repeated in
        one batch is applied in order: the repeat finds its lease cleared.
        """
        now = self.clock.now()
        items: list[Materialization] = []
        for index, item in enumerate(batch):
            field = f"[{index}]"
            if not isinstance(item, tuple | list) or len(item) != 4:
                raise ValidationError(
                    field, f"must be (schedule, occurrences, watermark, next_due), got {item!r}"
                )
            schedule, occurrences, watermark, next_due = item
            if not isinstance(schedule, Schedule):
                raise ValidationError(f"{field}.schedule", f"must be a Schedule, got {schedule!r}")
            items.append(
                Materialization(
                    schedule=schedule,
                    occurrences=self._new_occurrences(
                        schedule.id, occurrences, f"{field}.occurrences", now
                    ),
                    watermark=as_aware_utc(watermark, field=f"{field}.watermark"),
                    next_due=as_aware_utc(next_due, field=f"{field}.next_due"),
                )
            )
        answers = self._materialize(items) if items else []
        tell_stored(self.observers, items, answers)
        return answers

    @abstractmethod
    def _materialize(self, items: Sequence[Materialization]) -> list[list[Execution] | StaleLease]:
        """Apply validated items in one transaction (see :meth:`materialize`).

        Decide the fence with :func:`fencepost.domain.schedules.holds_lease` (or
        its SQL equivalent); answer a refused item with :func:`stale_schedule`.
        """

    def add_occurrences(
        self, schedule_id: str, occurrences: Sequence[Occurrence]
    ) -> list[Execution]:
        """Store occurrences of a schedule without a lease (e.g. a backfill).

        Inserted exactly as :meth:`materialize` inserts them (insert-if-absent,
        SKIPPED ones audited), in one transaction; the schedule itself (watermark,
        next_due, lease) is not changed. Returns the executions in occurrence
        order. Raises :class:`NotFound` if the schedule does not exist.
        """
        if not isinstance(schedule_id, str):
            raise ValidationError("schedule_id", f"must be a schedule id, got {schedule_id!r}")
        news = self._new_occurrences(schedule_id, occurrences, "occurrences", self.clock.now())
        if not storable(schedule_id):  # no schedule has such an id (see check_schedule_id)
            raise NotFound(schedule_id, subject="schedule")
        return self._add_occurrences(schedule_id, news)

    @abstractmethod
    def _add_occurrences(
        self, schedule_id: str, occurrences: tuple[NewOccurrence, ...]
    ) -> list[Execution]:
        """Insert validated occurrences if absent (see :meth:`add_occurrences`).

        ``schedule_id`` can be stored; :class:`NotFound` if no schedule has it.
        """

    def run_schedule(self, schedule_id: str, *, actor: str = "client") -> Execution:
        """Run a schedule once, now, besides its slots; return the new execution.

        One execution is stored as :meth:`materialize` stores an occurrence, in one
        transaction: the schedule's job, job_version, inputs, max_attempts, priority
        and queue as stored now, ``schedule_id`` set, no timeout, SCHEDULED, due at
        the store clock's now (its planned time, which the SLO measures from; on
        PostgreSQL this process's clock, as the materializer's plans), its bucket
        from its execution id. Its SUBMITTED audit record names ``actor``.

        It is no slot of the rule: its ``slot`` is None (so is a handler's
        ``ctx.slot``: make side effects idempotent on the execution id), and its
        ``idempotency_key`` is ``"{schedule_id}:run:{execution_id}"``
        (:func:`~fencepost.domain.schedules.run_now_key`), which no slot's key
        ``"{schedule_id}:{slot}"`` can equal: the slot of the same instant is stored
        and run all the same, and each call stores one more execution (the verb is
        not idempotent). The schedule itself (watermark, next_due, materializer
        lease) does not change.

        A paused schedule runs too: an operator's explicit request is honoured while
        the schedule's slots are skipped. No overlap policy applies to the run
        itself, but while it waits or runs it is the schedule's run in flight for
        the policy of later slots (``skip`` skips them, ``buffer_one`` and
        ``buffer_all`` hold them, ``replace`` cancels it), and pausing the schedule
        skips it if it has not started, as it skips an occurrence.

        Raises :class:`NotFound` (``subject="schedule"``) when no schedule has the
        id — an id no schedule can have (with NUL or a lone surrogate, blank, longer
        than 200 characters) included — and :class:`ValidationError` for an id that
        is not a string or an ``actor`` that is not a name. Nothing is written then
        (nor when a submit forged the new key first: :class:`IdempotencyConflict`).
        """
        occurrence = self._run_now(schedule_id, actor)
        [execution] = self._add_occurrences(occurrence.schedule_id, (occurrence,))
        return ran_now(occurrence, execution)

    def _run_now(self, schedule_id: object, actor: object) -> NewOccurrence:
        """:meth:`run_schedule`'s arguments validated: the occurrence it stores."""
        who = require_name(actor, "actor")
        if not isinstance(schedule_id, str):
            raise ValidationError("schedule_id", f"must be a schedule id, got {schedule_id!r}")
        if (
            not storable(schedule_id)
            or not schedule_id.strip()
            or len(schedule_id) > plans.MAX_SCHEDULE_ID
        ):
            raise NotFound(schedule_id, subject="schedule")  # no schedule can have this id
        now = self.clock.now()
        return plans.run_now(
            schedule_id,
            new_id=self._ids.new(int(now.timestamp() * 1000)),
            due_at=now,
            num_buckets=self.config.num_buckets,
            actor=who,
        )

    def release_schedules(self, schedules: Iterable[Schedule]) -> None:
        """Give materializer leases back unchanged (a materializer stopping).

        Each schedule, as acquired, whose stored row still carries its
        ``materializer`` and ``lease_until`` gets its lease cleared; nothing else
        changes (``next_due`` stays, so another materializer may take it at once).
        Schedules leased again by someone else, or not leased, are left alone.
        """
        held = []
        for index, schedule in enumerate(schedules):
            if not isinstance(schedule, Schedule):
                raise ValidationError(f"[{index}]", f"must be a Schedule, got {schedule!r}")
            if schedule.materializer is not None and schedule.lease_until is not None:
                held.append(schedule)
        if held:
            self._release_schedules(held)

    @abstractmethod
    def _release_schedules(self, schedules: Sequence[Schedule]) -> None:
        """Clear the leases still held by these (leased) schedules, in one transaction."""

    def _new_occurrences(
        self, schedule_id: str, occurrences: object, field: str, now: datetime
    ) -> tuple[NewOccurrence, ...]:
        if isinstance(occurrences, str | bytes) or not isinstance(occurrences, Iterable):
            raise ValidationError(field, f"must be a sequence of Occurrence, got {occurrences!r}")
        by_key: dict[str, NewOccurrence] = {}
        out = []
        unix_ms = int(now.timestamp() * 1000)
        for index, value in enumerate(occurrences):
            occurrence = plans.check_occurrence(value, f"{field}[{index}]")
            new = plans.new_occurrence(
                schedule_id,
                occurrence,
                new_id=self._ids.new(unix_ms),
                num_buckets=self.config.num_buckets,
            )
            out.append(by_key.setdefault(new.idempotency_key, new))
        return tuple(out)


def ran_now(occurrence: NewOccurrence, execution: Execution) -> Execution:
    """The execution :meth:`ScheduleVerbs.run_schedule` stored for ``occurrence``.

    Insert-if-absent returns what holds the key: an execution of another id means
    the new key was taken already (only a submit that forged it can have taken it),
    and nothing was stored.
    """
    if execution.id != occurrence.id:
        raise IdempotencyConflict(occurrence.idempotency_key, execution.id)
    return execution

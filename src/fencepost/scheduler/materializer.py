"""The materializer: leases due schedules, plans them, stores their occurrences.

Any number of materializers may run against one database (in ``fencepost
worker --with-scheduler`` processes, or in the service): each schedule is
planned under a short lease taken by ``acquire_schedules``, and occurrences are
stored insert-if-absent under the key ``schedule_id:slot``, so two
materializers never create two executions for one slot. Memory stays bounded:
schedules are taken ``batch`` at a time and each plan stores at most
``limit`` occurrences.

A running materializer (:meth:`Materializer.run`, :meth:`Materializer.start`) is a
node of kind ``"scheduler"`` named by its owner, renewed while it runs and gone when
it stops: ``store.live_schedulers()`` lists them, and :func:`scheduler_warning` is
what ``fencepost schedule add``/``ls``, a worker's start and ``POST /schedules`` say
when there is none (schedules then never fire). A single pass (:meth:`run_once`, as
``fencepost reconcile`` runs) does not register.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from fencepost.domain.errors import (
    FencepostError,
    InvalidTransition,
    NotRunning,
    StaleLease,
    ValidationError,
)
from fencepost.domain.models import Schedule
from fencepost.domain.nodes import SCHEDULER, default_node_id
from fencepost.domain.policies import Overlap
from fencepost.domain.schedules import slot_text
from fencepost.domain.states import CommandKind, State
from fencepost.store.base import Store
from fencepost.timing.planning import HELD, InFlight, SchedulePlan, occurrence_kind, plan
from fencepost.timing.rules import rule_of

log = logging.getLogger("fencepost.scheduler")

#: The actor recorded when the ``replace`` policy cancels an older run.
REPLACED_BY = "schedule {id}: replaced by the run for {slot}"

#: What is said where schedules are made or listed, or a worker starts, while no
#: materializer is alive (see :func:`scheduler_warning`).
NO_SCHEDULER = (
    "no scheduler is running: schedules fire only while `fencepost serve` or "
    "`fencepost worker --with-scheduler` runs"
)


@dataclass(frozen=True, kw_only=True)
class MaterializerOptions:
    """How far ahead and how often a materializer works. Intervals in seconds."""

    owner: str | None = None  #: lease owner; default ``host:pid``
    lookahead: float = 60.0  #: ``allow`` schedules are stored this far ahead
    batch: int = 500  #: schedules leased and stored per transaction
    ttl: float = 30.0  #: how long a leased schedule stays ours
    interval: float = 1.0  #: idle wait between passes
    recheck: float = 1.0  #: how soon a schedule with held occurrences is looked at again
    limit: int = 1000  #: occurrences planned per schedule per pass
    node_ttl: float = 30.0  #: its node registration's lifetime (renewed at a third of it)


def scheduler_warning(store: Store, *, schedules: bool | None = None) -> str | None:
    """:data:`NO_SCHEDULER` when no materializer is alive, else None.

    What ``fencepost schedule add``/``ls``/``resume``, a worker's start and ``POST
    /schedules`` say. ``schedules`` tells whether there is anything to fire (a
    schedule just added or resumed: True); None looks for one that is not paused.
    Reads only: the live nodes (``store.live_schedulers()``), then at most one
    schedule.
    """
    if store.live_schedulers():
        return None
    if schedules is None:
        schedules = bool(store.schedules(paused=False, limit=1).items)
    return NO_SCHEDULER if schedules else None


def in_flight_of(store: Store, schedule: Schedule) -> InFlight:
    """What ``schedule`` has stored and not finished: what its overlap policy judges."""
    running = store.query(schedule=schedule.id, state=State.RUNNING, limit=2).items
    unstarted = store.query(
        schedule=schedule.id, state=[State.SCHEDULED, State.RETRY_WAIT], limit=1000
    ).items
    held = sum(1 for e in unstarted if e.due_at >= HELD)
    return InFlight(running=len(running), waiting=len(unstarted) - held, held=held)


def plan_schedule(
    store: Store, schedule: Schedule, now: datetime, options: MaterializerOptions
) -> SchedulePlan:
    """The plan a materializer makes for ``schedule`` at ``now`` (``fencepost reconcile`` too).

    Only a policy other than ``allow`` reads what the schedule has in flight.
    """
    in_flight = InFlight() if schedule.overlap is Overlap.ALLOW else in_flight_of(store, schedule)
    return plan(
        schedule,
        rule_of(schedule),
        now=now,
        in_flight=in_flight,
        lookahead=timedelta(seconds=options.lookahead),
        recheck=timedelta(seconds=options.recheck),
        limit=options.limit,
    )


class Materializer:
    """Plans due schedules and stores their occurrences; see the module docstring."""

    def __init__(self, store: Store, options: MaterializerOptions | None = None) -> None:
        self.store = store
        self.options = options if options is not None else MaterializerOptions()
        self.owner = self.options.owner or f"{default_node_id()}:scheduler"
        self.stored = 0  #: occurrences stored (inserted or found) since start
        #: The same, by what each is: "run" (due at its slot), "held" (waits for the
        #: previous run, overlap policy) or "skipped" (recorded SKIPPED).
        self.stored_by: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unplannable: set[str] = set()  #: schedules whose error was logged
        self._renew_at = 0.0  #: when (monotonic) the node registration is next renewed

    def run_once(self) -> int:
        """One pass: lease up to ``batch`` due schedules, plan, store. Returns how many."""
        opts = self.options
        schedules = self.store.acquire_schedules(self.owner, limit=opts.batch, ttl=opts.ttl)
        if not schedules:
            return 0
        now = self.store.clock.now()
        work: list[tuple[Schedule, SchedulePlan]] = []
        for schedule in schedules:
            try:
                planned = plan_schedule(self.store, schedule, now, opts)
            except ValidationError as exc:
                self._set_aside(schedule, exc)
                continue
            for warning in planned.warnings:
                log.warning(warning)
            work.append((schedule, planned))
        results = self.store.materialize(
            [(s, p.occurrences, p.watermark, p.next_due) for s, p in work]
        )
        for (schedule, planned), result in zip(work, results, strict=True):
            if isinstance(result, StaleLease):
                log.warning("schedule %s: lease lost before its plan was stored", schedule.id)
                continue
            self.stored += len(result)
            self.stored_by.update(occurrence_kind(o) for o in planned.occurrences)
            self._follow_up(schedule, planned, now)
        return len(schedules)

    def _set_aside(self, schedule: Schedule, error: ValidationError) -> None:
        """Leave out a schedule that cannot be planned, so it holds up no other.

        A schedule stored before a rule tightened (a time zone now refused, such as
        ``localtime``) fails to load its rule. Its lease lapses and every pass tries it
        again (an operator's fix takes effect at once); the error is logged once.
        """
        if schedule.id not in self._unplannable:
            self._unplannable.add(schedule.id)
            log.error(
                "schedule %s cannot be planned and is left out until fixed: %s",
                schedule.id,
                error,
            )

    def run(self) -> None:
        """Pass after pass until :meth:`stop`; waits ``interval`` when nothing was due.

        Registered as a live node of kind ``"scheduler"`` (id: the owner) for as long
        as it runs, renewed every third of ``node_ttl``, deregistered when it stops.
        """
        log.info("materializer %s started", self.owner)
        while not self._stop.is_set():
            try:
                self._keep_registered()
                busy = self.run_once() >= self.options.batch
            except FencepostError as exc:  # an outage: the leases lapse, we try again
                log.error("materializer %s: %s; retrying", self.owner, exc)
                busy = False
            if not busy:
                self._stop.wait(self.options.interval)
        self._deregister()
        log.info("materializer %s stopped", self.owner)

    def start(self) -> None:
        """Run on a background daemon thread.

        It is registered as a live scheduler before this returns (unless the store
        is unreachable: then its thread keeps trying), so a worker started next in
        the same process finds it.
        """
        with contextlib.suppress(FencepostError):  # the thread retries and logs it
            self._keep_registered()
        self._thread = threading.Thread(target=self.run, name="fencepost-materializer", daemon=True)
        self._thread.start()

    def _keep_registered(self) -> None:
        """Register this materializer's node, or renew it once a third of its ttl passed."""
        now = time.monotonic()
        if now < self._renew_at:
            return
        self.store.register_node(self.owner, kind=SCHEDULER, ttl=self.options.node_ttl)
        self._renew_at = now + self.options.node_ttl / 3

    def _deregister(self) -> None:
        """Leave the node registry at a clean stop (no live scheduler is claimed by a
        stopped one); an unreachable store lets the registration lapse instead."""
        if not self._renew_at:
            return
        try:
            self.store.deregister_node(self.owner)
        except FencepostError as exc:
            log.error("could not deregister materializer %s: %s", self.owner, exc)
        self._renew_at = 0.0

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop after the current pass (and wait for it when started with :meth:`start`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- overlap follow-ups -----------------------------------------------------------

    def _follow_up(self, schedule: Schedule, planned: SchedulePlan, now: datetime) -> None:
        """Carry out what a plan asks beyond storing: cancel, supersede, release a held run."""
        if planned.cancel_running or planned.supersede_before is not None:
            self._supersede(schedule, planned)
        if planned.release_held:
            # due_after is inclusive: exactly the held occurrences.
            held = self.store.query(
                schedule=schedule.id, state=State.SCHEDULED, due_after=HELD, limit=1000
            ).items
            if held:
                oldest = min(held, key=lambda e: e.slot or "")
                self.store.reschedule(
                    oldest.id, now, reason="overlap: the previous run ended; released"
                )

    def _supersede(self, schedule: Schedule, planned: SchedulePlan) -> None:
        newest = planned.supersede_before
        assert newest is not None
        actor = REPLACED_BY.format(id=schedule.id, slot=slot_text(newest))
        if planned.cancel_running:
            for running in self.store.query(schedule=schedule.id, state=State.RUNNING).items:
                # Asked once: a delivered cancel may take the handler a while to honour.
                asked = any(c.kind is CommandKind.CANCEL for c in self.store.commands(running.id))
                if not asked:
                    with contextlib.suppress(NotRunning):  # it may have finished meanwhile
                        self.store.request(running.id, CommandKind.CANCEL, actor=actor)
        for waiting in self.store.query(
            schedule=schedule.id, state=[State.SCHEDULED, State.RETRY_WAIT], limit=1000
        ).items:
            if (waiting.slot or "") < slot_text(newest):
                # Claimed meanwhile: then it is running, and cancelled on the next pass.
                with contextlib.suppress(InvalidTransition):
                    self.store.cancel(waiting.id, actor=actor)

"""What a materializer does with a schedule now: misfire and overlap policies, as a pure function.

:func:`plan` takes a schedule, its rule, the time and what the schedule has in
flight, and says which occurrences to store — to run, to hold, or SKIPPED with
a reason — how far the watermark moves, and when to look again. No I/O, no
clock: the materializer supplies ``now`` and stores the result.

* **Watermark**: every slot at or before it is stored. Planning resumes strictly
  after it, so a crash between two plans loses nothing; storing is
  insert-if-absent, so a slot planned twice is stored once.
* **Misfire**: a slot is late when it passed by more than ``misfire_grace``
  before a plan saw it (the materializer was down, the schedule's row was
  stuck behind a backlog). ``allow`` schedules are planned ``lookahead`` ahead
  and other ones at each slot's due time, so a live materializer never finds
  one late.
* **Overlap** (policies other than ``allow``): a slot that falls due while a
  previous run has not finished is run anyway, SKIPPED, or **held**: stored
  with ``due_at = HELD`` (not claimable) until the previous run ends and a
  plan releases the oldest held one (:attr:`SchedulePlan.release_held`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from fencepost.domain.models import Occurrence
from fencepost.domain.policies import Misfire, Overlap
from fencepost.timing.rules import first_slot

if TYPE_CHECKING:
    from fencepost.domain.models import Schedule
    from fencepost.timing.rules import Rule

#: ``next_due`` of a schedule that will never fire again.
NEVER = datetime(9999, 12, 31, tzinfo=UTC)

#: ``due_at`` of a held occurrence: stored, visible, never claimable until released.
HELD = datetime(9999, 1, 1, tzinfo=UTC)


def occurrence_kind(occurrence: Occurrence) -> str:
    """What a planned occurrence is: ``run`` (due at its slot), ``held`` (due at HELD,
    waiting for the previous run) or ``skipped`` (recorded SKIPPED)."""
    if occurrence.skipped is not None:
        return "skipped"
    return "held" if occurrence.due_at >= HELD else "run"


#: The reason recorded for the slots of a paused schedule.
PAUSED = "paused"


@dataclass(frozen=True, kw_only=True)
class InFlight:
    """What a schedule has stored and not finished, as the materializer found it."""

    running: int = 0  #: RUNNING executions
    waiting: int = 0  #: stored, claimable, not started (SCHEDULED / RETRY_WAIT, due_at < HELD)
    held: int = 0  #: held back by an overlap policy (due_at == HELD)


@dataclass(frozen=True, kw_only=True)
class SchedulePlan:
    """What to store for one schedule, and when to plan it again."""

    occurrences: list[Occurrence]
    watermark: datetime
    next_due: datetime
    cancel_running: bool = False  #: ``replace``: ask the running executions to cancel
    #: ``replace``: cancel the schedule's not-started executions for slots before this one
    supersede_before: datetime | None = None
    release_held: bool = False  #: nothing runs or waits: make the oldest held occurrence due
    warnings: list[str] = field(default_factory=list)


def plan(
    schedule: Schedule,
    rule: Rule,
    *,
    now: datetime,
    in_flight: InFlight,
    lookahead: timedelta,
    recheck: timedelta = timedelta(seconds=1),
    limit: int = 1000,
) -> SchedulePlan:
    """Plan ``schedule`` at ``now`` (see the module docstring for the rules).

    At most ``limit`` occurrences are planned at once; a plan that stops there
    asks to be planned again at once (``next_due = now``), so a schedule that
    was off for a year is worked through in bounded steps. A schedule with held
    occurrences is planned again after ``recheck``, to release the next one as
    soon as the previous run ends.
    """
    if schedule.paused:
        return _plan_paused(schedule, rule, now=now, limit=limit)
    allow = schedule.overlap is Overlap.ALLOW
    horizon = now + lookahead if allow else now
    slots = _Peekable(rule.slots(schedule.watermark, horizon))
    grace_line = now - schedule.misfire_grace
    gate = _OverlapGate(schedule.overlap, in_flight, now + recheck)
    occurrences: list[Occurrence] = []
    warnings: list[str] = []
    watermark = schedule.watermark
    while (slot := slots.next()) is not None:
        if slot < grace_line:
            reason = _misfire(schedule, slots, grace_line, warnings)
            if reason is not None:
                occurrences.append(Occurrence(slot=slot, due_at=slot, skipped=reason))
                watermark = slot
                if len(occurrences) >= limit:
                    return gate.finish(occurrences, watermark, next_due=now, warnings=warnings)
                continue
        occurrences.append(gate.admit(slot))
        watermark = slot
        if len(occurrences) >= limit:
            return gate.finish(occurrences, watermark, next_due=now, warnings=warnings)
    upcoming = first_slot(rule, horizon)
    if upcoming is None:
        next_due = NEVER
    elif allow:
        next_due = max(now, upcoming - lookahead)
    else:
        next_due = upcoming
    return gate.finish(occurrences, max(watermark, horizon), next_due=next_due, warnings=warnings)


def _plan_paused(schedule: Schedule, rule: Rule, *, now: datetime, limit: int) -> SchedulePlan:
    """A paused schedule records each slot as SKIPPED ("paused") once it has passed."""
    occurrences: list[Occurrence] = []
    for slot in rule.slots(schedule.watermark, now):
        occurrences.append(Occurrence(slot=slot, due_at=slot, skipped=PAUSED))
        if len(occurrences) >= limit:
            return SchedulePlan(occurrences=occurrences, watermark=slot, next_due=now)
    upcoming = first_slot(rule, now)
    return SchedulePlan(
        occurrences=occurrences,
        watermark=max(schedule.watermark, now),
        next_due=NEVER if upcoming is None else upcoming,
    )


#: How the reason of a slot SKIPPED for a misfire begins (other skips say ``paused`` or
#: ``overlap: ...``): what the store's observers count as a misfire.
MISFIRE_REASON = "misfire:"


def _misfire(
    schedule: Schedule, slots: _Peekable, grace_line: datetime, warnings: list[str]
) -> str | None:
    """For a late slot: None to run it, or why it is SKIPPED."""
    if schedule.misfire is Misfire.SKIP:
        return f"{MISFIRE_REASON} missed, skipped by policy"
    if schedule.misfire is Misfire.COALESCE:
        following = slots.peek(0)
        if following is not None and following < grace_line:
            return f"{MISFIRE_REASON} missed, coalesced into a later run"
        return None
    # catch_up: run the newest max_catch_up late slots, record the older ones.
    beyond = slots.peek(schedule.max_catch_up - 1)
    if beyond is not None and beyond < grace_line:
        if not warnings:
            warnings.append(
                f"schedule {schedule.id}: more than {schedule.max_catch_up} missed slots; "
                "the oldest are recorded SKIPPED"
            )
        return f"{MISFIRE_REASON} missed, beyond max_catch_up ({schedule.max_catch_up})"
    return None


class _OverlapGate:
    """Decides, slot by slot in order, whether a due slot runs, waits or is SKIPPED."""

    def __init__(self, policy: Overlap, in_flight: InFlight, recheck_at: datetime) -> None:
        self.policy = policy
        self.recheck_at = recheck_at
        self.running = in_flight.running > 0
        # Something earlier is unfinished: running, waiting, held, or planned just now.
        self.unfinished = in_flight.running + in_flight.waiting + in_flight.held > 0
        self.waiting = in_flight.waiting > 0
        self.held = in_flight.held
        self.cancel_running = False
        self.supersede_before: datetime | None = None

    def admit(self, slot: datetime) -> Occurrence:
        if self.policy is Overlap.ALLOW or not self.unfinished:
            self.unfinished = True
            return Occurrence(slot=slot, due_at=slot)
        if self.policy is Overlap.SKIP:
            return Occurrence(
                slot=slot, due_at=slot, skipped="overlap: the previous run has not finished"
            )
        if self.policy is Overlap.BUFFER_ONE and self.held:
            return Occurrence(
                slot=slot, due_at=slot, skipped="overlap: a run is already waiting (buffer_one)"
            )
        if self.policy is Overlap.REPLACE:
            # The newest slot supersedes whatever runs or waits before it; it starts
            # once the cancelled run has stopped.
            self.cancel_running = self.running
            self.supersede_before = slot
            self.waiting = False
            self.held = 0
        self.held += 1
        return Occurrence(slot=slot, due_at=HELD)

    def finish(
        self,
        occurrences: list[Occurrence],
        watermark: datetime,
        *,
        next_due: datetime,
        warnings: list[str],
    ) -> SchedulePlan:
        # With nothing running or waiting, the oldest held occurrence may start.
        idle = not self.running and not self.waiting and not self.waiting_now(occurrences)
        if self.held:
            next_due = min(next_due, self.recheck_at)  # look again soon, to release the next
        return SchedulePlan(
            occurrences=occurrences,
            watermark=watermark,
            next_due=next_due,
            cancel_running=self.cancel_running,
            supersede_before=self.supersede_before,
            release_held=self.held > 0 and idle,
            warnings=warnings,
        )

    def waiting_now(self, occurrences: list[Occurrence]) -> bool:
        """Whether this plan itself stores a run that starts now (it goes first)."""
        return any(o.skipped is None and o.due_at != HELD for o in occurrences)


class _Peekable:
    """An iterator over slots with look-ahead, for policies that depend on later slots."""

    def __init__(self, slots: Iterator[datetime]) -> None:
        self._slots = slots
        self._ahead: deque[datetime] = deque()

    def peek(self, index: int) -> datetime | None:
        while len(self._ahead) <= index:
            try:
                self._ahead.append(next(self._slots))
            except StopIteration:
                return None
        return self._ahead[index]

    def next(self) -> datetime | None:
        if self.peek(0) is None:
            return None
        return self._ahead.popleft()

"""One execution's life as the data of a picture: its leases, its waits, and the marks between.

:func:`timeline` is pure. It reads what the store keeps of one execution — the audit
trail (``Store.transitions``), the commands (``Store.commands``) and the throttle
records (``Store.throttles``) — and the execution as it stands, and decides:

**Leases**, one per epoch, oldest first. A CLAIMED transition opens one (``start``;
``owner`` is the claim's actor). The first later transition *of the same epoch* that
leaves RUNNING ends it (every write that leaves RUNNING is fenced by the current
epoch), and says how (``ending``):

* COMPLETED: ``succeeded``;
* FAILED to RETRY_WAIT: ``retrying``; FAILED to FAILED (a dead letter): ``failed``;
* TIMED_OUT or LEASE_EXPIRED: ``timed_out``;
* RELEASED or SNOOZED: ``released``;
* CANCELLED (a cancel command honoured): ``cancelled``;
* CLAIMED from RUNNING (a takeover): ``taken_over``;
* none yet: ``running``.

``detail`` is that transition's reason (the error, the release's or snooze's reason,
the reaper's or the takeover's words). A lease still running has ``end`` None and
``lease_until`` the execution's current one: heartbeats are not audited (they are
the hot path), so the trail holds no earlier ``lease_until``, and an ended lease has
none. For the same reason an expired lease ends when its expiry was *noticed* — by
the reaper (LEASE_EXPIRED) or by the claim that took over — not at the ``lease_until``
it last had.

Each **refused stale write** (a STALE_REFUSED transition: its epoch is the one the
refused caller presented, its actor that caller, its reason ``stale <verb> refused``)
is placed on the lease of the epoch it carried, however late it came: a completion
refused after a takeover lands on the old lease, not on the one that replaced it.
A refusal whose epoch no lease here has (a caller that never held one, or a claim the
trail no longer holds) is a ``stale_refused`` mark instead.

**Waits**, by start. A wait begins with a transition into SCHEDULED or RETRY_WAIT:

* ``due``: after SUBMITTED (or RESCHEDULED), until the execution was due;
* ``retry_delay``: after a failure that leads to a retry (FAILED or TIMED_OUT to
  RETRY_WAIT), until the retry was due;
* ``snoozed``: after SNOOZED, for as long as its reason says (``snoozed for 30 s ...``).

Where it ends, in this order of knowledge: the execution's current ``due_at`` for the
wait still going on; the due time a claim-time throttle record implies
(``at - held``); the planned time, for the wait after SUBMITTED; the snooze's length;
and otherwise the next transition (usually the claim: the store keeps only the
current due time, so a past retry delay drawn this way includes the claim's
lateness). A wait is never drawn past the next transition, and a wait of no length
(due at once: a release, a replay, an expiry keeping its past due time) is left out.
Besides these:

* ``throttled``: one per throttle record, from ``at - held`` to ``at``, the scope
  that held it in ``detail`` (a limit held a due execution back until a claim took
  it, or a paused queue held it until it was resumed);
* ``paused``: from a pause command's request to the next resume's, or to the end of
  the lease it was asked of; ``end`` None while still paused.

**Marks**, by time: ``submitted``, ``replayed``, ``rescheduled``, ``skipped``,
``cancelled``, ``lease_expired`` from the trail (actor and reason as audited);
``cancel_requested``, ``pause_requested``, ``resume_requested`` from the commands (the
requester as actor, whether and where it was delivered as ``detail``); and
``stale_refused`` for a refusal no lease here carries.

The picture spans ``start`` (the earliest of these times, the execution's creation
at the latest) to ``end``: the latest of them, and ``now`` while the execution is not
terminal (a due time or a ``lease_until`` ahead of ``now`` counts too). A finished
execution's picture ends with its last record, however long ago.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from fencepost.domain.durations import as_aware_utc
from fencepost.domain.machine import attempts_from_transitions
from fencepost.domain.models import Command, Execution, Transition
from fencepost.domain.states import WAITING_STATES, CommandKind, CommandState, Event, State


class LeaseEnding(StrEnum):
    """How a lease ended (the module doc names the transition of each)."""

    #: Its completion was accepted.
    SUCCEEDED = "succeeded"
    #: Its holder failed it and the execution is a dead letter.
    FAILED = "failed"
    #: Its holder failed it and the execution waits for a retry.
    RETRYING = "retrying"
    #: It expired (reaped), or its holder stopped it for running past the job's timeout.
    TIMED_OUT = "timed_out"
    #: Another worker's claim took over the expired lease.
    TAKEN_OVER = "taken_over"
    #: Its holder honoured a cancel command.
    CANCELLED = "cancelled"
    #: Its holder gave it back unfinished: released, or snoozed until later.
    RELEASED = "released"
    #: Not ended yet.
    RUNNING = "running"


class WaitKind(StrEnum):
    """What an execution waited for."""

    #: Its due time, after a submit or a reschedule.
    DUE = "due"
    #: The backoff after a failed attempt.
    RETRY_DELAY = "retry_delay"
    #: A limit or a paused queue, while it was due.
    THROTTLED = "throttled"
    #: The time its handler snoozed for.
    SNOOZED = "snoozed"
    #: A resume, after an operator paused it.
    PAUSED = "paused"


class MarkKind(StrEnum):
    """A moment worth a tick on the picture."""

    SUBMITTED = "submitted"
    REPLAYED = "replayed"
    RESCHEDULED = "rescheduled"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    LEASE_EXPIRED = "lease_expired"
    CANCEL_REQUESTED = "cancel_requested"
    PAUSE_REQUESTED = "pause_requested"
    RESUME_REQUESTED = "resume_requested"
    #: A refused stale write that no lease of this execution carries.
    STALE_REFUSED = "stale_refused"


@dataclass(frozen=True, kw_only=True, slots=True)
class RefusedWrite:
    """A fenced call refused because its lease no longer held (a STALE_REFUSED record)."""

    at: datetime
    #: The refused verb: ``complete``, ``fail``, ``heartbeat``, ``release``, ``snooze``, ...
    verb: str
    #: The caller that presented the stale lease.
    owner: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaseSpan:
    """One lease (one epoch, one attempt), from its claim to its end."""

    epoch: int
    #: The attempt it was (numbers restart after a replay; a release's is used again).
    attempt: int
    owner: str
    start: datetime
    end: datetime | None  #: None while it runs
    ending: LeaseEnding
    #: The current ``lease_until`` of the running lease; None for an ended one.
    lease_until: datetime | None
    #: The reason of the transition that ended it (an error, a release's reason, ...).
    detail: str | None
    #: The stale writes refused that carried this lease's epoch, by time.
    refused: list[RefusedWrite]


@dataclass(frozen=True, kw_only=True, slots=True)
class Wait:
    """A span of time the execution spent waiting, and for what."""

    kind: WaitKind
    start: datetime
    end: datetime | None  #: None while it lasts with no known end
    detail: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Mark:
    """A moment of the execution's life that is no lease and no wait."""

    at: datetime
    kind: MarkKind
    actor: str | None
    detail: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """What :func:`timeline` decides: the picture's data (see the module doc)."""

    execution_id: str
    state: State
    #: The instant the picture was drawn at (running leases and open waits reach it).
    now: datetime
    start: datetime
    end: datetime
    leases: list[LeaseSpan]
    waits: list[Wait]
    marks: list[Mark]


class ThrottleRecord(Protocol):
    """A throttle record as the store keeps it (``fencepost.store.flow.Throttle``)."""

    @property
    def scope(self) -> str: ...
    @property
    def held(self) -> timedelta: ...
    @property
    def at(self) -> datetime: ...


#: The transitions from RUNNING that end a lease, and how (a FAILED's depends on where it led).
_ENDINGS = {
    Event.COMPLETED: LeaseEnding.SUCCEEDED,
    Event.FAILED: LeaseEnding.FAILED,
    Event.TIMED_OUT: LeaseEnding.TIMED_OUT,
    Event.LEASE_EXPIRED: LeaseEnding.TIMED_OUT,
    Event.RELEASED: LeaseEnding.RELEASED,
    Event.SNOOZED: LeaseEnding.RELEASED,
    Event.CANCELLED: LeaseEnding.CANCELLED,
}

#: The transitions into a waiting state that start a wait worth drawing, and its kind.
#: (A release, a replay and an expiry leave the execution due at once: nothing to wait for.)
_WAITS = {
    Event.SUBMITTED: WaitKind.DUE,
    Event.RESCHEDULED: WaitKind.DUE,
    Event.FAILED: WaitKind.RETRY_DELAY,
    Event.TIMED_OUT: WaitKind.RETRY_DELAY,
    Event.SNOOZED: WaitKind.SNOOZED,
}

#: The transitions that are marks, and their kind.
_MARKS = {
    Event.SUBMITTED: MarkKind.SUBMITTED,
    Event.REPLAYED: MarkKind.REPLAYED,
    Event.RESCHEDULED: MarkKind.RESCHEDULED,
    Event.SKIPPED: MarkKind.SKIPPED,
    Event.CANCELLED: MarkKind.CANCELLED,
    Event.LEASE_EXPIRED: MarkKind.LEASE_EXPIRED,
}

_REQUESTED = {
    CommandKind.CANCEL: MarkKind.CANCEL_REQUESTED,
    CommandKind.PAUSE: MarkKind.PAUSE_REQUESTED,
    CommandKind.RESUME: MarkKind.RESUME_REQUESTED,
}

#: ``machine.stale_reason``'s words, read back.
_STALE = re.compile(r"stale (?P<verb>\w+) refused")
#: ``machine.snoozed``'s words, read back (``machine.seconds_text`` writes the number).
_SNOOZE = re.compile(r"snoozed for (?P<seconds>[0-9]+(?:\.[0-9]+)?) s\b")


def timeline(
    execution: Execution,
    transitions: Iterable[Transition],
    commands: Iterable[Command],
    throttles: Iterable[ThrottleRecord],
    now: datetime,
) -> Timeline:
    """The picture of ``execution``'s life at ``now`` (see the module doc for every rule).

    ``transitions``, ``commands`` and ``throttles`` are the execution's own, in any
    order (they are sorted here: by ``seq``, by request time, by ``at``). Read one
    after the other rather than together, they may disagree by a step (a claim
    between two reads); each part is then drawn as its own record says. A naive
    ``now`` is a :class:`~fencepost.domain.errors.ValidationError`.
    """
    now = as_aware_utc(now, field="now")
    trail = sorted(transitions, key=lambda t: t.seq)
    asked = sorted(commands, key=lambda c: (c.requested_at, c.id))
    held = sorted(throttles, key=lambda h: h.at)
    leases, stray = _leases(execution, trail)
    waits = _waits(execution, trail, held) + _throttled(held) + _paused(asked, leases)
    waits.sort(key=lambda w: w.start)
    marks = _marks(trail, asked, stray)
    times = [execution.created_at, *(t.at for t in trail), *(m.at for m in marks)]
    times += [h.at - max(h.held, timedelta(0)) for h in held]
    for lease in leases:
        times += [lease.start, *(r.at for r in lease.refused)]
        times += [x for x in (lease.end, lease.lease_until) if x is not None]
    for wait in waits:
        times += [wait.start] if wait.end is None else [wait.start, wait.end]
    if not execution.state.is_terminal:
        times.append(now)
    return Timeline(
        execution_id=execution.id,
        state=execution.state,
        now=now,
        start=min(times),
        end=max(times),
        leases=leases,
        waits=waits,
        marks=marks,
    )


def refused_verb(reason: str | None) -> str:
    """The verb of a STALE_REFUSED record's reason (``stale complete refused``: ``complete``);
    the reason itself when it is worded otherwise."""
    found = _STALE.fullmatch(reason or "")
    return found["verb"] if found else (reason or "")


def snooze_length(reason: str | None) -> timedelta | None:
    """How long a SNOOZED record's reason says it snoozed for, or None if it does not say."""
    found = _SNOOZE.match(reason or "")
    return None if found is None else timedelta(seconds=float(found["seconds"]))


# -- leases ---------------------------------------------------------------------------------


@dataclass(kw_only=True, slots=True)
class _Open:
    """A lease being read off the trail."""

    epoch: int
    owner: str
    start: datetime
    end: datetime | None = None
    ending: LeaseEnding = LeaseEnding.RUNNING
    detail: str | None = None


def _leases(
    execution: Execution, trail: Sequence[Transition]
) -> tuple[list[LeaseSpan], list[Transition]]:
    """The leases, and the refusals that no lease carries."""
    spans: list[_Open] = []
    current: _Open | None = None
    refusals: list[Transition] = []
    for t in trail:
        if t.event is Event.STALE_REFUSED:
            refusals.append(t)
        elif t.event is Event.CLAIMED:
            if current is not None:  # a takeover: the open lease expired
                current.end, current.ending, current.detail = t.at, LeaseEnding.TAKEN_OVER, t.reason
            current = _Open(epoch=t.epoch, owner=t.actor or "", start=t.at)
            spans.append(current)
        elif (
            current is not None
            and t.epoch == current.epoch
            and t.from_state is State.RUNNING
            and t.event in _ENDINGS
        ):
            ending = _ENDINGS[t.event]
            if t.event is Event.FAILED and t.to_state is State.RETRY_WAIT:
                ending = LeaseEnding.RETRYING
            current.end, current.ending, current.detail = t.at, ending, t.reason
            current = None
    numbers = {a.epoch: a.attempt for a in attempts_from_transitions(trail)}
    by_epoch: dict[int, list[RefusedWrite]] = {s.epoch: [] for s in spans}
    stray: list[Transition] = []
    for t in refusals:
        if t.epoch in by_epoch:
            by_epoch[t.epoch].append(
                RefusedWrite(at=t.at, verb=refused_verb(t.reason), owner=t.actor)
            )
        else:
            stray.append(t)
    live = execution.state is State.RUNNING
    leases = [
        LeaseSpan(
            epoch=s.epoch,
            attempt=numbers.get(s.epoch, 0),
            owner=s.owner,
            start=s.start,
            end=s.end,
            ending=s.ending,
            lease_until=execution.lease_until
            if s.end is None and live and execution.epoch == s.epoch
            else None,
            detail=s.detail,
            refused=sorted(by_epoch[s.epoch], key=lambda r: r.at),
        )
        for s in spans
    ]
    return leases, stray


# -- waits ----------------------------------------------------------------------------------


def _waits(
    execution: Execution, trail: Sequence[Transition], held: Sequence[ThrottleRecord]
) -> list[Wait]:
    """The due waits, retry delays and snoozes: one per waiting period that has one."""
    changes = [t for t in trail if t.event is not Event.STALE_REFUSED]
    # A claim's records carry the claim's instant; of two at one instant, the longer hold.
    claimed_held: dict[datetime, ThrottleRecord] = {}
    for h in held:
        if h.at not in claimed_held or h.held > claimed_held[h.at].held:
            claimed_held[h.at] = h
    waits: list[Wait] = []
    for i, began in enumerate(changes):
        kind = _WAITS.get(began.event)
        if kind is None or began.to_state not in WAITING_STATES:
            continue
        after = changes[i + 1] if i + 1 < len(changes) else None
        due = _due(execution, began, after, claimed_held)
        if due is None:
            end = None if after is None else after.at
        else:
            end = due if after is None else min(due, after.at)
        if end is not None and end <= began.at:
            continue  # due at once
        waits.append(Wait(kind=kind, start=began.at, end=end, detail=began.reason))
    return waits


def _due(
    execution: Execution,
    began: Transition,
    after: Transition | None,
    claimed_held: dict[datetime, ThrottleRecord],
) -> datetime | None:
    """When the waiting period ``began`` starts was due, as well as the records tell."""
    if after is None:  # still waiting: the row knows
        return execution.due_at if execution.state in WAITING_STATES else None
    record = claimed_held.get(after.at) if after.event is Event.CLAIMED else None
    if record is not None and record.held > timedelta(0):
        return record.at - record.held
    if began.event is Event.SUBMITTED:
        return execution.planned_at
    if began.event is Event.SNOOZED:
        length = snooze_length(began.reason)
        return None if length is None else began.at + length
    return None


def _throttled(held: Sequence[ThrottleRecord]) -> list[Wait]:
    return [
        Wait(
            kind=WaitKind.THROTTLED,
            start=h.at - h.held,
            end=h.at,
            detail=f"held by {h.scope}",
        )
        for h in held
        if h.held > timedelta(0)
    ]


def _paused(asked: Sequence[Command], leases: Sequence[LeaseSpan]) -> list[Wait]:
    """From each pause to the next resume, or to the end of the lease it was asked of."""
    waits: list[Wait] = []
    pause: Command | None = None
    lease_end: datetime | None = None
    for c in asked:
        if pause is not None and lease_end is not None and lease_end <= c.requested_at:
            waits.append(_pause(pause, lease_end))  # its lease ended before this request
            pause = None
        if c.kind is CommandKind.PAUSE and pause is None:
            pause, lease_end = c, _lease_end_at(leases, c.requested_at)
        elif c.kind is CommandKind.RESUME and pause is not None:
            waits.append(_pause(pause, c.requested_at))
            pause = None
    if pause is not None:
        waits.append(_pause(pause, lease_end))
    return waits


def _pause(pause: Command, end: datetime | None) -> Wait:
    detail = f"requested by {pause.requested_by}; {_delivery(pause)}"
    return Wait(kind=WaitKind.PAUSED, start=pause.requested_at, end=end, detail=detail)


def _lease_end_at(leases: Sequence[LeaseSpan], at: datetime) -> datetime | None:
    """The end of the lease running at ``at`` (None: still running, or none was)."""
    for lease in leases:
        if lease.start <= at and (lease.end is None or at < lease.end):
            return lease.end
    return None


# -- marks ----------------------------------------------------------------------------------


def _marks(
    trail: Sequence[Transition], asked: Sequence[Command], stray: Sequence[Transition]
) -> list[Mark]:
    marks = [
        Mark(at=t.at, kind=_MARKS[t.event], actor=t.actor, detail=t.reason)
        for t in trail
        if t.event in _MARKS
    ]
    marks += [
        Mark(
            at=c.requested_at,
            kind=_REQUESTED[c.kind],
            actor=c.requested_by,
            detail=_delivery(c),
        )
        for c in asked
    ]
    marks += [
        Mark(
            at=t.at,
            kind=MarkKind.STALE_REFUSED,
            actor=t.actor,
            detail=f"{t.reason} (epoch {t.epoch}: no lease of this execution)",
        )
        for t in stray
    ]
    marks.sort(key=lambda m: m.at)
    return marks


def _delivery(c: Command) -> str:
    """Whether and where a command went."""
    if c.state is CommandState.DONE:
        if c.epoch is None:
            return "carried out at once"
        done = "" if c.done_at is None else f" at {c.done_at.isoformat()}"
        return f"delivered to epoch {c.epoch}{done}"
    if c.state is CommandState.CLAIMED:
        return f"taken by {c.owner}"
    return "not delivered yet"


__all__ = [
    "LeaseEnding",
    "LeaseSpan",
    "Mark",
    "MarkKind",
    "RefusedWrite",
    "ThrottleRecord",
    "Timeline",
    "Wait",
    "WaitKind",
    "refused_verb",
    "snooze_length",
    "timeline",
]

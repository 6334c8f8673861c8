"""The execution state machine: the edges as data, and one pure function that applies them.

Every backend changes state through these rules. The memory backend calls
:func:`apply` for every change. The SQL backends call it too, for every verb off the
hot path (fail, release, snooze, abort, cancel, replay, reschedule, reaping, a command's
cancel, deleting a schedule, a refused result, a set-aside claim: see
``fencepost.store.sqlstore``), and write the decided row with its guard. Claim,
complete and what submits and materializes write their transitions as SQL literals
for speed; ``tests/unit/test_machine_sql.py`` reads every block of both dialects'
SQL and checks each transition it writes against :data:`EDGES`, and the contract
suite checks that every audit transition a backend writes is an edge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from fencepost.domain.durations import as_duration
from fencepost.domain.errors import InvalidTransition, ValidationError
from fencepost.domain.events import (
    ExecutionAborted,
    ExecutionCancelled,
    ExecutionClaimed,
    ExecutionCompleted,
    ExecutionEvent,
    ExecutionFailed,
    ExecutionReleased,
    ExecutionReplayed,
    ExecutionRescheduled,
    ExecutionSkipped,
    ExecutionSnoozed,
    ExecutionTimedOut,
    LeaseExpired,
)
from fencepost.domain.models import Attempt, Execution, Transition
from fencepost.domain.states import AttemptOutcome, Event, State

#: For each event, the states it may leave and the states it may lead to.
#: ``None`` as a source is "no row yet" (creation). ``STALE_REFUSED`` is an audit
#: record of a refused call, not an edge: its from- and to-state are equal.
EDGES: Mapping[Event, Mapping[State | None, frozenset[State]]] = {
    Event.SUBMITTED: {None: frozenset({State.SCHEDULED})},
    Event.CLAIMED: {
        State.SCHEDULED: frozenset({State.RUNNING}),
        State.RETRY_WAIT: frozenset({State.RUNNING}),
        # Only when the previous lease expired and attempts remain (a takeover).
        State.RUNNING: frozenset({State.RUNNING}),
    },
    Event.COMPLETED: {State.RUNNING: frozenset({State.SUCCEEDED})},
    Event.FAILED: {State.RUNNING: frozenset({State.RETRY_WAIT, State.FAILED})},
    Event.TIMED_OUT: {State.RUNNING: frozenset({State.RETRY_WAIT, State.FAILED})},
    Event.LEASE_EXPIRED: {State.RUNNING: frozenset({State.RETRY_WAIT, State.FAILED})},
    Event.RELEASED: {State.RUNNING: frozenset({State.SCHEDULED})},
    # SCHEDULED, not RETRY_WAIT: a snooze is no failure (RETRY_WAIT means "failed,
    # retrying"), and like a release it gives the attempt back.
    Event.SNOOZED: {State.RUNNING: frozenset({State.SCHEDULED})},
    Event.CANCELLED: {
        State.SCHEDULED: frozenset({State.CANCELLED}),
        State.RETRY_WAIT: frozenset({State.CANCELLED}),
        # Only by the lease holder honouring a cancel command (ExecutionAborted);
        # a client's cancel (ExecutionCancelled) never stops a running execution.
        State.RUNNING: frozenset({State.CANCELLED}),
    },
    Event.SKIPPED: {State.SCHEDULED: frozenset({State.SKIPPED})},
    Event.REPLAYED: {State.FAILED: frozenset({State.SCHEDULED})},
    # A held occurrence released by its overlap policy, or a waiting execution an
    # operator made due now (retry now): the state stays, only due_at moves.
    Event.RESCHEDULED: {
        State.SCHEDULED: frozenset({State.SCHEDULED}),
        State.RETRY_WAIT: frozenset({State.RETRY_WAIT}),
    },
}


def sources(event: Event) -> tuple[State, ...]:
    """The states ``event`` may leave, in a stable order (for SQL ``IN`` lists)."""
    return tuple(sorted(s for s in EDGES.get(event, {}) if s is not None))


def is_edge(event: Event, from_state: State | None, to_state: State) -> bool:
    """Whether an audit record ``from_state --event--> to_state`` is allowed."""
    if event is Event.STALE_REFUSED:
        return from_state is not None and from_state == to_state
    return to_state in EDGES.get(event, {}).get(from_state, frozenset())


#: Events whose audit reason is the attempt's error (also stored on the execution).
RECORDS_ERROR = frozenset({Event.FAILED, Event.TIMED_OUT, Event.LEASE_EXPIRED})


def after_failure(*, attempt: int, max_attempts: int, retryable: bool) -> State:
    """Where a failed or timed-out attempt leads: another try, or the dead letters."""
    if retryable and attempt < max_attempts:
        return State.RETRY_WAIT
    return State.FAILED


def lease_is_live(lease_until: datetime | None, now: datetime) -> bool:
    """A lease is live strictly before ``lease_until``; at that instant it has expired."""
    return lease_until is not None and now < lease_until


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """The outcome of :func:`apply`: the new execution and what to audit."""

    execution: Execution
    event: Event
    from_state: State
    from_epoch: int
    actor: str | None
    reason: str | None

    def transition(self, seq: int, at: datetime) -> Transition:
        """The audit record of this change, numbered ``seq`` by the store."""
        return Transition(
            execution_id=self.execution.id,
            seq=seq,
            event=self.event,
            from_state=self.from_state,
            to_state=self.execution.state,
            epoch=self.execution.epoch,
            actor=self.actor,
            reason=self.reason,
            at=at,
        )


def apply(execution: Execution, event: ExecutionEvent, now: datetime) -> Change:
    """Apply ``event`` to ``execution`` at ``now``, or raise :class:`InvalidTransition`.

    Fencing (owner, epoch, live lease) is checked by the store *before* calling
    this, because a stale call is :class:`~fencepost.StaleLease`, not an invalid
    transition. What this checks is the state machine: the source state, due
    times for claims, expiry and remaining attempts for takeovers.
    """
    state = execution.state
    if state not in EDGES.get(event.kind, {}):
        raise InvalidTransition(execution.id, state, event.kind)
    moved = _apply(execution, event, now)
    actor, reason = _actor_and_reason(execution, event)
    return Change(
        execution=moved,
        event=event.kind,
        from_state=state,
        from_epoch=execution.epoch,
        actor=actor,
        reason=reason,
    )


def _apply(e: Execution, event: ExecutionEvent, now: datetime) -> Execution:
    match event:
        case ExecutionClaimed(owner=owner, lease_until=lease_until):
            if e.state is State.RUNNING:
                if lease_is_live(e.lease_until, now) or e.attempt >= e.max_attempts:
                    raise InvalidTransition(e.id, e.state, event.kind)
            elif e.due_at > now:
                raise InvalidTransition(e.id, e.state, event.kind)
            return replace(
                e,
                state=State.RUNNING,
                epoch=e.epoch + 1,
                attempt=e.attempt + 1,
                lease_owner=owner,
                lease_until=lease_until,
                updated_at=now,
            )
        case ExecutionCompleted(result=result):
            return _leave_running(e, now, state=State.SUCCEEDED, result=result)
        case (
            ExecutionFailed(error=error, retryable=retryable, retry_at=retry_at)
            | ExecutionTimedOut(error=error, retryable=retryable, retry_at=retry_at)
        ):
            target = after_failure(
                attempt=e.attempt, max_attempts=e.max_attempts, retryable=retryable
            )
            due = retry_at if target is State.RETRY_WAIT else e.due_at
            return _leave_running(e, now, state=target, error=error, due_at=due)
        case LeaseExpired(retry_at=retry_at):
            if lease_is_live(e.lease_until, now):
                raise InvalidTransition(e.id, e.state, event.kind)
            target = after_failure(attempt=e.attempt, max_attempts=e.max_attempts, retryable=True)
            due = retry_at if target is State.RETRY_WAIT else e.due_at
            return _leave_running(e, now, state=target, error=LEASE_EXPIRED_ERROR, due_at=due)
        case ExecutionReleased():
            # Claimable again at once; the abandoned attempt gives its budget back.
            return _leave_running(
                e, now, state=State.SCHEDULED, due_at=now, attempt=max(0, e.attempt - 1)
            )
        case ExecutionSnoozed(due_at=due_at):
            # Claimable again at due_at; the attempt gives its budget back, as a release's.
            return _leave_running(
                e, now, state=State.SCHEDULED, due_at=due_at, attempt=max(0, e.attempt - 1)
            )
        case ExecutionCancelled():
            if e.state is State.RUNNING:  # started: only its lease holder may stop it
                raise InvalidTransition(e.id, e.state, event.kind)
            return replace(e, state=State.CANCELLED, updated_at=now)
        case ExecutionAborted():
            if e.state is not State.RUNNING:
                raise InvalidTransition(e.id, e.state, event.kind)
            return _leave_running(e, now, state=State.CANCELLED)
        case ExecutionSkipped():
            return replace(e, state=State.SKIPPED, updated_at=now)
        case ExecutionReplayed():
            return replace(e, state=State.SCHEDULED, attempt=0, due_at=now, updated_at=now)
        case ExecutionRescheduled(due_at=due_at):
            return replace(e, due_at=due_at, updated_at=now)
    raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover


#: The error recorded on an execution whose attempt timed out.
LEASE_EXPIRED_ERROR = "lease expired"


def _leave_running(e: Execution, now: datetime, **changes: object) -> Execution:
    return replace(e, lease_owner=None, lease_until=None, updated_at=now, **changes)  # type: ignore[arg-type]


def _actor_and_reason(e: Execution, event: ExecutionEvent) -> tuple[str | None, str | None]:
    match event:
        case ExecutionClaimed(owner=owner):
            if e.state is State.RUNNING:
                return owner, takeover_reason(e.lease_owner, e.epoch)
            return owner, None
        case ExecutionCompleted(owner=owner):
            return owner, None
        case (
            ExecutionFailed(owner=owner, error=error) | ExecutionTimedOut(owner=owner, error=error)
        ):
            return owner, error
        case LeaseExpired():
            return "reaper", f"lease of {e.lease_owner} (epoch {e.epoch}) expired"
        case (
            ExecutionReleased(owner=owner, reason=reason)
            | ExecutionSnoozed(owner=owner, reason=reason)
            | ExecutionAborted(owner=owner, reason=reason)
        ):
            return owner, reason
        case ExecutionCancelled(actor=actor) | ExecutionReplayed(actor=actor):
            return actor, None
        case ExecutionSkipped(reason=reason, actor=actor):
            return actor, reason
        case ExecutionRescheduled(actor=actor, reason=reason):
            return actor, reason
    raise AssertionError(f"unhandled event {event!r}")  # pragma: no cover


_OUTCOMES: Mapping[Event, AttemptOutcome] = {
    Event.COMPLETED: AttemptOutcome.SUCCEEDED,
    Event.FAILED: AttemptOutcome.FAILED,
    Event.TIMED_OUT: AttemptOutcome.TIMED_OUT,
    Event.LEASE_EXPIRED: AttemptOutcome.TIMED_OUT,
    Event.RELEASED: AttemptOutcome.ABANDONED,
    Event.SNOOZED: AttemptOutcome.SNOOZED,
    Event.CANCELLED: AttemptOutcome.CANCELLED,
}


#: Events whose attempt gives its number back: it does not count against ``max_attempts``.
_GIVEN_BACK = frozenset({Event.RELEASED, Event.SNOOZED})


def ending_events(outcome: AttemptOutcome) -> frozenset[Event]:
    """The events of the audit transitions *from RUNNING* that end an attempt with
    ``outcome``, as :func:`attempts_from_transitions` decides it: an execution had an
    attempt that ended with ``outcome`` exactly when its trail holds a transition from
    RUNNING with one of these events.

    TIMED_OUT includes CLAIMED (a takeover of an expired lease ends the previous
    attempt TIMED_OUT). This holds because every write that leaves RUNNING is fenced
    by the current epoch, which is the open attempt's: stores filter attempts by
    outcome with it (``Store.query(outcome=...)``) without rebuilding the attempts.
    """
    ending = {event for event, ended in _OUTCOMES.items() if ended is outcome}
    if outcome is AttemptOutcome.TIMED_OUT:
        ending.add(Event.CLAIMED)
    return frozenset(ending)


def attempts_from_transitions(transitions: Iterable[Transition]) -> list[Attempt]:
    """Derive the attempts of one execution from its audit trail (ordered by ``seq``).

    An attempt opens with a CLAIMED transition (its epoch identifies it) and ends
    with the first later transition of the same epoch that leaves RUNNING. A
    takeover (CLAIMED from RUNNING) ends the previous attempt as TIMED_OUT at the
    moment of the takeover. Attempt numbers restart at 1 after a replay, and the
    attempt after a release or a snooze reuses the given-back one's number.
    """
    attempts: list[Attempt] = []
    open_attempt: Attempt | None = None
    number = 0
    for t in transitions:
        if t.event in (Event.SUBMITTED, Event.REPLAYED):
            number = 0
        elif t.event is Event.CLAIMED:
            if open_attempt is not None:
                attempts.append(
                    replace(
                        open_attempt,
                        ended_at=t.at,
                        outcome=AttemptOutcome.TIMED_OUT,
                        error=LEASE_EXPIRED_ERROR,
                    )
                )
            number += 1
            open_attempt = Attempt(
                execution_id=t.execution_id,
                attempt=number,
                epoch=t.epoch,
                owner=t.actor or "",
                started_at=t.at,
                ended_at=None,
                outcome=None,
                error=None,
            )
        elif (
            open_attempt is not None
            and t.epoch == open_attempt.epoch
            and t.from_state is State.RUNNING
            and t.event in _OUTCOMES
        ):
            error = t.reason if t.event in RECORDS_ERROR else None
            if t.event is Event.LEASE_EXPIRED:
                error = LEASE_EXPIRED_ERROR
            attempts.append(
                replace(open_attempt, ended_at=t.at, outcome=_OUTCOMES[t.event], error=error)
            )
            open_attempt = None
            if t.event in _GIVEN_BACK:
                number -= 1  # an abandoned or snoozed attempt does not use up the budget
    if open_attempt is not None:
        attempts.append(open_attempt)
    return attempts


def holds(execution: Execution, owner: str, epoch: int, now: datetime) -> bool:
    """The fence: ``owner`` at ``epoch`` holds a live lease on ``execution`` at ``now``.

    ``state == RUNNING`` alone is never enough: a re-claimed execution is
    RUNNING too, under a higher epoch.
    """
    return (
        execution.state is State.RUNNING
        and execution.lease_owner == owner
        and execution.epoch == epoch
        and lease_is_live(execution.lease_until, now)
    )


def stale_reason(verb: str) -> str:
    """The audit reason recorded when a fenced ``verb`` is refused."""
    return f"stale {verb} refused"


#: The audit reason of a takeover, as a ``%s`` template (owner, epoch) that SQL's
#: ``format()`` can fill in too, so every backend writes the same words.
TAKEOVER_REASON_FORMAT = "took over from %s (epoch %s): lease expired"


def takeover_reason(previous_owner: str | None, previous_epoch: int) -> str:
    """The audit reason of a claim that took over an expired lease."""
    return TAKEOVER_REASON_FORMAT % (previous_owner, previous_epoch)


# -- snoozing ------------------------------------------------------------------------------

#: How many times one execution may snooze, counted from its submit (or its last
#: replay), unless the caller of ``Store.snooze`` gives another bound. A snooze past it
#: is a failed attempt (:data:`SNOOZED_TOO_OFTEN`), so a handler that snoozes every
#: time still ends, in a dead letter, after ``max_attempts`` such failures.
DEFAULT_MAX_SNOOZES = 100

#: The largest bound ``Store.snooze`` takes (a mistake past it, not a policy).
MAX_SNOOZES_LIMIT = 1_000_000

#: The longest one snooze may be. Waiting longer is a schedule's work, and a bound
#: keeps a bad unit (milliseconds given as seconds) from parking an execution for years.
MAX_SNOOZE = timedelta(days=30)

#: The longest ``reason`` of a snooze, in characters (it joins the audit record).
MAX_SNOOZE_REASON = 1024

#: The error of an attempt that snoozed once more than its bound allows.
SNOOZED_TOO_OFTEN = "snoozed too often"


def snooze_delay(value: object, *, field: str = "seconds") -> timedelta:
    """How long a snooze lasts: seconds (int or float) or a ``timedelta``, > 0 and at
    most :data:`MAX_SNOOZE` (30 days); a bool, NaN, infinity or anything else is a
    :class:`ValidationError` naming ``field``."""
    limit = MAX_SNOOZE.total_seconds()
    shown: str | None = None  # set when too long: before as_duration, whose own bound
    # (100 years) would name the wrong limit
    if isinstance(value, timedelta) and value > MAX_SNOOZE:
        shown = f"{value.total_seconds():g}"
    elif isinstance(value, int) and not isinstance(value, bool) and value > limit:
        text = str(value)
        shown = text if len(text) <= 20 else f"{text[:20]}... ({len(text)} digits)"
    elif isinstance(value, float) and math.isfinite(value) and value > limit:
        shown = f"{value:g}"
    if shown is not None:
        raise ValidationError(
            field, f"must be at most {MAX_SNOOZE.days} days ({limit:.0f} s), got {shown}"
        )
    return as_duration(value, field=field)


def seconds_text(delay: timedelta) -> str:
    """A duration as the audit and errors write it: ``30 s``, ``0.25 s`` (to the microsecond)."""
    return f"{delay.total_seconds():.6f}".rstrip("0").rstrip(".") + " s"


def snoozes_so_far(transitions: Iterable[Transition]) -> int:
    """How many times an execution snoozed since its submit or its last replay (a replay
    gives a dead letter a fresh budget of attempts, and of snoozes with it)."""
    count = 0
    for t in transitions:
        if t.event in (Event.SUBMITTED, Event.REPLAYED):
            count = 0
        elif t.event is Event.SNOOZED:
            count += 1
    return count


def snoozed(
    *,
    owner: str,
    delay: timedelta,
    reason: str | None,
    snoozes: int,
    max_snoozes: int,
    now: datetime,
    retry_at: datetime,
) -> ExecutionSnoozed | ExecutionFailed:
    """The event of a snooze decided at ``now``, after ``snoozes`` earlier ones.

    Within the bound: :class:`ExecutionSnoozed`, due at ``now + delay``, its audit
    reason saying for how long and which snooze it is (``snoozed for 30 s (2 of at
    most 100): <reason>``). Past it: a retryable :class:`ExecutionFailed` with error
    ``snoozed too often: ...``, due again at ``retry_at`` (the backoff) if attempts
    remain, like any failure.
    """
    if snoozes >= max_snoozes:
        error = (
            f"{SNOOZED_TOO_OFTEN}: asked to snooze for {seconds_text(delay)} after "
            f"{snoozes} snoozes, at most {max_snoozes}"
        )
        if reason:
            error += f" ({reason})"
        return ExecutionFailed(owner=owner, error=error, retryable=True, retry_at=retry_at)
    text = f"snoozed for {seconds_text(delay)} ({snoozes + 1} of at most {max_snoozes})"
    if reason:
        text += f": {reason}"
    return ExecutionSnoozed(owner=owner, due_at=now + delay, reason=text)

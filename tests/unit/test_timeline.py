"""The timeline of one execution, decided from hand-built audit trails (no store)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.domain.machine import takeover_reason
from fencepost.domain.models import Command, Execution, Transition
from fencepost.domain.states import CommandKind, CommandState, Event, State
from fencepost.domain.timeline import (
    LeaseEnding,
    LeaseSpan,
    Mark,
    MarkKind,
    RefusedWrite,
    Wait,
    WaitKind,
    refused_verb,
    snooze_length,
    timeline,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOSTILE = "<img src=x onerror=alert(1)>\x00'; DROP TABLE executions; --"


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def execution(**changes: object) -> Execution:
    base = Execution(
        id="e1",
        job="job",
        job_version=None,
        inputs={},
        state=State.SCHEDULED,
        due_at=T0,
        priority=0,
        queue="default",
        attempt=0,
        max_attempts=3,
        epoch=0,
        lease_owner=None,
        lease_until=None,
        timeout=None,
        idempotency_key=None,
        schedule_id=None,
        slot=None,
        bucket=0,
        bucket_key=None,
        result=None,
        error=None,
        progress=None,
        created_at=T0,
        updated_at=T0,
        planned_at=T0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


class Trail:
    """An audit trail written step by step, as a store would (seq in order)."""

    def __init__(self, *, due: float = 0) -> None:
        self.records: list[Transition] = []
        self.add(0, Event.SUBMITTED, None, State.SCHEDULED, 0)
        self.due = due

    def add(
        self,
        at: float,
        event: Event,
        from_state: State | None,
        to_state: State,
        epoch: int,
        actor: str | None = None,
        reason: str | None = None,
    ) -> Trail:
        self.records.append(
            Transition(
                execution_id="e1",
                seq=len(self.records) + 1,
                event=event,
                from_state=from_state,
                to_state=to_state,
                epoch=epoch,
                actor=actor,
                reason=reason,
                at=t(at),
            )
        )
        return self

    def claim(self, at: float, epoch: int, owner: str, *, takeover_of: str | None = None) -> Trail:
        source = State.SCHEDULED if takeover_of is None else State.RUNNING
        reason = None if takeover_of is None else takeover_reason(takeover_of, epoch - 1)
        return self.add(at, Event.CLAIMED, source, State.RUNNING, epoch, owner, reason)

    def refuse(self, at: float, epoch: int, owner: str, verb: str) -> Trail:
        state = self.records[-1].to_state
        return self.add(
            at, Event.STALE_REFUSED, state, state, epoch, owner, f"stale {verb} refused"
        )


@dataclass(frozen=True)
class Held:
    """A throttle record as the store hands it out."""

    execution_id: str
    scope: str
    held: timedelta
    at: datetime


def command(
    kind: CommandKind,
    at: float,
    *,
    by: str = "alice",
    epoch: int | None = None,
    done: float | None = None,
    state: CommandState = CommandState.DONE,
) -> Command:
    return Command(
        id=f"c{at}",
        execution_id="e1",
        kind=kind,
        state=state,
        requested_by=by,
        requested_at=t(at),
        owner=None if state is CommandState.PENDING else "worker-a",
        claim_until=None,
        epoch=epoch,
        done_at=None if done is None else t(done),
    )


def test_a_refused_stale_completion_lands_on_the_old_lease_after_a_takeover() -> None:
    """The lease-timeline example: worker-a's lease (epoch 1) expired, worker-b took over
    (epoch 2) and completed; worker-a's late completion carried epoch 1, so it is drawn
    on epoch 1's bar, after its end — never on the lease that replaced it."""
    trail = (
        Trail()
        .claim(10, 1, "worker-a")
        .claim(15, 2, "worker-b", takeover_of="worker-a")
        .refuse(16, 1, "worker-a", "complete")
        .add(16, Event.COMPLETED, State.RUNNING, State.SUCCEEDED, 2, "worker-b")
        .refuse(16, 2, "worker-b", "complete")  # a repeat, after success
        .refuse(17, 9, HOSTILE, "heartbeat")  # an epoch nobody held
    )
    done = execution(state=State.SUCCEEDED, epoch=2, attempt=2, due_at=t(10), planned_at=t(10))

    got = timeline(done, trail.records, [], [], t(100))

    old, new = got.leases
    assert old == LeaseSpan(
        epoch=1,
        attempt=1,
        owner="worker-a",
        start=t(10),
        end=t(15),
        ending=LeaseEnding.TAKEN_OVER,
        lease_until=None,
        detail="took over from worker-a (epoch 1): lease expired",
        refused=[RefusedWrite(at=t(16), verb="complete", owner="worker-a")],
    )
    assert (new.epoch, new.attempt, new.owner, new.start, new.end) == (
        2,
        2,
        "worker-b",
        t(15),
        t(16),
    )
    assert new.ending is LeaseEnding.SUCCEEDED
    assert new.refused == [RefusedWrite(at=t(16), verb="complete", owner="worker-b")]
    assert got.waits == [Wait(kind=WaitKind.DUE, start=t(0), end=t(10), detail=None)]
    assert got.marks == [
        Mark(at=t(0), kind=MarkKind.SUBMITTED, actor=None, detail=None),
        Mark(
            at=t(17),
            kind=MarkKind.STALE_REFUSED,
            actor=HOSTILE,
            detail="stale heartbeat refused (epoch 9: no lease of this execution)",
        ),
    ]
    # A finished execution's picture ends with its last record, not at now.
    assert (got.start, got.end, got.now, got.state) == (t(0), t(17), t(100), State.SUCCEEDED)


def test_retries_draw_their_delays_and_the_throttled_time() -> None:
    trail = (
        Trail()
        .claim(0, 1, "w1")
        .add(2, Event.FAILED, State.RUNNING, State.RETRY_WAIT, 1, "w1", "boom")
        .claim(7, 2, "w2")  # due at 5, held by a rate until 7 (its throttle record says)
        .add(8, Event.TIMED_OUT, State.RUNNING, State.RETRY_WAIT, 2, "w2", "ran past 1 s")
        .claim(12, 3, "w3")  # no record: the delay is drawn up to the claim
        .add(13, Event.FAILED, State.RUNNING, State.FAILED, 3, "w3", "fatal")
    )
    dead = execution(state=State.FAILED, epoch=3, attempt=3, due_at=t(11))
    held = [Held("e1", "job:job", timedelta(seconds=2), t(7))]

    got = timeline(dead, trail.records, [], held, t(50))

    assert [(x.epoch, x.attempt, x.ending, x.detail) for x in got.leases] == [
        (1, 1, LeaseEnding.RETRYING, "boom"),
        (2, 2, LeaseEnding.TIMED_OUT, "ran past 1 s"),
        (3, 3, LeaseEnding.FAILED, "fatal"),
    ]
    assert got.waits == [
        Wait(kind=WaitKind.RETRY_DELAY, start=t(2), end=t(5), detail="boom"),
        Wait(kind=WaitKind.THROTTLED, start=t(5), end=t(7), detail="held by job:job"),
        Wait(kind=WaitKind.RETRY_DELAY, start=t(8), end=t(12), detail="ran past 1 s"),
    ]
    assert got.end == t(13)


def test_a_replay_restarts_the_attempts_and_waits_for_nothing() -> None:
    trail = (
        Trail()
        .claim(0, 1, "w1")
        .add(1, Event.FAILED, State.RUNNING, State.FAILED, 1, "w1", "fatal")
        .add(30, Event.REPLAYED, State.FAILED, State.SCHEDULED, 1, "ops")
        .claim(31, 2, "w2")
    )
    row = execution(
        state=State.RUNNING, epoch=2, attempt=1, lease_owner="w2", lease_until=t(61), due_at=t(30)
    )

    got = timeline(row, trail.records, [], [], t(40))

    first, again = got.leases
    assert (first.attempt, first.ending) == (1, LeaseEnding.FAILED)
    assert (again.attempt, again.ending, again.end, again.lease_until) == (
        1,
        LeaseEnding.RUNNING,
        None,
        t(61),
    )
    assert got.waits == []  # due at once after the submit and after the replay
    assert [(m.kind, m.actor) for m in got.marks] == [
        (MarkKind.SUBMITTED, None),
        (MarkKind.REPLAYED, "ops"),
    ]
    # Running: the picture reaches now and the lease's current lease_until beyond it.
    assert (got.start, got.end) == (t(0), t(61))


def test_a_snooze_waits_as_long_as_it_said() -> None:
    reason = "snoozed for 30 s (1 of at most 100): rate limited"
    trail = (
        Trail()
        .claim(0, 1, "w1")
        .add(1, Event.SNOOZED, State.RUNNING, State.SCHEDULED, 1, "w1", reason)
        .claim(40, 2, "w1")
        .add(41, Event.SNOOZED, State.RUNNING, State.SCHEDULED, 2, "w1", "snoozed for 0.5 s (2")
        .add(41.5, Event.CLAIMED, State.SCHEDULED, State.RUNNING, 3, "w1")
        .add(42, Event.SNOOZED, State.RUNNING, State.SCHEDULED, 3, "w1", "snoozed for 600 s")
    )
    waiting = execution(state=State.SCHEDULED, epoch=3, due_at=t(642))

    got = timeline(waiting, trail.records, [], [], t(50))

    assert (got.leases[0].ending, got.leases[0].detail) == (LeaseEnding.RELEASED, reason)
    assert [x.attempt for x in got.leases] == [1, 1, 1], "a snooze gives its attempt back"
    assert got.waits == [
        Wait(kind=WaitKind.SNOOZED, start=t(1), end=t(31), detail=reason),
        Wait(kind=WaitKind.SNOOZED, start=t(41), end=t(41.5), detail="snoozed for 0.5 s (2"),
        # still snoozing: the row's due time, ahead of now, ends it and the picture
        Wait(kind=WaitKind.SNOOZED, start=t(42), end=t(642), detail="snoozed for 600 s"),
    ]
    assert got.end == t(642)


def test_throttle_records_of_a_paused_queue_and_of_a_limited_claim() -> None:
    trail = Trail().claim(20, 1, "w1")
    row = execution(state=State.RUNNING, epoch=1, attempt=1, lease_owner="w1", lease_until=t(50))
    held = [
        # due at 0; its queue paused from 2 and resumed at 10: recorded at the resume
        Held("e1", "queue:q", timedelta(seconds=8), t(10)),
        # then a rate held it until the claim at 20, recorded from its due time
        Held("e1", "job:job", timedelta(seconds=20), t(20)),
        Held("e1", "queue:other", timedelta(0), t(20)),  # held no time: nothing to draw
    ]

    got = timeline(row, trail.records, [], reversed(held), t(30))

    assert [(w.kind, w.start, w.end, w.detail) for w in got.waits] == [
        (WaitKind.THROTTLED, t(0), t(20), "held by job:job"),
        (WaitKind.THROTTLED, t(2), t(10), "held by queue:q"),
    ]


def test_commands_are_marks_and_a_pause_is_a_wait() -> None:
    trail = (
        Trail()
        .claim(0, 1, "worker-a")
        .add(9, Event.CANCELLED, State.RUNNING, State.CANCELLED, 1, "worker-a", "cancel requested")
    )
    asked = [
        command(CommandKind.CANCEL, 8, by="bob", epoch=1, done=8.5),
        command(CommandKind.PAUSE, 2, epoch=1, done=2.5),
        command(CommandKind.RESUME, 4, epoch=1, done=4.5),
        command(CommandKind.PAUSE, 6, state=CommandState.CLAIMED),  # never resumed
        command(CommandKind.RESUME, 10, by=HOSTILE, state=CommandState.PENDING),
    ]
    row = execution(state=State.CANCELLED, epoch=1, attempt=1)

    got = timeline(row, trail.records, asked, [], t(20))

    (lease,) = got.leases
    assert (lease.ending, lease.end, lease.detail) == (
        LeaseEnding.CANCELLED,
        t(9),
        "cancel requested",
    )
    paused = [w for w in got.waits if w.kind is WaitKind.PAUSED]
    assert [(w.start, w.end) for w in paused] == [(t(2), t(4)), (t(6), t(9))]
    assert paused[0].detail == (f"requested by alice; delivered to epoch 1 at {t(2.5).isoformat()}")
    assert paused[1].detail == "requested by alice; taken by worker-a"
    assert [(m.at, m.kind, m.actor) for m in got.marks] == [
        (t(0), MarkKind.SUBMITTED, None),
        (t(2), MarkKind.PAUSE_REQUESTED, "alice"),
        (t(4), MarkKind.RESUME_REQUESTED, "alice"),
        (t(6), MarkKind.PAUSE_REQUESTED, "alice"),
        (t(8), MarkKind.CANCEL_REQUESTED, "bob"),
        (t(9), MarkKind.CANCELLED, "worker-a"),
        (t(10), MarkKind.RESUME_REQUESTED, HOSTILE),
    ]
    cancel = next(m for m in got.marks if m.kind is MarkKind.CANCEL_REQUESTED)
    assert cancel.detail == f"delivered to epoch 1 at {t(8.5).isoformat()}"
    assert got.marks[-1].detail == "not delivered yet"


def test_a_pause_still_in_force_has_no_end() -> None:
    trail = Trail().claim(0, 1, "w1")
    row = execution(state=State.RUNNING, epoch=1, attempt=1, lease_owner="w1", lease_until=t(60))
    asked = [command(CommandKind.PAUSE, 5, state=CommandState.PENDING)]

    got = timeline(row, trail.records, asked, [], t(10))

    assert got.waits == [
        Wait(
            kind=WaitKind.PAUSED,
            start=t(5),
            end=None,
            detail="requested by alice; not delivered yet",
        )
    ]


def test_a_cancel_before_the_start_and_other_marks() -> None:
    trail = (
        Trail()
        .add(5, Event.RESCHEDULED, State.SCHEDULED, State.SCHEDULED, 0, "scheduler", "released")
        .add(8, Event.CANCELLED, State.SCHEDULED, State.CANCELLED, 0, "ops")
    )
    # A held occurrence: planned at its slot (100), due far ahead until rescheduled.
    row = execution(state=State.CANCELLED, due_at=t(20), planned_at=t(100))
    asked = [command(CommandKind.CANCEL, 8, by="ops")]

    got = timeline(row, trail.records, asked, [], t(30))

    assert got.leases == []
    assert got.waits == [
        Wait(kind=WaitKind.DUE, start=t(0), end=t(5), detail=None),
        Wait(kind=WaitKind.DUE, start=t(5), end=t(8), detail="released"),
    ]
    assert [(m.kind, m.detail) for m in got.marks] == [
        (MarkKind.SUBMITTED, None),
        (MarkKind.RESCHEDULED, "released"),
        (MarkKind.CANCELLED, None),
        (MarkKind.CANCEL_REQUESTED, "carried out at once"),
    ]


def test_a_reaped_lease_times_out_and_is_marked() -> None:
    reaped = "lease of w1 (epoch 1) expired"
    trail = (
        Trail()
        .claim(0, 1, "w1")
        .add(20, Event.LEASE_EXPIRED, State.RUNNING, State.RETRY_WAIT, 1, "reaper", reaped)
        .add(30, Event.SKIPPED, State.SCHEDULED, State.SKIPPED, 1, None, "misfire")
    )
    row = execution(state=State.SKIPPED, epoch=1, attempt=1)

    got = timeline(row, trail.records, [], [], t(40))

    (lease,) = got.leases
    assert (lease.end, lease.ending, lease.detail) == (t(20), LeaseEnding.TIMED_OUT, reaped)
    assert got.waits == [], "an expiry keeps its past due time: nothing to wait for"
    assert [(m.kind, m.actor, m.detail) for m in got.marks][1:] == [
        (MarkKind.LEASE_EXPIRED, "reaper", reaped),
        (MarkKind.SKIPPED, None, "misfire"),
    ]


def test_a_row_behind_its_trail_is_drawn_as_the_trail_says() -> None:
    """Read apart, the row may lag a claim: the lease runs, with no lease_until known."""
    trail = Trail().claim(3, 1, "w1")
    row = execution(state=State.SCHEDULED, due_at=t(2))

    got = timeline(row, trail.records, [], [], t(5))

    (lease,) = got.leases
    assert (lease.ending, lease.end, lease.lease_until) == (LeaseEnding.RUNNING, None, None)
    assert got.end == t(5)


def test_a_new_execution_spans_from_its_creation_to_now() -> None:
    row = execution(due_at=t(60), planned_at=t(60))
    got = timeline(row, Trail().records, [], [], t(10))
    assert got.waits == [Wait(kind=WaitKind.DUE, start=t(0), end=t(60), detail=None)]
    assert (got.start, got.end) == (t(0), t(60))
    with pytest.raises(ValidationError) as caught:
        timeline(row, [], [], [], datetime(2026, 1, 1))  # naive on purpose
    assert caught.value.field == "now"


def test_the_audit_s_words_read_back() -> None:
    assert refused_verb("stale complete refused") == "complete"
    assert refused_verb("stale heartbeat refused") == "heartbeat"
    assert refused_verb("something else") == "something else"
    assert refused_verb(None) == ""
    assert snooze_length("snoozed for 0.25 s (1 of at most 100): x") == timedelta(seconds=0.25)
    assert snooze_length("snoozed for 30 s") == timedelta(seconds=30)
    assert snooze_length("snoozed for ever") is None
    assert snooze_length(None) is None

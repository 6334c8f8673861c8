"""The state machine as data, and the one function that applies it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from fencepost import InvalidTransition, State
from fencepost.domain.events import (
    ExecutionAborted,
    ExecutionCancelled,
    ExecutionClaimed,
    ExecutionCompleted,
    ExecutionFailed,
    ExecutionReplayed,
    ExecutionSkipped,
    ExecutionTimedOut,
    LeaseExpired,
)
from fencepost.domain.machine import (
    EDGES,
    after_failure,
    apply,
    attempts_from_transitions,
    holds,
    is_edge,
    sources,
)
from fencepost.domain.models import Execution, Transition
from fencepost.domain.states import TERMINAL_STATES, AttemptOutcome, Event

T0 = datetime(2026, 1, 1, tzinfo=UTC)


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
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def running(**changes: object) -> Execution:
    defaults: dict[str, object] = {
        "state": State.RUNNING,
        "attempt": 1,
        "epoch": 1,
        "lease_owner": "w",
        "lease_until": T0 + timedelta(seconds=30),
    }
    return execution(**(defaults | changes))


def test_state_values_equal_names() -> None:
    assert [s.value for s in State] == [s.name for s in State]
    assert {State.SUCCEEDED, State.FAILED, State.CANCELLED, State.SKIPPED} == TERMINAL_STATES


def test_terminal_states_have_no_way_out_but_replay() -> None:
    for event, edges in EDGES.items():
        for source in edges:
            if source in TERMINAL_STATES:
                assert (event, source) == (Event.REPLAYED, State.FAILED)


def test_claim_sources_match_the_sqlite_claim_index() -> None:
    """The SQL's literal state lists must be the domain's, or claims would miss rows."""
    from importlib import resources

    assert sources(Event.CLAIMED) == (State.RETRY_WAIT, State.RUNNING, State.SCHEDULED)
    waiting = "state IN ('RETRY_WAIT', 'SCHEDULED')"
    migration = (
        resources.files("fencepost.store.sqlite.migrations")
        .joinpath("0001_initial.sql")
        .read_text()
    )
    queries = resources.files("fencepost.store.sqlite").joinpath("queries.sql").read_text()
    assert waiting in migration
    assert waiting in queries


def test_claim() -> None:
    until = T0 + timedelta(seconds=5)
    change = apply(execution(), ExecutionClaimed(owner="w", lease_until=until), T0)
    e = change.execution
    assert (e.state, e.epoch, e.attempt, e.lease_owner, e.lease_until) == (
        State.RUNNING,
        1,
        1,
        "w",
        until,
    )
    assert (change.from_state, change.event, change.actor) == (
        State.SCHEDULED,
        Event.CLAIMED,
        "w",
    )


def test_claim_before_due_is_invalid() -> None:
    event = ExecutionClaimed(owner="w", lease_until=T0)
    with pytest.raises(InvalidTransition):
        apply(execution(due_at=T0 + timedelta(seconds=1)), event, T0)


def test_takeover_only_after_expiry_and_with_attempts_left() -> None:
    now = T0 + timedelta(seconds=30)
    event = ExecutionClaimed(owner="b", lease_until=now + timedelta(seconds=5))
    with pytest.raises(InvalidTransition):
        apply(running(), event, now - timedelta(microseconds=1))
    taken = apply(running(), event, now)
    assert (taken.execution.epoch, taken.execution.attempt, taken.from_state) == (
        2,
        2,
        State.RUNNING,
    )
    assert taken.reason == "took over from w (epoch 1): lease expired"
    with pytest.raises(InvalidTransition):
        apply(running(attempt=3), event, now)


@pytest.mark.parametrize(
    ("attempt", "retryable", "state"),
    [
        (1, True, State.RETRY_WAIT),
        (2, True, State.RETRY_WAIT),
        (3, True, State.FAILED),
        (1, False, State.FAILED),
    ],
)
def test_after_failure(attempt: int, retryable: bool, state: State) -> None:
    assert after_failure(attempt=attempt, max_attempts=3, retryable=retryable) is state
    retry_at = T0 + timedelta(seconds=9)
    event = ExecutionFailed(owner="w", error="x", retryable=retryable, retry_at=retry_at)
    e = apply(running(attempt=attempt), event, T0).execution
    assert e.state is state
    assert e.lease_owner is None
    assert e.due_at == (retry_at if state is State.RETRY_WAIT else T0)


@pytest.mark.parametrize(
    ("attempt", "retryable", "state"),
    [(1, True, State.RETRY_WAIT), (3, True, State.FAILED), (1, False, State.FAILED)],
)
def test_timed_out_leads_where_a_failure_does(attempt: int, retryable: bool, state: State) -> None:
    retry_at = T0 + timedelta(seconds=9)
    event = ExecutionTimedOut(owner="w", error="ran 61s", retryable=retryable, retry_at=retry_at)
    change = apply(running(attempt=attempt), event, T0)
    e = change.execution
    assert (e.state, e.error, e.lease_owner, e.lease_until) == (state, "ran 61s", None, None)
    assert e.due_at == (retry_at if state is State.RETRY_WAIT else T0)
    assert (change.event, change.actor, change.reason) == (Event.TIMED_OUT, "w", "ran 61s")
    assert ExecutionTimedOut(owner="w", error="x", retry_at=T0).retryable, "retryable by default"


def test_abort_stops_only_a_running_execution() -> None:
    change = apply(running(), ExecutionAborted(owner="w", reason="asked"), T0)
    e = change.execution
    assert (e.state, e.lease_owner, e.lease_until, e.epoch) == (State.CANCELLED, None, None, 1)
    assert (change.event, change.from_state, change.actor, change.reason) == (
        Event.CANCELLED,
        State.RUNNING,
        "w",
        "asked",
    )
    assert is_edge(Event.CANCELLED, State.RUNNING, State.CANCELLED)


def test_lease_expired_needs_an_expired_lease() -> None:
    with pytest.raises(InvalidTransition):
        apply(running(), LeaseExpired(retry_at=T0), T0)
    later = T0 + timedelta(seconds=30)
    e = apply(running(), LeaseExpired(retry_at=later), later).execution
    assert (e.state, e.error) == (State.RETRY_WAIT, "lease expired")


@pytest.mark.parametrize(
    ("start", "event"),
    [
        (State.RUNNING, ExecutionCancelled(actor="a")),
        (State.SUCCEEDED, ExecutionCancelled(actor="a")),
        (State.SCHEDULED, ExecutionCompleted(owner="w", result=1)),
        (State.RETRY_WAIT, ExecutionSkipped(reason="misfire")),
        (State.SUCCEEDED, ExecutionReplayed(actor="ops")),
        (State.CANCELLED, ExecutionReplayed(actor="ops")),
        (State.FAILED, ExecutionClaimed(owner="w", lease_until=T0)),
        (State.SCHEDULED, ExecutionAborted(owner="w", reason="x")),
        (State.RETRY_WAIT, ExecutionAborted(owner="w", reason="x")),
        (State.SUCCEEDED, ExecutionAborted(owner="w", reason="x")),
        (State.SCHEDULED, ExecutionTimedOut(owner="w", error="x", retry_at=T0)),
    ],
)
def test_invalid_transitions(start: State, event: object) -> None:
    with pytest.raises(InvalidTransition) as caught:
        apply(execution(state=start), event, T0)  # type: ignore[arg-type]
    assert caught.value.state == start


def test_replay_resets_the_attempt_budget_but_not_the_epoch() -> None:
    dead = execution(state=State.FAILED, attempt=3, epoch=3, error="x")
    e = apply(dead, ExecutionReplayed(actor="ops"), T0 + timedelta(hours=1)).execution
    assert (e.state, e.attempt, e.epoch, e.due_at) == (
        State.SCHEDULED,
        0,
        3,
        T0 + timedelta(hours=1),
    )


def test_holds_is_the_fence() -> None:
    e = running()
    assert holds(e, "w", 1, T0)
    assert not holds(e, "x", 1, T0)
    assert not holds(e, "w", 2, T0)
    assert not holds(e, "w", 1, T0 + timedelta(seconds=30)), "expired at lease_until"
    assert not holds(execution(), "w", 0, T0)


def test_is_edge() -> None:
    assert is_edge(Event.SUBMITTED, None, State.SCHEDULED)
    assert not is_edge(Event.COMPLETED, State.SCHEDULED, State.SUCCEEDED)
    assert is_edge(Event.STALE_REFUSED, State.SUCCEEDED, State.SUCCEEDED)
    assert not is_edge(Event.STALE_REFUSED, State.RUNNING, State.SUCCEEDED)


def _t(
    seq: int, event: Event, frm: State | None, to: State, epoch: int, **kw: object
) -> Transition:
    return Transition(
        execution_id="e1",
        seq=seq,
        event=event,
        from_state=frm,
        to_state=to,
        epoch=epoch,
        actor=kw.get("actor"),  # type: ignore[arg-type]
        reason=kw.get("reason"),  # type: ignore[arg-type]
        at=T0 + timedelta(seconds=seq),
    )


def test_attempts_of_timeouts_and_aborts() -> None:
    trail = [
        _t(1, Event.SUBMITTED, None, State.SCHEDULED, 0),
        _t(2, Event.CLAIMED, State.SCHEDULED, State.RUNNING, 1, actor="a"),
        _t(3, Event.TIMED_OUT, State.RUNNING, State.RETRY_WAIT, 1, actor="a", reason="ran 61s"),
        _t(4, Event.CLAIMED, State.RETRY_WAIT, State.RUNNING, 2, actor="b"),
        _t(5, Event.CANCELLED, State.RUNNING, State.CANCELLED, 2, actor="b", reason="asked"),
    ]
    got = [(a.attempt, a.owner, a.outcome, a.error) for a in attempts_from_transitions(trail)]
    assert got == [
        (1, "a", AttemptOutcome.TIMED_OUT, "ran 61s"),
        (2, "b", AttemptOutcome.CANCELLED, None),
    ]


def test_attempts_from_transitions() -> None:
    trail = [
        _t(1, Event.SUBMITTED, None, State.SCHEDULED, 0),
        _t(2, Event.CLAIMED, State.SCHEDULED, State.RUNNING, 1, actor="a"),
        _t(3, Event.FAILED, State.RUNNING, State.RETRY_WAIT, 1, actor="a", reason="boom"),
        _t(4, Event.CLAIMED, State.RETRY_WAIT, State.RUNNING, 2, actor="b"),
        _t(5, Event.CLAIMED, State.RUNNING, State.RUNNING, 3, actor="c"),
        _t(6, Event.STALE_REFUSED, State.RUNNING, State.RUNNING, 2, actor="b"),
        _t(7, Event.LEASE_EXPIRED, State.RUNNING, State.FAILED, 3, actor="reaper"),
        _t(8, Event.REPLAYED, State.FAILED, State.SCHEDULED, 3, actor="ops"),
        _t(9, Event.CLAIMED, State.SCHEDULED, State.RUNNING, 4, actor="d"),
    ]
    got = [
        (a.attempt, a.epoch, a.owner, a.outcome, a.error, a.ended_at)
        for a in attempts_from_transitions(trail)
    ]
    assert got == [
        (1, 1, "a", AttemptOutcome.FAILED, "boom", T0 + timedelta(seconds=3)),
        (2, 2, "b", AttemptOutcome.TIMED_OUT, "lease expired", T0 + timedelta(seconds=5)),
        (3, 3, "c", AttemptOutcome.TIMED_OUT, "lease expired", T0 + timedelta(seconds=7)),
        (1, 4, "d", None, None, None),
    ]

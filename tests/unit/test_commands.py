"""Where a command request goes, and the fences of command claims: pure rules, no store."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fencepost import Command, CommandKind, CommandState, Lease, NotRunning, State
from fencepost.domain.commands import claim_is_live, claimable, may_complete, on_request
from tests.unit.test_machine import T0, execution, running


def command(**changes: object) -> Command:
    base = Command(
        id="c1",
        execution_id="e1",
        kind=CommandKind.CANCEL,
        state=CommandState.CLAIMED,
        requested_by="client",
        requested_at=T0,
        owner="w",
        claim_until=T0 + timedelta(seconds=5),
        epoch=None,
        done_at=None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def lease(**changes: object) -> Lease:
    base = Lease(
        execution_id="e1",
        owner="w",
        epoch=1,
        lease_until=T0 + timedelta(seconds=30),
        due_at=T0,
        attempt=1,
        max_attempts=3,
        job="job",
        job_version=None,
        inputs={},
        timeout=None,
        schedule_id=None,
        slot=None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", list(CommandKind))
def test_a_running_execution_gets_every_command_pending(kind: CommandKind) -> None:
    assert on_request(running(), kind) is CommandState.PENDING


@pytest.mark.parametrize("state", [State.SCHEDULED, State.RETRY_WAIT])
def test_a_cancel_before_start_is_done_at_once(state: State) -> None:
    assert on_request(execution(state=state), CommandKind.CANCEL) is CommandState.DONE


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        (State.SCHEDULED, CommandKind.PAUSE),
        (State.RETRY_WAIT, CommandKind.RESUME),
        (State.SUCCEEDED, CommandKind.CANCEL),
        (State.FAILED, CommandKind.CANCEL),
        (State.CANCELLED, CommandKind.CANCEL),
        (State.SKIPPED, CommandKind.PAUSE),
    ],
)
def test_other_requests_are_refused(state: State, kind: CommandKind) -> None:
    with pytest.raises(NotRunning) as caught:
        on_request(execution(state=state), kind)
    assert (caught.value.execution_id, caught.value.state, caught.value.kind) == ("e1", state, kind)
    assert str(caught.value) == (
        f"execution e1 is {state}, not RUNNING: cannot deliver a {kind} command"
    )


def test_command_claims_expire_at_claim_until() -> None:
    until = T0 + timedelta(seconds=5)
    assert claim_is_live(until, until - timedelta(microseconds=1))
    assert not claim_is_live(until, until)
    assert not claim_is_live(None, T0)
    assert claimable(command(state=CommandState.PENDING, owner=None, claim_until=None), T0)
    assert not claimable(command(), T0)
    assert claimable(command(), until)
    assert not claimable(command(state=CommandState.DONE, claim_until=None), until)


def test_may_complete_is_fenced_on_both_sides() -> None:
    row = command()
    e = running()
    assert may_complete(row, row, lease(), e, T0)
    refused = [
        (command(state=CommandState.PENDING, owner=None), row, lease(), e, T0),
        (command(owner="other"), row, lease(), e, T0),
        (row, row, lease(owner="other"), e, T0),
        (row, row, lease(execution_id="e2"), e, T0),
        (row, row, lease(epoch=2), e, T0),
        (row, row, lease(), running(epoch=2), T0),
        (row, row, lease(), e, T0 + timedelta(seconds=5)),  # the claim ended
        # The claim is still live but the execution lease ended.
        (
            command(claim_until=T0 + timedelta(seconds=60)),
            row,
            lease(),
            e,
            T0 + timedelta(seconds=30),
        ),
    ]
    for args in refused:
        assert not may_complete(*args), args

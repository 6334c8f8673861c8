"""The contract of what a client asks of an execution.

Commands to a running execution (``request``, ``claim_commands``, ``complete_command``
fenced by the holder's lease, ``release_command``), and the verbs on one that is not
running: ``cancel``, ``reschedule`` and ``replay`` of a dead letter.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from fencepost.domain.errors import (
    InvalidTransition,
    NotFound,
    NotRunning,
    StaleLease,
    ValidationError,
)
from fencepost.domain.models import Command
from fencepost.domain.states import AttemptOutcome, CommandKind, CommandState, Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    US,
    ContractFixtures,
    assert_audit_valid,
    at,
    fields_of,
    taken_over,
)
from fencepost.testing.factory import ExecutionFactory


class CommandsContract(ContractFixtures):
    """Request, claim and complete commands; cancel, reschedule and replay executions."""

    # -- commands --------------------------------------------------------------------------

    def test_request_to_a_running_execution_is_pending(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        lease = make.running()
        before = store.get(lease.execution_id)
        clock.set(2)
        pause = store.request(lease.execution_id, "pause", actor="alice")
        assert pause == Command(
            id=pause.id,
            execution_id=lease.execution_id,
            kind=CommandKind.PAUSE,
            state=CommandState.PENDING,
            requested_by="alice",
            requested_at=at(2),
            owner=None,
            claim_until=None,
            epoch=None,
            done_at=None,
        )
        cancel = store.request(lease.execution_id, CommandKind.CANCEL)
        assert (cancel.kind, cancel.state, cancel.requested_by) == (
            CommandKind.CANCEL,
            CommandState.PENDING,
            "client",
        )
        assert store.commands(lease.execution_id) == [pause, cancel]
        assert store.get(lease.execution_id) == before, "delivery is the worker's job"
        assert len(store.transitions(lease.execution_id)) == 2

    def test_request_cancel_of_a_not_started_execution_cancels_it(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        waiting = make.scheduled(delay=60)
        retrying = make.retry_waiting()
        clock.set(7)
        for e in (waiting, retrying):
            command = store.request(e.id, "cancel", actor="alice")
            assert (command.kind, command.state, command.done_at, command.requested_at) == (
                CommandKind.CANCEL,
                CommandState.DONE,
                at(7),
                at(7),
            )
            assert (command.owner, command.claim_until, command.epoch) == (None, None, None)
            assert store.commands(e.id) == [command]
            assert store.get(e.id).state is State.CANCELLED
            last = store.transitions(e.id)[-1]
            assert (last.event, last.actor, last.at) == (Event.CANCELLED, "alice", at(7))
            assert_audit_valid(store, e.id)
        clock.set(1000)
        assert store.claim("w", limit=10) == []

    def test_requests_a_not_running_execution_cannot_take(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        done = make.succeeded()
        dead = make.dead()
        waiting = make.scheduled()
        retrying = make.retry_waiting()
        cases = [
            (done, "cancel", State.SUCCEEDED),
            (dead, "cancel", State.FAILED),
            (dead, "resume", State.FAILED),
            (waiting, "pause", State.SCHEDULED),
            (waiting, "resume", State.SCHEDULED),
            (retrying, "pause", State.RETRY_WAIT),
        ]
        for e, kind, state in cases:
            before = store.get(e.id)
            with pytest.raises(NotRunning) as caught:
                store.request(e.id, kind)
            assert (caught.value.execution_id, caught.value.state, caught.value.kind) == (
                e.id,
                state,
                kind,
            )
            assert state in str(caught.value)
            assert kind in str(caught.value)
            assert store.get(e.id) == before
            assert store.commands(e.id) == []
            assert_audit_valid(store, e.id)
        cancelled = store.request(waiting.id, "cancel").execution_id
        with pytest.raises(NotRunning):
            store.request(cancelled, "cancel")
        assert len(store.commands(cancelled)) == 1

    @pytest.mark.parametrize("kind", ["stop", "CANCEL", "", 3, None])
    def test_request_validates_the_kind(
        self, store: Store, make: ExecutionFactory, kind: Any
    ) -> None:
        lease = make.running()
        with pytest.raises(ValidationError) as caught:
            store.request(lease.execution_id, kind)
        assert caught.value.field == "kind"
        assert store.commands(lease.execution_id) == []

    def test_commands_of_unknown_executions(self, store: Store) -> None:
        unknown = "00000000-0000-7000-8000-000000000000"
        for call in (
            lambda: store.request(unknown, "cancel"),
            lambda: store.commands(unknown),
            lambda: store.commands("not-an-id"),
        ):
            with pytest.raises(NotFound):
                call()
        assert store.claim_commands("w", [unknown, "not-an-id"]) == []

    def test_claim_commands_in_request_order_with_expiring_claims(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        a = make.running(ttl=100).execution_id
        b = make.running(ttl=100).execution_id
        idle = make.running(ttl=100).execution_id
        clock.set(1)
        a_pause = store.request(a, "pause")
        clock.set(2)
        b_cancel = store.request(b, "cancel")
        b_pause = store.request(b, "pause")  # same instant: ordered by id
        clock.set(3)
        a_resume = store.request(a, "resume")
        store.request(idle, "pause")

        clock.set(4)
        first = store.claim_commands("w", [b, a], ttl=5, limit=3)
        assert [c.id for c in first] == [a_pause.id, b_cancel.id, b_pause.id]
        assert {(c.state, c.owner, c.claim_until) for c in first} == {
            (CommandState.CLAIMED, "w", at(9))
        }
        (rest,) = store.claim_commands("x", [a, b], ttl=5)
        assert (rest.id, rest.owner, rest.claim_until) == (a_resume.id, "x", at(9))
        clock.set(at(9) - US)
        assert store.claim_commands("x", [a, b]) == [], "every claim is still live"
        clock.set(9)
        expired = store.claim_commands("y", [a, b], ttl=1)
        assert [c.id for c in expired] == [a_pause.id, b_cancel.id, b_pause.id, a_resume.id]
        assert {(c.owner, c.claim_until) for c in expired} == {("y", at(10))}
        assert store.commands(a) == [c for c in expired if c.execution_id == a]
        assert [c.state for c in store.commands(idle)] == [CommandState.PENDING]
        assert store.claim_commands("y", []) == []

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"owner": ""}, "owner", id="empty-owner"),
            pytest.param({"ttl": 0}, "ttl", id="zero-ttl"),
            pytest.param({"limit": 0}, "limit", id="zero-limit"),
            pytest.param({"execution_ids": "abc"}, "execution_ids", id="ids-as-string"),
            pytest.param({"execution_ids": [""]}, "execution_ids", id="empty-id"),
        ],
    )
    def test_bad_claim_commands_names_the_field(
        self, store: Store, make: ExecutionFactory, arguments: dict[str, Any], field: str
    ) -> None:
        lease = make.running()
        command = store.request(lease.execution_id, "pause")
        call: dict[str, Any] = {"owner": "w", "execution_ids": [lease.execution_id]}
        with pytest.raises(ValidationError) as caught:
            store.claim_commands(**(call | arguments))
        assert caught.value.field == field
        assert store.commands(lease.execution_id) == [command]

    def test_a_command_taken_by_a_lost_lease_reaches_the_holder(
        self, store: Store, clock: ManualClock
    ) -> None:
        e, lost, holder = taken_over(store, clock, "a", "b", ttl=30, max_attempts=3)
        clock.set(6)
        store.request(e.id, "cancel", actor="alice")

        (mine,) = store.claim_commands("a", [e.id])  # a still thinks it runs e
        assert store.claim_commands("b", [e.id]) == [], "a's claim is live"
        with pytest.raises(StaleLease):
            store.complete_command(mine, lost)
        assert store.commands(e.id) == [mine], "a refused completion changes nothing"
        store.release_command(mine)
        (released,) = store.commands(e.id)
        assert (released.state, released.owner, released.claim_until) == (
            CommandState.PENDING,
            None,
            None,
        )

        clock.set(7)
        (theirs,) = store.claim_commands("b", [e.id])
        with pytest.raises(StaleLease):
            store.complete_command(theirs, lost)  # a lease of another owner
        store.release_command(mine)  # a's claim is gone: nothing happens
        assert store.commands(e.id) == [theirs]
        done = store.complete_command(theirs, holder)
        assert (done.id, done.state, done.epoch, done.done_at, done.owner) == (
            theirs.id,
            CommandState.DONE,
            2,
            at(7),
            "b",
        )
        assert store.commands(e.id) == [done]
        store.release_command(theirs)  # completed: release is a no-op
        assert store.commands(e.id) == [done]
        assert store.claim_commands("b", [e.id]) == [], "done commands are not claimed again"
        with pytest.raises(StaleLease):
            store.complete_command(theirs, holder)

        aborted = store.abort(holder, reason="cancel requested by alice")
        assert aborted.state is State.CANCELLED
        assert [(a.owner, a.outcome) for a in store.attempts(e.id)] == [
            ("a", AttemptOutcome.TIMED_OUT),
            ("b", AttemptOutcome.CANCELLED),
        ]
        assert_audit_valid(store, e.id)

    def test_complete_command_needs_the_current_epoch(
        self, store: Store, clock: ManualClock
    ) -> None:
        """The owner name proves nothing: a re-claimed execution takes the new epoch's lease."""
        e, first, second = taken_over(store, clock, "w", "w", ttl=30, max_attempts=3)
        store.request(e.id, "pause")
        (command,) = store.claim_commands("w", [e.id])
        with pytest.raises(StaleLease):
            store.complete_command(command, first)
        assert store.commands(e.id) == [command]
        assert store.complete_command(command, second).epoch == 2

    def test_complete_command_fence_boundaries(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        short_lease = make.running(ttl=5)
        long_lease = make.running(ttl=100)
        for lease in (short_lease, long_lease):
            store.request(lease.execution_id, "pause")
        clock.set(1)
        short_cmd, long_cmd = store.claim_commands(
            "worker", [short_lease.execution_id, long_lease.execution_id], ttl=4
        )
        with pytest.raises(StaleLease):
            store.complete_command(long_cmd, short_lease)  # another execution's lease
        clock.set(5)  # both the command claims and the short lease end now
        for command, lease in ((short_cmd, short_lease), (long_cmd, long_lease)):
            with pytest.raises(StaleLease):
                store.complete_command(command, lease)
            assert store.commands(lease.execution_id) == [command]

        clock.set(6)
        (short_again,) = store.claim_commands("worker", [short_lease.execution_id], ttl=30)
        with pytest.raises(StaleLease):
            store.complete_command(short_again, short_lease)  # its lease expired at t=5
        (long_again,) = store.claim_commands("worker", [long_lease.execution_id], ttl=30)
        clock.set(at(36) - US)
        done = store.complete_command(long_again, long_lease)
        assert (done.state, done.epoch, done.done_at) == (CommandState.DONE, 1, at(36) - US)
        pending = Command(**{**fields_of(short_again), "owner": None})
        with pytest.raises(StaleLease):
            store.complete_command(pending, short_lease)
        for lease in (short_lease, long_lease):
            assert_audit_valid(store, lease.execution_id)

    # -- cancel and replay ---------------------------------------------------------------

    def test_cancel_before_start(self, store: Store, make: ExecutionFactory) -> None:
        waiting = make.scheduled(delay=60)
        retrying = make.retry_waiting()
        for e in (waiting, retrying):
            cancelled = store.cancel(e.id, actor="alice")
            assert cancelled.state is State.CANCELLED
            assert store.transitions(e.id)[-1].actor == "alice"
            assert_audit_valid(store, e.id)
        assert store.claim("w") == []

    def test_cancel_refuses_started_and_finished(
        self, store: Store, make: ExecutionFactory
    ) -> None:
        running = make.running()
        done = make.succeeded()
        for execution_id in (running.execution_id, done.id):
            before = store.get(execution_id)
            with pytest.raises(InvalidTransition):
                store.cancel(execution_id)
            assert store.get(execution_id) == before
        with pytest.raises(NotFound):
            store.cancel("00000000-0000-7000-8000-000000000000")

    def test_reschedule_moves_a_waiting_execution_and_is_audited(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        held = make.scheduled(delay=3600)
        clock.set(10)
        moved = store.reschedule(held.id, at(10), actor="scheduler", reason="released")
        assert (moved.state, moved.due_at) == (State.SCHEDULED, at(10))
        last = store.transitions(held.id)[-1]
        assert (last.event, last.actor, last.reason) == (Event.RESCHEDULED, "scheduler", "released")
        assert_audit_valid(store, held.id)
        (lease,) = store.claim("w")
        assert lease.execution_id == held.id
        with pytest.raises(InvalidTransition):
            store.reschedule(held.id, at(20))  # RUNNING now
        with pytest.raises(NotFound):
            store.reschedule("00000000-0000-7000-8000-000000000000", at(20))
        with pytest.raises(ValidationError) as naive:
            store.reschedule(held.id, datetime(2026, 1, 1))
        assert naive.value.field == "due_at"

    def test_replay_revives_a_dead_letter(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        dead = make.dead(max_attempts=2)
        clock.set(50)
        revived = store.replay(dead.id, actor="ops@example")
        assert (revived.id, revived.state, revived.attempt, revived.due_at) == (
            dead.id,
            State.SCHEDULED,
            0,
            at(50),
        )
        (lease,) = store.claim("w")
        assert (lease.execution_id, lease.epoch, lease.attempt) == (dead.id, 2, 1)
        store.complete(lease, "second time lucky")
        trail = store.transitions(dead.id)
        assert [(t.event, t.actor) for t in trail if t.event is Event.REPLAYED] == [
            (Event.REPLAYED, "ops@example")
        ]
        assert [(a.attempt, a.epoch, a.outcome) for a in store.attempts(dead.id)] == [
            (1, 1, AttemptOutcome.FAILED),
            (1, 2, AttemptOutcome.SUCCEEDED),
        ]
        assert_audit_valid(store, dead.id)

    def test_replay_only_dead_letters(self, store: Store, make: ExecutionFactory) -> None:
        for e in (make.scheduled(), make.succeeded()):
            with pytest.raises(InvalidTransition):
                store.replay(e.id)
        with pytest.raises(NotFound):
            store.replay("nope")

"""A Hypothesis state machine that drives a store through random worker behaviour.

Several simulated workers claim, heartbeat, complete, fail, time out, release
and abort executions, and clients send them commands that the workers claim and
complete, while the clock jumps forward by random amounts. After every step the
machine checks the fencing invariants:

* at most one live lease per execution (no two issued leases overlap in time);
* epochs only increase, and every claim hands out a new, higher epoch;
* a stale call (refused with ``StaleLease``) never changes the execution;
* at most one accepted completion per execution;
* terminal states stay terminal;
* ``attempt`` never exceeds ``max_attempts``;
* every audit record is an edge of the state machine;
* a command is completed only by the worker holding the execution, at its epoch.

The clock only moves forward here: lease arbitration assumes the store's clock
does not step back (on PostgreSQL it is the server's clock).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    rule,
)

from fencepost.domain.errors import NotRunning, StaleLease
from fencepost.domain.machine import is_edge, lease_is_live
from fencepost.domain.models import Execution, Lease
from fencepost.domain.states import WAITING_STATES, AttemptOutcome, CommandKind, CommandState, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock

WORKERS = ("worker-a", "worker-b", "worker-c")

_T = TypeVar("_T")


def run_fencing_machine(
    store_factory: Callable[..., Store], *, max_examples: int = 150, steps: int = 40
) -> None:
    """Run the fencing state machine against stores made by ``store_factory``."""

    class FencingMachine(RuleBasedStateMachine):
        leases = Bundle("leases")

        def __init__(self) -> None:
            super().__init__()
            self.clock = ManualClock(0)
            # Seeded: the reaper's jittered backoff decides what later claims find,
            # and Hypothesis must see the same run when it replays an example.
            self.store = store_factory(self.clock, rng=random.Random(0))
            self.ids: list[str] = []
            self.issued: dict[str, list[Lease]] = {}  # every lease version handed out
            self.ended: dict[str, set[int]] = {}  # epochs whose lease was given back
            self.max_epoch: dict[str, int] = {}
            self.accepted: dict[str, int] = {}
            self.terminal: dict[str, State] = {}
            self.delivered: dict[str, tuple[str, int]] = {}  # command id -> (owner, epoch)

        @initialize(
            plan=st.lists(
                st.tuples(st.integers(0, 20), st.integers(1, 4), st.integers(-1, 1)),
                min_size=1,
                max_size=5,
            )
        )
        def submit(self, plan: list[tuple[int, int, int]]) -> None:
            made = self.store.submit_many(
                [
                    {"job": "job", "delay": delay, "max_attempts": attempts, "priority": prio}
                    for delay, attempts, prio in plan
                ]
            )
            self.ids = [e.id for e in made]
            for e in made:
                self.issued[e.id] = []
                self.ended[e.id] = set()
                self.max_epoch[e.id] = 0
                self.accepted[e.id] = 0

        def held(self, eid: str, now: datetime) -> list[Lease]:
            """Leases of ``eid`` not given back and not yet expired, by their own clocks."""
            return [
                lease
                for lease in self.issued[eid]
                if lease.epoch not in self.ended[eid] and lease_is_live(lease.lease_until, now)
            ]

        @rule(seconds=st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0]))
        def advance(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @rule(
            target=leases,
            worker=st.sampled_from(WORKERS),
            limit=st.integers(1, 3),
            ttl=st.sampled_from([1.0, 2.0, 5.0]),
        )
        def claim(self, worker: str, limit: int, ttl: float) -> object:
            got = self.store.claim(worker, limit=limit, ttl=ttl)
            now = self.clock.now()
            for lease in got:
                eid = lease.execution_id
                assert lease.epoch > self.max_epoch[eid], "every claim raises the epoch"
                live = self.held(eid, now)
                assert not live, f"claimed {eid} while {live} was still live"
                self.max_epoch[eid] = lease.epoch
                self.issued[eid].append(lease)
            return multiple(*got)

        def should_accept(self, lease: Lease, before: Execution) -> bool:
            """The oracle: the fence, computed from the row as it was before the call."""
            return (
                before.state is State.RUNNING
                and before.lease_owner == lease.owner
                and before.epoch == lease.epoch
                and lease_is_live(before.lease_until, self.clock.now())
            )

        def fenced(
            self, lease: Lease, report: Callable[[Execution], _T], *, act: str, verb: str
        ) -> tuple[Execution, _T] | None:
            """Run ``report(before)``, a fenced call with ``lease``, and judge it by the oracle.

            Accepted exactly when :meth:`should_accept` says so (from the row before the
            call), and a refusal changes nothing. ``act`` and ``verb`` word the failures.
            Returns the row as it was before and what the call returned; None if refused.
            """
            before = self.store.get(lease.execution_id)
            expected = self.should_accept(lease, before)
            try:
                answer = report(before)
            except StaleLease:
                assert not expected, f"a live lease's {act} was refused"
                assert self.store.get(lease.execution_id) == before, f"stale {verb} wrote"
                return None
            assert expected, f"a stale {act} was accepted"
            return before, answer

        @rule(lease=leases, ttl=st.sampled_from([1.0, 3.0]))
        def heartbeat(self, lease: Lease, ttl: float) -> None:
            ran = self.fenced(
                lease,
                lambda before: self.store.heartbeat(
                    lease, ttl=ttl, progress={"at": str(before.epoch)}
                ),
                act="heartbeat",
                verb="heartbeat",
            )
            if ran is None:
                return
            before, renewed = ran
            assert renewed.epoch == lease.epoch == before.epoch
            self.issued[lease.execution_id].append(renewed)

        @rule(lease=consumes(leases), result=st.integers(0, 9))
        def complete(self, lease: Lease, result: int) -> None:
            ran = self.fenced(
                lease,
                lambda _: self.store.complete(lease, result),
                act="completion",
                verb="complete",
            )
            if ran is None:
                return
            _, done = ran
            self.accepted[lease.execution_id] += 1
            assert self.accepted[lease.execution_id] == 1, "two accepted completions"
            assert (done.state, done.result) == (State.SUCCEEDED, result)

        @rule(lease=consumes(leases), retryable=st.booleans())
        def fail(self, lease: Lease, retryable: bool) -> None:
            ran = self.fenced(
                lease,
                lambda _: self.store.fail(
                    lease, "boom", retryable=retryable, retry_in=timedelta(seconds=1)
                ),
                act="failure",
                verb="fail",
            )
            if ran is None:
                return
            _, failed = ran
            assert failed.state in (State.RETRY_WAIT, State.FAILED)

        @rule(lease=consumes(leases), retryable=st.booleans())
        def time_out(self, lease: Lease, retryable: bool) -> None:
            ran = self.fenced(
                lease,
                lambda _: self.store.fail(
                    lease,
                    "ran too long",
                    retryable=retryable,
                    retry_in=timedelta(seconds=1),
                    timed_out=True,
                ),
                act="timeout",
                verb="timeout",
            )
            if ran is None:
                return
            _, failed = ran
            assert failed.state in (State.RETRY_WAIT, State.FAILED)
            last = self.store.attempts(lease.execution_id)[-1]
            assert (last.epoch, last.outcome) == (lease.epoch, AttemptOutcome.TIMED_OUT)

        @rule(lease=consumes(leases))
        def abort(self, lease: Lease) -> None:
            ran = self.fenced(lease, lambda _: self.store.abort(lease), act="abort", verb="abort")
            if ran is None:
                return
            _, aborted = ran
            assert (aborted.state, aborted.lease_owner) == (State.CANCELLED, None)

        @rule(lease=leases, kind=st.sampled_from(list(CommandKind)))
        def request(self, lease: Lease, kind: CommandKind) -> None:
            # Addressed through a lease: most such executions are still running.
            eid = lease.execution_id
            before = self.store.get(eid)
            try:
                command = self.store.request(eid, kind)
            except NotRunning:
                assert before.state is not State.RUNNING
                assert not (before.state in WAITING_STATES and kind is CommandKind.CANCEL)
                assert self.store.get(eid) == before, "a refused request wrote"
                return
            if before.state is State.RUNNING:
                assert command.state is CommandState.PENDING
                assert self.store.get(eid) == before, "a delivered request changed the row"
            else:
                assert (kind, command.state) == (CommandKind.CANCEL, CommandState.DONE)
                assert self.store.get(eid).state is State.CANCELLED

        @rule(lease=leases)
        def deliver(self, lease: Lease) -> None:
            """The lease's owner claims the execution's commands and completes them with it.

            A worker whose lease is stale is refused and gives the commands back.
            """
            eid = lease.execution_id
            for command in self.store.claim_commands(lease.owner, [eid], ttl=2.0):
                before = self.store.get(eid)
                expected = self.should_accept(lease, before)  # the claim was just taken
                try:
                    done = self.store.complete_command(command, lease)
                except StaleLease:
                    assert not expected, "a holder's command completion was refused"
                    (row,) = [c for c in self.store.commands(eid) if c.id == command.id]
                    assert row == command, "a refused completion wrote"
                    self.store.release_command(command)
                    (back,) = [c for c in self.store.commands(eid) if c.id == command.id]
                    assert (back.state, back.owner) == (CommandState.PENDING, None)
                    continue
                assert expected, "a command was completed without the lease"
                assert (done.state, done.epoch, done.owner) == (
                    CommandState.DONE,
                    lease.epoch,
                    lease.owner,
                )
                assert done.id not in self.delivered, "a command was delivered twice"
                self.delivered[done.id] = (lease.owner, lease.epoch)

        @rule(lease=consumes(leases))
        def release(self, lease: Lease) -> None:
            ran = self.fenced(
                lease, lambda _: self.store.release(lease), act="release", verb="release"
            )
            if ran is None:
                return
            before, released = ran
            assert (released.state, released.attempt) == (State.SCHEDULED, before.attempt - 1)

        @rule()
        def reap(self) -> None:
            self.store.reap_expired()

        @invariant()
        def fencing_holds(self) -> None:
            now = self.clock.now()
            for eid in self.ids:
                e: Execution = self.store.get(eid)
                assert e.attempt <= e.max_attempts
                assert e.epoch == self.max_epoch[eid], "the row carries the newest epoch"
                if eid in self.terminal:
                    assert e.state is self.terminal[eid], "terminal states stay terminal"
                elif e.state.is_terminal:
                    self.terminal[eid] = e.state
                if e.state is not State.RUNNING:
                    # Completed, failed or reaped: whatever lease it had is over.
                    self.ended[eid].update(lease.epoch for lease in self.issued[eid])
                live = self.held(eid, now)
                assert len({lease.epoch for lease in live}) <= 1, "two live leases"
                if e.state is State.RUNNING and lease_is_live(e.lease_until, now):
                    assert e.lease_owner is not None
                assert self.accepted[eid] <= 1

        def teardown(self) -> None:
            for eid in self.ids:
                for command in self.store.commands(eid):
                    if command.state is CommandState.DONE and command.owner is not None:
                        owner_epoch = (command.owner, command.epoch)
                        assert self.delivered.get(command.id) == owner_epoch, command
                state: State | None = None
                for t in self.store.transitions(eid):
                    assert is_edge(t.event, t.from_state, t.to_state), t
                    if t.from_state != t.to_state or t.from_state is None:
                        assert t.from_state == state, t
                        state = t.to_state
            self.store.close()

    FencingMachine.TestCase.settings = settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    FencingMachine.TestCase().runTest()

"""Snooze and a handler-chosen retry delay: the machine's rules, the exceptions, and the
in-process worker (memory store, real clock) turning them into store calls.

The store verb itself is specified by the contract section
(``fencepost.testing.contract.snoozing``); real worker processes, the HTTP worker
protocol and the HTTP runner against a real server are in
tests/integration/test_snooze_processes.py and tests/unit/test_http_retry_after.py.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import fencepost
from fencepost.app import App
from fencepost.domain.errors import InvalidTransition, Retry, Snooze, ValidationError
from fencepost.domain.events import ExecutionSnoozed
from fencepost.domain.machine import (
    DEFAULT_MAX_SNOOZES,
    EDGES,
    SNOOZED_TOO_OFTEN,
    apply,
    attempts_from_transitions,
    seconds_text,
    snoozed,
    snoozes_so_far,
)
from fencepost.domain.models import Execution, Transition
from fencepost.domain.retry import RetryPolicy, retry_after
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.jobs.context import Context
from fencepost.testing.factory import ExecutionFactory
from fencepost.worker.runtime import Worker

T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: A backoff no test waits out: a retry that came sooner used the handler's delay.
SLOW = RetryPolicy(base_delay=3600, max_delay=3600)


def running_execution(**submit: Any) -> Execution:
    store = fencepost.connect("memory://")
    lease = ExecutionFactory(store).running(owner="w", **submit)
    e = store.get(lease.execution_id)
    store.close()
    return e


def test_a_snooze_is_an_edge_from_running_to_scheduled_only() -> None:
    assert EDGES[Event.SNOOZED] == {State.RUNNING: frozenset({State.SCHEDULED})}
    e = running_execution(max_attempts=1)
    assert (e.attempt, e.lease_owner) == (1, "w")
    event = ExecutionSnoozed(owner="w", due_at=T0 + timedelta(seconds=30), reason="r")
    change = apply(e, event, T0)
    moved = change.execution
    assert (moved.state, moved.attempt, moved.due_at, moved.epoch) == (
        State.SCHEDULED,
        0,
        T0 + timedelta(seconds=30),
        e.epoch,
    )
    assert (moved.lease_owner, moved.lease_until) == (None, None)
    assert (change.event, change.actor, change.reason) == (Event.SNOOZED, "w", "r")
    with pytest.raises(InvalidTransition):
        apply(moved, event, T0)


def _t(seq: int, event: Event, epoch: int, *, actor: str = "w") -> Transition:
    states = {
        Event.SUBMITTED: (None, State.SCHEDULED),
        Event.CLAIMED: (State.SCHEDULED, State.RUNNING),
        Event.SNOOZED: (State.RUNNING, State.SCHEDULED),
        Event.COMPLETED: (State.RUNNING, State.SUCCEEDED),
        Event.FAILED: (State.RUNNING, State.FAILED),
        Event.REPLAYED: (State.FAILED, State.SCHEDULED),
    }
    source, target = states[event]
    return Transition(
        execution_id="e",
        seq=seq,
        event=event,
        from_state=source,
        to_state=target,
        epoch=epoch,
        actor=actor,
        reason=None,
        at=T0 + timedelta(seconds=seq),
    )


def test_a_snoozed_attempt_gives_its_number_back_and_snoozes_count_until_a_replay() -> None:
    trail = [
        _t(1, Event.SUBMITTED, 0),
        _t(2, Event.CLAIMED, 1),
        _t(3, Event.SNOOZED, 1),
        _t(4, Event.CLAIMED, 2),
        _t(5, Event.SNOOZED, 2),
        _t(6, Event.CLAIMED, 3),
        _t(7, Event.FAILED, 3),
    ]
    attempts = attempts_from_transitions(trail)
    assert [(a.attempt, a.epoch, a.outcome) for a in attempts] == [
        (1, 1, AttemptOutcome.SNOOZED),
        (1, 2, AttemptOutcome.SNOOZED),
        (1, 3, AttemptOutcome.FAILED),
    ]
    assert snoozes_so_far(trail) == 2
    replayed = [*trail, _t(8, Event.REPLAYED, 3), _t(9, Event.CLAIMED, 4)]
    assert snoozes_so_far(replayed) == 0
    assert snoozes_so_far([*replayed, _t(10, Event.SNOOZED, 4)]) == 1


def test_the_snooze_decision_within_and_past_the_bound() -> None:
    delay = timedelta(seconds=2.5)
    retry_at = T0 + timedelta(seconds=7)
    within = snoozed(
        owner="w", delay=delay, reason=None, snoozes=0, max_snoozes=2, now=T0, retry_at=retry_at
    )
    assert within == ExecutionSnoozed(
        owner="w", due_at=T0 + delay, reason="snoozed for 2.5 s (1 of at most 2)"
    )
    past = snoozed(
        owner="w", delay=delay, reason="busy", snoozes=2, max_snoozes=2, now=T0, retry_at=retry_at
    )
    assert past.kind is Event.FAILED
    assert past.retry_at == retry_at
    assert past.retryable is True
    assert past.error == (
        f"{SNOOZED_TOO_OFTEN}: asked to snooze for 2.5 s after 2 snoozes, at most 2 (busy)"
    )
    assert [seconds_text(timedelta(seconds=s)) for s in (30, 0.25, 1e-6, 2592000)] == [
        "30 s",
        "0.25 s",
        "0.000001 s",
        "2592000 s",
    ]


def test_snooze_and_retry_are_public_errors_checked_where_they_are_made() -> None:
    assert fencepost.Snooze is Snooze
    assert fencepost.Retry is Retry
    assert issubclass(Snooze, fencepost.FencepostError)
    snooze = Snooze(timedelta(minutes=2), reason="waiting for the bank")
    assert (snooze.seconds, snooze.reason) == (120.0, "waiting for the bank")
    assert str(snooze) == "snooze for 120 s: waiting for the bank"
    retry = Retry("rate limited", after=1.5)
    assert (retry.after, retry.message, str(retry)) == (
        1.5,
        "rate limited",
        "rate limited (retry after 1.5 s)",
    )
    assert Retry(after=0).after == 0.0
    for bad in (True, float("nan"), float("inf"), -1, 0, 30 * 86400 + 1, 10**400, "5", None):
        with pytest.raises(ValidationError) as caught:
            Snooze(bad)
        assert caught.value.field == "seconds"
    for bad in (True, float("nan"), float("inf"), -0.5, 10**400, "5", None):
        with pytest.raises(ValidationError) as caught:
            Retry(after=bad)
        assert caught.value.field == "after"


def test_ctx_snooze_raises_snooze() -> None:
    lease = fencepost.connect("memory://")
    lease.submit("job")
    (claimed,) = lease.claim("w")
    ctx = Context(claimed)
    with pytest.raises(Snooze) as caught:
        ctx.snooze(5, "later")
    assert (caught.value.seconds, caught.value.reason) == (5.0, "later")
    with pytest.raises(ValidationError, match="seconds"):
        ctx.snooze(-5)
    lease.close()


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after("120") == 120.0
    assert retry_after(" 7 ") == 7.0
    assert retry_after("Tue, 01 Dec 2026 12:00:30 GMT", lambda: now) == 30.0
    assert retry_after("Tue, 01 Dec 2026 11:00:00 GMT", lambda: now) == 0.0
    for unreadable in (None, "", "soon", "-5", "1.5", "\u00b2", "\u0663"):  # ², Arabic-Indic 3
        assert retry_after(unreadable) is None, unreadable


# -- the in-process worker ---------------------------------------------------------------


@pytest.fixture
def app() -> Iterator[App]:
    app = App("memory://")
    yield app
    app.close()


def run_until_finished(app: App, execution_ids: list[str], **options: Any) -> list[Execution]:
    worker: Worker = app.worker(poll_interval=0.01, **options)
    worker.start()
    try:
        return [app.store.wait(eid, timeout=30) for eid in execution_ids]
    finally:
        worker.stop(immediate=True)
        assert worker.join(10), "the worker did not stop"


def test_a_job_that_snoozes_three_times_then_succeeds_ends_at_attempt_1(app: App) -> None:
    seen: list[tuple[int, int]] = []

    @app.job("sync-snoozer", max_attempts=1)
    def sync_snoozer(ctx: Context) -> str:
        seen.append((ctx.attempt, ctx.epoch))
        if ctx.epoch <= 3:
            ctx.snooze(0.05, f"not ready at epoch {ctx.epoch}")
        return "ready"

    @app.job("async-snoozer", max_attempts=1)
    async def async_snoozer(ctx: Context) -> str:
        await asyncio.sleep(0)
        if ctx.epoch <= 3:
            raise fencepost.Snooze(timedelta(milliseconds=50))
        return "ready"

    ids = [app.submit("sync-snoozer").id, app.submit("async-snoozer").id]
    done = run_until_finished(app, ids)
    for execution in done:
        assert (execution.state, execution.attempt, execution.epoch, execution.result) == (
            State.SUCCEEDED,
            1,
            4,
            "ready",
        )
        attempts = app.store.attempts(execution.id)
        assert [(a.attempt, a.epoch, a.outcome) for a in attempts] == [
            (1, 1, AttemptOutcome.SNOOZED),
            (1, 2, AttemptOutcome.SNOOZED),
            (1, 3, AttemptOutcome.SNOOZED),
            (1, 4, AttemptOutcome.SUCCEEDED),
        ]
        snoozes = [t for t in app.store.transitions(execution.id) if t.event is Event.SNOOZED]
        for n, (t, later) in enumerate(zip(snoozes, attempts[1:], strict=True), start=1):
            assert t.reason is not None
            assert t.reason.startswith(f"snoozed for 0.05 s ({n} of at most 100)")
            assert later.started_at >= t.at + timedelta(seconds=0.05), "claimed before due"
    assert seen == [(1, 1), (1, 2), (1, 3), (1, 4)]
    sync_reasons = [t.reason for t in app.store.transitions(ids[0]) if t.event is Event.SNOOZED]
    assert sync_reasons[0] == "snoozed for 0.05 s (1 of at most 100): not ready at epoch 1"


def test_a_job_that_always_snoozes_fails_after_the_bound(app: App) -> None:
    calls: list[int] = []

    @app.job("sleepy", max_attempts=1)
    def sleepy(ctx: Context) -> None:
        calls.append(ctx.attempt)
        ctx.snooze(0.001)

    eid = app.submit("sleepy").id
    (done,) = run_until_finished(app, [eid])
    assert (done.state, done.attempt) == (State.FAILED, 1)
    assert done.error == (
        f"{SNOOZED_TOO_OFTEN}: asked to snooze for 0.001 s after "
        f"{DEFAULT_MAX_SNOOZES} snoozes, at most {DEFAULT_MAX_SNOOZES}"
    )
    outcomes = [a.outcome for a in app.store.attempts(eid)]
    assert outcomes == [AttemptOutcome.SNOOZED] * DEFAULT_MAX_SNOOZES + [AttemptOutcome.FAILED]
    assert calls == [1] * (DEFAULT_MAX_SNOOZES + 1)


def test_a_snooze_past_the_bound_retries_with_the_backoff_while_attempts_remain(
    app: App,
) -> None:
    @app.job("sleepy", max_attempts=3, retry=RetryPolicy(base_delay=0.01, max_delay=0.01))
    def sleepy(ctx: Context) -> None:
        ctx.snooze(0.001)

    eid = app.submit("sleepy").id
    (done,) = run_until_finished(app, [eid])
    assert (done.state, done.attempt) == (State.FAILED, 3)
    failed = [a for a in app.store.attempts(eid) if a.outcome is AttemptOutcome.FAILED]
    assert [a.attempt for a in failed] == [1, 2, 3]  # every later snooze is past the bound
    assert all((a.error or "").startswith(SNOOZED_TOO_OFTEN) for a in failed)


def test_retry_after_is_due_exactly_after_the_handler_s_delay(app: App) -> None:
    @app.job("rate-limited", max_attempts=2, retry=SLOW)
    def rate_limited(ctx: Context) -> int:
        if ctx.attempt == 1:
            raise Retry("upstream said 429", after=0.3)
        return ctx.attempt

    eid = app.submit("rate-limited").id
    (done,) = run_until_finished(app, [eid])
    assert (done.state, done.result, done.attempt) == (State.SUCCEEDED, 2, 2)
    (failed,) = [t for t in app.store.transitions(eid) if t.event is Event.FAILED]
    assert (failed.to_state, failed.reason) == (
        State.RETRY_WAIT,
        "Retry: upstream said 429 (retry after 0.3 s)",
    )
    assert done.due_at == failed.at + timedelta(seconds=0.3)  # exact: not the hour's backoff
    first, second = app.store.attempts(eid)
    assert (first.outcome, second.outcome) == (AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED)
    assert second.started_at >= done.due_at


def test_retry_on_the_last_attempt_is_a_dead_letter(app: App) -> None:
    @app.job("rate-limited", max_attempts=1)
    def rate_limited() -> None:
        raise Retry(after=60)

    eid = app.submit("rate-limited").id
    (done,) = run_until_finished(app, [eid])
    assert (done.state, done.error) == (State.FAILED, "Retry: retry requested (retry after 60 s)")


def test_a_snooze_reason_is_made_storable_not_refused(app: App) -> None:
    @app.job("odd", max_attempts=1)
    def odd(ctx: Context) -> str:
        if ctx.epoch == 1:
            raise Snooze(0.01, "bad\x00reason \ud800" + "x" * 5000)
        if ctx.epoch == 2:
            raise Snooze(0.01, "   ")  # blank: no reason
        return "ok"

    eid = app.submit("odd").id
    (done,) = run_until_finished(app, [eid])
    assert (done.state, done.attempt) == (State.SUCCEEDED, 1)
    first, second = [t.reason for t in app.store.transitions(eid) if t.event is Event.SNOOZED]
    assert first is not None
    assert first.startswith("snoozed for 0.01 s (1 of at most 100): bad\ufffdreason \ufffd")
    assert len(first) == len("snoozed for 0.01 s (1 of at most 100): ") + 1024
    assert second == "snoozed for 0.01 s (2 of at most 100)"


def test_a_cancel_delivered_before_a_snooze_wins(app: App) -> None:
    """A handler that snoozes after its cancel was delivered is aborted, not put back."""
    started = threading.Event()

    @app.job("stubborn", max_attempts=1)
    def stubborn(ctx: Context) -> None:
        started.set()
        ctx.wait(30)  # returns once the cancel asks the handler to stop
        ctx.snooze(60)

    eid = app.submit("stubborn").id
    worker: Worker = app.worker(poll_interval=0.01, command_interval=0.01)
    worker.start()
    try:
        assert started.wait(10), "the handler did not start"
        app.store.request(eid, "cancel")
        done = app.store.wait(eid, timeout=30)
    finally:
        worker.stop(immediate=True)
        assert worker.join(10), "the worker did not stop"
    assert done.state is State.CANCELLED
    assert [a.outcome for a in app.store.attempts(eid)] == [AttemptOutcome.CANCELLED]

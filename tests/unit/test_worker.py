"""The worker runtime, in process, on the memory store with the real clock.

Processes, signals and real databases are in tests/integration/test_worker_*.py;
these tests pin the runtime's decisions: what each handler outcome becomes,
timeouts, commands, heartbeats, shutdown and store outages.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from fencepost.app import App
from fencepost.domain.errors import Cancelled, PermanentFailure, StoreRefused, StoreUnavailable
from fencepost.domain.models import Execution
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.states import (
    TERMINAL_STATES,
    AttemptOutcome,
    CommandState,
    Event,
    State,
)
from fencepost.jobs.context import Context
from fencepost.store.base import Store
from fencepost.worker.runs import WorkerLoad
from fencepost.worker.runtime import Worker, WorkerOptions

FAST = RetryPolicy(base_delay=0.01, max_delay=0.01)


def wait_until(predicate: Callable[[], Any], timeout: float = 5.0, message: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail the test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    pytest.fail(f"timed out waiting: {message or predicate}")


def finished(store: Store, execution_id: str) -> Execution | None:
    execution = store.get(execution_id)
    return execution if execution.state in TERMINAL_STATES else None


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(immediate=True)
        assert worker.join(10), "the worker did not stop"


@pytest.fixture
def app() -> Iterator[App]:
    app = App("memory://")
    yield app
    app.close()


def test_sync_and_async_handlers_run_and_their_results_are_stored(app: App) -> None:
    @app.job("double")
    def double(ctx: Context, n: int) -> int:
        return 2 * n

    @app.job("later")
    async def later(ctx: Context, n: int) -> dict[str, int]:
        await asyncio.sleep(0.01)
        return {"n": n, "attempt": ctx.attempt, "epoch": ctx.epoch}

    ids = [app.submit("double", {"n": i}).id for i in range(40)]
    ids += [app.submit("later", {"n": i}).id for i in range(40)]
    with running(app.worker(concurrency=4)):
        done = [wait_until(lambda i=i: finished(app.store, i)) for i in ids]
    assert {e.state for e in done} == {State.SUCCEEDED}
    assert [e.result for e in done[:3]] == [0, 2, 4]
    assert done[40].result == {"n": 0, "attempt": 1, "epoch": 1}


def test_failures_are_retried_by_the_jobs_policy_then_succeed(app: App) -> None:
    calls: list[int] = []

    @app.job("flaky", max_attempts=3, retry=FAST)
    def flaky(ctx: Context) -> str:
        calls.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError(f"boom {ctx.attempt}")
        return "third time lucky"

    eid = app.submit("flaky").id
    with running(app.worker()):
        execution = wait_until(lambda: finished(app.store, eid))
    assert execution.state is State.SUCCEEDED
    outcomes = [a.outcome for a in app.store.attempts(eid)]
    assert outcomes == [AttemptOutcome.FAILED, AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]
    assert "RuntimeError: boom 1" in (app.store.attempts(eid)[0].error or "")
    assert calls == [1, 2, 3]


def test_permanent_failure_and_invalid_results_are_not_retried(app: App) -> None:
    @app.job("refuse", max_attempts=5)
    def refuse() -> None:
        raise PermanentFailure("bad account")

    @app.job("garbage", max_attempts=5)
    def garbage() -> object:
        return {1, 2}  # a set is not JSON

    refused, invalid = app.submit("refuse").id, app.submit("garbage").id
    with running(app.worker()):
        first = wait_until(lambda: finished(app.store, refused))
        second = wait_until(lambda: finished(app.store, invalid))
    assert (first.state, first.attempt) == (State.FAILED, 1)
    assert first.error is not None
    assert "bad account" in first.error
    assert (second.state, second.attempt) == (State.FAILED, 1)
    assert second.error is not None
    assert second.error.startswith("result_invalid")


def test_timeout_ends_the_attempt_timed_out_and_dead_letters_after_max_attempts(
    app: App,
) -> None:
    stopped: list[str | None] = []

    @app.job("slow", max_attempts=2, timeout=0.3, retry=FAST)
    def slow(ctx: Context) -> None:
        ctx.wait(30)  # returns as soon as the worker asks it to stop
        stopped.append(ctx.stop_reason)

    eid = app.submit("slow").id
    with running(app.worker()):
        execution = wait_until(lambda: finished(app.store, eid))
        wait_until(lambda: len(stopped) == 2)
    assert execution.state is State.FAILED
    attempts = app.store.attempts(eid)
    assert [a.outcome for a in attempts] == [AttemptOutcome.TIMED_OUT] * 2
    assert stopped == ["timed out", "timed out"]


def test_a_handler_that_ignores_its_timeout_is_abandoned_and_its_slot_reused(app: App) -> None:
    release = threading.Event()

    @app.job("stubborn", max_attempts=1, timeout=0.2)
    def stubborn() -> str:
        release.wait(30)  # ignores every request to stop
        return "too late"

    @app.job("quick")
    def quick() -> str:
        return "ok"

    slow_id = app.submit("stubborn").id
    with running(app.worker(concurrency=1)):
        assert wait_until(lambda: finished(app.store, slow_id)).state is State.FAILED
        quick_id = app.submit("quick").id
        # The only handler thread is still stuck; a replacement runs the next job.
        assert wait_until(lambda: finished(app.store, quick_id)).state is State.SUCCEEDED
        release.set()
        time.sleep(0.1)
    # The abandoned handler's late return changed nothing.
    assert app.store.get(slow_id).state is State.FAILED
    assert app.store.get(slow_id).result is None


def test_heartbeats_keep_a_long_handler_s_lease(app: App) -> None:
    @app.job("long", lease_ttl=0.3)
    def long(ctx: Context) -> str:
        time.sleep(1.2)  # four lease lengths, no checkpoint
        return "done"

    eid = app.submit("long").id
    with running(app.worker()):
        execution = wait_until(lambda: finished(app.store, eid))
    assert (execution.state, execution.epoch) == (State.SUCCEEDED, 1)
    refused = [t for t in app.store.transitions(eid) if t.event is Event.STALE_REFUSED]
    assert refused == []


def test_checkpoint_progress_reaches_the_store(app: App) -> None:
    gate = threading.Event()

    @app.job("progress")
    def progress(ctx: Context) -> None:
        ctx.checkpoint(progress={"step": 1})
        gate.wait(5)

    eid = app.submit("progress").id
    with running(app.worker()):
        wait_until(lambda: app.store.get(eid).progress == {"step": 1}, timeout=3)
        gate.set()
        wait_until(lambda: finished(app.store, eid))


def test_cancel_reaches_the_handler_at_its_next_checkpoint(app: App) -> None:
    @app.job("loop")
    def loop(ctx: Context) -> None:
        while True:
            ctx.checkpoint()
            time.sleep(0.01)

    eid = app.submit("loop").id
    with running(app.worker()):
        wait_until(lambda: app.store.get(eid).state is State.RUNNING)
        command = app.request(eid, "cancel")
        asked = time.monotonic()
        execution = wait_until(lambda: finished(app.store, eid))
        took = time.monotonic() - asked
    assert execution.state is State.CANCELLED
    assert [a.outcome for a in app.store.attempts(eid)] == [AttemptOutcome.CANCELLED]
    assert took < 1.5
    (stored,) = app.store.commands(eid)
    assert (stored.id, stored.state, stored.epoch) == (command.id, CommandState.DONE, 1)


def test_pause_blocks_checkpoints_and_resume_releases_them(app: App) -> None:
    steps: list[int] = []

    @app.job("counter", timeout=2.0)
    def counter(ctx: Context) -> int:
        for step in range(30):
            ctx.checkpoint()
            steps.append(step)
            time.sleep(0.02)
        return len(steps)

    eid = app.submit("counter").id
    with running(app.worker()):
        wait_until(lambda: len(steps) >= 2)
        app.request(eid, "pause")
        wait_until(lambda: app.store.commands(eid)[0].state is CommandState.DONE)
        time.sleep(0.1)
        paused_at = len(steps)
        time.sleep(2.2)  # longer than the timeout: paused time does not count
        assert len(steps) == paused_at
        app.request(eid, "resume")
        execution = wait_until(lambda: finished(app.store, eid))
    assert (execution.state, execution.result) == (State.SUCCEEDED, 30)


def test_a_worker_runs_only_the_versions_it_knows(app: App) -> None:
    ran: list[int] = []

    @app.job("report", version=1)
    def report_v1(ctx: Context) -> None:
        ran.append(1)

    other = App(app.store)

    @other.job("report", version=2)
    def report_v2(ctx: Context) -> None: ...

    unpinned = app.store.submit("report").id  # before any publication: any version runs it
    v2 = other.submit("report").id
    v1 = app.submit("report", version=1).id  # without a version, the catalogue's latest: 2
    with running(app.worker()):
        wait_until(lambda: finished(app.store, v1) and finished(app.store, unpinned))
        time.sleep(0.2)
    assert app.store.get(v2).state is State.SCHEDULED
    assert ran == [1, 1]


def test_graceful_stop_waits_for_short_handlers_and_releases_long_ones(app: App) -> None:
    never = threading.Event()

    @app.job("short")
    def short(ctx: Context) -> str:
        time.sleep(0.3)
        return "finished in the grace period"

    @app.job("cooperative")
    def cooperative(ctx: Context) -> None:
        while True:
            ctx.checkpoint()  # raises Cancelled("worker shutting down") after the grace period
            time.sleep(0.01)

    @app.job("deaf")
    def deaf(ctx: Context) -> None:
        never.wait(30)  # ignores the stop request entirely

    ids = [app.submit(job).id for job in ("short", "cooperative", "deaf")]
    worker = app.worker(concurrency=3, grace=1.0)
    worker.start()
    wait_until(lambda: len(worker.running) == 3)
    assert [n.id for n in app.store.nodes()] == [worker.owner]  # registered while running
    worker.stop()
    assert worker.join(10)
    never.set()
    assert app.store.get(ids[0]).state is State.SUCCEEDED
    for eid in ids[1:]:
        released = app.store.get(eid)
        assert (released.state, released.lease_owner, released.attempt) == (
            State.SCHEDULED,
            None,
            0,
        )
        assert [a.outcome for a in app.store.attempts(eid)] == [AttemptOutcome.ABANDONED]
    assert app.store.nodes() == []  # deregistered


class FlakyStore:
    """A store proxy whose every verb but ``get`` fails while ``down`` is set."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.down = threading.Event()
        self.refused_calls = 0
        self.parallel_writes = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if not callable(attribute) or name == "get":
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down.is_set():
                self.refused_calls += 1
                raise StoreUnavailable(f"{name}: connection refused (simulated)")
            return attribute(*args, **kwargs)

        return call


class LostHeartbeats:
    """A store proxy that drops heartbeats on the floor, as a frozen worker would send none.

    The worker believes its leases are renewed; the store lets them lapse.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def heartbeat_many(self, beats: list[tuple[Any, Any]], **_: Any) -> list[Any]:
        return [lease for lease, _progress in beats]


def frozen_heartbeats(app: App, **options: Any) -> Worker:
    """A worker whose leases lapse while it keeps running its handlers."""
    return Worker(LostHeartbeats(app.store), app.registry, WorkerOptions(**options))  # type: ignore[arg-type]


#: A store that takes writes from several threads has outcomes written on a thread of
#: their own (PostgreSQL); one that does not, on the control thread (SQLite, memory).
WRITERS = pytest.mark.parametrize("parallel_writes", [False, True], ids=["inline", "writer"])


@WRITERS
def test_outcomes_wait_out_a_store_outage_and_claims_resume_after_it(
    app: App, parallel_writes: bool
) -> None:
    gate = threading.Event()

    @app.job("gated", lease_ttl=30)
    def gated() -> str:
        gate.wait(10)
        return "kept through the outage"

    first = app.submit("gated").id
    flaky = FlakyStore(app.store)
    flaky.parallel_writes = parallel_writes
    with running(Worker(flaky, app.registry)) as w:  # type: ignore[arg-type]
        wait_until(lambda: app.store.get(first).state is State.RUNNING)
        wait_until(lambda: w.load() == WorkerLoad(buffered=0, busy=1, unwritten=0, store_up=True))
        flaky.down.set()
        gate.set()
        wait_until(lambda: flaky.refused_calls >= 3)
        second = app.store.submit("gated").id
        # The outcome is held while the store is down, and the worker says so.
        wait_until(lambda: w.load() == WorkerLoad(buffered=0, busy=0, unwritten=1, store_up=False))
        time.sleep(0.3)
        assert app.store.get(first).state is State.RUNNING  # outcome held, not lost
        assert app.store.get(second).state is State.SCHEDULED  # no claims while down
        flaky.down.clear()
        assert wait_until(lambda: finished(app.store, first)).result == "kept through the outage"
        assert wait_until(lambda: finished(app.store, second)).state is State.SUCCEEDED
        wait_until(lambda: w.load() == WorkerLoad(buffered=0, busy=0, unwritten=0, store_up=True))
    assert w.counters.dropped == 0


def test_a_command_for_an_execution_the_worker_does_not_hold_is_released(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()

    @app.job("held", lease_ttl=0.5)
    def held(ctx: Context) -> None:
        gate.wait(10)

    eid = app.submit("held").id
    worker = frozen_heartbeats(app, concurrency=1, command_interval=3600)
    with running(worker):
        wait_until(lambda: eid in worker.running)
        stale = worker.running[eid]
        # Another worker takes the execution over once the lease lapses ...
        time.sleep(0.6)
        (taken,) = app.store.claim("other-worker", ttl=30)
        app.request(eid, "cancel")
        # ... so when this worker polls the command, it finds it is not the holder.
        with caplog.at_level(logging.INFO, logger="fencepost.worker"):
            worker._held_runs.poll_commands(time.monotonic())
        assert f"command cancel for {eid}: not held by" in caplog.text  # claimed, then given back
        (command,) = app.store.commands(eid)
        assert command.state is CommandState.PENDING
        assert command.owner is None
        (mine,) = app.store.claim_commands("other-worker", [eid])
        app.store.complete_command(mine, taken)
        gate.set()
    assert stale.epoch == 1
    assert taken.epoch == 2
    assert app.store.commands(eid)[0].epoch == 2


def test_a_stale_handler_s_result_is_refused_and_audited(app: App) -> None:
    gate = threading.Event()

    @app.job("late", lease_ttl=0.3)
    def late(ctx: Context) -> str:
        gate.wait(10)
        return "from the old lease"

    eid = app.submit("late").id
    worker = frozen_heartbeats(app, concurrency=1)
    with running(worker):
        wait_until(lambda: eid in worker.running)
        time.sleep(0.4)
        (taken,) = app.store.claim("newer", ttl=30)
        app.store.complete(taken, "from the new lease")
        gate.set()
        wait_until(lambda: worker.counters.refused == 1)
    execution = app.store.get(eid)
    assert (execution.result, execution.epoch) == ("from the new lease", 2)
    refusal = next(t for t in app.store.transitions(eid) if t.event is Event.STALE_REFUSED)
    assert (refusal.actor, refusal.epoch) == (worker.owner, 1)
    assert refusal.reason is not None
    assert "complete" in refusal.reason


def test_cancelled_raised_without_a_request_fails_the_attempt(app: App) -> None:
    @app.job("quitter", max_attempts=1)
    def quitter() -> None:
        raise Cancelled("gave up")

    eid = app.submit("quitter").id
    with running(app.worker()):
        execution = wait_until(lambda: finished(app.store, eid))
    assert execution.state is State.FAILED


class RefusingStore:
    """A store proxy that refuses (as a database data error would) one result value."""

    def __init__(self, store: Store, poison: object) -> None:
        self._store = store
        self._poison = poison
        self.parallel_writes = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def complete_many(self, results: list[tuple[Any, Any]]) -> list[Any]:
        if any(result == self._poison for _, result in results):
            raise StoreRefused("simulated: the database refused a value")
        return self._store.complete_many(results)


@WRITERS
def test_a_refused_outcome_is_that_outcome_s_problem(
    app: App, caplog: pytest.LogCaptureFixture, parallel_writes: bool
) -> None:
    """The worker logs it once, fails that execution, and writes and claims the rest."""

    @app.job("echo")
    def echo(n: int) -> int:
        return n

    ids = [app.submit("echo", inputs={"n": n}).id for n in range(20)]
    refusing = RefusingStore(app.store, 7)
    refusing.parallel_writes = parallel_writes
    worker = Worker(refusing, app.registry)  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="fencepost.worker"), running(worker) as w:
        for eid in ids:
            wait_until(lambda eid=eid: finished(app.store, eid), message=eid)
        late = app.submit("echo", inputs={"n": 99}).id  # still claiming afterwards
        assert wait_until(lambda: finished(app.store, late)).result == 99
    refused = app.store.get(ids[7])
    assert refused.state is State.FAILED
    assert refused.error is not None
    assert refused.error.startswith("result_invalid: value: simulated")
    assert [app.store.get(i).result for i in ids if i != ids[7]] == [n for n in range(20) if n != 7]
    assert w.counters.rejected == 1
    assert w.counters.succeeded == 20
    refusals = [r for r in caplog.records if "the store refused" in r.getMessage()]
    assert len(refusals) == 1
    assert ids[7] in refusals[0].getMessage()
    assert not [r for r in caplog.records if "unreachable" in r.getMessage()]


def test_handler_error_texts_are_stored_sanitized(app: App) -> None:
    @app.job("hostile", retry=FAST, max_attempts=1)
    def hostile() -> None:
        raise RuntimeError("nul\x00 and \ud800 lone" + "x" * 20_000)

    eid = app.submit("hostile").id
    with running(Worker(app.store, app.registry)):
        failed = wait_until(lambda: finished(app.store, eid))
    assert failed.state is State.FAILED
    assert failed.error.startswith("RuntimeError: nul\ufffd and \ufffd lone")
    assert len(failed.error) == 8_192


def test_handler_threads_outlive_their_jobs_however_the_threads_interleave(app: App) -> None:
    """A handler thread leaves only when its run was abandoned, never because its
    outcome was collected first: with thread switches every 10 µs, the control thread
    often collects an outcome before the handler thread that produced it runs again.
    """

    @app.job("tick")
    def tick() -> None:
        return None

    app.store.submit_many([{"job": "tick"} for _ in range(2000)])
    worker = app.worker(concurrency=4)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with running(worker):
            wait_until(lambda: worker.counters.succeeded == 2000, timeout=60)
            handlers = [t for t in threading.enumerate() if t.name == "fencepost-handler"]
            assert len(handlers) == 4
    finally:
        sys.setswitchinterval(previous)

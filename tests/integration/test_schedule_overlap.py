"""Each overlap policy with a slow handler: a slot every second, a run takes 2.5 s.

A worker and a materializer run in this process on one SQLite file with the
real clock, for about six seconds. The handler records when each run started
and ended; the store records what was SKIPPED, held and cancelled.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencepost
from fencepost import State
from fencepost.jobs.context import Context

pytestmark = pytest.mark.slow

RUN_FOR = 2.5
OBSERVE = 6.5


def overlapping(spans: list[tuple[float, float]]) -> bool:
    ordered = sorted(spans)
    return any(b[0] < a[1] for a, b in itertools.pairwise(ordered))


@pytest.fixture
def app(tmp_path: Path) -> Iterator[fencepost.App]:
    app = fencepost.App(f"sqlite:///{tmp_path / 'fencepost.db'}")
    yield app
    app.close()


def observe(
    app: fencepost.App, overlap: str
) -> tuple[list[tuple[float, float]], list[fencepost.Execution]]:
    spans: list[tuple[float, float]] = []
    runs.clear()
    lock = threading.Lock()

    @app.job("slow", lease_ttl=10)
    def slow(ctx: Context) -> None:
        started = time.monotonic()
        try:
            while time.monotonic() - started < RUN_FOR:
                ctx.checkpoint()  # where a cancel (replace) reaches the handler
                time.sleep(0.02)
        finally:
            with lock:
                spans.append((started, time.monotonic()))
                runs.append((started, ctx.execution_id))

    schedule = app.schedule("slow", every=1, overlap=overlap, misfire_grace=30)
    worker = app.worker(concurrency=4)
    materializer = app.materializer(interval=0.05, recheck=0.05, lookahead=1)
    worker.start()
    materializer.start()
    time.sleep(OBSERVE)
    materializer.stop()
    worker.stop(immediate=True)
    assert worker.join(15)
    return spans, schedule.executions(limit=1000).items


#: (start, execution id) of each run of the last observe(), in the order they ended.
runs: list[tuple[float, str]] = []

RELEASED = "overlap: the previous run ended; released"


def started_in_turn(app: fencepost.App) -> None:
    """Each run after the first was held, then released by the end of the run before it.

    Read from the store's audit trail, so it holds however slowly the machine runs:
    the held run's release comes after the previous run's SUCCEEDED (in the store's
    order of transitions), it is claimed only after the release, and no run waits
    for a later one.
    """
    ordered = [execution_id for _, execution_id in sorted(runs)]
    for before, after in itertools.pairwise(ordered):
        ended = next(t.seq for t in app.store.transitions(before) if t.to_state is State.SUCCEEDED)
        trail = app.store.transitions(after)
        released = [t.seq for t in trail if t.reason == RELEASED]
        assert released, f"{after} ran without being released: {trail}"
        claimed = [t.seq for t in trail if t.to_state is State.RUNNING]
        assert ended < released[0] < claimed[0], (before, after, trail)


def reasons(app: fencepost.App, executions: list[fencepost.Execution]) -> set[str]:
    return {
        (app.store.transitions(e.id)[-1].reason or "").split(":")[0]
        for e in executions
        if e.state is State.SKIPPED
    }


def test_allow_runs_side_by_side(app: fencepost.App) -> None:
    spans, executions = observe(app, "allow")
    assert overlapping(spans)
    assert not any(e.state is State.SKIPPED for e in executions)


def test_skip_records_the_slots_that_fall_due_during_a_run(app: fencepost.App) -> None:
    spans, executions = observe(app, "skip")
    assert not overlapping(spans)
    assert len(spans) >= 2
    assert reasons(app, executions) == {"overlap"}
    assert sum(e.state is State.SKIPPED for e in executions) >= 3


def test_buffer_one_keeps_one_waiting_and_skips_the_rest(app: fencepost.App) -> None:
    spans, executions = observe(app, "buffer_one")
    assert not overlapping(spans)
    assert len(spans) >= 2  # the buffered one ran right after the first
    assert reasons(app, executions) == {"overlap"}
    started_in_turn(app)


def test_buffer_all_runs_every_slot_in_turn(app: fencepost.App) -> None:
    spans, executions = observe(app, "buffer_all")
    assert not overlapping(spans)
    assert len(spans) >= 2
    assert not any(e.state is State.SKIPPED for e in executions)
    waiting = [e for e in executions if e.state is State.SCHEDULED]
    assert len(waiting) >= 2, "slots that fell due during runs wait their turn"
    started_in_turn(app)


def test_replace_cancels_the_running_one_then_starts_the_new_one(app: fencepost.App) -> None:
    spans, executions = observe(app, "replace")
    assert not overlapping(spans)
    cancelled = [e for e in executions if e.state is State.CANCELLED]
    assert cancelled, "the running one was cancelled through the command channel"
    for e in cancelled:
        if e.attempt:  # it had started: the cancel reached the handler
            assert app.store.attempts(e.id)[-1].outcome is fencepost.AttemptOutcome.CANCELLED
    assert all(end - start < RUN_FOR - 0.1 for start, end in spans[:-1]), spans

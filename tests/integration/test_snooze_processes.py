"""Snooze and ``Retry(after=)`` in real ``fencepost worker`` processes.

A worker on the database (``--db``: SQLite and PostgreSQL) and a remote worker
(``--server``, through the worker protocol's snooze and fail endpoints) run the jobs of
``tests/integration/_snooze_app.py``: one that snoozes three times then succeeds on its
single attempt, one that always snoozes (FAILED past the store's bound of 100), and one
whose handler chooses its retry delay.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost.domain.machine import DEFAULT_MAX_SNOOZES, SNOOZED_TOO_OFTEN
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.store.base import Store
from tests.integration.test_service_processes import Processes, free_port, wait_ready

pytestmark = pytest.mark.slow

APP = "tests.integration._snooze_app:app"
TOKEN = "snooze-worker-token-0123456789"
JOBS = "snooze-thrice,always-snooze,retry-after"


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


def start_worker(processes: Processes, url: str, mode: str) -> subprocess.Popen[bytes]:
    """A worker on ``url`` directly (``db``), or through a service on it (``server``)."""
    common = ("--jobs", JOBS, "--poll-interval", "0.02", "--owner", f"{mode}-worker")
    if mode == "db":
        return processes.start("worker", "worker", APP, "--db", url, *common)
    port = free_port()
    service = processes.start(
        "serve", "serve", APP, "--db", url, "--port", str(port), "--workers", "0",
        env={"FENCEPOST_TOKENS": f"{TOKEN}=work,submit,read"},
    )  # fmt: skip
    server = f"http://127.0.0.1:{port}"
    wait_ready(server, service)
    return processes.start(
        "worker", "worker", APP, "--server", server, *common, env={"FENCEPOST_TOKEN": TOKEN}
    )


def finished(
    store: Store, ids: list[str], worker: subprocess.Popen[bytes]
) -> list[fencepost.Execution]:
    """Every execution of ``ids`` once it is terminal (the worker must stay up meanwhile)."""
    done = []
    for eid in ids:
        try:
            done.append(store.wait(eid, timeout=60))
        except TimeoutError:
            assert worker.poll() is None, "the worker exited"
            raise
    return done


@pytest.mark.parametrize("mode", ["db", "server"])
def test_a_worker_process_snoozes_without_using_attempts(
    shared_db: str, processes: Processes, mode: str
) -> None:
    store = fencepost.connect(shared_db)
    try:
        thrice = store.submit("snooze-thrice").id
        always = store.submit("always-snooze").id
        retried = store.submit("retry-after").id
        worker = start_worker(processes, shared_db, mode)
        done_thrice, done_always, done_retried = finished(store, [thrice, always, retried], worker)

        # Three snoozes, then success: still the first (and only allowed) attempt.
        assert (done_thrice.state, done_thrice.attempt, done_thrice.result) == (
            State.SUCCEEDED,
            1,
            {"attempt": 1, "epoch": 4},
        )
        attempts = store.attempts(thrice)
        assert [(a.attempt, a.outcome) for a in attempts] == [
            (1, AttemptOutcome.SNOOZED),
            (1, AttemptOutcome.SNOOZED),
            (1, AttemptOutcome.SNOOZED),
            (1, AttemptOutcome.SUCCEEDED),
        ]
        snoozes = [t for t in store.transitions(thrice) if t.event is Event.SNOOZED]
        assert [(t.actor, t.reason) for t in snoozes] == [
            (f"{mode}-worker", f"snoozed for 0.2 s ({n} of at most 100): not ready (epoch {n})")
            for n in (1, 2, 3)
        ]
        for t, later in zip(snoozes, attempts[1:], strict=True):
            assert later.started_at >= t.at + timedelta(seconds=0.2), "claimed before it was due"

        # Always snoozing: FAILED once past the bound, the single attempt used by that failure.
        assert (done_always.state, done_always.attempt) == (State.FAILED, 1)
        assert (done_always.error or "").startswith(SNOOZED_TOO_OFTEN)
        outcomes = [a.outcome for a in store.attempts(always)]
        assert outcomes == [AttemptOutcome.SNOOZED] * DEFAULT_MAX_SNOOZES + [AttemptOutcome.FAILED]

        # Retry(after=0.5): due exactly 0.5 s after the failure, not after the hour's backoff.
        assert (done_retried.state, done_retried.result, done_retried.attempt) == (
            State.SUCCEEDED,
            2,
            2,
        )
        (failed,) = [t for t in store.transitions(retried) if t.event is Event.FAILED]
        assert failed.reason == "Retry: upstream asked us to wait (retry after 0.5 s)"
        assert done_retried.due_at == failed.at + timedelta(seconds=0.5)

        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0, processes.log("worker")
    finally:
        store.close()

"""Real ``fencepost worker`` processes under real signals, on a real SQLite file.

Each test starts worker processes with the installed ``fencepost`` command, drives
them with SIGSTOP/SIGCONT/SIGKILL/SIGTERM, and judges the outcome from the store's
audit trail: who completed, at which epoch, which calls were refused.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import AttemptOutcome, Execution, State, Store
from fencepost.domain.states import CommandState
from tests.integration._audit import refused_completion

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"


class Workers:
    """Starts ``fencepost worker`` processes and makes sure none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, url: str, owner: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.tmp_path / f"{owner}.log").open("wb") as log:
            proc = subprocess.Popen(
                [FENCEPOST, "worker", "--db", url, "--owner", owner, *args],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        self.procs.append(proc)
        return proc

    def log(self, owner: str) -> str:
        return (self.tmp_path / f"{owner}.log").read_text()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    started = Workers(tmp_path)
    yield started
    started.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    url = f"sqlite:///{tmp_path / 'fencepost.db'}"
    store = fencepost.connect(url)
    yield url, store
    store.close()


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def running_under(store: Store, eid: str, owner: str, epoch: int) -> Execution | None:
    e = store.get(eid)
    ok = e.state is State.RUNNING and e.lease_owner == owner and e.epoch == epoch
    return e if ok else None


def freeze(proc: subprocess.Popen[bytes], db_path: Path) -> None:
    """SIGSTOP ``proc`` at a moment it holds no SQLite write lock.

    A process frozen inside a write transaction would block every other writer
    of the file (SQLite has one writer); that is SQLite's nature, not the
    failure under test, so the freeze is retried until the lock is free.
    """
    for _ in range(200):
        proc.send_signal(signal.SIGSTOP)
        probe = sqlite3.connect(db_path, timeout=0.2, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            return
        except sqlite3.OperationalError:
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.01)
        finally:
            probe.close()
    pytest.fail("could not freeze the worker outside a write transaction")


def write_definition(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return directory


def dead(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet (it runs no code either way)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_a_stale_worker_s_completion_is_refused_and_the_newer_result_stands(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    definitions = write_definition(
        tmp_path / "defs",
        "slow",
        """
name: slow
version: 1
lease_ttl: 2
timeout: 60
retry: {max_attempts: 3, base_delay: 0.1, max_delay: 0.1}
run:
  command:
    - python
    - -c
    - "import os, time; time.sleep(3); print('epoch', os.environ['FENCEPOST_EPOCH'])"
""",
    )
    a = workers.start(url, "worker-a", "--definitions", str(definitions), "--concurrency", "1")
    eid = store.submit("slow", version=1).id
    wait_until(lambda: running_under(store, eid, "worker-a", 1), 15, "A to claim")
    freeze(a, tmp_path / "fencepost.db")
    workers.start(url, "worker-b", "--definitions", str(definitions), "--concurrency", "1")
    done = wait_until(
        lambda: store.get(eid).state is State.SUCCEEDED and store.get(eid), 20, "B to finish"
    )
    assert (done.epoch, done.result) == (2, "epoch 2")
    a.send_signal(signal.SIGCONT)

    refusal = wait_until(lambda: refused_completion(store, eid), 15, "A's completion to be refused")
    assert (refusal.actor, refusal.epoch) == ("worker-a", 1)
    final = store.get(eid)
    assert (final.state, final.epoch, final.result) == (State.SUCCEEDED, 2, "epoch 2")
    attempts = store.attempts(eid)
    assert [(a.owner, a.epoch, a.outcome) for a in attempts] == [
        ("worker-a", 1, AttemptOutcome.TIMED_OUT),
        ("worker-b", 2, AttemptOutcome.SUCCEEDED),
    ]
    # A logs the refusal once its call returns: after the refusal is in the audit, so it
    # may not be in A's log yet when the audit has it.
    wait_until(lambda: "complete refused" in workers.log("worker-a"), 15, "A to log the refusal")


def test_a_killed_worker_s_execution_is_run_again_after_its_lease_expires(
    workers: Workers, db: tuple[str, Store]
) -> None:
    url, store = db
    a = workers.start(url, "worker-a", APP, "--jobs", "crashy")
    eid = store.submit("crashy", max_attempts=3).id
    wait_until(lambda: running_under(store, eid, "worker-a", 1), 15, "A to claim")
    a.kill()  # SIGKILL mid-handler: no release, no goodbye
    a.wait(10)
    workers.start(url, "worker-b", APP, "--jobs", "crashy")
    done = wait_until(
        lambda: store.get(eid).state is State.SUCCEEDED and store.get(eid), 20, "B to run it"
    )
    assert (done.attempt, done.epoch, done.result) == (2, 2, "recovered on attempt 2")
    outcomes = [(a.owner, a.outcome) for a in store.attempts(eid)]
    assert outcomes == [
        ("worker-a", AttemptOutcome.TIMED_OUT),
        ("worker-b", AttemptOutcome.SUCCEEDED),
    ]


def test_pause_resume_and_cancel_reach_a_running_handler_from_another_process(
    workers: Workers, db: tuple[str, Store]
) -> None:
    url, store = db
    workers.start(url, "worker-a", APP, "--jobs", "spin")
    eid = store.submit("spin", inputs={"pause": 0.02}).id

    def step() -> int:
        progress = store.get(eid).progress
        return progress["step"] if isinstance(progress, dict) else -1

    wait_until(lambda: step() >= 5, 15, "progress")
    delivered = []
    for kind in ("pause", "resume", "cancel"):
        command = store.request(eid, kind)
        done = wait_until(
            lambda c=command: next(
                (x for x in store.commands(eid) if x.id == c.id and x.state is CommandState.DONE),
                None,
            ),
            5,
            f"{kind} to be delivered",
        )
        delivered.append((done.done_at - done.requested_at).total_seconds())
        if kind == "pause":
            time.sleep(1.5)  # progress is written within a second of each checkpoint
            held = step()
            time.sleep(1.0)
            assert step() == held, "a paused handler made progress"
        elif kind == "resume":
            wait_until(lambda held=held: step() > held, 5, "progress after resume")
    execution = wait_until(
        lambda: store.get(eid).state is State.CANCELLED and store.get(eid), 5, "cancellation"
    )
    assert execution.lease_owner is None
    assert [a.outcome for a in store.attempts(eid)] == [AttemptOutcome.CANCELLED]
    assert max(delivered) < 1.0, f"commands took {delivered} s to reach the worker"


def test_a_runaway_command_s_process_group_is_killed_at_its_timeout(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    pidfile = tmp_path / "pids"
    definitions = write_definition(
        tmp_path / "defs",
        "runaway",
        """
name: runaway
version: 1
inputs: {type: object, properties: {pidfile: {type: string}}, required: [pidfile]}
timeout: 1
retry: {max_attempts: 2, base_delay: 0.1, max_delay: 0.1}
run:
  command:
    - sh
    - -c
    - 'sleep 60 & echo $! >> "$0"; echo $$ >> "$0"; wait'
    - "{inputs.pidfile}"
""",
    )
    workers.start(url, "worker-a", "--definitions", str(definitions))
    app = fencepost.App(store, definitions=definitions)  # submits with the job's retry policy
    eid = app.submit("runaway", {"pidfile": str(pidfile)}).id
    execution = wait_until(
        lambda: store.get(eid).state is State.FAILED and store.get(eid), 20, "the dead letter"
    )
    assert execution.attempt == 2
    assert [a.outcome for a in store.attempts(eid)] == [AttemptOutcome.TIMED_OUT] * 2
    pids = [int(line) for line in pidfile.read_text().split()]
    assert len(pids) == 4  # a shell and its background sleep, per attempt
    wait_until(lambda: all(dead(pid) for pid in pids), 5, "the process groups to die")


def test_sigterm_drains_releases_and_leaves_nothing_held_by_a_dead_owner(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    pidfile = tmp_path / "pids"
    definitions = write_definition(
        tmp_path / "defs",
        "sleeper",
        """
name: sleeper
version: 1
inputs: {type: object, properties: {pidfile: {type: string}}}
run:
  command: ["sh", "-c", "echo $$ >> \\"$0\\"; exec sleep 60", "{inputs.pidfile}"]
""",
    )
    a = workers.start(
        url,
        "worker-a",
        APP,
        "--definitions",
        str(definitions),
        "--grace",
        "1",
        "--jobs",
        "spin,deaf,quick,sleeper",
    )
    ids = [
        store.submit("spin").id,
        store.submit("deaf").id,
        store.submit("sleeper", version=1, inputs={"pidfile": str(pidfile)}).id,
    ]
    wait_until(
        lambda: all(store.get(i).state is State.RUNNING for i in ids), 15, "all three to run"
    )
    quick = store.submit("quick", inputs={"n": 7}).id  # finishes inside the grace period
    wait_until(lambda: store.get(quick).state is State.SUCCEEDED, 10, "the quick job")
    a.send_signal(signal.SIGTERM)
    assert a.wait(15) == 0
    for eid in ids:
        released = store.get(eid)
        assert (released.state, released.lease_owner) == (State.SCHEDULED, None), eid
        assert store.attempts(eid)[-1].outcome is AttemptOutcome.ABANDONED
    assert store.nodes() == []
    wait_until(lambda: all(dead(int(p)) for p in pidfile.read_text().split()), 5, "sleep to die")
    # Released means claimable at once: another worker picks them up without waiting.
    workers.start(url, "worker-b", APP, "--definitions", str(definitions), "--jobs", "spin,deaf")
    wait_until(
        lambda: all(running_under(store, i, "worker-b", 2) for i in ids[:2]), 10, "B to claim"
    )


def test_a_second_signal_stops_at_once(workers: Workers, db: tuple[str, Store]) -> None:
    url, store = db
    a = workers.start(url, "worker-a", APP, "--jobs", "deaf", "--grace", "60")
    eid = store.submit("deaf").id
    wait_until(lambda: running_under(store, eid, "worker-a", 1), 15, "A to claim")
    a.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    stopped_at = time.monotonic()
    a.send_signal(signal.SIGINT)
    assert a.wait(10) == 0
    assert time.monotonic() - stopped_at < 3.0
    assert store.get(eid).state is State.SCHEDULED
    assert "stopping now" in workers.log("worker-a")


def test_with_scheduler_a_worker_process_materializes_and_runs_schedules(
    workers: Workers, db: tuple[str, Store]
) -> None:
    url, store = db
    schedule = store.add_schedule("quick", every=1, inputs={"n": 3}, id="every-second")
    workers.start(url, "worker-a", APP, "--jobs", "quick", "--with-scheduler")

    def succeeded() -> list[Execution]:
        page = store.query(schedule=schedule.id, state=State.SUCCEEDED, limit=100)
        return page.items if len(page.items) >= 3 else []

    done = wait_until(succeeded, 20, "three scheduled runs")
    assert all(e.result == 3 and e.slot for e in done)
    assert len({e.slot for e in done}) == len(done)


def test_json_logs_carry_the_execution_epoch_and_owner(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    definitions = write_definition(
        tmp_path / "defs",
        "hang",
        """
name: hang
version: 1
timeout: 0.5
retry: {max_attempts: 1}
run:
  command: ["sleep", "30"]
""",
    )
    worker = workers.start(
        url, "worker-json", "--definitions", str(definitions), "--log-format", "json"
    )
    eid = fencepost.App(store, definitions=definitions).submit("hang").id
    wait_until(lambda: store.get(eid).state is State.FAILED, 15, "the timeout")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(15) == 0
    entries = [json.loads(line) for line in workers.log("worker-json").splitlines()]
    about = [e for e in entries if e.get("execution_id") == eid]
    assert about, entries
    assert {(e["epoch"], e["owner"], e["job"]) for e in about} == {(1, "worker-json", "hang")}
    assert any("timed out" in e["message"] and e["level"] == "warning" for e in about)
    assert all({"ts", "level", "logger", "message"} <= e.keys() for e in entries)

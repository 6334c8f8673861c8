"""`make demo` (examples/service_demo.py) brings the service up; its schedule's runs succeed."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost import State

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "service_demo.py"
SCHEDULE = "demo-every-2-seconds"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_demo(*args: str, timeout: float = 25) -> subprocess.CompletedProcess[str]:
    """The demo as a process; on a timeout it gets SIGTERM, which stops its service too."""
    proc = subprocess.Popen(
        [sys.executable, str(DEMO), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=40)
        pytest.fail(f"the demo did not finish within {timeout} s:\n{out}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out)


def test_the_demo_runs_the_examples_and_its_schedule_succeeds(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    port = free_port()
    done = run_demo(
        "--every", "2", "--exit-after-success", "--port", str(port), "--db", f"sqlite:///{db}"
    )

    assert done.returncode == 0, done.stdout
    assert f"Dashboard:  http://127.0.0.1:{port}/" in done.stdout
    with fencepost.connect(f"sqlite:///{db}") as store:
        schedule = store.get_schedule(SCHEDULE)
        assert (schedule.job, schedule.every, schedule.paused) == (
            "greet",
            timedelta(seconds=2),
            False,
        )
        runs = store.query(schedule=SCHEDULE, state=State.SUCCEEDED, limit=1000).items
        assert len(runs) >= 2
        assert {run.result for run in runs} == {
            f"hello the {SCHEDULE} schedule from {run.id}" for run in runs
        }
        greet = [e for e in store.query(job="greet").items if e.schedule_id is None]
        add = store.query(job="add").items
    assert [(e.state, e.result) for e in greet] == [
        (State.SUCCEEDED, f"hello make demo from {greet[0].id}")
    ]
    assert [(e.state, e.inputs, e.result) for e in add] == [(State.SUCCEEDED, {"x": 2, "y": 3}, 5)]
    # The HTTP example job GETs port 8080, where this demo does not listen.
    assert "not submitting healthz" in done.stdout


def test_a_taken_port_is_named_and_fails_the_demo(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_demo("--port", str(port), "--db", f"sqlite:///{tmp_path / 'demo.db'}")

    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in done.stdout
    assert not (tmp_path / "demo.db").exists()

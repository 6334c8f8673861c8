"""A job run first as a script, then by ``fencepost worker``, is one job in the catalogue.

The quick start runs ``python tasks.py`` (its jobs are defined in ``__main__``) and then
``fencepost serve tasks:app`` or ``fencepost worker tasks:app`` (the same jobs, imported
as module ``tasks``). Both must publish the same definition, or the second process finds
the job published from elsewhere and refuses to start.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fencepost
from fencepost import State

pytestmark = pytest.mark.slow

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TASKS = """\
import fencepost

app = fencepost.App("sqlite:///jobs.db")


@app.job("double")
def double(n: int) -> int:
    return 2 * n


if __name__ == "__main__":
    app.submit("double", {"n": 1})
    app.run_worker()
"""


def wait_succeeded(db: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.communicate()[0]
        if db.exists():
            with fencepost.connect(f"sqlite:///{db}") as store:
                done = store.query(job="double", state=State.SUCCEEDED).items
            if len(done) >= count:
                return
        assert time.monotonic() < deadline, f"{count} executions did not succeed in 30 s"
        time.sleep(0.1)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    return out


def test_a_script_s_jobs_are_the_same_jobs_for_fencepost_worker(tmp_path: Path) -> None:
    (tmp_path / "tasks.py").write_text(TASKS, encoding="utf-8")
    db = tmp_path / "jobs.db"
    script = subprocess.Popen(
        [sys.executable, "tasks.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_succeeded(db, 1, script)
    finally:
        if script.poll() is None:
            stop(script)
    with fencepost.connect(f"sqlite:///{db}") as store:
        store.submit("double", inputs={"n": 2})
    worker = subprocess.Popen(
        [FENCEPOST, "worker", "tasks:app", "--db", "sqlite:///jobs.db"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_succeeded(db, 2, worker)  # fails with the worker's output if it refused to start
    finally:
        if worker.poll() is None:
            stop(worker)

"""What an operator tailing a real worker's log sees, and what a remote worker says first.

Real ``fencepost worker`` processes (SQLite, and ``--server`` against a real
``fencepost serve``); the assertions read their actual stderr.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

import fencepost
from fencepost import State
from tests.integration.test_service_processes import (
    APP,
    TOKEN,
    Processes,
    free_port,
    processes,
    wait_ready,
)
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # fixture


def _run_until(
    processes: Processes, name: str, url: str, done: list[str], *args: str
) -> tuple[str, fencepost.Store]:
    """A worker on ``url`` until every id in ``done`` is terminal; then SIGTERM; its log."""
    proc = processes.start(name, "worker", APP, "--db", url, "--owner", name, *args)
    store = fencepost.connect(url)
    wait_until(
        lambda: all(store.get(i).state in (State.SUCCEEDED, State.FAILED) for i in done),
        30,
        "the executions to finish",
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, processes.log(name)
    return processes.log(name), store


def test_each_failed_attempt_is_a_warning_with_its_traceback_and_the_dead_letter_an_error(
    processes: Processes, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with fencepost.connect(url) as store:
        doomed = store.submit("doomed", inputs={"day": "2026-11-28"}, max_attempts=2).id
    log, store = _run_until(processes, "w1", url, [doomed])
    store.close()
    lines = log.splitlines()

    started = [line for line in lines if " started: " in line]
    assert len(started) == 1
    assert "INFO fencepost.worker worker w1 started: jobs " in started[0]
    assert "doomed@1" in started[0]
    assert "concurrency 8" in started[0]
    assert f"store {url}" in started[0]

    failed = [i for i, line in enumerate(lines) if "failed (epoch" in line]
    assert [lines[i].split(" WARNING ")[1] for i in failed] == [
        f"fencepost.worker execution {doomed} (job doomed) attempt {n} of 2 failed "
        f"(epoch {n}, owner w1): ValueError: no rows for 2026-11-28"
        for n in (1, 2)
    ]
    # The traceback belongs to the same record: the lines right after it, down to the
    # raise in the helper the handler called.
    record = []
    for line in lines[failed[0] + 1 :]:
        if line[:4].isdigit():  # the next record's timestamp
            break
        record.append(line)
    after = "\n".join(record)
    assert after.startswith("Traceback (most recent call last):")
    assert "in _load_rows" in after
    assert "ValueError: no rows for 2026-11-28" in after

    dead = [line for line in lines if "dead-lettered" in line]
    assert len(dead) == 1
    assert (
        f" ERROR fencepost.worker execution {doomed} (job doomed) dead-lettered after "
        "attempt 2 of 2: ValueError: no rows for 2026-11-28"
    ) in dead[0]
    stopped = [line for line in lines if " stopped: " in line]
    assert len(stopped) == 1
    assert "0 succeeded, 2 failed" in stopped[0]


def test_in_json_the_traceback_and_attempt_are_fields_of_the_failure_record(
    processes: Processes, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with fencepost.connect(url) as store:
        doomed = store.submit("doomed", max_attempts=2).id
    log, store = _run_until(processes, "w1", url, [doomed], "--log-format", "json")
    store.close()
    records = [json.loads(line) for line in log.splitlines()]  # every line is one object
    failures = [r for r in records if r["level"] == "warning" and "failed" in r["message"]]
    assert [(r["execution_id"], r["attempt"], r["epoch"], r["job"]) for r in failures] == [
        (doomed, 1, 1, "doomed"),
        (doomed, 2, 2, "doomed"),
    ]
    for record in failures:
        assert record["error"].startswith("Traceback (most recent call last):")
        assert record["error"].rstrip().endswith("ValueError: no rows for 2026-11-28")
    assert [r["level"] for r in records if "dead-lettered" in r["message"]] == ["error"]


def test_a_job_that_ends_before_its_first_heartbeat_keeps_its_last_progress(
    processes: Processes, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with fencepost.connect(url) as store:
        quick = store.submit("quick-progress", inputs={"rows": 3}).id
    _, store = _run_until(processes, "w1", url, [quick])
    try:
        execution = store.get(quick)
        assert execution.state is State.SUCCEEDED
        assert execution.progress == {"rows": 3}
    finally:
        store.close()


def _service(processes: Processes, tmp_path: Path) -> str:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    tokens = {"FENCEPOST_TOKENS": f"{TOKEN}=work,submit,read;reader-token-0123456789=read"}
    service = processes.start(
        "serve", "serve", APP, "--db", f"sqlite:///{tmp_path / 'svc.db'}", "--port", str(port),
        "--workers", "0", env=tokens,
    )  # fmt: skip
    wait_ready(url, service)
    return url


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (None, "missing credentials"),
        ("not-a-known-token-0123456789", "unknown token"),
        ("reader-token-0123456789", "this token lacks the 'work' scope"),
    ],
    ids=["missing", "unknown", "read-only"],
)
def test_a_remote_worker_refused_its_token_says_so_in_one_line_before_starting(
    processes: Processes, tmp_path: Path, token: str | None, says: str
) -> None:
    url = _service(processes, tmp_path)
    env = {"FENCEPOST_TOKEN": token} if token else {}
    proc = processes.start("remote", "worker", APP, "--server", url, env=env)
    assert proc.wait(30) == 2
    lines = processes.log("remote").splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"fencepost worker: {url} refused the token: ")
    assert says in lines[0]
    assert "'work' scope" in lines[0]


def test_an_idle_remote_worker_logs_no_http_requests(processes: Processes, tmp_path: Path) -> None:
    url = _service(processes, tmp_path)
    proc = processes.start(
        "remote", "worker", APP, "--server", url, "--poll-interval", "0.1",
        env={"FENCEPOST_TOKEN": TOKEN},
    )  # fmt: skip
    wait_until(lambda: " started: " in processes.log("remote"), 20, "the remote worker's start")
    time.sleep(2.0)  # about 20 claims over HTTP while idle
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    lines = processes.log("remote").splitlines()
    assert not [line for line in lines if "httpx" in line or "HTTP Request" in line], lines
    # Only the worker's own start, signal and stop lines: nothing per request.
    info = [line.split(" INFO ", 1)[1] for line in lines if " INFO " in line]
    assert len(info) == 3, lines
    assert " started: " in info[0]
    assert f"store {url}" in info[0]
    assert info[1].startswith("fencepost.worker SIGTERM: ")
    assert " stopped: " in info[2]


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("tests.integration._broken_app", "importing 'tests.integration._broken_app' failed: "
         "No module named 'nonexistent_dep'"),
        ("no_such_module_here", "no module 'no_such_module_here' in"),
    ],
    ids=["missing-dependency", "missing-module"],
)  # fmt: skip
def test_an_app_that_cannot_be_imported_is_named_with_what_is_missing(
    module: str, says: str, tmp_path: Path
) -> None:
    from tests.integration.test_worker_processes import FENCEPOST, ROOT

    run = subprocess.run(
        [FENCEPOST, "worker", f"{module}:app", "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("fencepost worker: app: ")
    assert says in run.stderr

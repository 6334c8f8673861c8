"""What a worker and a service tell an operator, seen from outside real processes.

* ``fencepost worker --metrics-port`` serves Prometheus metrics: per-job attempt
  duration histograms by outcome, attempts started, leases claimed, and the
  service's process counters under the service's names;
* ``app.run_worker()`` logs as ``fencepost worker`` does, unless the application
  configured logging itself;
* ``fencepost serve --log-format json`` writes nothing but JSON lines on stderr,
  uvicorn's own lines included.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import fencepost
from fencepost import State
from tests.integration._observed_app import APP_FORMAT
from tests.integration.test_service_processes import free_port, wait_ready
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._observed_app:app"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


class Started:
    """Processes a test started, each writing stderr to a file; none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen[bytes]:
        with (self.tmp_path / f"{name}.err").open("wb") as err:
            proc = subprocess.Popen(
                argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env={**ENV, **env}
            )
        self.procs.append(proc)
        return proc

    def stderr(self, name: str) -> str:
        return (self.tmp_path / f"{name}.err").read_text()

    def stop(self, proc: subprocess.Popen[bytes]) -> int:
        proc.send_signal(signal.SIGTERM)
        return proc.wait(30)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    procs = Started(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample ``url`` serves, by (sample name, sorted labels)."""
    text = httpx.get(url, timeout=5).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def metrics_url(started: Started, name: str, proc: subprocess.Popen[bytes]) -> str:
    def logged() -> str | None:
        assert proc.poll() is None, f"the worker exited: {started.stderr(name)}"
        found = re.search(r"serving metrics at (http://\S+)", started.stderr(name))
        return found.group(1) if found else None

    url: str = wait_until(logged, 30, "the metrics line")
    return url


def test_a_worker_s_metrics_count_a_success_and_a_failure(started: Started, shared_db: str) -> None:
    with fencepost.connect(shared_db) as store:
        good = store.submit("ok", {"n": 7}).id
        bad = store.submit("boom", max_attempts=1).id
        proc = started.start(
            "worker",
            [FENCEPOST, "worker", APP, "--db", shared_db, "--metrics-port", "0"],
        )
        url = metrics_url(started, "worker", proc)
        assert url.startswith("http://127.0.0.1:")  # the default host: loopback only
        wait_until(lambda: store.get(good).state is State.SUCCEEDED, 30, "the success")
        wait_until(lambda: store.get(bad).state is State.FAILED, 30, "the failure")

        def written() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
            samples = scrape(url)
            done = ("fencepost_attempts_total", (("outcome", "failed"),))
            return samples if samples.get(done) == 1 else None

        samples = wait_until(written, 10, "the failure counted")
        assert started.stop(proc) == 0

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    count = "fencepost_attempt_duration_seconds_count"
    assert value(count, job="ok", outcome="succeeded") == 1
    assert value(count, job="boom", outcome="failed") == 1
    assert value(count, job="ok", outcome="failed") == 0  # every series from the start
    # ok sleeps 10 ms: its one observation is above 5 ms and within the 10 s bucket.
    bucket = "fencepost_attempt_duration_seconds_bucket"
    assert value(bucket, job="ok", outcome="succeeded", le="0.005") == 0
    assert value(bucket, job="ok", outcome="succeeded", le="10.0") == 1
    assert value("fencepost_attempt_duration_seconds_sum", job="ok", outcome="succeeded") >= 0.01
    assert value("fencepost_attempts_started_total", job="ok") == 1
    assert value("fencepost_attempts_started_total", job="boom") == 1
    assert value("fencepost_leases_claimed_total", job="ok") == 1
    # The service's process counters, under the service's names and labels.
    assert value("fencepost_attempts_total", outcome="succeeded") == 1
    assert value("fencepost_attempts_total", outcome="failed") == 1
    assert value("fencepost_stale_refused_total", verb="complete_many") == 0
    assert value("fencepost_claim_lateness_seconds_count") == 2
    # Occupancy, read at the scrape: nothing held once both are done.
    assert value("fencepost_worker_handlers") == 8
    assert value("fencepost_worker_handlers_busy") == 0
    assert value("fencepost_worker_buffered") == 0
    assert value("fencepost_worker_store_up") == 1


def test_a_worker_without_metrics_port_listens_nowhere_and_a_taken_port_is_one_line(
    started: Started, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    with fencepost.connect(db) as store:
        eid = store.submit("ok").id
        plain = started.start("plain", [FENCEPOST, "worker", APP, "--db", db])
        wait_until(lambda: store.get(eid).state is State.SUCCEEDED, 30, "the job")
        assert "serving metrics" not in started.stderr("plain")
        assert started.stop(plain) == 0
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        run = subprocess.run(
            [FENCEPOST, "worker", APP, "--db", db, "--metrics-port", str(port)],
            cwd=ROOT,
            env=ENV,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("fencepost worker: metrics-port: cannot listen on 127.0.0.1:")


def test_app_run_worker_logs_like_fencepost_worker(started: Started, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    script = [sys.executable, "-m", "tests.integration._observed_app"]
    with fencepost.connect(db) as store:
        eid = store.submit("boom", max_attempts=1).id
        proc = started.start("plain", script, OBSERVED_DB=db)
        wait_until(lambda: store.get(eid).state is State.FAILED, 30, "the failure")
        wait_until(lambda: "dead-lettered" in started.stderr("plain"), 10, "the dead letter")
        assert started.stop(proc) == 0
        text = started.stderr("plain")
        # The format `fencepost worker` logs in: time, level, logger, message.
        line = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (INFO|WARNING|ERROR) fencepost\.worker "
        assert re.search(line + r"worker observed started: jobs ", text, re.M), text
        assert re.search(line + rf"execution {eid} \(job boom\) attempt 1 of 1 failed", text, re.M)
        assert re.search(line + r"worker observed stopped: ", text, re.M)

        # An application that configured logging itself keeps its own format.
        again = store.submit("boom", max_attempts=1).id
        proc = started.start("basic", [*script, "basic"], OBSERVED_DB=db)
        wait_until(lambda: store.get(again).state is State.FAILED, 30, "the failure")
        wait_until(lambda: "dead-lettered" in started.stderr("basic"), 10, "the dead letter")
        assert started.stop(proc) == 0
    text = started.stderr("basic")
    own = APP_FORMAT.partition(" ")[0]
    assert re.search(rf"^{own} INFO fencepost\.worker: worker observed started", text, re.M)
    assert not re.search(line, text, re.M), "the worker replaced the application's logging"


def test_app_run_worker_serves_metrics_when_asked(started: Started, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    script = [sys.executable, "-m", "tests.integration._observed_app"]
    port = free_port()
    with fencepost.connect(db) as store:
        eid = store.submit("ok").id
        proc = started.start("app", script, OBSERVED_DB=db, OBSERVED_METRICS_PORT=str(port))
        wait_until(lambda: store.get(eid).state is State.SUCCEEDED, 30, "the job")
        url = f"http://127.0.0.1:{port}/metrics"
        done = (
            "fencepost_attempt_duration_seconds_count",
            (("job", "ok"), ("outcome", "succeeded")),
        )
        samples = wait_until(lambda: (s := scrape(url)).get(done) and s, 10, "the success counted")
        assert started.stop(proc) == 0
    assert samples[("fencepost_attempts_total", (("outcome", "succeeded"),))] == 1


def test_serve_log_format_json_writes_only_json_lines(started: Started, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = started.start(
        "serve",
        [
            *(FENCEPOST, "serve", APP, "--db", db, "--port", str(port)),
            *("--log-format", "json", "--log-level", "INFO"),
        ],
    )
    wait_ready(base, proc)
    with fencepost.connect(db) as store:
        bad = store.submit("boom", max_attempts=1).id
        wait_until(lambda: store.get(bad).state is State.FAILED, 30, "the failure")
    assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    assert httpx.get(f"{base}/no-such-page", timeout=5).status_code == 404
    assert started.stop(proc) == 0
    lines = started.stderr("serve").splitlines()
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"a line of serve's stderr is not JSON: {line!r}")
    loggers = {e["logger"] for e in entries}
    assert {"uvicorn.error", "uvicorn.access", "fencepost.worker"} <= loggers, loggers
    access = [e["message"] for e in entries if e["logger"] == "uvicorn.access"]
    assert any("GET /no-such-page" in m and "404" in m for m in access), access
    failure = next(e for e in entries if "attempt 1 of 1 failed" in e["message"])
    assert failure["execution_id"] == bad
    assert "RuntimeError: boom, as asked" in failure["error"]

"""``fencepost serve`` and ``fencepost worker --server`` as real processes on real sockets."""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import fencepost
from fencepost.client import Client
from fencepost.domain.states import Event, State
from tests.integration._audit import refused_completion
from tests.integration.test_worker_processes import running_under, wait_until, write_definition

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"
TOKEN = "remote-worker-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Processes:
    """Starts ``fencepost`` processes and makes sure none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with (self.tmp_path / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                [FENCEPOST, *args],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            )
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the service exited"
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready after {timeout}s")


def test_remote_workers_drain_2000_executions_without_duplicates(
    shared_db: str, processes: Processes
) -> None:
    """Two services on one database, a remote worker on each: every execution runs once."""
    tokens = {"FENCEPOST_TOKENS": f"{TOKEN}=work,submit,read"}
    urls = []
    for name in ("serve-1", "serve-2"):
        port = free_port()
        urls.append(f"http://127.0.0.1:{port}")
        service = processes.start(
            name, "serve", APP, "--db", shared_db, "--port", str(port), "--workers", "0",
            env=tokens,
        )  # fmt: skip
        wait_ready(urls[-1], service)
    # Both workers are polling before there is any work, and neither may hold more than
    # its 16 handlers' worth: otherwise the first to start could drain all 2,000 before
    # the other made its first claim (it did, under load).
    owners = ("remote-1", "remote-2")
    remote = ("worker", APP, "--jobs", "lease-echo", "--concurrency", "16", "--prefetch", "0")
    workers = [
        processes.start(
            owner, *remote, "--server", url, "--owner", owner, env={"FENCEPOST_TOKEN": TOKEN}
        )
        for owner, url in zip(owners, urls, strict=True)
    ]
    store = fencepost.connect(shared_db)
    try:
        deadline = time.monotonic() + 60
        while not set(owners) <= {node.id for node in store.nodes()}:
            for proc in workers:
                assert proc.poll() is None, "a remote worker exited"
            assert time.monotonic() < deadline, "the remote workers did not register in 60 s"
            time.sleep(0.1)
        ids = []
        for start in range(0, 2000, 500):
            with Client(urls[start // 500 % 2], token=TOKEN) as client:
                ids += [e.id for e in client.submit_many([{"job": "lease-echo"}] * 500)]
        assert len(set(ids)) == 2000
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if store.stats().by_state[State.SUCCEEDED] == 2000:
                break
            for proc in workers:
                assert proc.poll() is None, "a remote worker exited"
            time.sleep(0.25)
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc, owner in zip(workers, owners, strict=True):
            assert proc.wait(30) == 0, processes.log(owner)

        executions = [store.get(i) for i in ids]
        assert collections.Counter(e.state for e in executions) == {State.SUCCEEDED: 2000}
        # Each ran once: one claim, epoch 1, its result names the lease that produced it.
        assert {e.epoch for e in executions} == {1}
        by_owner = collections.Counter(e.result["owner"] for e in executions)  # type: ignore[index]
        assert set(by_owner) == set(owners)  # each service served its worker
        for execution in executions[::50]:
            events = [t.event for t in store.transitions(execution.id)]
            assert events == [Event.SUBMITTED, Event.CLAIMED, Event.COMPLETED]
        assert store.stats().stale_refused == 0
    finally:
        store.close()
    for name, proc in zip(("serve-1", "serve-2"), processes.procs, strict=False):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, processes.log(name)


def test_serve_refuses_a_public_bind_without_tokens(processes: Processes, tmp_path: Path) -> None:
    db = tmp_path / "never.db"
    proc = processes.start("public", "serve", "--db", f"sqlite:///{db}", "--host", "0.0.0.0")
    assert proc.wait(20) == 2
    assert "host" in processes.log("public")
    assert "tokens" in processes.log("public")
    assert not db.exists()


def test_a_public_bind_with_tokens_requires_them(processes: Processes, tmp_path: Path) -> None:
    port = free_port()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - name: ops\n    token: {TOKEN}\n    scopes: [read]\n")
    proc = processes.start(
        "public",
        "serve",
        "--db",
        f"sqlite:///{tmp_path / 'public.db'}",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--tokens",
        str(tokens),
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    assert httpx.get(f"{url}/executions").status_code == 401
    authorized = httpx.get(f"{url}/executions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert authorized.status_code == 200
    refused = httpx.post(
        f"{url}/executions",
        json={"job": "x"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert refused.status_code == 403
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 0, processes.log("public")


def test_without_tokens_only_loopback_host_names_are_served(
    processes: Processes, tmp_path: Path
) -> None:
    """A page that rebinds its own name to 127.0.0.1 (DNS rebinding) is turned away."""
    port = free_port()
    proc = processes.start(
        "local", "serve", "--db", f"sqlite:///{tmp_path / 'local.db'}", "--port", str(port)
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    assert httpx.get(f"{url}/executions").status_code == 200
    assert httpx.get(f"{url}/executions", headers={"Host": f"localhost:{port}"}).status_code == 200
    rebound = httpx.post(
        f"{url}/executions", json={"job": "x"}, headers={"Host": f"evil.example:{port}"}
    )
    assert rebound.status_code == 400
    assert httpx.get(f"{url}/executions").json()["items"] == []
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, processes.log("local")


#: Marks each run's start with a file STARTED/started-EPOCH (STARTED: a directory of the test's).
SLOW = """
name: slow
version: 1
lease_ttl: 2
timeout: 60
retry: {max_attempts: 3, base_delay: 0.1, max_delay: 0.1}
run:
  command:
    - python
    - -c
    - "import os, pathlib, sys, time; epoch = os.environ['FENCEPOST_EPOCH'];
       pathlib.Path(sys.argv[1], 'started-' + epoch).touch();
       time.sleep(3); print('epoch', epoch)"
    - STARTED
"""


def test_a_frozen_remote_worker_s_completion_is_refused_over_http(
    processes: Processes, tmp_path: Path
) -> None:
    """The lease timeline through the worker protocol, with real processes and SIGSTOP."""
    db = f"sqlite:///{tmp_path / 'stale.db'}"
    started = tmp_path / "started"
    started.mkdir()
    definitions = write_definition(tmp_path / "defs", "slow", SLOW.replace("STARTED", str(started)))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = processes.start(
        "serve", "serve", "--db", db, "--port", str(port), "--workers", "0",
        "--definitions", str(definitions),
    )  # fmt: skip
    wait_ready(url, service)
    remote = ("worker", "--server", url, "--definitions", str(definitions), "--concurrency", "1")
    store = fencepost.connect(db)
    try:
        a = processes.start("worker-a", *remote, "--owner", "worker-a")
        eid = store.submit("slow", version=1).id
        wait_until(lambda: running_under(store, eid, "worker-a", 1), 15, "A to claim")
        # Frozen once its command runs: a lease still in A's prefetch buffer when it
        # resumes, half its length gone, is handed back unstarted (a release refused),
        # and no completion of A's ever comes.
        wait_until((started / "started-1").exists, 15, "A's command to start")
        a.send_signal(signal.SIGSTOP)  # A holds the lease and stops answering
        processes.start("worker-b", *remote, "--owner", "worker-b")
        done = wait_until(
            lambda: store.get(eid).state is State.SUCCEEDED and store.get(eid), 20, "B to finish"
        )
        assert (done.epoch, done.result) == (2, "epoch 2")
        a.send_signal(signal.SIGCONT)  # A's command finishes; its completion arrives late

        refusal = wait_until(
            lambda: refused_completion(store, eid), 15, "A's completion to be refused"
        )
        assert (refusal.actor, refusal.epoch) == ("worker-a", 1)
        final = store.get(eid)
        assert (final.state, final.epoch, final.result) == (State.SUCCEEDED, 2, "epoch 2")
        # A logs the refusal once the service's answer reaches it: after the service wrote
        # it to the audit, so it may not be in A's log yet when the audit has it.
        wait_until(
            lambda: "complete refused" in processes.log("worker-a"), 15, "A to log the refusal"
        )
    finally:
        store.close()


def test_a_remote_worker_rides_out_a_killed_service(processes: Processes, tmp_path: Path) -> None:
    """SIGKILL the service mid-run and start it again: every execution completes exactly once."""
    db = f"sqlite:///{tmp_path / 'outage.db'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = ("serve", APP, "--db", db, "--port", str(port), "--workers", "0")
    service = processes.start("serve-1", *serve)
    wait_ready(url, service)
    store = fencepost.connect(db)
    try:
        ids = [e.id for e in store.submit_many([{"job": "lease-echo"}] * 1000)]
        worker = processes.start(
            "remote", "worker", APP, "--server", url, "--owner", "remote", "--jobs", "lease-echo",
            "--concurrency", "8",
        )  # fmt: skip
        wait_until(lambda: store.stats().by_state[State.SUCCEEDED] >= 200, 30, "200 to finish")
        service.kill()  # no shutdown: requests in flight are cut off
        service.wait(10)
        time.sleep(1.0)
        wait_ready(url, processes.start("serve-2", *serve))
        wait_until(
            lambda: store.stats().by_state[State.SUCCEEDED] == 1000, 60, "all 1,000 to finish"
        )
        assert worker.poll() is None, processes.log("remote")
        for execution in (store.get(i) for i in ids):
            completed = [t for t in store.transitions(execution.id) if t.event is Event.COMPLETED]
            # One accepted result, from the lease that holds it now.
            assert len(completed) == 1
            assert execution.result == {"owner": "remote", "epoch": execution.epoch}
        assert "unreachable" in processes.log("remote")  # it noticed, and resumed by itself
    finally:
        store.close()

"""Long-polling ``GET /executions/{id}?wait=`` and ``Client.wait`` against a real service."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.wire.executions import MAX_WAIT_HEADER
from tests.api.support import TestClient, assert_problem
from tests.integration.test_service_processes import Processes, free_port, wait_ready


def _finish_later(seconds: float, store: Store, execution_id: str) -> threading.Thread:
    (lease,) = store.claim("w", ids=[execution_id])
    thread = threading.Timer(seconds, lambda: store.complete(lease, {"done": True}))
    thread.start()
    return thread


def test_a_long_poll_returns_early_when_the_execution_finishes(
    client: TestClient, store: Store
) -> None:
    execution = store.submit("work")
    _finish_later(0.3, store, execution.id)
    started = time.monotonic()
    response = client.get(f"/executions/{execution.id}", params={"wait": "20"})
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "SUCCEEDED"
    assert response.json()["result"] == {"done": True}
    assert elapsed < 5, "well under wait"
    assert response.headers[MAX_WAIT_HEADER] == "30"
    tag = response.headers["etag"]
    again = client.get(f"/executions/{execution.id}", headers={"If-None-Match": tag})
    assert again.status_code == 304


def test_a_long_poll_answers_the_current_state_after_wait(client: TestClient, store: Store) -> None:
    execution = store.submit("work", delay=3600)
    started = time.monotonic()
    response = client.get(f"/executions/{execution.id}", params={"wait": "0.6"})
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json()["state"] == "SCHEDULED"
    assert 0.6 <= elapsed < 3
    tag = response.headers["etag"]
    unchanged = client.get(
        f"/executions/{execution.id}", params={"wait": "0.1"}, headers={"If-None-Match": tag}
    )
    assert unchanged.status_code == 304
    assert unchanged.headers["etag"] == tag


def test_a_long_poll_on_a_finished_execution_answers_at_once(
    client: TestClient, store: Store
) -> None:
    execution = store.submit("work")
    store.cancel(execution.id)
    started = time.monotonic()
    response = client.get(f"/executions/{execution.id}", params={"wait": "30"})
    assert response.json()["state"] == "CANCELLED"
    assert time.monotonic() - started < 2


def test_a_long_poll_of_an_unknown_id_is_404_at_once(client: TestClient) -> None:
    for unknown in ("01a20000-0000-7000-8000-000000000000", "nope"):
        started = time.monotonic()
        response = client.get(f"/executions/{unknown}", params={"wait": "30"})
        assert_problem(response, 404, "not-found")
        assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "wait",
    [
        "-1",
        "-0.5",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "1e400",
        "31",
        "1e9",
        "abc",
        "",
        " ",
        "1s",
        "\x00",
        "9" * 5000,
        "0x10",
    ],
)
def test_hostile_waits_are_422_naming_wait(client: TestClient, store: Store, wait: str) -> None:
    execution = store.submit("work")
    response = client.get(f"/executions/{execution.id}", params={"wait": wait})
    assert_problem(response, 422, "validation", field="wait")


def test_wait_zero_and_absent_are_a_plain_read(client: TestClient, store: Store) -> None:
    execution = store.submit("work", delay=3600)
    for params in ({}, {"wait": "0"}):
        started = time.monotonic()
        response = client.get(f"/executions/{execution.id}", params=params)
        assert response.json()["state"] == "SCHEDULED"
        # Not held as a long-poll would be (up to the app's bound): a busy machine has
        # stalled a plain read in process for 7 s, so the bound, not 2 s, is the line.
        held = client.app.state.max_wait
        assert time.monotonic() - started < held / 2, f"held like a long-poll of {held} s"


def test_max_wait_is_a_setting(store: Store) -> None:
    with TestClient(create_app(store, max_wait=2)) as client:
        execution = store.submit("work", delay=3600)
        response = client.get(f"/executions/{execution.id}", params={"wait": "2.5"})
        assert_problem(response, 422, "validation", field="wait")
        assert "at most 2 seconds" in response.json()["detail"]
        ok = client.get(f"/executions/{execution.id}", params={"wait": "0.2"})
        assert ok.status_code == 200
        assert ok.headers[MAX_WAIT_HEADER] == "2"
    for bad in (-1, float("nan"), float("inf"), "30"):
        with pytest.raises(ValidationError) as raised:
            create_app(store, max_wait=bad)  # type: ignore[arg-type]
        assert raised.value.field == "max_wait"


def test_many_long_polls_do_not_hold_a_thread_each(store: Store) -> None:
    """More concurrent long-polls than the thread pool has threads (40) all return."""
    executions = store.submit_many([{"job": "work"} for _ in range(60)])
    app = create_app(store)
    answers: list[Any] = []
    with TestClient(app) as client:

        def poll(execution_id: str) -> None:
            answers.append(client.get(f"/executions/{execution_id}", params={"wait": "20"}))

        threads = [threading.Thread(target=poll, args=(e.id,)) for e in executions]
        for t in threads:
            t.start()
        time.sleep(1.0)
        # A plain read still gets a pool thread while 60 long-polls are waiting.
        started = time.monotonic()
        assert client.get(f"/executions/{executions[0].id}").status_code == 200
        assert time.monotonic() - started < 5
        leases = store.claim("w", limit=60)
        store.complete_many([(lease, None) for lease in leases])
        for t in threads:
            t.join(30)
    assert [a.json()["state"] for a in answers] == ["SUCCEEDED"] * 60


# -- Client.wait against a real `fencepost serve` -----------------------------------------


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A ``fencepost serve`` on a SQLite file, with a 1 s max_wait: (its URL, the store URL)."""
    processes = Processes(tmp_path)
    db = f"sqlite:///{tmp_path / 'served.db'}"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = ("serve", "--db", db, "--port", str(port), "--workers", "0", "--max-wait", "1")
    try:
        wait_ready(url, processes.start("serve", *args))
        yield url, db
    finally:
        processes.close()


COMPLETER = """
import sys, time, fencepost
time.sleep(float(sys.argv[3]))
with fencepost.connect(sys.argv[1]) as store:
    (lease,) = store.claim("other-process", ids=[sys.argv[2]])
    store.complete(lease, {"by": "another process"})
"""


def test_client_wait_end_to_end(service: tuple[str, str]) -> None:
    url, db = service
    with Client(url) as client:
        execution = client.submit("work")
        # Completed by another process after 2.5 s: three slices of the service's 1 s.
        completer = subprocess.Popen([sys.executable, "-c", COMPLETER, db, execution.id, "2.5"])
        try:
            started = time.monotonic()
            found = client.wait(execution.id, timeout=30)
            elapsed = time.monotonic() - started
        finally:
            completer.wait(30)
        assert found.state is State.SUCCEEDED
        assert found.result == {"by": "another process"}
        assert 2.0 <= elapsed < 10
        assert client.wait(execution.id, timeout=0).state is State.SUCCEEDED


def test_client_wait_times_out_and_names_bad_arguments(service: tuple[str, str]) -> None:
    url, _ = service
    with Client(url) as client:
        execution = client.submit("work", delay=3600)
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=execution.id):
            client.wait(execution.id, timeout=1.5)
        assert 1.5 <= time.monotonic() - started < 5
        with pytest.raises(NotFound):
            client.wait("01a20000-0000-7000-8000-000000000000", timeout=5)
        with pytest.raises(NotFound):
            client.wait("nope", timeout=5)
        for bad in (-1, float("nan"), float("inf"), "5", True):
            with pytest.raises(ValidationError) as raised:
                client.wait(execution.id, timeout=bad)
            assert raised.value.field == "timeout"
        with pytest.raises(ValidationError) as raised:
            client.wait(5, timeout=1)  # type: ignore[arg-type]
        assert raised.value.field == "execution_id"


def test_client_wait_and_store_wait_agree(tmp_path: Path, service: tuple[str, str]) -> None:
    url, db = service
    with Client(url) as client, fencepost.connect(db) as store:
        execution = client.submit("work")
        _finish_later(0.5, store, execution.id)
        remote = client.wait(execution.id, timeout=20)
        local = store.wait(execution.id, timeout=0)
        assert remote == local

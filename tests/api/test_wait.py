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


def _warm(client: TestClient, execution_id: str) -> None:
    """One plain read first, so that what a test times is its own request alone.

    An app's first request builds its route table (FastAPI prepares every route's
    dependencies and models then): a tenth of a second on a quiet machine, seconds on
    a loaded one, and no part of how long a long-poll is held.
    """
    assert client.get(f"/executions/{execution_id}").status_code == 200


def _until_parked(store: Store, count: int = 1) -> None:
    """Return once ``count`` executions are waited for (long-polls parked on the watcher)."""
    watcher = store._waits()
    assert watcher is not None
    deadline = time.monotonic() + 30
    while watcher.watched() < count:
        assert time.monotonic() < deadline, f"{watcher.watched()} of {count} long-polls parked"
        time.sleep(0.005)


def test_a_long_poll_returns_early_when_the_execution_finishes(
    client: TestClient, store: Store
) -> None:
    execution = store.submit("work")
    _warm(client, execution.id)
    (lease,) = store.claim("w", ids=[execution.id])

    def finish_once_parked() -> None:
        # Completed only once the poll waits: it must be woken, not find it finished.
        _until_parked(store)
        store.complete(lease, {"done": True})

    finisher = threading.Thread(target=finish_once_parked)
    finisher.start()
    wait = 20
    started = time.monotonic()
    response = client.get(f"/executions/{execution.id}", params={"wait": str(wait)})
    elapsed = time.monotonic() - started
    finisher.join(30)
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "SUCCEEDED"
    assert response.json()["result"] == {"done": True}
    # Answered when woken: held to its wait it would have taken 20 s.
    assert elapsed < wait / 2, f"held {elapsed:.1f} s of a {wait} s wait"
    assert response.headers[MAX_WAIT_HEADER] == "30"
    tag = response.headers["etag"]
    again = client.get(f"/executions/{execution.id}", headers={"If-None-Match": tag})
    assert again.status_code == 304


def test_a_long_poll_answers_the_current_state_after_wait(client: TestClient, store: Store) -> None:
    execution = store.submit("work", delay=3600)
    _warm(client, execution.id)
    started = time.monotonic()
    response = client.get(f"/executions/{execution.id}", params={"wait": "0.6"})
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json()["state"] == "SCHEDULED"
    # Held its 0.6 s, not the service's bound (30 s).
    held = client.app.state.max_wait
    assert 0.6 <= elapsed < held / 2, f"held {elapsed:.1f} s"
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
    _warm(client, execution.id)
    watcher = store._waits()
    assert watcher is not None
    looked = watcher.lookups
    wait = client.app.state.max_wait
    started = time.monotonic()
    response = client.get(f"/executions/{execution.id}", params={"wait": f"{wait:g}"})
    elapsed = time.monotonic() - started
    assert response.json()["state"] == "CANCELLED"
    # At once: the watcher's first look answered it (a poll left waiting would be
    # looked at again at the next poll or recheck), and the wait was not held.
    assert watcher.lookups - looked == 1
    assert elapsed < wait / 2, f"held {elapsed:.1f} s of a {wait:g} s wait"


def test_a_long_poll_of_an_unknown_id_is_404_at_once(client: TestClient, store: Store) -> None:
    _warm(client, store.submit("work").id)
    watcher = store._waits()
    assert watcher is not None
    wait = client.app.state.max_wait
    for unknown in ("01a20000-0000-7000-8000-000000000000", "nope"):
        looked = watcher.lookups
        started = time.monotonic()
        response = client.get(f"/executions/{unknown}", params={"wait": f"{wait:g}"})
        elapsed = time.monotonic() - started
        assert_problem(response, 404, "not-found")
        # At most one look (none for an id no execution can have), and no wait held.
        assert watcher.lookups - looked <= 1
        assert elapsed < wait / 2, f"held {elapsed:.1f} s of a {wait:g} s wait"


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
    _warm(client, execution.id)
    watcher = store._waits()
    assert watcher is not None
    looked = watcher.lookups
    for params in ({}, {"wait": "0"}):
        started = time.monotonic()
        response = client.get(f"/executions/{execution.id}", params=params)
        assert response.json()["state"] == "SCHEDULED"
        # Not held as a long-poll would be (up to the app's bound), and never handed to
        # the watcher: a plain read is one read.
        held = client.app.state.max_wait
        assert time.monotonic() - started < held / 2, f"held like a long-poll of {held} s"
    assert watcher.lookups == looked
    assert watcher.watched() == 0


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
        _until_parked(store, 60)
        # A plain read still gets a pool thread while 60 long-polls are waiting: were
        # they holding the pool's 40, it would wait for their 20 s to end.
        started = time.monotonic()
        assert client.get(f"/executions/{executions[0].id}").status_code == 200
        elapsed = time.monotonic() - started
        assert elapsed < 10, f"a plain read waited {elapsed:.1f} s beside the long-polls"
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
    print(time.monotonic())  # when it completed, on the clock every process shares
"""


def test_client_wait_end_to_end(service: tuple[str, str]) -> None:
    url, db = service
    with Client(url) as client:
        execution = client.submit("work")
        # Completed by another process after 2.5 s: three slices of the service's 1 s.
        completer = subprocess.Popen(
            [sys.executable, "-c", COMPLETER, db, execution.id, "2.5"], stdout=subprocess.PIPE
        )
        try:
            started = time.monotonic()
            timeout = 30
            found = client.wait(execution.id, timeout=timeout)
            woken = time.monotonic()
        finally:
            out, _ = completer.communicate(timeout=30)
        assert found.state is State.SUCCEEDED
        assert found.result == {"by": "another process"}
        assert woken - started >= 2.5  # the completer slept that long before it completed
        # Answered once the completion landed (the completer's start-up, slow on a busy
        # machine, is not the wait's), not at the wait's timeout.
        late = woken - float(out)
        assert late < timeout / 2, f"returned {late:.1f} s after the completion"
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

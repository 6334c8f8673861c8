"""The HTTP clients' retries, through a proxy the test controls, against a real service.

The proxy (``_http_proxy``) stands between a ``Client`` (or ``AsyncClient``) and a
``fencepost serve`` on a SQLite file: it loses the answer of a request the service
carried out, or answers 429 itself. What the service stored is read from the file.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import fencepost
from fencepost import StoreUnavailable
from fencepost.client import AsyncClient, Client
from tests.integration._http_proxy import Proxy, Rule, proxy
from tests.integration.test_service_processes import TOKEN, free_port, wait_ready

FENCEPOST = Path(sys.executable).with_name("fencepost")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """A ``fencepost serve`` on a SQLite file: its port, and the file's URL."""
    directory = tmp_path_factory.mktemp("retries")
    db = f"sqlite:///{directory / 'service.db'}"
    port = free_port()
    with (directory / "serve.log").open("wb") as log:
        serve = subprocess.Popen(
            [str(FENCEPOST), "serve", "--db", db, "--port", str(port), "--workers", "0"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "FENCEPOST_TOKENS": f"{TOKEN}=submit,read"},
        )
    try:
        wait_ready(f"http://127.0.0.1:{port}", serve)
        yield port, db
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()


@pytest.fixture
def front(service: tuple[int, str]) -> Iterator[Proxy]:
    with proxy(service[0]) as running:
        yield running


def _stored(db: str, job: str) -> int:
    with fencepost.connect(db) as store:
        return len(store.query(job=job, limit=100).items)


def test_a_keyed_submit_whose_answer_is_lost_is_stored_once(
    front: Proxy, service: tuple[int, str]
) -> None:
    front.rules.append(Rule("POST", "/executions", "drop"))
    with Client(front.url, token=TOKEN) as client:
        execution = client.submit("lost-answer", {"n": 1}, idempotency_key="order-1")
    assert len(front.requests("POST", "/executions")) == 2, "sent again after the reset"
    assert _stored(service[1], "lost-answer") == 1
    with fencepost.connect(service[1]) as store:
        assert store.get(execution.id).inputs == {"n": 1}


def test_an_unkeyed_submit_whose_answer_is_lost_is_not_sent_again(
    front: Proxy, service: tuple[int, str]
) -> None:
    front.rules.append(Rule("POST", "/executions", "drop"))
    with Client(front.url, token=TOKEN) as client, pytest.raises(StoreUnavailable):
        client.submit("unkeyed-lost")
    assert len(front.requests("POST", "/executions")) == 1
    assert _stored(service[1], "unkeyed-lost") == 1, "carried out once, never twice"


def test_a_429_s_retry_after_is_waited_out(front: Proxy) -> None:
    with Client(front.url, token=TOKEN) as client:
        execution = client.submit("held-back", idempotency_key="held-1")
        front.rules.append(Rule("GET", "/executions/", "answer", status=429,
                                headers={"Retry-After": "1"}))  # fmt: skip
        assert client.get(execution.id).id == execution.id
    first, second = front.requests("GET", f"/executions/{execution.id}")
    assert second.at - first.at >= 1.0, "the second try came before Retry-After"


def test_retry_timeout_0_gives_the_first_answer(front: Proxy) -> None:
    front.rules.append(
        Rule("GET", "/executions", "answer", status=429, headers={"Retry-After": "1"})
    )
    with (
        Client(front.url, token=TOKEN, retry_timeout=0) as client,
        pytest.raises(StoreUnavailable) as held,
    ):
        client.query()
    assert held.value.status == 429  # type: ignore[attr-defined]
    assert len(front.requests("GET", "/executions")) == 1
    # A Retry-After past the deadline is not waited for either: the answer at once.
    front.rules.append(Rule("GET", "/executions", "answer", status=503,
                            headers={"Retry-After": "120"}))  # fmt: skip
    started = time.monotonic()
    with Client(front.url, token=TOKEN, retry_timeout=5) as client, pytest.raises(StoreUnavailable):
        client.query()
    assert time.monotonic() - started < 5


def test_the_async_client_retries_alike(front: Proxy, service: tuple[int, str]) -> None:
    async def scenario() -> tuple[str, str]:
        async with AsyncClient(front.url, token=TOKEN) as client:
            front.rules.append(Rule("POST", "/executions", "drop"))
            kept = await client.submit("async-lost", idempotency_key="async-1")
            front.rules.append(Rule("GET", "/executions/", "answer", status=429,
                                    headers={"Retry-After": "1"}))  # fmt: skip
            read = await client.get(kept.id)
            front.rules.append(Rule("POST", "/executions", "drop"))
            with pytest.raises(StoreUnavailable):
                await client.submit("async-unkeyed")
            return kept.id, read.id

    kept, read = asyncio.run(scenario())
    assert kept == read
    assert _stored(service[1], "async-lost") == 1
    assert _stored(service[1], "async-unkeyed") == 1
    first, second = front.requests("GET", f"/executions/{kept}")
    assert second.at - first.at >= 1.0
    posts = front.requests("POST", "/executions")
    assert len(posts) == 3, "the keyed submit twice, the unkeyed one once"

"""Which requests the HTTP clients send again, when, and for how long (client/retries.py).

The transport is httpx's MockTransport, which fails or answers as each test says;
the end-to-end cases (a real service behind a proxy) are in
tests/integration/test_client_retries.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from fencepost import StoreUnavailable, ValidationError
from fencepost.client import Client
from fencepost.client.retries import BACKOFF, Retrying, retry_after


def _client(handler: Callable[[httpx.Request], httpx.Response], **options: float) -> Client:
    http = httpx.Client(base_url="http://service", transport=httpx.MockTransport(handler))
    return Client("http://service", http=http, **options)  # type: ignore[arg-type]


def _failing(
    *outcomes: Exception | int,
) -> tuple[list[httpx.Request], Callable[..., httpx.Response]]:
    """A handler that raises or answers with each outcome in turn, then 404s; and its log."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        outcome = outcomes[len(seen) - 1] if len(seen) <= len(outcomes) else 404
        if isinstance(outcome, Exception):
            raise outcome
        return httpx.Response(outcome, json={"type": "about:blank", "detail": "test"})

    return seen, handler


def test_a_connect_error_is_retried_for_any_request_a_lost_answer_only_for_keyed_ones() -> None:
    refused = httpx.ConnectError("connection refused")
    seen, handler = _failing(refused, refused)
    with _client(handler) as client, pytest.raises(Exception, match="test"):
        client.submit("report")  # never sent twice: refused twice, then answered (404)
    assert len(seen) == 3
    seen, handler = _failing(httpx.ReadError("reset"))
    with _client(handler) as client, pytest.raises(StoreUnavailable):
        client.submit("report")  # may have been carried out: not sent again
    assert len(seen) == 1
    seen, handler = _failing(httpx.RemoteProtocolError("closed"), 503)
    with _client(handler) as client, pytest.raises(Exception, match="test"):
        client.submit("report", idempotency_key="k")
    assert len(seen) == 3
    assert {r.headers["Idempotency-Key"] for r in seen} == {"k"}


def test_the_worker_protocol_and_503s_of_unkeyed_writes_are_not_retried() -> None:
    seen, handler = _failing(httpx.ConnectError("refused"))
    with _client(handler) as client, pytest.raises(StoreUnavailable):
        client.claim("w")  # the worker has its own outage rule
    assert len(seen) == 1
    seen, handler = _failing(503)
    with _client(handler) as client, pytest.raises(StoreUnavailable):
        client.cancel("01890000-0000-7000-8000-000000000001")
    assert len(seen) == 1
    seen, handler = _failing(503, 429)
    with _client(handler) as client, pytest.raises(Exception, match="test"):
        client.stats()
    assert len(seen) == 3


def test_every_try_ends_within_retry_timeout() -> None:
    now = [0.0]
    retrying = Retrying("GET", {}, timeout=10.0, clock=lambda: now[0], rng=random.Random(7))
    pauses = []
    while (pause := retrying.after_answer(503, None)) is not None:
        assert 0 <= pause <= BACKOFF.cap(retrying.tries)
        pauses.append(pause)
        now[0] += pause
    assert now[0] <= 10.0
    assert len(pauses) >= 3
    retrying = Retrying("GET", {}, timeout=10.0, clock=lambda: 0.0)
    assert retrying.after_answer(429, "11") is None, "past the deadline: not waited for"
    assert retrying.after_answer(429, "9") == 9.0
    assert Retrying("GET", {}, timeout=0, clock=lambda: 0.0).after_answer(503, "1") is None


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after("3") == 3.0
    assert retry_after("Tue, 01 Dec 2026 12:00:02 GMT", lambda: now) == 2.0
    assert retry_after("Tue, 01 Dec 2026 11:00:00 GMT", lambda: now) == 0.0
    assert retry_after("soon") is None
    assert retry_after(None) is None


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "30", True])
def test_a_bad_retry_timeout_is_refused_naming_it(value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        Client("http://service", retry_timeout=value)  # type: ignore[arg-type]
    assert refused.value.field == "retry_timeout"

"""``GET /stats`` carries the window's error classes by name, and both clients read them
back as the store reports them, on every backend (the rules: the contract's reports
section, ``test_stats_count_each_error_class_by_its_name``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest

from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import StaleLease
from fencepost.domain.reports import Stats
from fencepost.domain.slo import ErrorClass
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient

pytestmark = pytest.mark.manual_clock

BASE = "http://testserver"


def _history(store: Store, clock: ManualClock) -> None:
    """A refused heartbeat, two refused completions, a timeout, a handler failure and a
    first claim 30 s late, all within the last minute at t=40."""
    store.submit("work", max_attempts=3)
    store.submit("slow", max_attempts=3)
    store.submit("late")
    (lease,) = store.claim("w", jobs=["work"], ttl=600)
    forged = replace(lease, epoch=99)  # a worker whose lease was replaced
    with pytest.raises(StaleLease):
        store.heartbeat(forged)
    for _ in range(2):
        with pytest.raises(StaleLease):
            store.complete(forged, "late")
    store.fail(lease, "boom", retry_in=600)
    (slow,) = store.claim("w", jobs=["slow"])
    store.fail(slow, "ran past 10s", timed_out=True, retry_in=600)
    clock.set(30)
    store.claim("w", jobs=["late"])
    clock.set(40)


EXPECTED = {
    "late_claim": 1,
    "renewal_failed": 1,
    "timed_out": 1,
    "handler_failed": 1,
    "stale_completion_refused": 2,
    "throttled": 0,
}


def test_get_stats_names_each_error_class(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    _history(store, clock)
    body = client.get("/stats", params={"window": 60}).json()
    assert body["errors"] == EXPECTED
    assert list(body["errors"]) == list(EXPECTED), "in the classes' order"
    assert (body["stale_refused"], body["lease_expiries"]) == (3, 0), "kept as they were"
    narrow = client.get("/stats", params={"window": 5}).json()["errors"]
    assert narrow == dict.fromkeys(EXPECTED, 0), "(35, 40]: nothing happened"


def test_the_clients_read_the_error_classes_back(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    _history(store, clock)
    expected = store.stats(window=60)
    assert {c.value: n for c, n in expected.errors.items()} == EXPECTED
    with Client(BASE, http=client) as remote:
        got = remote.stats(window=60)
    assert got == expected
    assert all(isinstance(c, ErrorClass) for c in got.errors)

    async def scenario() -> Stats:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app), base_url=BASE)
        async with AsyncClient(BASE, http=http) as aclient:
            return await aclient.stats(window=60)

    assert asyncio.run(scenario()) == expected


def test_openapi_declares_the_errors(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    errors = spec["components"]["schemas"]["Stats"]["properties"]["errors"]
    assert (errors["type"], errors["additionalProperties"]) == ("object", {"type": "integer"})

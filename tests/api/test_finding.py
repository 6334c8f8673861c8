"""``GET /executions`` by due time and attempt outcome, and the clients that pass them on.

The store's rules are the contract's (``fencepost.testing.contract.finding``); here:
the parameters reach it from the query string and from both clients, keyset pages keep
the filter, and every bad value is a 422 problem naming the parameter, on every backend.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Page
from fencepost.domain.states import AttemptOutcome
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock

BASE = "http://testserver"


def _timed_out(store: Store, job: str) -> str:
    """An execution whose one attempt timed out (its retry due at t=3600); its id."""
    made = store.submit(job, max_attempts=3)
    (lease,) = store.claim("w", ids=[made.id])
    store.fail(lease, "ran past its timeout", timed_out=True, retry_in=3600)
    return made.id


@pytest.fixture
def scene(store: Store, clock: ManualClock) -> dict[str, str]:
    """At t=100: ``early`` due at t=0, ``late`` due at t=50, ``slow-1`` and ``slow-2``
    timed out (their retries due at t=3600), ``done`` succeeded (due at t=0)."""
    made = {
        "early": store.submit("a", execute_at=at(0)).id,
        "late": store.submit("a", execute_at=at(50)).id,
        "slow-1": _timed_out(store, "b"),
        "slow-2": _timed_out(store, "b"),
    }
    done = store.submit("c")
    store.complete(store.claim("w", ids=[done.id])[0], "ok")
    made["done"] = done.id
    clock.set(100)
    return made


def _listed(client: TestClient, **params: Any) -> list[str]:
    answer = client.get("/executions", params=params)
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["items"]]


def test_list_by_due_time(client: TestClient, scene: dict[str, str]) -> None:
    early, late = scene["early"], scene["late"]
    assert _listed(client, due_before="2026-01-01T00:00:50Z", job="a") == [early]
    assert _listed(client, due_after="2026-01-01T00:00:50Z", job="a") == [late]
    # Any offset names the same instant; the bounds are half-open.
    assert _listed(
        client, due_after="2026-01-01T01:00:00+01:00", due_before=at(50).isoformat(), job="a"
    ) == [early]
    assert _listed(client, due_before="2025-12-31T19:00:50-05:00", job="a") == [early]
    assert _listed(client, due_after="2026-01-01T00:00:00.000001Z", job="a") == [late]


def test_list_by_outcome_in_any_case(client: TestClient, scene: dict[str, str]) -> None:
    slow = sorted([scene["slow-1"], scene["slow-2"]])
    for spelled in ("timed_out", "TIMED_OUT", "Timed_Out"):
        assert _listed(client, outcome=spelled) == slow
    assert _listed(client, outcome="succeeded") == [scene["done"]]
    assert _listed(client, outcome="failed") == []
    assert _listed(client, outcome="timed_out", state="SUCCEEDED") == []
    assert _listed(client, outcome="timed_out", due_after="2026-01-01T01:00:00Z") == slow
    assert _listed(client, outcome="timed_out", due_before="2026-01-01T01:00:00Z") == []


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_pages_keep_the_outcome_filter(client: TestClient, store: Store, order: str) -> None:
    slow = []
    for n in range(5):
        store.submit("other")
        slow.append(_timed_out(store, f"slow-{n}"))
    expected = sorted(slow, reverse=order == "desc")
    seen: list[str] = []
    params: dict[str, Any] = {"outcome": "timed_out", "limit": 2, "order": order}
    while True:
        page = client.get("/executions", params=params).json()
        seen += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == expected


#: (parameter, value): each answered 422 naming the parameter. (A lone surrogate cannot
#: even be encoded by httpx: see the raw query string test below.)
HOSTILE = [
    ("outcome", ""),
    ("outcome", " "),
    ("outcome", "\x00"),
    ("outcome", "timed_out\x00"),
    ("outcome", "nope"),
    ("outcome", "x" * 10_000),
    ("due_before", "not a date"),
    ("due_before", ""),
    ("due_before", "0000-01-01T00:00:00Z"),
    ("due_before", "10000-01-01T00:00:00Z"),
    ("due_before", "0001-01-01T00:00:00+05:00"),
    ("due_before", "2026-01-01T00:00:00"),
    ("due_before", "2026-01-01"),
    ("due_before", "1767225600"),
    ("due_before", "2026-02-30T00:00:00Z"),
    ("due_before", "\x00"),
    ("due_after", "2026-01-01T00:00:00"),
    ("due_after", "9999-12-31T23:59:59-05:00"),
    ("due_after", "x" * 10_000),
]


@pytest.mark.parametrize(("name", "value"), HOSTILE, ids=lambda v: repr(v)[:40])
def test_bad_filters_are_a_problem_naming_the_parameter(
    client: TestClient, store: Store, name: str, value: str
) -> None:
    store.submit("j")
    answer = client.get("/executions", params={name: value})
    assert_problem(answer, 422, "validation", name)
    assert len(answer.text) < 2_000, "the problem never echoes a huge value"
    assert len(_listed(client)) == 1, "the service still answers"


def test_a_surrogate_in_the_raw_query_string_is_refused(client: TestClient) -> None:
    # %ED%A0%80 is U+D800 in (invalid) UTF-8: what a client that sends raw bytes sends.
    for name in ("outcome", "due_before"):
        answer = client.get(f"/executions?{name}=%ED%A0%80")
        assert_problem(answer, 422, "validation", name)


def test_openapi_documents_the_filters(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    params = {p["name"]: p for p in spec["paths"]["/executions"]["get"]["parameters"]}
    for name in ("due_after", "due_before"):
        assert params[name]["schema"]["anyOf"][0]["format"] == "date-time"
    assert "timed_out" in params["outcome"]["description"]


# -- the clients ---------------------------------------------------------------------------


def test_the_clients_pass_the_filters_on(
    client: TestClient, store: Store, scene: dict[str, str]
) -> None:
    asked: dict[str, Any] = {
        "outcome": "timed_out",
        "due_after": at(3600).astimezone(UTC),
        "due_before": at(3601),
        "limit": 1,
    }
    expected = store.query(**asked)
    assert len(expected.items) == 1
    assert expected.next_cursor is not None
    with Client(BASE, http=client) as remote:
        assert remote.query(**asked) == expected
        assert remote.query(**asked | {"outcome": AttemptOutcome.TIMED_OUT}) == expected
        after = remote.query(**asked | {"after": expected.next_cursor})
        assert after == store.query(**asked | {"after": expected.next_cursor})

    async def scenario() -> Page:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app), base_url=BASE)
        async with AsyncClient(BASE, http=http) as aclient:
            return await aclient.query(**asked)

    assert asyncio.run(scenario()) == expected


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"outcome": "nope"}, "outcome"),
        ({"outcome": ""}, "outcome"),
        ({"outcome": "\x00"}, "outcome"),
        ({"outcome": 3}, "outcome"),
        ({"due_before": datetime(2026, 1, 1)}, "due_before"),  # naive
        ({"due_after": "2026-01-01T00:00:00Z"}, "due_after"),
        ({"due_after": datetime.min.replace(tzinfo=UTC)}, "due_after"),
    ],
    ids=repr,
)
def test_the_client_refuses_what_the_store_refuses(
    client: TestClient, arguments: dict[str, Any], field: str
) -> None:
    sent: list[httpx.Request] = []
    with Client(BASE, http=client) as remote:
        client.event_hooks["request"] = [sent.append]
        with pytest.raises(ValidationError) as caught:
            remote.query(**arguments)
    assert caught.value.field == field
    if field == "due_after" and isinstance(arguments[field], datetime):
        # Year 1 is a time the store holds but the API does not take (0002..9998):
        # the service refuses it, naming the parameter.
        assert len(sent) == 1
    else:
        assert sent == [], "nothing was sent"

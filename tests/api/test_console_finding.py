"""``GET /executions`` by limit key, owner, creation and finish time and error text, and
``GET /executions/counts``; and the clients that pass them on.

The store's rules are the contract's (``fencepost.testing.contract.narrowing``); here:
the parameters reach it from the query string and from both clients, the counts
answer every state and their total, pages keep the filters, and every bad value is a
422 problem naming the parameter (or, for text no store holds, an empty answer),
never a 500, on every backend.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import ValidationError
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock

BASE = "http://testserver"


@pytest.fixture
def scene(store: Store, clock: ManualClock) -> dict[str, str]:
    """``keyed`` (key k, SCHEDULED, t=0), ``running`` (under w1, t=0), ``dead`` (FAILED
    at t=20 with "Disk 100% full", created t=10), ``done`` (SUCCEEDED at t=30)."""
    made = {"keyed": store.submit("a", limit_key="k").id}
    running = store.submit("b")
    store.claim("w1", ids=[running.id], ttl=3600)
    made["running"] = running.id
    clock.set(10)
    dead = store.submit("c", max_attempts=1)
    made["dead"] = dead.id
    done = store.submit("d")
    made["done"] = done.id
    clock.set(20)
    store.fail(store.claim("w2", ids=[dead.id])[0], "Disk 100% full")
    clock.set(30)
    store.complete(store.claim("w2", ids=[done.id])[0], "ok")
    return made


def _listed(client: TestClient, **params: Any) -> list[str]:
    answer = client.get("/executions", params=params)
    assert answer.status_code == 200, answer.text
    return [item["id"] for item in answer.json()["items"]]


def _counted(client: TestClient, **params: Any) -> dict[str, Any]:
    answer = client.get("/executions/counts", params=params)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_list_and_count_by_every_new_filter(client: TestClient, scene: dict[str, str]) -> None:
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"limit_key": "k"}, ["keyed"]),
        ({"owner": "w1"}, ["running"]),
        ({"owner": "w2"}, []),  # its executions finished
        ({"created_after": "2026-01-01T00:00:10Z"}, ["dead", "done"]),
        ({"created_before": "2026-01-01T01:00:10+01:00"}, ["keyed", "running"]),
        ({"finished_after": at(20).isoformat()}, ["dead", "done"]),
        ({"finished_before": "2026-01-01T00:00:30Z"}, ["dead"]),
        ({"finished_after": "2025-12-31T19:00:25-05:00"}, ["done"]),
        ({"error": "100%"}, ["dead"]),
        ({"error": "DISK"}, ["dead"]),
        ({"error": "1_0"}, []),
        ({"error": "full", "state": ["SUCCEEDED", "FAILED"]}, ["dead"]),
        ({"error": "full", "state": "RUNNING"}, []),
    ]
    for params, names in cases:
        wanted = sorted(scene[n] for n in names)
        assert _listed(client, **params) == wanted, params
        assert _listed(client, order="desc", **params) == wanted[::-1], params
        counts = _counted(client, **params)
        assert list(counts["counts"]) == [s.value for s in State], "every state, in order"
        assert counts["total"] == len(wanted) == sum(counts["counts"].values()), params


def test_counts_answer_every_state(client: TestClient, scene: dict[str, str]) -> None:
    assert _counted(client) == {
        "counts": {
            "SCHEDULED": 1,
            "RUNNING": 1,
            "RETRY_WAIT": 0,
            "SUCCEEDED": 1,
            "FAILED": 1,
            "CANCELLED": 0,
            "SKIPPED": 0,
        },
        "total": 4,
    }
    assert _counted(client, job="c", outcome="failed")["counts"]["FAILED"] == 1
    assert _counted(client, due_after="2027-01-01T00:00:00Z")["total"] == 0
    assert _counted(client, state=["RUNNING", "SCHEDULED"])["total"] == 2
    # The listing's own parameters are not the counts'.
    assert _counted(client, limit=1, cursor="x", order="desc")["total"] == 4


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_pages_keep_the_new_filters(client: TestClient, store: Store, order: str) -> None:
    kept = []
    for _ in range(5):
        store.submit("other", limit_key="other")
        kept.append(store.submit("mine", limit_key="tenant").id)
    seen: list[str] = []
    params: dict[str, Any] = {"limit_key": "tenant", "limit": 2, "order": order}
    while True:
        page = client.get("/executions", params=params).json()
        seen += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert seen == sorted(kept, reverse=order == "desc")


#: (parameter, value): each a 422 naming the parameter, from the list and the counts.
HOSTILE = [
    ("error", ""),
    ("error", "x" * 201),
    ("error", "é" * 10_000),
    ("created_after", "not a date"),
    ("created_after", "2026-01-01T00:00:00"),
    ("created_after", "0001-01-01T00:00:00+05:00"),
    ("created_before", "10000-01-01T00:00:00Z"),
    ("created_before", "1767225600"),
    ("finished_after", ""),
    ("finished_after", "2026-02-30T00:00:00Z"),
    ("finished_before", "\x00"),
    ("finished_before", "9999-12-31T23:59:59-05:00"),
    ("finished_before", "x" * 10_000),
    ("state", "NOPE"),
    ("outcome", "nope"),
]


@pytest.mark.parametrize(("name", "value"), HOSTILE, ids=lambda v: repr(v)[:40])
def test_bad_filters_are_a_problem_naming_the_parameter(
    client: TestClient, store: Store, name: str, value: str
) -> None:
    store.submit("j")
    for path in ("/executions", "/executions/counts"):
        answer = client.get(path, params={name: value})
        assert_problem(answer, 422, "validation", name)
        assert len(answer.text) < 2_000, "the problem never echoes a huge value"
    assert _counted(client)["total"] == 1, "the service still answers"


#: Text no stored limit key, owner or error holds, or means something to SQL: nothing.
NOTHING = ["\x00", "k\x00", "' OR 1=1 --", "%%", "_", "\\", "k" * 5_000, "w1 ", "kK"]


@pytest.mark.parametrize("name", ["limit_key", "owner", "error"])
def test_text_no_execution_holds_is_an_empty_answer(
    client: TestClient, scene: dict[str, str], name: str
) -> None:
    for value in NOTHING:
        if name == "error" and len(value) > 200:
            continue
        assert _listed(client, **{name: value}) == [], (name, value)
        assert _counted(client, **{name: value})["total"] == 0, (name, value)
    # U+D800 as raw (invalid) UTF-8: what a client that sends bytes sends.
    for path in ("/executions", "/executions/counts"):
        answer = client.get(f"{path}?{name}=%ED%A0%80")
        assert answer.status_code in (200, 422), answer.text
        if answer.status_code == 200:
            assert answer.json().get("items", []) == []
            assert answer.json().get("total", 0) == 0


def test_openapi_documents_the_counts(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    counts = spec["paths"]["/executions/counts"]["get"]
    names = {p["name"] for p in counts["parameters"]}
    listed = {p["name"] for p in spec["paths"]["/executions"]["get"]["parameters"]}
    assert names == listed - {"cursor", "limit", "order"}
    new = {"limit_key", "owner", "created_after", "created_before", "finished_after"}
    assert new | {"finished_before", "error"} <= names
    error = next(p for p in counts["parameters"] if p["name"] == "error")
    assert error["schema"]["anyOf"][0]["maxLength"] == 200


# -- the clients ---------------------------------------------------------------------------


def test_the_clients_pass_the_filters_and_count(
    client: TestClient, store: Store, scene: dict[str, str]
) -> None:
    asked: list[dict[str, Any]] = [
        {"limit_key": "k"},
        {"owner": "w1"},
        {"created_after": at(10).astimezone(UTC), "created_before": at(11)},
        {"finished_after": at(20), "finished_before": at(31)},
        {"error": "disk 100%", "state": State.FAILED},
    ]
    with Client(BASE, http=client) as remote:
        for filters in asked:
            assert remote.query(**filters) == store.query(**filters), filters
            assert remote.count_by_state(**filters) == store.count_by_state(**filters)

    async def scenario() -> list[tuple[Any, Any]]:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app), base_url=BASE)
        async with AsyncClient(BASE, http=http) as aclient:
            return [(await aclient.query(**f), await aclient.count_by_state(**f)) for f in asked]

    for filters, (page, counts) in zip(asked, asyncio.run(scenario()), strict=True):
        assert page == store.query(**filters)
        assert counts == store.count_by_state(**filters)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"error": ""}, "error"),
        ({"error": "x" * 201}, "error"),
        ({"error": 5}, "error"),
        ({"created_after": datetime(2026, 1, 1)}, "created_after"),  # naive
        ({"finished_before": "2026-01-01T00:00:00Z"}, "finished_before"),
        ({"created_before": datetime.min.replace(tzinfo=UTC)}, "created_before"),
    ],
    ids=repr,
)
def test_the_client_refuses_what_the_store_refuses(
    client: TestClient, arguments: dict[str, Any], field: str
) -> None:
    sent: list[httpx.Request] = []
    with Client(BASE, http=client) as remote:
        client.event_hooks["request"] = [sent.append]
        for verb in (remote.query, remote.count_by_state):
            with pytest.raises(ValidationError) as caught:
                verb(**arguments)
            assert caught.value.field == field
    if arguments.get(field) == datetime.min.replace(tzinfo=UTC):
        # Year 1 is a time the store holds but the API does not take (0002..9998):
        # the service refuses it, naming the parameter.
        assert len(sent) == 2
    else:
        assert sent == [], "nothing was sent"

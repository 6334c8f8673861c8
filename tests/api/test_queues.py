"""Named queues over HTTP: submits, schedules and claims carry them; bad names are a 422."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from fencepost.api import create_app
from fencepost.domain.states import State
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem

#: JSON values no queue may be (lone surrogates travel as JSON escapes).
HOSTILE: tuple[Any, ...] = ("", "  ", "a\x00b", "\ud800", "x" * 101, "q" * 10_000, 5, ["a"], {})


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as c:
        yield c


def send(client: TestClient, method: str, path: str, body: Any) -> Any:
    """``body`` as JSON text (lone surrogates escaped, as any JSON client may send them)."""
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return client.request(method, path, content=content, headers=headers)


def test_a_submit_names_its_queue_and_reads_it_back(client: TestClient, store: Store) -> None:
    made = client.post("/executions", json={"job": "x", "queue": "ünï 🚀"})
    assert made.status_code == 201, made.text
    assert made.json()["queue"] == "ünï 🚀"
    plain = client.post("/executions", json={"job": "x"}).json()
    assert plain["queue"] == "default"
    batch = client.post(
        "/executions/batch", json={"items": [{"job": "x", "queue": "b"}, {"job": "x"}]}
    )
    assert [e["queue"] for e in batch.json()["items"]] == ["b", "default"]
    assert client.get(f"/executions/{made.json()['id']}").json()["queue"] == "ünï 🚀"
    assert store.get(made.json()["id"]).queue == "ünï 🚀"


@pytest.mark.parametrize("queue", HOSTILE, ids=lambda q: repr(q)[:16])
def test_a_bad_queue_is_a_422_naming_it_and_nothing_is_stored(
    client: TestClient, store: Store, queue: Any
) -> None:
    def refused(method: str, path: str, body: Any, field: str | None) -> None:
        assert_problem(send(client, method, path, body), 422, "validation", field)

    refused("POST", "/executions", {"job": "x", "queue": queue}, "queue")
    refused(
        "POST",
        "/executions/batch",
        {"items": [{"job": "x"}, {"job": "x", "queue": queue}]},
        "items.1.queue",
    )
    refused(
        "POST", "/schedules", {"job": "x", "every_seconds": 60, "id": "s", "queue": queue}, "queue"
    )
    assert store.query().items == []
    assert store.schedules().items == []
    store.add_schedule("x", every=60, id="ok")
    refused("PATCH", "/schedules/ok", {"queue": queue}, "queue")
    assert store.get_schedule("ok").queue == "default"
    waiting = store.submit("x", queue="a")
    refused("POST", "/claims", {"owner": "w", "queues": [queue]}, None)
    assert store.get(waiting.id).state is State.SCHEDULED


def test_a_schedule_carries_its_queue(client: TestClient) -> None:
    made = client.post("/schedules", json={"job": "x", "every_seconds": 60, "queue": "reports"})
    assert made.status_code == 201, made.text
    assert made.json()["queue"] == "reports"
    path = f"/schedules/{made.json()['id']}"
    assert client.patch(path, json={"queue": "batch"}).json()["queue"] == "batch"
    assert client.patch(path, json={"queue": None}).json()["queue"] == "default"


def test_a_claim_takes_only_from_its_queues_and_their_limits(
    client: TestClient, store: Store
) -> None:
    for queue in ("a", "a", "a", "b", "b", "c"):
        store.submit("x", queue=queue)
    first = client.post("/claims", json={"owner": "w", "limit": 10, "queues": {"a": 2, "b": 1}})
    assert first.status_code == 200, first.text
    assert Counter(lease["queue"] for lease in first.json()["leases"]) == {"a": 2, "b": 1}
    rest = client.post("/claims", json={"owner": "w", "limit": 10, "queues": ["a", "b"]}).json()
    assert Counter(lease["queue"] for lease in rest["leases"]) == {"a": 1, "b": 1}
    assert store.query(state=State.SCHEDULED).items[0].queue == "c"


@pytest.mark.parametrize(
    "queues", [{"a": -1}, {"a": 1001}, {"a": "1"}, {"a": 1.5}, "a", {"": 1}, {"a\x00": 1}]
)
def test_bad_claim_queues_are_a_422(client: TestClient, store: Store, queues: Any) -> None:
    waiting = store.submit("x", queue="a")
    response = send(client, "POST", "/claims", {"owner": "w", "queues": queues})
    assert response.status_code == 422, response.text
    assert response.json()["field"].startswith("queues"), response.text
    assert store.get(waiting.id).state is State.SCHEDULED

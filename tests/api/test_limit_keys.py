"""Limit keys and declared limits over HTTP, and remote workers that sleep until the next token.

Submits (single and batch) and schedules take a ``limit_key`` and return it; a bad one
is a 422 naming it, with nothing stored; an odd but valid one reads, lists, claims
under a per-key limit and encodes. ``POST /jobs/limits`` declares the limits of a
remote worker's jobs; ``POST /claims`` says when held-back work may start, and a
remote worker held by a rate sleeps until then.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from fencepost import App
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.client import AsyncClient, Client, Forbidden
from fencepost.domain.errors import ValidationError
from fencepost.domain.limits import Rate, new_limit
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.worker.runtime import Worker, WorkerOptions
from tests.api.support import TestClient, assert_problem
from tests.unit.test_declared_limits import CountingStore

#: JSON values no limit key may be (lone surrogates travel as JSON escapes).
HOSTILE: tuple[Any, ...] = (
    "",
    "  ",
    "a\x00b",
    "\ud800",
    "tab\there",
    "\x1b[31m",
    "del\x7f",
    "x" * 201,
    "k" * 10_000,
    5,
    True,
    [],
    {},
)
#: Odd but valid keys.
ODD = ("tenant 🙂", "with  spaces", "'; DROP TABLE executions; --", "say \"hi\" 'now'", "k" * 200)
BASE = "http://testserver"


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as c:
        yield c


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client(BASE, http=client) as c:
        yield c


def send(client: TestClient, method: str, path: str, body: Any) -> Any:
    """``body`` as JSON text (lone surrogates escaped, as any JSON client may send them)."""
    content = json.dumps(body).encode()
    return client.request(
        method, path, content=content, headers={"content-type": "application/json"}
    )


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {predicate}")


# -- the wire shapes -------------------------------------------------------------------


def test_submits_carry_their_limit_key(client: TestClient, store: Store) -> None:
    made = client.post("/executions", json={"job": "x", "limit_key": "tenant-1"})
    assert made.status_code == 201, made.text
    assert made.json()["limit_key"] == "tenant-1"
    assert client.post("/executions", json={"job": "x"}).json()["limit_key"] is None
    batch = client.post(
        "/executions/batch",
        json={"items": [{"job": "x", "limit_key": "b"}, {"job": "x", "limit_key": None}]},
    )
    assert batch.status_code == 201, batch.text
    assert [e["limit_key"] for e in batch.json()["items"]] == ["b", None]
    execution_id = made.json()["id"]
    assert client.get(f"/executions/{execution_id}").json()["limit_key"] == "tenant-1"
    assert store.get(execution_id).limit_key == "tenant-1"
    listed = [e["limit_key"] for e in client.get("/executions").json()["items"]]
    assert listed == ["tenant-1", None, "b", None]
    # An idempotent retry compares the key too.
    first = client.post(
        "/executions", json={"job": "x", "limit_key": "a"}, headers={"Idempotency-Key": "k"}
    )
    again = client.post(
        "/executions", json={"job": "x", "limit_key": "a"}, headers={"Idempotency-Key": "k"}
    )
    assert (first.status_code, again.status_code) == (201, 200)
    other = client.post(
        "/executions", json={"job": "x", "limit_key": "b"}, headers={"Idempotency-Key": "k"}
    )
    assert_problem(other, 409, "idempotency-conflict")


def test_a_schedule_carries_its_limit_key(client: TestClient, store: Store) -> None:
    made = client.post(
        "/schedules", json={"job": "x", "every_seconds": 60, "id": "s", "limit_key": "t"}
    )
    assert made.status_code == 201, made.text
    assert made.json()["limit_key"] == "t"
    assert client.get("/schedules/s").json()["limit_key"] == "t"
    assert [s["limit_key"] for s in client.get("/schedules").json()["items"]] == ["t"]
    assert client.patch("/schedules/s", json={"limit_key": "u"}).json()["limit_key"] == "u"
    assert store.get_schedule("s").limit_key == "u"
    assert client.patch("/schedules/s", json={"limit_key": None}).json()["limit_key"] is None
    assert store.get_schedule("s").limit_key is None
    run = client.post(
        "/schedules", json={"job": "x", "every_seconds": 60, "id": "r", "limit_key": "v"}
    )
    assert run.status_code == 201
    assert client.post("/schedules/r/run").json()["limit_key"] == "v"


@pytest.mark.parametrize("key", HOSTILE, ids=lambda k: repr(k)[:16])
def test_a_bad_limit_key_is_a_422_naming_it_and_nothing_is_stored(
    client: TestClient, store: Store, key: Any
) -> None:
    def refused(method: str, path: str, body: Any, field: str) -> None:
        assert_problem(send(client, method, path, body), 422, "validation", field)

    refused("POST", "/executions", {"job": "x", "limit_key": key}, "limit_key")
    refused(
        "POST",
        "/executions/batch",
        {"items": [{"job": "x"}, {"job": "x", "limit_key": key}]},
        "items.1.limit_key",
    )
    refused(
        "POST",
        "/schedules",
        {"job": "x", "every_seconds": 60, "id": "s", "limit_key": key},
        "limit_key",
    )
    assert store.query().items == []
    assert store.schedules().items == []
    store.add_schedule("x", every=60, id="ok", limit_key="fine")
    refused("PATCH", "/schedules/ok", {"limit_key": key}, "limit_key")
    assert store.get_schedule("ok").limit_key == "fine"


@pytest.mark.parametrize("key", ODD, ids=lambda k: repr(k)[:16])
def test_an_odd_limit_key_reads_lists_claims_and_encodes(
    client: TestClient, store: Store, key: str
) -> None:
    store.set_limit("job:x", concurrency=1, per_key=True)
    neighbour = key[:-1] + "#"
    made = send(client, "POST", "/executions", {"job": "x", "limit_key": key})
    assert made.status_code == 201, made.text
    twin = send(client, "POST", "/executions", {"job": "x", "limit_key": key}).json()
    other = send(client, "POST", "/executions", {"job": "x", "limit_key": neighbour}).json()
    assert made.json()["limit_key"] == key
    assert client.get(f"/executions/{made.json()['id']}").json()["limit_key"] == key
    assert [e["limit_key"] for e in client.get("/executions").json()["items"]] == [
        key,
        key,
        neighbour,
    ]
    claimed = client.post("/claims", json={"owner": "w", "limit": 10}).json()["leases"]
    assert {lease["execution_id"] for lease in claimed} == {made.json()["id"], other["id"]}
    assert store.get(twin["id"]).state is State.SCHEDULED  # its key's one place is taken
    schedule = send(
        client, "POST", "/schedules", {"job": "x", "every_seconds": 60, "limit_key": key}
    )
    assert schedule.status_code == 201, schedule.text
    assert schedule.json()["limit_key"] == key


# -- the clients -----------------------------------------------------------------------


def test_the_clients_send_and_read_limit_keys(
    remote: Client, client: TestClient, store: Store
) -> None:
    one = remote.submit("x", limit_key="a")
    batch = remote.submit_many([{"job": "x", "limit_key": "b"}, {"job": "x"}])
    schedule = remote.add_schedule("x", every=60, id="s", limit_key="c")
    assert (one.limit_key, [e.limit_key for e in batch], schedule.limit_key) == (
        "a",
        ["b", None],
        "c",
    )
    assert remote.get(one.id).limit_key == "a"
    assert remote.get_schedule("s").limit_key == "c"
    assert remote.update_schedule("s", limit_key="d").limit_key == "d"
    with pytest.raises(ValidationError) as caught:
        remote.submit("x", limit_key="bad\nkey")
    assert caught.value.field == "limit_key"
    with pytest.raises(ValidationError) as caught:
        remote.submit_many([{"job": "x"}, {"job": "x", "limit_key": ""}])
    assert caught.value.field == "items.1.limit_key"  # the service's name for it

    async def scenario(aclient: AsyncClient) -> tuple[str | None, str | None, list[str | None]]:
        made = await aclient.submit("x", limit_key="e")
        many = await aclient.submit_many([{"job": "x", "limit_key": "f"}])
        added = await aclient.add_schedule("x", every=60, id="t", limit_key="g")
        return made.limit_key, added.limit_key, [e.limit_key for e in many]

    async def main() -> tuple[str | None, str | None, list[str | None]]:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=client.app), base_url=BASE)
        async with AsyncClient(BASE, http=http) as aclient:
            return await scenario(aclient)

    assert asyncio.run(main()) == ("e", "g", ["f"])
    assert store.get_schedule("t").limit_key == "g"


# -- declared limits and the next token ------------------------------------------------


def test_post_jobs_limits_declares_and_refuses_by_field(
    client: TestClient, remote: Client, store: Store
) -> None:
    remote.declare_limits([new_limit("job:charge", rate="50/s", concurrency=10, per_key=True)])
    (declared,) = store.limits()
    assert (declared.scope, declared.source, declared.rate, declared.concurrency) == (
        "job:charge",
        "code",
        Rate(50.0, 1.0),
        10,
    )
    assert declared.per_key
    store.set_limit("job:charge", rate="1/s")
    remote.declare_limits([new_limit("job:charge", rate="99/s")])  # an operator's stands
    assert store.limits()[0].rate == Rate(1.0, 1.0)
    for body, field in (
        ({"limits": [{"job": "j", "rate": "fast"}]}, "limits.0.rate"),
        ({"limits": [{"job": "j"}]}, "limits.0.rate"),
        ({"limits": [{"job": "j", "concurrency": 1}, {"job": "j", "burst": 2}]}, "limits.1.burst"),
        ({"limits": [{"job": "", "concurrency": 1}]}, "limits.0.job"),
        ({"limits": []}, "limits"),
    ):
        assert_problem(send(client, "POST", "/jobs/limits", body), 422, "validation", field)
    assert [lim.scope for lim in store.limits()] == ["job:charge"]
    with pytest.raises(ValidationError):
        remote.declare_limits([new_limit("queue:q", concurrency=1)])  # a job's only


def test_declaring_needs_the_work_scope(store: Store) -> None:
    reader, worker = "r" * 20, "w" * 20
    auth = Auth(
        {
            reader: Principal(name="reader", scopes=frozenset({Scope.READ})),
            worker: Principal(name="worker-7", scopes=frozenset({Scope.WORK})),
        }
    )
    limit = new_limit("job:j", concurrency=2)
    with TestClient(create_app(store, auth=auth)) as http:
        with pytest.raises(Forbidden):
            Client(BASE, token=reader, http=http).declare_limits([limit])
        assert store.limits() == []
        Client(BASE, token=worker, http=http).declare_limits([limit])
    assert [lim.updated_by for lim in store.limits()] == ["worker-7"]


def test_a_claim_says_when_held_back_work_may_start(
    client: TestClient, remote: Client, store: Store
) -> None:
    store.set_limit("job:x", rate="1/h")  # a burst of one
    store.submit("x")
    store.submit("x")
    first = client.post("/claims", json={"owner": "w", "limit": 10}).json()
    assert len(first["leases"]) == 1
    held = client.post("/claims", json={"owner": "w", "limit": 10}).json()
    assert held["leases"] == []
    assert 3000 < held["next_start_in"] <= 3600
    assert remote.next_start_in() is None  # nothing claimed through it yet
    assert remote.claim("w", limit=10) == []
    assert 3000 < (remote.next_start_in() or 0) <= 3600
    store.remove_limit("job:x")
    assert len(remote.claim("w", limit=10)) == 1
    assert remote.next_start_in() is None


def test_a_remote_worker_declares_its_limits_and_sleeps_until_the_next_token(
    remote: Client, store: Store
) -> None:
    app = App(store)

    @app.job("tick", rate_limit="1/s")
    def tick() -> None: ...

    ids = [store.submit("tick").id for _ in range(6)]
    counting = CountingStore(remote)
    options = WorkerOptions(owner="remote-1", poll_interval=0.05)
    worker = Worker(counting, app.registry, options)  # type: ignore[arg-type]
    worker.start()
    try:
        wait_until(lambda: sum(store.get(i).state is State.SUCCEEDED for i in ids) >= 3)
        ended = time.monotonic()
        claims = [t for t in counting.claims if t <= ended]
    finally:
        worker.stop(immediate=True)
        assert worker.join(10)
    (declared,) = store.limits()  # declared through POST /jobs/limits
    assert (declared.scope, declared.source, declared.rate) == ("job:tick", "code", Rate(1.0, 1.0))
    window = ended - claims[0]
    assert window >= 1.8, window
    # As a worker on the store (tests/unit/test_declared_limits.py): at most four
    # claims a token, where polling every 50 ms would make window / 0.05 of them.
    assert len(claims) <= 4 * (int(window) + 2), (len(claims), window)

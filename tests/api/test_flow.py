"""Flow control over HTTP: limits, paused queues, throttled counts and their audit.

Every backend (memory, SQLite, PostgreSQL). The routes name a scope or a queue in
the path, percent-encoded; any valid name travels (``:``, ``/``, a line break, dots).
Hostile values are refused with a 422 naming the field, and nothing is stored:
the limits read the same afterwards, and what was stored still lists and claims.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.limits import Limit
from fencepost.domain.states import State
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem

BASE = "http://testserver"


def path(name: str) -> str:
    return quote(name, safe="")


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client(BASE, http=client) as c:
        yield c


# -- limits --------------------------------------------------------------------------------


def test_a_limit_is_set_listed_and_removed(client: TestClient, store: Store) -> None:
    answer = client.put(
        "/limits/job:emails", json={"rate": "100/5min", "concurrency": 20, "per_key": True}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["scope"] == "job:emails"
    assert body["rate"] == "100/300s"  # the shortest spelling, read back as the same rate
    assert (body["burst"], body["concurrency"], body["per_key"]) == (1, 20, True)
    assert (body["paused"], body["source"], body["updated_by"]) == (False, "operator", "api")
    [stored] = store.limits()
    assert stored.rate is not None
    assert stored.rate.per_second == pytest.approx(100 / 300)
    assert client.get("/limits").json() == [body]

    replaced = client.put("/limits/job:emails", json={"rate": "50/s", "burst": 7}).json()
    assert (replaced["rate"], replaced["burst"], replaced["concurrency"]) == ("50/s", 7, None)

    gone = client.delete("/limits/job:emails")
    assert (gone.status_code, gone.content) == (204, b"")
    assert store.limits() == []
    assert_problem(client.delete("/limits/job:emails"), 404, "not-found")
    actions = [c["action"] for c in client.get("/flow/changes").json()]
    assert actions == ["remove", "set", "set"]


@pytest.mark.parametrize(
    "scope",
    [
        "queue:emails",
        "job:reports/nightly",
        "job:a:b",
        "job:..",
        "queue:.",
        "queue:line\nbreak",
        "job:100% sure?#",
        "job: leading space",
        "queue:é-ü-漢字-🙂",
        "job:" + "j" * 200,
    ],
    ids=[
        "queue",
        "slash",
        "colon",
        "dots",
        "dot",
        "newline",
        "percent",
        "space",
        "unicode",
        "longest",
    ],
)
def test_any_valid_scope_travels_in_the_path(
    client: TestClient, remote: Client, store: Store, scope: str
) -> None:
    """Percent-encoded, the colon too; the client encodes dot names so they are not
    resolved away as dot segments."""
    answer = client.put(f"/limits/{path(scope)}", json={"concurrency": 3})
    assert answer.status_code == 200, answer.text
    assert answer.json()["scope"] == scope
    assert [lim.scope for lim in store.limits()] == [scope]
    remote.remove_limit(scope)
    assert store.limits() == []
    assert remote.set_limit(scope, concurrency=4).scope == scope
    assert [lim.concurrency for lim in store.limits()] == [4]


def test_the_colon_may_be_sent_as_it_is_or_encoded(client: TestClient, store: Store) -> None:
    assert client.put("/limits/queue%3Aa", json={"concurrency": 1}).json()["scope"] == "queue:a"
    assert client.put("/limits/queue:a", json={"concurrency": 2}).json()["concurrency"] == 2
    assert client.delete("/limits/queue%3aa").status_code == 204
    assert store.limits() == []


def test_a_limit_on_a_paused_queue_keeps_it_paused(client: TestClient, store: Store) -> None:
    store.pause_queue("q", actor="ops")
    assert client.put("/limits/queue:q", json={"concurrency": 2}).json()["paused"] is True
    assert client.delete("/limits/queue:q").status_code == 204
    [left] = client.get("/limits").json()
    assert (left["scope"], left["paused"], left["rate"], left["concurrency"]) == (
        "queue:q",
        True,
        None,
        None,
    )
    # A pause is not a limit: removing one again finds none.
    assert_problem(client.delete("/limits/queue:q"), 404, "not-found")


# -- queues --------------------------------------------------------------------------------


def test_queues_list_their_executions_pause_and_limit(client: TestClient, store: Store) -> None:
    store.submit("send", queue="emails")
    store.submit("send", queue="emails")
    store.submit("report")
    store.set_limit("queue:emails", rate="10/s", actor="ops")
    paused = client.post("/queues/reports/pause")
    assert paused.status_code == 200, paused.text
    assert paused.json() == {
        "name": "reports",
        "paused": True,
        "paused_by": "api",
        "paused_at": paused.json()["paused_at"],
        "limit": None,
        "counts": None,
    }
    listed = {q["name"]: q for q in client.get("/queues").json()}
    assert list(listed) == ["default", "emails", "reports"]
    assert listed["emails"]["counts"][State.SCHEDULED.value] == 2
    assert listed["emails"]["limit"]["rate"] == "10/s"
    assert listed["emails"]["paused"] is False
    assert listed["default"]["limit"] is None
    assert (listed["reports"]["paused"], listed["reports"]["paused_by"]) == (True, "api")
    assert sum(listed["reports"]["counts"].values()) == 0  # known by its pause alone

    resumed = client.post("/queues/reports/resume").json()
    assert (resumed["paused"], resumed["paused_by"], resumed["limit"]) == (False, None, None)
    assert [q["name"] for q in client.get("/queues").json()] == ["default", "emails"]
    # Resuming what is not paused changes nothing (idempotent).
    assert client.post("/queues/emails/resume").json()["limit"]["rate"] == "10/s"


@pytest.mark.parametrize(
    "name",
    ["a/b/pause", "..", ".", "x\ny", "%", " padded "],
    ids=["slashes", "dots", "dot", "newline", "percent", "padded"],
)
def test_any_valid_queue_name_is_paused_and_resumed(
    remote: Client, store: Store, name: str
) -> None:
    paused = remote.pause_queue(name)
    assert (paused.scope, paused.paused, paused.updated_by) == (f"queue:{name}", True, "api")
    assert store.paused_queues() == [paused]
    assert [q.name for q in remote.queues()] == [name]
    assert remote.resume_queue(name) == Limit(scope=f"queue:{name}")
    assert store.paused_queues() == []


def test_resume_records_what_the_pause_held_as_throttled(client: TestClient, store: Store) -> None:
    client.post("/queues/emails/pause")
    store.submit("send", queue="emails")
    assert store.claim("w", limit=5) == []
    client.post("/queues/emails/resume")
    [count] = client.get("/throttled", params={"window": 3600}).json()
    assert (count["scope"], count["count"]) == ("queue:emails", 1)
    assert count["held_seconds"] >= 0
    assert len(store.claim("w", limit=5)) == 1
    assert_problem(client.get("/throttled", params={"window": 0}), 422, "validation", "window")


def test_changes_are_audited_with_the_tokens_name(store: Store) -> None:
    tokens = {
        "admin-token-0123456789": Principal(name="ops-alice", scopes=frozenset({Scope.ADMIN})),
        "read-token-01234567890": Principal(name="viewer", scopes=frozenset({Scope.READ})),
    }
    app = create_app(store, auth=Auth(tokens))
    with TestClient(app) as http:
        admin = {"Authorization": "Bearer admin-token-0123456789"}
        reader = {"Authorization": "Bearer read-token-01234567890"}
        assert http.put("/limits/job:x", json={"concurrency": 1}, headers=admin).status_code == 200
        assert http.post("/queues/q/pause", headers=admin).status_code == 200
        for method, url in (
            ("PUT", "/limits/job:x"),
            ("DELETE", "/limits/job:x"),
            ("POST", "/queues/q/resume"),
        ):
            refused = http.request(method, url, json={"concurrency": 2}, headers=reader)
            assert_problem(refused, 403, "forbidden")
        for url in ("/limits", "/queues", "/throttled", "/flow/changes"):
            assert http.get(url, headers=reader).status_code == 200, url
            assert_problem(http.get(url), 401, "unauthorized")
        changes = http.get("/flow/changes", params={"limit": 1}, headers=reader).json()
        assert [(c["action"], c["actor"], c["scope"]) for c in changes] == [
            ("pause", "ops-alice", "queue:q")
        ]
    assert [lim.updated_by for lim in store.limits()] == ["ops-alice", "ops-alice"]
    assert [lim.concurrency for lim in store.limits()] == [1, None]


# -- hostile values ------------------------------------------------------------------------

LONG = "x" * 10_000

HOSTILE_BODIES = [
    pytest.param({"rate": "0/s"}, "rate", id="rate-zero"),
    pytest.param({"rate": "-1/s"}, "rate", id="rate-negative"),
    pytest.param({"rate": "1e400/s"}, "rate", id="rate-1e400"),
    pytest.param({"rate": "5/fortnight"}, "rate", id="rate-fortnight"),
    pytest.param({"rate": ""}, "rate", id="rate-empty"),
    pytest.param({"rate": LONG}, "rate", id="rate-10k"),
    pytest.param({"rate": "9999999/s"}, "rate", id="rate-too-fast"),
    pytest.param({"rate": "1/9999d"}, "rate", id="rate-too-slow"),
    pytest.param({"rate": 5}, "rate", id="rate-number"),
    pytest.param({}, "rate", id="neither-rate-nor-concurrency"),
    pytest.param({"rate": None, "concurrency": None}, "rate", id="both-null"),
    pytest.param({"concurrency": 1, "burst": 5}, "burst", id="burst-without-rate"),
    pytest.param({"concurrency": 1, "per_key": "yes"}, "per_key", id="per-key-text"),
    pytest.param({"concurrency": 1, "per_key": 1}, "per_key", id="per-key-number"),
    pytest.param({"concurrency": 1, "unknown": 1}, "unknown", id="unknown-field"),
    *(
        pytest.param({"rate": "5/s", field: value}, field, id=f"{field}-{label}")
        for field in ("burst", "concurrency")
        for value, label in (
            (0, "zero"),
            (-1, "negative"),
            (2**63, "2**63"),
            (2**31, "int32"),
            (True, "true"),
            ("5", "text"),
            (1.5, "fraction"),
        )
    ),
]


@pytest.fixture
def roomy(store: Store) -> Iterator[TestClient]:
    """A client of an app with the default body cap: a 10,000-character value fits."""
    with TestClient(create_app(store)) as c:
        yield c


@pytest.fixture
def kept(store: Store) -> tuple[list[Limit], str]:
    """A limit and an execution that refusals must leave as they are."""
    store.set_limit("job:keep", rate="1000/s", concurrency=5, actor="ops")
    store.pause_queue("held", actor="ops")
    execution = store.submit("keep")
    return store.limits(), execution.id


def assert_nothing_changed(client: TestClient, store: Store, kept: tuple[list[Limit], str]) -> None:
    """The limits read as before; what was stored still lists, and still claims."""
    limits, execution_id = kept
    assert store.limits() == limits
    assert [lim["scope"] for lim in client.get("/limits").json()] == ["job:keep", "queue:held"]
    names = [q["name"] for q in client.get("/queues").json()]
    assert names == ["default", "held"]
    [lease] = store.claim("w", limit=5)
    assert lease.execution_id == execution_id


@pytest.mark.parametrize(("body", "field"), HOSTILE_BODIES)
def test_a_hostile_body_is_refused_naming_its_field(
    roomy: TestClient,
    store: Store,
    kept: tuple[list[Limit], str],
    body: dict[str, Any],
    field: str,
) -> None:
    for scope in ("job:keep", "job:fresh", "queue:held"):
        assert_problem(roomy.put(f"/limits/{scope}", json=body), 422, "validation", field)
    assert_nothing_changed(roomy, store, kept)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"concurrency": 1e400}', "concurrency"),
        (b'{"rate": "5/s", "burst": 1e400}', "burst"),
        (b'{"rate": 1e400}', "rate"),
        (b'{"rate": "5/s", "burst": 9223372036854775808}', "burst"),
        (b'{"rate": "\\ud800/s"}', "rate"),
        (b'{"rate": "5/s\\u0000"}', "rate"),
    ],
    ids=["concurrency-1e400", "burst-1e400", "rate-1e400", "burst-2**63", "surrogate", "nul"],
)
def test_hostile_json_numbers_and_escapes_are_refused(
    client: TestClient, store: Store, kept: tuple[list[Limit], str], raw: bytes, field: str
) -> None:
    answer = client.put(
        "/limits/job:fresh", content=raw, headers={"Content-Type": "application/json"}
    )
    assert_problem(answer, 422, "validation", field)
    assert_nothing_changed(client, store, kept)


HOSTILE_NAMES = [
    pytest.param("%00", id="nul"),
    pytest.param("a%00b", id="nul-inside"),
    pytest.param("%ED%A0%80", id="lone-surrogate"),
    pytest.param("%FF", id="not-utf8"),
    pytest.param("%20%20", id="blank"),
    pytest.param(LONG, id="10k"),
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_scope_is_refused_naming_scope(
    roomy: TestClient, store: Store, kept: tuple[list[Limit], str], name: str
) -> None:
    for scope in (f"job:{name}", f"queue:{name}"):
        assert_problem(
            roomy.put(f"/limits/{scope}", json={"concurrency": 1}), 422, "validation", "scope"
        )
        assert_problem(roomy.delete(f"/limits/{scope}"), 422, "validation", "scope")
    assert_nothing_changed(roomy, store, kept)


@pytest.mark.parametrize(
    "scope",
    ["nokind:x", "job:", "queue:", "job", "", "JOB:x", " job:x", "queue:" + "q" * 101],
    ids=["no-kind", "job-empty", "queue-empty", "no-colon", "empty", "upper", "space", "q101"],
)
def test_a_scope_of_no_kind_or_no_name_is_refused_naming_scope(
    client: TestClient, store: Store, kept: tuple[list[Limit], str], scope: str
) -> None:
    answer = client.put(f"/limits/{path(scope)}", json={"concurrency": 1})
    assert_problem(answer, 422, "validation", "scope")
    assert_nothing_changed(client, store, kept)


@pytest.mark.parametrize("name", [*HOSTILE_NAMES, pytest.param("q" * 101, id="101")])
def test_a_hostile_queue_name_is_refused_naming_name(
    roomy: TestClient, store: Store, kept: tuple[list[Limit], str], name: str
) -> None:
    for verb in ("pause", "resume"):
        assert_problem(roomy.post(f"/queues/{name}/{verb}"), 422, "validation", "name")
    assert_problem(roomy.post("/queues//pause"), 422, "validation", "name")
    assert_nothing_changed(roomy, store, kept)


# -- the clients ---------------------------------------------------------------------------


def test_the_client_mirrors_the_store(remote: Client, store: Store) -> None:
    stored = remote.set_limit("job:emails", rate="100/s", concurrency=20, per_key=True)
    assert store.limits() == [stored] == remote.limits()
    paused = remote.pause_queue("emails")
    assert paused == next(lim for lim in store.limits() if lim.scope == "queue:emails")
    [emails] = [q for q in remote.queues() if q.name == "emails"]
    assert (emails.paused, emails.paused_by, emails.limit) == (True, "api", None)
    assert emails.counts == dict.fromkeys(State, 0)
    assert remote.resume_queue("emails") == Limit(scope="queue:emails")
    assert remote.throttled(window=60) == store.throttled(window=60)
    assert remote.flow_changes(limit=3) == store.flow_changes(limit=3)
    remote.remove_limit("job:emails")
    assert store.limits() == []
    with pytest.raises(NotFound):
        remote.remove_limit("job:emails")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.set_limit("job:\ud800", concurrency=1), "scope"),
        (lambda c: c.set_limit("job:\x00", concurrency=1), "scope"),
        (lambda c: c.set_limit("nokind:x", concurrency=1), "scope"),
        (lambda c: c.set_limit("job:x", rate="5/fortnight"), "rate"),
        (lambda c: c.set_limit("job:x", concurrency=True), "concurrency"),
        (lambda c: c.set_limit("job:x", concurrency=1, burst=2), "burst"),
        (lambda c: c.remove_limit("job:"), "scope"),
        (lambda c: c.pause_queue("\ud800"), "name"),
        (lambda c: c.pause_queue(""), "name"),
        (lambda c: c.resume_queue("q" * 101), "name"),
    ],
    ids=[
        "surrogate",
        "nul",
        "no-kind",
        "rate",
        "concurrency",
        "burst",
        "rm-empty",
        "pause-surrogate",
        "pause-empty",
        "resume-101",
    ],
)
def test_the_client_refuses_what_the_store_would_and_sends_nothing(
    store: Store, call: Any, field: str
) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    http = httpx.Client(base_url=BASE, transport=httpx.MockTransport(handler))
    with Client(BASE, http=http) as c, pytest.raises(ValidationError) as refused:
        call(c)
    assert refused.value.field == field
    assert sent == []


def test_the_async_client_answers_as_the_sync_client(
    client: TestClient, remote: Client, store: Store
) -> None:
    app = client.app

    async def scenario() -> list[Any]:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
        async with AsyncClient(BASE, http=http) as aclient:
            stored = await aclient.set_limit("queue:a/b", rate="5/min", burst=2)
            listed = await aclient.limits()
            paused = await aclient.pause_queue("a/b")
            queues = await aclient.queues()
            resumed = await aclient.resume_queue("a/b")
            throttled = await aclient.throttled(window=60)
            changes = await aclient.flow_changes(limit=10)
            await aclient.remove_limit("queue:a/b")
            with pytest.raises(NotFound):
                await aclient.remove_limit("queue:a/b")
            return [stored, listed, paused, queues, resumed, throttled, changes]

    stored, listed, paused, queues, resumed, throttled, changes = asyncio.run(scenario())
    assert (str(stored.rate), stored.burst) == ("5/min", 2)
    assert listed == [stored]
    assert (paused.paused, paused.rate) == (True, stored.rate)
    assert [(q.name, q.limit) for q in queues] == [("a/b", paused)]
    assert resumed is not None
    assert not resumed.paused
    assert throttled == remote.throttled(window=60)
    assert [c.action for c in changes] == ["resume", "pause", "set"]
    assert store.limits() == []

"""``POST /executions/actions`` and ``GET /deletions``: acting on many, over HTTP.

A bulk action is one batch per request, audited as the calling token; the caller
follows ``next_cursor``. Read-only tokens may not act; a dry run writes nothing;
hostile values are a 422 naming the field, never a 500.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.client import AsyncClient, Client
from fencepost.domain.bulk import Action, BulkResult
from fencepost.domain.errors import ValidationError
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.contract import executions
from tests.api.support import TestClient, assert_problem
from tests.api.test_async_client import async_error, run

ADMIN = "alice-admin-token-0123456789"
READER = "rita-read-token-0123456789"
NOBODY = "00000000-0000-7000-8000-000000000000"
#: A well-formed id but for its case: ids are lower-case, as stores write them.
UPPER = "0190B1E0-ABCD-7000-8000-00000000CAFE"


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """An in-process client of an app with auth on: an admin token and a read-only one."""
    auth = Auth(
        {
            ADMIN: Principal(name="alice", scopes=frozenset({Scope.ADMIN})),
            READER: Principal(name="rita", scopes=frozenset({Scope.READ})),
        }
    )
    with TestClient(create_app(store, auth=auth)) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN}"
        yield c


def dead_letters(store: Store, job: str, count: int) -> list[str]:
    """``count`` FAILED executions of ``job``, by id."""
    made = store.submit_many([{"job": job, "max_attempts": 1} for _ in range(count)])
    for _ in range(0, count, 1000):
        for lease in store.claim("w", limit=1000, jobs=[job]):
            store.fail(lease, "boom", retryable=False)
    assert all(store.get(e.id).state is State.FAILED for e in made[:3])
    return sorted(e.id for e in made)


def stored(store: Store) -> list[tuple[str, State, int]]:
    """Every execution's id, state and audit length: what a dry run must leave alone."""
    return [(e.id, e.state, len(store.transitions(e.id))) for e in executions(store)]


def test_a_filtered_replay_of_500_dead_letters_replays_exactly_those(
    client: TestClient, store: Store
) -> None:
    dead = dead_letters(store, "report", 500)
    others = dead_letters(store, "mail", 3)
    waiting = store.submit("report", delay=3600).id
    body: dict[str, Any] = {"action": "replay", "filter": {"job": "report", "state": ["FAILED"]}}

    before = stored(store)
    dry = client.post("/executions/actions", json=body | {"dry_run": True})
    assert dry.status_code == 200, dry.text
    preview = dry.json()
    assert (preview["dry_run"], preview["matched"], preview["done"]) == (True, 500, 0)
    assert [e["id"] for e in preview["preview"]] == dead[:20]
    assert preview["next_cursor"] is None
    assert stored(store) == before, "a dry run writes nothing"

    batches, cursor = [], None
    while True:
        answer = client.post("/executions/actions", json=body | {"limit": 200, "cursor": cursor})
        assert answer.status_code == 200, answer.text
        batches.append(answer.json())
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            break
    assert [(b["matched"], b["done"], b["skipped"]) for b in batches] == [
        (200, 200, 0),
        (200, 200, 0),
        (100, 100, 0),
    ]
    assert all(b["action"] == "replay" and b["preview"] == [] for b in batches)
    replayed = [e.id for e in executions(store) if e.state is State.SCHEDULED and e.id in dead]
    assert sorted(replayed) == dead
    for execution_id in (dead[0], dead[250], dead[-1]):
        last = store.transitions(execution_id)[-1]
        assert (last.event, last.actor) == (Event.REPLAYED, "alice")
    assert {store.get(i).state for i in others} == {State.FAILED}
    assert store.get(waiting).state is State.SCHEDULED


def test_a_read_only_token_may_look_but_not_act(client: TestClient, store: Store) -> None:
    dead = dead_letters(store, "report", 2)
    before = stored(store)
    as_reader = {"Authorization": f"Bearer {READER}"}
    for body in (
        {"action": "replay", "ids": dead},
        {"action": "delete", "filter": {}, "dry_run": True},
    ):
        refused = client.post("/executions/actions", json=body, headers=as_reader)
        assert_problem(refused, 403, "forbidden")
    anonymous = client.post(
        "/executions/actions", json={"action": "replay", "ids": dead}, headers={"Authorization": ""}
    )
    assert anonymous.status_code == 401
    assert stored(store) == before
    assert client.get("/deletions", headers=as_reader).json() == {"items": [], "next_cursor": None}


def test_deletions_are_listed_in_pages(client: TestClient, store: Store) -> None:
    dead = dead_letters(store, "report", 3)
    deleted = client.post("/executions/actions", json={"action": "delete", "ids": dead})
    assert deleted.json()["done"] == 3
    first = client.get("/deletions", params={"limit": 2}).json()
    assert [d["execution_id"] for d in first["items"]] == dead[:2]
    assert {d["actor"] for d in first["items"]} == {"alice"}
    assert {(d["job"], d["queue"], d["state"]) for d in first["items"]} == {
        ("report", "default", "FAILED")
    }
    rest = client.get("/deletions", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert ([d["execution_id"] for d in rest["items"]], rest["next_cursor"]) == (dead[2:], None)
    for cursor in ("x", "-1", "1" * 40, "' OR 1=1 --"):
        assert_problem(
            client.get("/deletions", params={"cursor": cursor}), 422, "validation", "cursor"
        )
    assert_problem(client.get("/deletions", params={"limit": 0}), 422, "validation", "limit")


def test_the_client_acts_and_reads_deletions(client: TestClient, store: Store) -> None:
    dead = dead_letters(store, "report", 3)
    with Client("http://testserver", http=client) as remote:
        dry = remote.act("delete", filter={"job": "report", "state": State.FAILED}, dry_run=True)
        assert (dry.action, dry.dry_run, dry.matched) == (Action.DELETE, True, 3)
        assert [e.id for e in dry.preview] == dead
        assert dry.preview[0] == store.get(dead[0])
        first = remote.act("delete", ids=dead, limit=2)
        assert (first.done, first.next_cursor) == (2, dead[1])
        rest = remote.act("delete", ids=dead, limit=2, after=first.next_cursor)
        assert (rest.done, rest.next_cursor) == (1, None)
        page = remote.deletions(limit=10)
        assert [d.execution_id for d in page.items] == dead
        assert page.items[0] == store.deletions().items[0]


def test_the_async_client_acts_the_same(client: TestClient, store: Store) -> None:
    dead = dead_letters(store, "report", 2)

    async def scenario(aclient: AsyncClient) -> tuple[BulkResult, BulkResult, Any]:
        dry = await aclient.act("replay", ids=dead, dry_run=True)
        done = await aclient.act("replay", filter={"job": "report"})
        refused = await async_error(aclient.act("replay", filter={"nope": 1}))
        return dry, done, refused

    dry, done, refused = run(client.app, scenario, token=ADMIN)
    assert ([e.id for e in dry.preview], dry.matched) == (dead, 2)
    assert (done.done, done.next_cursor) == (2, None)
    assert isinstance(refused, ValidationError)
    assert refused.field == "filter.nope"
    assert store.transitions(dead[0])[-1].actor == "alice"


#: Bodies and the field each 422 must name.
HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"action": "explode", "filter": {}}, "action"),
    ({"action": None, "filter": {}}, "action"),
    ({"action": ["replay"], "filter": {}}, "action"),
    ({"filter": {}}, "action"),
    ({"action": "replay"}, "filter"),
    ({"action": "replay", "filter": {}, "ids": [NOBODY]}, "ids"),
    ({"action": "replay", "ids": []}, "ids"),
    ({"action": "replay", "ids": NOBODY}, "ids"),
    ({"action": "replay", "ids": [NOBODY, "not-an-id"]}, "ids.1"),
    ({"action": "replay", "ids": [UPPER]}, "ids.0"),
    ({"action": "replay", "ids": ["' OR 1=1 --"]}, "ids.0"),
    ({"action": "replay", "ids": [{"a": [1]}]}, "ids.0"),
    ({"action": "replay", "ids": [NOBODY] * 10_001}, "ids"),
    ({"action": "replay", "filter": {"nope": 1}}, "filter.nope"),
    ({"action": "replay", "filter": {"job": {"a": {"b": [1]}}}}, "filter.job"),
    ({"action": "replay", "filter": {"job": 5}}, "filter.job"),
    ({"action": "replay", "filter": {"state": ["NOPE"]}}, "filter.state.0"),
    ({"action": "replay", "filter": {"state": "FAILED"}}, "filter.state"),
    ({"action": "replay", "filter": {"bucket": -1}}, "filter.bucket"),
    ({"action": "replay", "filter": {"bucket": 10**30}}, "filter.bucket"),
    ({"action": "replay", "filter": {"bucket": 65536}}, "filter.bucket"),
    ({"action": "replay", "filter": {"due_after": "2026-01-01T00:00:00"}}, "filter.due_after"),
    ({"action": "replay", "filter": {"due_after": "yesterday"}}, "filter.due_after"),
    ({"action": "replay", "filter": {"outcome": "%"}}, "filter.outcome"),
    ({"action": "replay", "filter": []}, "filter"),
    ({"action": "replay", "filter": {}, "limit": 0}, "limit"),
    ({"action": "replay", "filter": {}, "limit": -1}, "limit"),
    ({"action": "replay", "filter": {}, "limit": 10_001}, "limit"),
    ({"action": "replay", "filter": {}, "limit": 10**40}, "limit"),
    ({"action": "replay", "filter": {}, "limit": "10"}, "limit"),
    ({"action": "replay", "filter": {}, "limit": True}, "limit"),
    ({"action": "replay", "filter": {}, "dry_run": "yes"}, "dry_run"),
    ({"action": "replay", "filter": {}, "cursor": "x"}, "cursor"),
    ({"action": "replay", "filter": {}, "cursor": "\x00"}, "cursor"),
    ({"action": "replay", "filter": {}, "actor": "mallory"}, "actor"),
]


def test_hostile_requests_are_a_422_naming_the_field(client: TestClient, store: Store) -> None:
    dead_letters(store, "report", 1)
    before = stored(store)
    for body, field in HOSTILE:
        answer = client.post("/executions/actions", json=body)
        assert_problem(answer, 422, "validation", field)
    # Text no job holds selects nothing (or, where JSON cannot carry it, is refused).
    for job in ("a\x00b", "\udc00", "' OR 1=1 --", "%", "_", "x" * 5000, "report%", "repo_t"):
        content = f'{{"action": "delete", "filter": {{"job": {_json_string(job)}}}}}'
        answer = client.post(
            "/executions/actions", content=content, headers={"Content-Type": "application/json"}
        )
        if answer.status_code == 422:
            assert_problem(answer, 422, "validation")
        else:
            assert answer.status_code == 200, answer.text
            assert (answer.json()["matched"], answer.json()["done"]) == (0, 0), repr(job)
    assert stored(store) == before, "nothing was written"


def _json_string(text: str) -> str:
    """``text`` as a JSON string literal, lone surrogates escaped (as a client may send)."""
    out = []
    for char in text:
        if char in '"\\' or ord(char) < 0x20 or 0xD800 <= ord(char) <= 0xDFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'

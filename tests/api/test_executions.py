"""The HTTP service's executions slice, over the memory and SQLite stores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fencepost.domain.errors import StoreUnavailable
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem, running

# -- submit -----------------------------------------------------------------------------


def test_submit_returns_the_new_execution(client: TestClient, store: Store) -> None:
    response = client.post(
        "/executions",
        json={
            "job": "email",
            "version": 2,
            "inputs": {"to": "a@example.com"},
            "execute_at": "2030-01-01T12:00:00+02:00",
            "max_attempts": 5,
            "bucket_key": "tenant-1",
            "priority": 7,
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()
    stored = store.get(body["id"])
    assert body["job"] == "email"
    assert body["version"] == 2
    assert body["inputs"] == {"to": "a@example.com"}
    assert body["state"] == "SCHEDULED"
    assert body["due_at"].startswith("2030-01-01T10:00:00")
    assert (body["max_attempts"], body["priority"], body["bucket_key"]) == (5, 7, "tenant-1")
    assert stored.job_version == 2
    assert response.headers["etag"].startswith('"0-')


def test_submit_with_delay(client: TestClient, store: Store) -> None:
    response = client.post("/executions", json={"job": "later", "delay_seconds": 60})
    assert response.status_code == 201, response.text
    stored = store.get(response.json()["id"])
    assert (stored.due_at - stored.created_at).total_seconds() == pytest.approx(60)


def test_idempotent_submit_201_then_200_then_409(client: TestClient, store: Store) -> None:
    headers = {"Idempotency-Key": "order-42"}
    body = {"job": "charge", "inputs": {"cents": 100}}
    first = client.post("/executions", json=body, headers=headers)
    again = client.post("/executions", json=body, headers=headers)
    other = client.post("/executions", json={**body, "inputs": {"cents": 999}}, headers=headers)
    assert first.status_code == 201, first.text
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    assert_problem(other, 409, "idempotency-conflict")
    assert [e.id for e in store.query().items] == [first.json()["id"]]


def test_submit_without_key_always_creates(client: TestClient, store: Store) -> None:
    for _ in range(2):
        assert client.post("/executions", json={"job": "x"}).status_code == 201
    assert len(store.query().items) == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"inputs": {}}, "job", id="missing-job"),
        pytest.param({"job": "x", "priority": "high"}, "priority", id="wrong-type"),
        pytest.param({"job": "x", "version": "2"}, "version", id="version-as-string"),
        pytest.param({"job": "x", "colour": "red"}, "colour", id="unknown-field"),
        pytest.param(
            {"job": "x", "execute_at": "2030-01-01T12:00:00"}, "execute_at", id="naive-execute-at"
        ),
        pytest.param(
            {"job": "x", "execute_at": 1_900_000_000}, "execute_at", id="execute-at-as-number"
        ),
        pytest.param(
            {"job": "x", "execute_at": "1900000000"}, "execute_at", id="execute-at-as-digits"
        ),
        pytest.param({"job": "x", "delay_seconds": -1}, "delay_seconds", id="negative-delay"),
        pytest.param({"job": "x", "delay_seconds": "5"}, "delay_seconds", id="delay-as-string"),
        pytest.param(
            {"job": "x", "execute_at": "2030-01-01T12:00:00Z", "delay_seconds": 5},
            "execute_at",
            id="execute-at-and-delay",
        ),
        pytest.param({"job": "x", "max_attempts": 0}, "max_attempts", id="zero-attempts"),
        pytest.param({"job": ""}, "job", id="empty-job"),
    ],
)
def test_bad_submit_is_a_problem_and_stores_nothing(
    client: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    assert_problem(client.post("/executions", json=body), 422, "validation", field)
    assert store.query().items == []


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        (
            "/executions",
            {"job": "x", "delay": 60},
            "delay: is not a field of this request (did you mean 'delay_seconds'?)",
        ),
        (
            "/executions",
            {"job": "x", "max_attempt": 2},
            "max_attempt: is not a field of this request (did you mean 'max_attempts'?)",
        ),
        (
            "/executions/batch",
            {"items": [{"job": "x"}, {"job": "x", "idempotencykey": "k"}]},
            "items.1.idempotencykey: is not a field of this request "
            "(did you mean 'idempotency_key'?)",
        ),
    ],
    ids=["delay", "max-attempt", "batch-item"],
)
def test_an_unknown_field_is_named_with_the_field_meant(
    client: TestClient, store: Store, path: str, body: Any, detail: str
) -> None:
    response = client.post(path, json=body)
    assert_problem(response, 422, "validation", detail.split(":")[0])
    assert response.json()["detail"] == detail
    assert store.query().items == []


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("", "is not a field of this request"),
        ("\u0000", "is not a field of this request"),
        # Not text at all: the body is refused before its keys are looked at.
        ("\\ud800", "body: Input should be a valid string"),
        ("d" * 3000, "is not a field of this request"),
        ("delay\u0000", "is not a field of this request"),
        ("__proto__", "is not a field of this request"),
        ("1e309", "is not a field of this request"),
    ],
    ids=["empty", "nul", "lone-surrogate", "long", "nul-suffix", "proto", "number-like"],
)
def test_a_hostile_unknown_field_is_refused_and_the_answer_is_json(
    client: TestClient, store: Store, key: str, says: str
) -> None:
    # The body is sent as text: a lone surrogate must arrive as the JSON escape it is.
    name = key.replace("\u0000", "\\u0000")
    body = '{"job": "x", "' + name + '": 1}'
    response = client.post(
        "/executions", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422, response.text
    problem = response.json()  # decodes: the answer is valid JSON whatever the key held
    assert problem["type"].endswith("/validation")
    assert says in problem["detail"]
    assert store.query().items == []


def test_the_commands_of_an_unknown_or_hostile_id_are_a_404(client: TestClient) -> None:
    for execution_id in ("nope", "%00", "x" * 3000, "%F0%9F%92%A9"):
        response = client.get(f"/executions/{execution_id}/commands")
        assert_problem(response, 404, "not-found")


def test_inputs_that_are_not_json_are_refused(client: TestClient, store: Store) -> None:
    # Python's JSON parser accepts NaN, which is not JSON: the store's encoder refuses it.
    response = client.post(
        "/executions",
        content=b'{"job": "x", "inputs": {"ratio": NaN}}',
        headers={"Content-Type": "application/json"},
    )
    assert_problem(response, 422, "validation", "inputs")
    assert store.query().items == []


def test_a_body_that_is_not_json_is_refused(client: TestClient, store: Store) -> None:
    response = client.post(
        "/executions", content=b'{"job": ', headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 422, "validation", "body")
    assert store.query().items == []


def test_bad_idempotency_key_names_the_header(client: TestClient, store: Store) -> None:
    response = client.post("/executions", json={"job": "x"}, headers={"Idempotency-Key": "k" * 300})
    assert_problem(response, 422, "validation", "Idempotency-Key")
    assert store.query().items == []


def test_oversized_body_is_413(client: TestClient, store: Store) -> None:
    body = {"job": "x", "inputs": {"blob": "a" * 5000}}
    assert_problem(client.post("/executions", json=body), 413, "body-too-large", "body")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield b'{"job": "x", "inputs": "'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"}'

    response = client.post(
        "/executions", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 413, "body-too-large")
    assert store.query().items == []


# -- reading ----------------------------------------------------------------------------


def test_get_with_etag_and_304(client: TestClient, store: Store) -> None:
    created = client.post("/executions", json={"job": "x"}).json()
    first = client.get(f"/executions/{created['id']}")
    assert first.status_code == 200
    assert first.json() == created
    tag = first.headers["etag"]
    unchanged = client.get(f"/executions/{created['id']}", headers={"If-None-Match": tag})
    assert unchanged.status_code == 304
    assert unchanged.headers["etag"] == tag
    store.claim("worker-1")
    changed = client.get(f"/executions/{created['id']}", headers={"If-None-Match": tag})
    assert changed.status_code == 200
    assert changed.headers["etag"] != tag
    assert changed.headers["etag"].startswith('"1-')
    assert changed.json()["state"] == "RUNNING"


def test_get_unknown_is_404(client: TestClient) -> None:
    for path in ("", "/attempts", "/transitions"):
        assert_problem(client.get(f"/executions/nope{path}"), 404, "not-found")


def test_list_paginates_and_filters(client: TestClient, store: Store) -> None:
    ids = [store.submit("a" if i % 2 else "b").id for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get("/executions", params=params).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    only_a = client.get("/executions", params={"job": "a"}).json()
    assert [item["id"] for item in only_a["items"]] == ids[1::2]
    running_id = running(store, "c")
    by_state = client.get("/executions", params={"state": ["RUNNING"]}).json()
    assert [item["id"] for item in by_state["items"]] == [running_id]


def test_list_with_bad_filters(client: TestClient) -> None:
    assert_problem(client.get("/executions?state=DONE"), 422, "validation", "state")
    assert_problem(client.get("/executions?limit=0"), 422, "validation", "limit")


def test_attempts_and_transitions(client: TestClient, store: Store) -> None:
    execution_id = running(store)
    attempts = client.get(f"/executions/{execution_id}/attempts").json()
    assert [(a["attempt"], a["epoch"], a["owner"]) for a in attempts] == [(1, 1, "worker-1")]
    assert attempts[0]["ended_at"] is None
    trail = client.get(f"/executions/{execution_id}/transitions").json()
    assert [(t["event"], t["from_state"], t["to_state"]) for t in trail] == [
        ("SUBMITTED", None, "SCHEDULED"),
        ("CLAIMED", "SCHEDULED", "RUNNING"),
    ]


# -- cancelling, commands, replay -------------------------------------------------------


def test_delete_cancels_one_not_started(client: TestClient, store: Store) -> None:
    execution_id = store.submit("x").id
    response = client.delete(f"/executions/{execution_id}")
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "CANCELLED"
    assert store.transitions(execution_id)[-1].actor == "api"


def test_running_execution_delete_409_post_cancel_202(client: TestClient, store: Store) -> None:
    execution_id = running(store)
    assert_problem(client.delete(f"/executions/{execution_id}"), 409, "invalid-transition")
    response = client.post(f"/executions/{execution_id}/cancel")
    assert response.status_code == 202, response.text
    command = response.json()
    assert (command["kind"], command["state"], command["requested_by"]) == (
        "cancel",
        "PENDING",
        "api",
    )
    assert store.get(execution_id).state.value == "RUNNING"


@pytest.mark.parametrize("kind", ["pause", "resume"])
def test_pause_and_resume_commands(client: TestClient, store: Store, kind: str) -> None:
    execution_id = running(store)
    response = client.post(f"/executions/{execution_id}/{kind}")
    assert response.status_code == 202, response.text
    assert response.json()["kind"] == kind
    waiting = store.submit("x").id
    assert_problem(client.post(f"/executions/{waiting}/{kind}"), 409, "not-running")


def test_replay_of_a_dead_letter(client: TestClient, store: Store) -> None:
    execution = store.submit("fragile", max_attempts=1)
    [lease] = store.claim("worker-1")
    store.fail(lease, "boom", retryable=False)
    letters = client.get("/dead-letters").json()
    assert [item["id"] for item in letters["items"]] == [execution.id]
    assert letters["items"][0]["error"] == "boom"
    response = client.post(f"/executions/{execution.id}/replay")
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "SCHEDULED"
    assert client.get("/dead-letters").json() == {"items": [], "next_cursor": None}
    assert_problem(client.post(f"/executions/{execution.id}/replay"), 409, "invalid-transition")


# -- health and the schema --------------------------------------------------------------


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ok"})


def test_a_closed_store_is_503(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.close()
    if type(store).__name__ == "MemoryStore":  # closing a memory store releases nothing

        def unavailable(*_: Any, **__: Any) -> Any:
            raise StoreUnavailable("closed")

        monkeypatch.setattr(store, "query", unavailable)
        monkeypatch.setattr(store, "get", unavailable)
    assert_problem(client.get("/readyz"), 503, "store-unavailable")
    assert_problem(client.get("/executions/x"), 503, "store-unavailable")
    assert client.get("/healthz").status_code == 200


def test_openapi_declares_routes_and_problems(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    post = schema["paths"]["/executions"]["post"]
    assert {"201", "200", "409", "413", "422"} <= set(post["responses"])
    assert set(post["responses"]["409"]["content"]) == {"application/problem+json"}
    assert set(post["responses"]["201"]["content"]) == {"application/json"}
    assert "Problem" in schema["components"]["schemas"]
    assert "/executions/{execution_id}/cancel" in schema["paths"]
    for operations in schema["paths"].values():  # every declared 422 is a problem
        for operation in operations.values():
            if "422" in operation["responses"]:
                assert set(operation["responses"]["422"]["content"]) == {"application/problem+json"}


def test_list_newest_first_pages_backwards(client: TestClient, store: Store) -> None:
    made = [store.submit("x").id for _ in range(5)]
    first = client.get("/executions", params={"order": "desc", "limit": 3}).json()
    assert [e["id"] for e in first["items"]] == made[::-1][:3]
    rest = client.get(
        "/executions", params={"order": "desc", "limit": 3, "cursor": first["next_cursor"]}
    ).json()
    assert [e["id"] for e in rest["items"]] == made[::-1][3:]
    assert rest["next_cursor"] is None
    assert_problem(client.get("/executions", params={"order": "up"}), 422, "validation", "order")


def test_every_answer_forbids_content_sniffing(client: TestClient, store: Store) -> None:
    for response in (
        client.get("/executions"),
        client.get("/executions/missing"),
        client.post("/executions", json={"job": "x"}),
        client.get("/healthz"),
    ):
        assert response.headers["x-content-type-options"] == "nosniff"

"""The audit actor of every HTTP and dashboard action: the name of the token that made it.

With auth off (no tokens) it is ``api``. A dashboard action is audited as the token the
dashboard signed in with.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fencepost.api import create_app
from fencepost.api.auth import CSRF_COOKIE, SESSION_COOKIE, Auth, Principal, Scope
from fencepost.store.base import Store
from tests.api.support import TestClient, running

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"


@pytest.fixture
def auth() -> Auth:
    """Two admin tokens, named ``alice`` and ``bob``."""
    admin = frozenset({Scope.ADMIN})
    return Auth(
        {ALICE: Principal(name="alice", scopes=admin), BOB: Principal(name="bob", scopes=admin)}
    )


@pytest.fixture
def client(store: Store, auth: Auth) -> Iterator[TestClient]:
    """An in-process client of an app with auth on."""
    with TestClient(create_app(store, auth=auth)) as c:
        yield c


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_cancel_by_alice_is_audited_as_alice(client: TestClient, store: Store) -> None:
    execution_id = store.submit("x").id
    response = client.delete(f"/executions/{execution_id}", headers=as_(ALICE))
    assert response.status_code == 200, response.text
    assert store.transitions(execution_id)[-1].actor == "alice"


def test_the_actor_follows_the_token_not_the_first_caller(client: TestClient, store: Store) -> None:
    first, second = store.submit("x").id, store.submit("x").id
    assert client.delete(f"/executions/{first}", headers=as_(BOB)).status_code == 200
    assert client.delete(f"/executions/{second}", headers=as_(ALICE)).status_code == 200
    assert store.transitions(first)[-1].actor == "bob"
    assert store.transitions(second)[-1].actor == "alice"


@pytest.mark.parametrize("kind", ["cancel", "pause", "resume"])
def test_a_command_records_its_token_as_requester(
    client: TestClient, store: Store, kind: str
) -> None:
    execution_id = running(store, "work")
    response = client.post(f"/executions/{execution_id}/{kind}", headers=as_(ALICE))
    assert response.status_code == 202, response.text
    assert response.json()["requested_by"] == "alice"
    assert [c.requested_by for c in store.commands(execution_id)] == ["alice"]


def test_a_replay_is_audited_as_its_token(client: TestClient, store: Store) -> None:
    execution = store.submit("fragile", max_attempts=1)
    [lease] = store.claim("worker-1")
    store.fail(lease, "boom", retryable=False)
    response = client.post(f"/executions/{execution.id}/replay", headers=as_(BOB))
    assert response.status_code == 200, response.text
    assert store.transitions(execution.id)[-1].actor == "bob"


def test_a_dashboard_action_is_audited_as_its_signed_in_token(
    client: TestClient, store: Store
) -> None:
    signed_in = client.post("/session", json={"token": ALICE})
    assert signed_in.status_code < 300, signed_in.text
    session = signed_in.cookies[SESSION_COOKIE]
    execution_id = store.submit("x").id
    response = client.delete(
        f"/executions/{execution_id}",
        headers={"Cookie": f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}=abc", "X-CSRF-Token": "abc"},
    )
    assert response.status_code == 200, response.text
    assert store.transitions(execution_id)[-1].actor == "alice"


def test_with_auth_off_the_actor_is_api(store: Store) -> None:
    execution_id = store.submit("x").id
    with TestClient(create_app(store)) as client:
        assert client.delete(f"/executions/{execution_id}").status_code == 200
    assert store.transitions(execution_id)[-1].actor == "api"


def test_submits_are_audited_with_their_tokens_name(client: TestClient, store: Store) -> None:
    one = client.post("/executions", json={"job": "x"}, headers=as_(ALICE))
    assert one.status_code == 201, one.text
    batch = client.post(
        "/executions/batch", json={"items": [{"job": "x"}, {"job": "y"}]}, headers=as_(BOB)
    )
    assert batch.status_code == 201, batch.text
    assert store.transitions(one.json()["id"])[0].actor == "alice"
    for item in batch.json()["items"]:
        [submitted] = store.transitions(item["id"])
        assert (submitted.event.value, submitted.actor) == ("SUBMITTED", "bob")
    # A keyed retry by another token finds the first: it is not a different request.
    key = {"Idempotency-Key": "k-1"}
    first = client.post("/executions", json={"job": "x"}, headers=as_(ALICE) | key)
    again = client.post("/executions", json={"job": "x"}, headers=as_(BOB) | key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert store.transitions(first.json()["id"])[0].actor == "alice"

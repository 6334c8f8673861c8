"""``POST /schedules/{id}/run``: one run of a schedule now, through the API and both clients.

201 with the execution in the usual wire shape, audited as the token's name; a paused
schedule runs too; each request runs it once more; 404 for an unknown or impossible id
(nothing written); admin scope, as the other changes of a schedule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.client import AsyncClient, Client, Forbidden
from fencepost.domain.errors import NotFound
from fencepost.domain.models import Execution
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract import at
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock

ALICE = "alice-token-0123456789"
READER = "reader-token-0123456789"


@pytest.fixture
def auth() -> Auth:
    """An admin token named ``alice`` and a read-only one."""
    return Auth(
        {
            ALICE: Principal(name="alice", scopes=frozenset({Scope.ADMIN})),
            READER: Principal(name="reader", scopes=frozenset({Scope.READ})),
        }
    )


@pytest.fixture
def secured(store: Store, auth: Auth) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=auth)) as c:
        yield c


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_run_answers_201_with_the_new_execution(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.add_schedule("report", cron="0 2 * * *", id="nightly", inputs={"day": "x"}, priority=3)
    clock.set(42)
    response = client.post("/schedules/nightly/run")
    assert response.status_code == 201, response.text
    body = response.json()
    execution = store.get(body["id"])
    assert body["schedule_id"] == "nightly"
    assert body["slot"] is None
    assert body["idempotency_key"] == f"nightly:run:{execution.id}"
    assert (body["job"], body["inputs"], body["priority"], body["state"]) == (
        "report",
        {"day": "x"},
        3,
        "SCHEDULED",
    )
    assert execution.due_at == at(42)
    assert response.headers["ETag"]
    assert client.get(f"/executions/{execution.id}").json() == body, "the usual wire shape"
    (submitted,) = store.transitions(execution.id)
    assert (submitted.event, submitted.actor) == (Event.SUBMITTED, "api"), "auth off: api"
    again = client.post("/schedules/nightly/run")
    assert again.status_code == 201
    assert again.json()["id"] != body["id"], "each request runs it once more"


def test_run_is_audited_as_the_token_and_needs_admin(secured: TestClient, store: Store) -> None:
    store.add_schedule("report", every=60, id="s", paused=True)
    response = secured.post("/schedules/s/run", headers=as_(ALICE))
    assert response.status_code == 201, response.text
    assert store.transitions(response.json()["id"])[0].actor == "alice"
    assert store.get(response.json()["id"]).state is State.SCHEDULED, "paused: it runs"
    assert_problem(secured.post("/schedules/s/run", headers=as_(READER)), 403, "forbidden")
    assert_problem(secured.post("/schedules/s/run"), 401, "unauthorized")
    assert len(store.query(schedule="s").items) == 1


@pytest.mark.parametrize(
    "path_id", ["nope", "a%00b", "%ED%A0%80", "x" * 201, "y" * 4000, "%20", "s%20"]
)
def test_run_of_an_unknown_or_impossible_id_is_404(
    client: TestClient, store: Store, path_id: str
) -> None:
    store.add_schedule("report", every=60, id="s")
    assert_problem(client.post(f"/schedules/{path_id}/run"), 404, "not-found")
    assert store.query().items == []


def test_both_clients_run_a_schedule(client: TestClient, store: Store, clock: ManualClock) -> None:
    store.add_schedule("report", every=60, id="s")
    clock.set(7)
    with Client("http://testserver", http=client) as remote:
        ran = remote.run_schedule("s")
        with pytest.raises(NotFound) as missing:
            remote.run_schedule("nope")
    assert "nope" in str(missing.value)
    assert ran == store.get(ran.id)
    assert (ran.schedule_id, ran.slot, ran.due_at) == ("s", None, at(7))

    async def scenario() -> tuple[Execution, BaseException]:
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=client.app), base_url="http://testserver"
        )
        async with AsyncClient("http://testserver", http=http) as aclient:
            ran = await aclient.run_schedule("s")
            try:
                await aclient.run_schedule("nope")
            except NotFound as exc:
                return ran, exc
        raise AssertionError("no NotFound")

    ran_async, error = asyncio.run(scenario())
    assert ran_async == store.get(ran_async.id)
    assert ran_async.id != ran.id
    assert str(error) == str(missing.value)


def test_the_client_s_token_is_the_actor(secured: TestClient, store: Store) -> None:
    store.add_schedule("report", every=60, id="s")
    # Not closed here: closing a Client closes the TestClient it was given.
    alice = Client("http://testserver", token=ALICE, http=secured)
    ran = alice.run_schedule("s")
    assert store.transitions(ran.id)[0].actor == "alice"
    reader = Client("http://testserver", token=READER, http=secured)
    with pytest.raises(Forbidden):
        reader.run_schedule("s")
    assert [e.id for e in store.query(schedule="s").items] == [ran.id]

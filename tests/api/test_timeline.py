"""``GET /executions/{id}/timeline`` and the clients' ``timeline``, on every backend.

One execution lives through a throttled claim, a takeover, a refused stale completion
and a cancel request, with hostile names as its owner and requester; the answer must
carry the contract's fields, place the refusal on the old lease, and decode in both
clients to what :func:`fencepost.domain.timeline.timeline` decides from the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import quote

import httpx
import pytest

from fencepost.api import create_app
from fencepost.api.timeline import read_timeline
from fencepost.client import AsyncClient, Client
from fencepost.domain.errors import NotFound, StaleLease
from fencepost.domain.states import CommandKind, State
from fencepost.domain.timeline import LeaseEnding, RefusedWrite, Timeline, WaitKind
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract.support import at
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock

BASE = "http://testserver"
OWNER = "<img src=x onerror=alert(1)>"
ACTOR = "'; DROP TABLE executions; -- %_"

#: The fields the shared API contract names, per object of the answer.
CONTRACT = {
    "timeline": {"execution_id", "state", "now", "start", "end", "leases", "waits", "marks"},
    "lease": {"epoch", "owner", "start", "end", "ending", "lease_until", "refused"},
    "refused": {"at", "verb", "owner"},
    "wait": {"kind", "start", "end", "detail"},
    "mark": {"at", "kind", "actor", "detail"},
}


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client(BASE, http=client) as c:
        yield c


def live_through_a_takeover(store: Store, clock: ManualClock) -> str:
    """Held by a rate for 1.5 s, claimed by OWNER, taken over by worker-b once OWNER's
    lease expired, OWNER's completion refused, then a cancel asked by ACTOR."""
    store.set_limit("job:job", rate="1/s", burst=1)
    store.submit("job")  # takes the one token
    subject = store.submit("job")
    store.claim("w0", limit=10)
    clock.set(1.5)
    (old,) = store.claim(OWNER, ttl=5)
    assert old.execution_id == subject.id
    store.remove_limit("job:job")
    clock.set(6.5)  # OWNER's lease ends here (live strictly before lease_until)
    (new,) = store.claim("worker-b", ttl=60)
    assert (new.execution_id, new.epoch) == (subject.id, 2)
    clock.set(7)
    with pytest.raises(StaleLease):
        store.complete(old, "too late")
    clock.set(8)
    store.request(subject.id, CommandKind.CANCEL, actor=ACTOR)
    clock.set(9)
    store.heartbeat(new, ttl=60)
    clock.set(10)
    return subject.id


def test_the_timeline_of_a_takeover_with_a_refused_completion(
    client: TestClient, remote: Client, store: Store, clock: ManualClock
) -> None:
    execution_id = live_through_a_takeover(store, clock)

    response = client.get(f"/executions/{execution_id}/timeline")

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == CONTRACT["timeline"]
    assert (body["execution_id"], body["state"]) == (execution_id, "RUNNING")
    old, new = body["leases"]
    for lease in (old, new):
        assert set(lease) >= CONTRACT["lease"]
    assert (old["epoch"], old["owner"], old["ending"], old["end"]) == (
        1,
        OWNER,
        "taken_over",
        "2026-01-01T00:00:06.500000Z",
    )
    [refused] = old["refused"]
    assert set(refused) == CONTRACT["refused"]
    assert (refused["verb"], refused["owner"], refused["at"]) == (
        "complete",
        OWNER,
        "2026-01-01T00:00:07Z",
    )
    assert (new["epoch"], new["owner"], new["ending"], new["end"], new["refused"]) == (
        2,
        "worker-b",
        "running",
        None,
        [],
    )
    assert new["lease_until"] == "2026-01-01T00:01:09Z"  # renewed at 9 for 60 s
    [throttled] = body["waits"]
    assert set(throttled) == CONTRACT["wait"]
    assert throttled == {
        "kind": "throttled",
        "start": "2026-01-01T00:00:00Z",
        "end": "2026-01-01T00:00:01.500000Z",
        "detail": "held by job:job",
    }
    submitted, cancel = body["marks"]
    assert set(cancel) == CONTRACT["mark"]
    assert (submitted["kind"], cancel["kind"], cancel["actor"], cancel["detail"]) == (
        "submitted",
        "cancel_requested",
        ACTOR,
        "not delivered yet",
    )
    assert (body["start"], body["end"], body["now"]) == (
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:01:09Z",
        "2026-01-01T00:00:10Z",
    )

    # The client decodes the same answer into the domain's own values.
    got = remote.timeline(execution_id)
    assert isinstance(got, Timeline)
    assert got == read_timeline(store, execution_id)
    assert got.state is State.RUNNING
    assert [lease.ending for lease in got.leases] == [LeaseEnding.TAKEN_OVER, LeaseEnding.RUNNING]
    assert got.leases[0].refused == [RefusedWrite(at=at(7), verb="complete", owner=OWNER)]
    [throttled_wait] = got.waits
    assert throttled_wait.kind is WaitKind.THROTTLED
    assert (throttled_wait.start, throttled_wait.end) == (at(0), at(0) + timedelta(seconds=1.5))


@pytest.mark.parametrize(
    "execution_id",
    [
        "00000000-0000-7000-8000-000000000000",
        "not-an-id",
        "%00",
        "a%00b",
        "%ED%A0%80",  # a lone surrogate's UTF-8 bytes
        quote("'; DROP TABLE executions; --", safe=""),
        "%25_",
        "x" * 5000,
    ],
)
def test_an_unknown_or_hostile_id_is_a_404(
    client: TestClient, store: Store, execution_id: str
) -> None:
    store.submit("job")
    assert_problem(client.get(f"/executions/{execution_id}/timeline"), 404, "not-found")


def test_the_clients_say_not_found(remote: Client, client: TestClient) -> None:
    unknown = "00000000-0000-7000-8000-000000000000"
    with pytest.raises(NotFound):
        remote.timeline(unknown)

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=client.app)
        async with AsyncClient(
            BASE, http=httpx.AsyncClient(transport=transport, base_url=BASE)
        ) as a:
            with pytest.raises(NotFound):
                await a.timeline(unknown)

    asyncio.run(scenario())


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_async_client_reads_what_the_sync_one_does(
    remote: Client, store: Store, clock: ManualClock
) -> None:
    execution_id = live_through_a_takeover(store, clock)
    app = create_app(store)

    async def scenario() -> Timeline:
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient(
            BASE, http=httpx.AsyncClient(transport=transport, base_url=BASE)
        ) as a:
            return await a.timeline(execution_id)

    assert asyncio.run(scenario()) == remote.timeline(execution_id)

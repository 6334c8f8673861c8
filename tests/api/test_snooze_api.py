"""``POST /executions/{id}/snooze``: the worker protocol's snooze, and the Client's verb.

A remote worker (``fencepost worker --server``) snoozes through it: fenced by owner and
epoch like every report, the attempt not counted, the service's store bound applying,
and bad seconds refused with a 422 naming ``seconds`` before anything is written.
``fail``'s ``retry_in_seconds`` carries a handler's ``Retry(after=)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.machine import SNOOZED_TOO_OFTEN
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as c:
        yield c


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def claim(client: TestClient, owner: str = "w") -> dict[str, Any]:
    response = client.post("/claims", json={"owner": owner, "ttl_seconds": 30})
    assert response.status_code == 200, response.text
    (lease,) = response.json()["leases"]
    return dict(lease)


def snooze(client: TestClient, lease: dict[str, Any], **body: Any) -> Any:
    return client.post(
        f"/executions/{lease['execution_id']}/snooze",
        json={"owner": lease["owner"], "epoch": lease["epoch"], **body},
    )


def test_a_snooze_over_http_keeps_the_attempt(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    e = store.submit("job", max_attempts=1)
    lease = claim(client)
    clock.advance(2)
    answer = snooze(client, lease, seconds=30, reason="bank closed")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["state"], body["attempt"]) == ("SCHEDULED", 0)
    assert store.get(e.id).due_at == e.due_at + timedelta(seconds=32)
    (t,) = [t for t in store.transitions(e.id) if t.event is Event.SNOOZED]
    assert (t.actor, t.reason) == ("w", "snoozed for 30 s (1 of at most 100): bank closed")
    assert_problem(snooze(client, lease, seconds=30), 409, "stale-lease")
    clock.advance(30)
    again = claim(client, "w2")
    assert (again["attempt"], again["epoch"]) == (1, 2)


@pytest.mark.parametrize(
    "seconds", [0, -1, 30 * 86400 + 1, True, "30", None, 1e-9, 1e308], ids=repr
)
def test_hostile_seconds_are_refused_naming_the_field(
    client: TestClient, store: Store, seconds: Any
) -> None:
    e = store.submit("job")
    lease = claim(client)
    trail = store.transitions(e.id)
    assert_problem(snooze(client, lease, seconds=seconds), 422, "validation", "seconds")
    assert store.transitions(e.id) == trail
    assert store.get(e.id).state is State.RUNNING


@pytest.mark.parametrize("body", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_seconds_are_refused(client: TestClient, store: Store, body: str) -> None:
    e = store.submit("job")
    lease = claim(client)
    raw = f'{{"owner": "w", "epoch": {lease["epoch"]}, "seconds": {body}}}'
    answer = client.post(
        f"/executions/{e.id}/snooze", content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    assert store.get(e.id).state is State.RUNNING


@pytest.mark.parametrize(("reason", "field"), [("", "reason"), ("x" * 1025, "reason")])
def test_a_bad_reason_is_refused(client: TestClient, store: Store, reason: str, field: str) -> None:
    store.submit("job")
    lease = claim(client)
    assert_problem(snooze(client, lease, seconds=5, reason=reason), 422, "validation", field)


def test_the_client_snoozes_and_fails_with_a_chosen_delay(
    remote: Client, store: Store, clock: ManualClock
) -> None:
    e = store.submit("job", max_attempts=2)
    (lease,) = remote.claim("remote", ttl=30)
    snoozed = remote.snooze(lease, timedelta(seconds=5), reason="later")
    assert (snoozed.state, snoozed.attempt) == (State.SCHEDULED, 0)
    with pytest.raises(StaleLease):
        remote.snooze(lease, 5)
    with pytest.raises(ValidationError) as caught:  # checked before it is sent
        remote.snooze(lease, float("nan"))
    assert caught.value.field == "seconds"
    clock.advance(5)
    (lease,) = remote.claim("remote", ttl=30)
    assert lease.attempt == 1
    clock.advance(1)
    # Retry(after=) travels as fail's retry_in: due exactly then, not after the backoff.
    waiting = remote.fail(lease, "Retry: busy (retry after 12.5 s)", retry_in=12.5)
    assert waiting.state is State.RETRY_WAIT
    assert store.get(e.id).due_at == e.due_at + timedelta(seconds=5 + 1 + 12.5)
    assert [a.outcome for a in store.attempts(e.id)] == [
        AttemptOutcome.SNOOZED,
        AttemptOutcome.FAILED,
    ]


def test_the_service_s_bound_applies_to_remote_snoozes(
    remote: Client, store: Store, clock: ManualClock
) -> None:
    e = store.submit("job", max_attempts=1)
    for _ in range(100):
        (lease,) = remote.claim("remote", ttl=30)
        remote.snooze(lease, 1)
        clock.advance(1)
    (lease,) = remote.claim("remote", ttl=30)
    dead = remote.snooze(lease, 1)
    assert (dead.state, dead.attempt) == (State.FAILED, 1)
    assert (store.get(e.id).error or "").startswith(SNOOZED_TOO_OFTEN)

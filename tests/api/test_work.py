"""The worker protocol over HTTP: the lease timeline, batches, commands, nodes, bad input."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from fencepost.api import create_app
from fencepost.domain.schedules import slot_text
from fencepost.domain.states import Event, State
from fencepost.scheduler.materializer import Materializer, MaterializerOptions
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.timing.rules import rule_of
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as c:
        yield c


def claim(client: TestClient, owner: str, **body: Any) -> list[dict[str, Any]]:
    response = client.post("/claims", json={"owner": owner, **body})
    assert response.status_code == 200, response.text
    leases: list[dict[str, Any]] = response.json()["leases"]
    return leases


def report(client: TestClient, lease: dict[str, Any], verb: str, **body: Any) -> Any:
    return client.post(
        f"/executions/{lease['execution_id']}/{verb}",
        json={"owner": lease["owner"], "epoch": lease["epoch"], **body},
    )


def test_the_lease_timeline_over_http(client: TestClient, store: Store, clock: ManualClock) -> None:
    """A stalled worker's late completion is refused; its successor's result stands."""
    execution = store.submit("report", inputs={"day": 1})
    [a] = claim(client, "worker-a", ttl_seconds=10)
    assert (a["epoch"], a["attempt"], a["inputs"], a["job"]) == (1, 1, {"day": 1}, "report")
    assert a["due_at"] == execution.due_at.isoformat().replace("+00:00", "Z")

    clock.advance(5)
    renewed = report(client, a, "heartbeat", ttl_seconds=10, progress={"done": 1})
    assert renewed.status_code == 200, renewed.text
    assert store.get(execution.id).progress == {"done": 1}

    clock.advance(11)  # A stalls past its lease; B takes over at epoch 2
    [b] = claim(client, "worker-b", ttl_seconds=10)
    assert (b["execution_id"], b["epoch"], b["attempt"]) == (execution.id, 2, 2)

    late = report(client, a, "complete", result={"by": "a"})
    assert_problem(late, 409, "stale-lease")
    assert_problem(report(client, a, "heartbeat"), 409, "stale-lease")
    assert_problem(report(client, a, "fail", error="boom"), 409, "stale-lease")

    done = report(client, b, "complete", result={"by": "b"})
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "SUCCEEDED"
    final = store.get(execution.id)
    assert (final.state, final.result, final.epoch) == (State.SUCCEEDED, {"by": "b"}, 2)
    refused = [t for t in store.transitions(execution.id) if t.event is Event.STALE_REFUSED]
    assert [(t.actor, t.epoch) for t in refused] == [("worker-a", 1)] * 3
    assert_problem(report(client, b, "complete", result={"by": "b"}), 409, "stale-lease")


def test_fail_retries_then_dead_letters(client: TestClient, store: Store) -> None:
    execution = store.submit("flaky", max_attempts=2)
    [first] = claim(client, "w")
    retried = report(client, first, "fail", error="boom", retry_in_seconds=0)
    assert retried.status_code == 200, retried.text
    assert retried.json()["state"] == "RETRY_WAIT"
    [second] = claim(client, "w")
    dead = report(client, second, "fail", error="boom again", retryable=False)
    assert dead.json()["state"] == "FAILED"
    assert store.get(execution.id).error == "boom again"


def test_timed_out_failure_is_audited_as_such(client: TestClient, store: Store) -> None:
    execution = store.submit("slow", max_attempts=1)
    [lease] = claim(client, "w")
    assert report(client, lease, "fail", error="ran past 5s", timed_out=True).status_code == 200
    events = [t.event for t in store.transitions(execution.id)]
    assert Event.TIMED_OUT in events
    assert store.get(execution.id).state is State.FAILED


def test_a_result_that_is_too_large_fails_the_execution(client: TestClient, store: Store) -> None:
    execution = store.submit("big")
    [lease] = claim(client, "w")
    response = report(client, lease, "complete", result="x" * 2_000_000)
    # The 1 MiB body cap answers before the store sees it; the lease stays held.
    assert_problem(response, 413, "body-too-large", "body")
    assert store.get(execution.id).state is State.RUNNING


def test_release_makes_it_claimable_at_once(client: TestClient, store: Store) -> None:
    execution = store.submit("x")
    [lease] = claim(client, "w1")
    released = report(client, lease, "release", reason="shutting down")
    assert released.json()["state"] == "SCHEDULED"
    [again] = claim(client, "w2")
    assert (again["execution_id"], again["epoch"], again["attempt"]) == (execution.id, 2, 1)


def test_batches_answer_per_item(client: TestClient, store: Store, clock: ManualClock) -> None:
    ids = [store.submit("batch").id for _ in range(3)]
    leases = claim(client, "w", limit=3, ttl_seconds=10)
    assert sorted(le["execution_id"] for le in leases) == sorted(ids)
    forged = {**leases[2], "epoch": 7}
    beats = client.post(
        "/heartbeats",
        json={
            "ttl_seconds": 20,
            "items": [
                {"execution_id": le["execution_id"], "owner": "w", "epoch": le["epoch"]}
                for le in [leases[0], forged]
            ],
        },
    )
    assert beats.status_code == 200, beats.text
    renewed, refused = beats.json()["results"]
    assert renewed["execution_id"] == leases[0]["execution_id"]
    assert refused["type"].endswith("/stale-lease")

    items = [
        {"execution_id": le["execution_id"], "owner": "w", "epoch": le["epoch"], "result": i}
        for i, le in enumerate([leases[0], leases[1], forged])
    ]
    done = client.post("/completions", json={"items": items})
    assert done.status_code == 200, done.text
    first, second, third = done.json()["results"]
    assert (first, second) == (None, None)
    assert third["type"].endswith("/stale-lease")
    states = {e: store.get(e).state for e in ids}
    assert states[leases[0]["execution_id"]] is State.SUCCEEDED
    assert states[leases[2]["execution_id"]] is State.RUNNING


def test_claim_filters_by_job_version_and_bucket(client: TestClient, store: Store) -> None:
    store.submit("a", version=1)
    wanted = store.submit("a", version=2)
    store.submit("b")
    leases = claim(client, "w", limit=10, jobs=["a"], versions=[{"job": "a", "version": 2}])
    assert [le["execution_id"] for le in leases] == [wanted.id]
    other = store.submit("c", bucket_key="tenant-1")
    leases = claim(client, "w", limit=10, jobs=["c"], buckets=[(other.bucket + 1) % 1024])
    assert leases == []
    leases = claim(client, "w", limit=10, jobs=["c"], buckets=[other.bucket])
    assert [le["execution_id"] for le in leases] == [other.id]


def test_commands_are_claimed_and_delivered_under_the_lease(
    client: TestClient, store: Store
) -> None:
    execution = store.submit("long")
    [lease] = claim(client, "w")
    asked = client.post(f"/executions/{execution.id}/cancel")
    assert asked.status_code == 202, asked.text
    claimed = client.post("/commands/claims", json={"owner": "w", "execution_ids": [execution.id]})
    assert claimed.status_code == 200, claimed.text
    [command] = claimed.json()["commands"]
    assert (command["kind"], command["state"], command["owner"]) == ("cancel", "CLAIMED", "w")

    wrong = client.post(
        f"/commands/{command['id']}/complete",
        json={"owner": "w", "execution_id": execution.id, "epoch": 9},
    )
    assert_problem(wrong, 409, "stale-lease")
    delivered = client.post(
        f"/commands/{command['id']}/complete",
        json={"owner": "w", "execution_id": execution.id, "epoch": lease["epoch"]},
    )
    assert delivered.status_code == 200, delivered.text
    assert delivered.json()["state"] == "DONE"
    aborted = report(client, lease, "abort", reason="cancel requested")
    assert aborted.json()["state"] == "CANCELLED"


def test_a_released_command_can_be_claimed_by_the_holder(client: TestClient, store: Store) -> None:
    execution = store.submit("long")
    claim(client, "holder")
    client.post(f"/executions/{execution.id}/pause")
    body = {"owner": "bystander", "execution_ids": [execution.id]}
    [command] = client.post("/commands/claims", json=body).json()["commands"]
    released = client.post(
        f"/commands/{command['id']}/release",
        json={"owner": "bystander", "execution_id": execution.id},
    )
    assert released.status_code == 204, released.text
    body = {"owner": "holder", "execution_ids": [execution.id]}
    [again] = client.post("/commands/claims", json=body).json()["commands"]
    assert (again["id"], again["owner"]) == (command["id"], "holder")


def test_nodes_register_and_leave(client: TestClient, store: Store) -> None:
    response = client.put("/nodes/remote-1", json={"buckets": [1, 2], "ttl_seconds": 30})
    assert response.status_code == 200, response.text
    assert response.json()["buckets"] == [1, 2]
    assert [(n.id, n.buckets) for n in store.nodes()] == [("remote-1", (1, 2))]
    assert client.delete("/nodes/remote-1").status_code == 204
    assert store.nodes() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "owner"),
        ({"owner": ""}, "owner"),
        ({"owner": "w", "limit": 0}, "limit"),
        ({"owner": "w", "limit": 1001}, "limit"),
        ({"owner": "w", "ttl_seconds": 0}, "ttl_seconds"),
        ({"owner": "w", "ttl_seconds": "30"}, "ttl_seconds"),
        ({"owner": "w", "buckets": [5000]}, "buckets"),
        ({"owner": "w", "versions": [{"job": "a"}]}, "versions.0.version"),
        ({"owner": "w", "surprise": 1}, "surprise"),
    ],
)
def test_bad_claims_name_the_field_and_lease_nothing(
    client: TestClient, store: Store, body: dict[str, Any], field: str
) -> None:
    execution = store.submit("x")
    assert_problem(client.post("/claims", json=body), 422, "validation", field)
    assert store.get(execution.id).state is State.SCHEDULED


@pytest.mark.parametrize(
    ("verb", "body", "field"),
    [
        ("complete", {"epoch": 1}, "owner"),
        ("complete", {"owner": "w"}, "epoch"),
        ("complete", {"owner": "w", "epoch": 0}, "epoch"),
        ("complete", {"owner": "w", "epoch": "1"}, "epoch"),
        ("heartbeat", {"owner": "w", "epoch": 1, "ttl_seconds": -1}, "ttl_seconds"),
        ("fail", {"owner": "w", "epoch": 1}, "error"),
        ("fail", {"owner": "w", "epoch": 1, "error": "x", "retryable": "no"}, "retryable"),
        (
            "fail",
            {"owner": "w", "epoch": 1, "error": "x", "retry_in_seconds": -1},
            "retry_in_seconds",
        ),
        ("release", {"owner": "w", "epoch": 1, "reason": ""}, "reason"),
        ("complete", {"owner": "w", "epoch": 1, "extra": True}, "extra"),
    ],
)
def test_bad_reports_name_the_field_and_change_nothing(
    client: TestClient, store: Store, verb: str, body: dict[str, Any], field: str
) -> None:
    execution = store.submit("x")
    claim(client, "w")
    before = store.get(execution.id)
    response = client.post(f"/executions/{execution.id}/{verb}", json=body)
    assert_problem(response, 422, "validation", field)
    assert store.get(execution.id) == before


def test_reports_on_unknown_executions(client: TestClient) -> None:
    """``fail`` reads the attempt first (404); the fenced verbs refuse an unknown id as stale."""
    body = {"owner": "w", "epoch": 1}
    fail = client.post("/executions/nope/fail", json={**body, "error": "x"})
    assert_problem(fail, 404, "not-found")
    for verb in ("complete", "heartbeat", "release", "abort"):
        assert_problem(client.post(f"/executions/nope/{verb}", json=body), 409, "stale-lease")


# -- one occurrence of a schedule: /jobs/{task}/{slot} ---------------------------------------


def slots_of(store: Store, schedule_id: str, count: int) -> list[str]:
    """The schedule's next ``count`` slots after its creation, as slot text."""
    schedule = store.get_schedule(schedule_id)
    slots = rule_of(schedule).slots(schedule.created_at)
    return [slot_text(next(slots)) for _ in range(count)]


def test_claim_and_complete_one_occurrence(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.add_schedule("tick", every=60, id="tick", inputs={"n": 1})
    first, second = slots_of(store, "tick", 2)
    clock.advance(60)

    assert_problem(client.post(f"/jobs/tick/{second}/claim", json={"owner": "w"}), 409, "not-due")
    claimed = client.post(f"/jobs/tick/{first}/claim", json={"owner": "w", "ttl_seconds": 10})
    assert claimed.status_code == 200, claimed.text
    lease = claimed.json()
    assert (lease["schedule_id"], lease["slot"], lease["epoch"]) == ("tick", first, 1)
    assert lease["inputs"] == {"n": 1}
    execution = store.find(f"tick:{first}")
    assert execution is not None
    assert execution.id == lease["execution_id"]

    again = client.post(f"/jobs/tick/{first}/claim", json={"owner": "other"})
    assert_problem(again, 409, "invalid-transition")

    stale = {"owner": "w", "epoch": 2, "result": "late"}
    assert_problem(client.post(f"/jobs/tick/{first}/complete", json=stale), 409, "stale-lease")
    done = client.post(
        f"/jobs/tick/{first}/complete", json={"owner": "w", "epoch": 1, "result": "ok"}
    )
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "SUCCEEDED"

    # A materializer passing over the same slot later finds it stored: never two.
    Materializer(store, MaterializerOptions(owner="m")).run_once()
    runs = store.query(schedule="tick", limit=100).items
    assert [e.slot for e in runs].count(first) == 1
    assert store.get(execution.id).result == "ok"


def test_occurrence_claims_that_name_no_occurrence(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.add_schedule("tick", every=60, id="tick")
    [first] = slots_of(store, "tick", 1)
    clock.advance(600)
    off_rule = slot_text(datetime.fromisoformat(first) + timedelta(seconds=30))
    body = {"owner": "w"}
    assert_problem(client.post(f"/jobs/tick/{off_rule}/claim", json=body), 404, "not-found")
    assert_problem(client.post(f"/jobs/nope/{first}/claim", json=body), 404, "not-found")
    bad = client.post("/jobs/tick/yesterday/claim", json=body)
    assert_problem(bad, 422, "validation", "slot")
    naive = client.post(f"/jobs/tick/{first.removesuffix('Z')}/claim", json=body)
    assert_problem(naive, 422, "validation", "slot")
    done = {"owner": "w", "epoch": 1}
    assert_problem(client.post(f"/jobs/tick/{first}/complete", json=done), 404, "not-found")
    assert store.query(schedule="tick").items == []


def test_a_paused_schedule_offers_no_occurrence(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.add_schedule("tick", every=60, id="tick")
    [first] = slots_of(store, "tick", 1)
    store.pause_schedule("tick")
    clock.advance(120)
    response = client.post(f"/jobs/tick/{first}/claim", json={"owner": "w"})
    assert_problem(response, 409, "not-due")
    assert store.query(schedule="tick").items == []


def test_an_occurrence_claimed_before_its_schedule_changed_can_still_complete(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.add_schedule("tick", every=60, id="tick")
    [first] = slots_of(store, "tick", 1)
    clock.advance(60)
    lease = client.post(f"/jobs/tick/{first}/claim", json={"owner": "w"}).json()
    store.update_schedule("tick", every=45)  # the slot is no longer a fire time of the rule
    done = client.post(f"/jobs/tick/{first}/complete", json={"owner": "w", "epoch": lease["epoch"]})
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "SUCCEEDED"


def test_a_claim_whose_answer_cannot_be_encoded_gives_its_leases_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No lease stays with a worker that never got it: released, claimable, not counted."""
    from fencepost.wire import work

    ids = [store.submit("job").id for _ in range(3)]

    def unencodable(lease: Any) -> Any:
        raise RuntimeError("simulated: the answer cannot be encoded")

    monkeypatch.setattr(work.Lease, "from_domain", unencodable)
    with TestClient(create_app(store), raise_server_exceptions=False) as http:
        response = http.post("/claims", json={"owner": "w", "limit": 10})
    assert_problem(response, 500, "internal")
    for eid in ids:
        execution = store.get(eid)
        assert (execution.state, execution.attempt, execution.lease_owner) == (
            State.SCHEDULED,
            0,
            None,
        )
        events = [t.event for t in store.transitions(eid)]
        assert events == [Event.SUBMITTED, Event.CLAIMED, Event.RELEASED]
    monkeypatch.undo()
    assert len(store.claim("w2", limit=10)) == 3

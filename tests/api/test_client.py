"""``fencepost.client.Client``: the store's verbs over HTTP, errors included."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from fencepost import App
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.client import Client, Forbidden, Unauthorized
from fencepost.domain.errors import (
    IdempotencyConflict,
    InvalidTransition,
    NotDue,
    NotFound,
    NotRunning,
    ResultInvalid,
    StaleLease,
    StoreUnavailable,
    ValidationError,
)
from fencepost.domain.schedules import slot_text
from fencepost.domain.states import CommandKind, Event, State
from fencepost.store.base import Store
from fencepost.timing.rules import rule_of
from fencepost.worker.runtime import Worker, WorkerOptions
from tests.api.support import TestClient


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def test_submit_and_read_back(remote: Client, store: Store) -> None:
    when = datetime(2031, 1, 1, 12, tzinfo=UTC)
    execution = remote.submit(
        "email", {"to": "a@example.com"}, execute_at=when, max_attempts=4, priority=3
    )
    assert execution == store.get(execution.id)
    assert remote.get(execution.id) == execution
    assert remote.query(job="email").items == [execution]
    assert remote.query(state=State.SUCCEEDED).items == []
    [submitted] = remote.transitions(execution.id)
    assert submitted == store.transitions(execution.id)[0]


def test_idempotent_submit_returns_the_first(remote: Client) -> None:
    first = remote.submit("charge", {"cents": 100}, idempotency_key="order-1")
    assert remote.submit("charge", {"cents": 100}, idempotency_key="order-1") == first
    with pytest.raises(IdempotencyConflict):
        remote.submit("charge", {"cents": 5}, idempotency_key="order-1")


def test_submit_many_is_all_or_nothing(remote: Client, store: Store) -> None:
    made = remote.submit_many(
        [{"job": "a", "inputs": {"n": i}, "idempotency_key": f"k{i}"} for i in range(3)]
    )
    assert [e.inputs for e in made] == [{"n": 0}, {"n": 1}, {"n": 2}]
    with pytest.raises(ValidationError) as refused:
        remote.submit_many([{"job": "a"}, {"job": "a", "max_attempts": 0}])
    assert refused.value.field == "items.1.max_attempts"
    assert len(store.query(limit=100).items) == 3


def test_errors_are_the_stores_own(remote: Client, store: Store) -> None:
    with pytest.raises(NotFound):
        remote.get("missing")
    with pytest.raises(ValidationError) as bad:
        remote.submit("x", execute_at=datetime(2030, 1, 1))  # naive: refused, never guessed
    assert bad.value.field == "execute_at"
    finished = store.submit("x")
    [lease] = store.claim("w")
    store.complete(lease)
    with pytest.raises(InvalidTransition):
        remote.cancel(finished.id)
    with pytest.raises(NotRunning):
        remote.request(finished.id, CommandKind.PAUSE)


def test_operator_actions(remote: Client, store: Store) -> None:
    waiting = store.submit("x")
    assert remote.cancel(waiting.id).state is State.CANCELLED
    dead = store.submit("y", max_attempts=1)
    [lease] = store.claim("w", jobs=["y"])
    store.fail(lease, "boom", retryable=False)
    assert [e.id for e in remote.dead_letters().items] == [dead.id]
    assert remote.replay(dead.id).state is State.SCHEDULED
    running = store.submit("z")
    store.claim("w", jobs=["z"])
    command = remote.request(running.id, "cancel")
    assert (command.kind, command.execution_id) == (CommandKind.CANCEL, running.id)


def test_the_fence_holds_through_the_client(remote: Client, store: Store) -> None:
    execution = store.submit("x")
    [lease] = remote.claim("a", ttl=30)
    assert lease.execution_id == execution.id
    renewed = remote.heartbeat(lease, ttl=60, progress={"p": 1})
    assert renewed.lease_until > lease.lease_until
    forged = type(lease)(**{**{f: getattr(lease, f) for f in lease.__slots__}, "epoch": 5})
    with pytest.raises(StaleLease):
        remote.complete(forged, {"ok": False})
    assert remote.complete_many([(forged, 1), (lease, {"ok": True})])[0] is not None
    assert store.get(execution.id).result == {"ok": True}
    refused = [t for t in store.transitions(execution.id) if t.event is Event.STALE_REFUSED]
    assert len(refused) == 2


def test_a_result_that_is_not_json_fails_the_execution(remote: Client, store: Store) -> None:
    execution = store.submit("x")
    [lease] = remote.claim("w")
    with pytest.raises(ResultInvalid):
        remote.complete(lease, {"when": datetime.now(UTC)})
    stored = store.get(execution.id)
    assert stored.state is State.FAILED
    assert stored.error is not None
    assert stored.error.startswith("result_invalid")


def test_schedules_round_trip(remote: Client, store: Store) -> None:
    schedule = remote.add_schedule("nightly", cron="0 3 * * *", timezone="Europe/London", id="n")
    assert schedule.id == "n"
    assert store.get_schedule("n").cron == schedule.cron
    assert remote.get_schedule("n").timezone == "Europe/London"
    assert [s.id for s in remote.schedules().items] == ["n"]
    assert remote.pause_schedule("n").paused
    assert not remote.resume_schedule("n").paused
    assert remote.update_schedule("n", priority=5).priority == 5
    fire = remote.preview("n", 3, after=datetime(2026, 3, 28, tzinfo=UTC))
    # 03:00 London is 03:00 UTC before the clocks go forward on 29 March, 02:00 UTC after.
    assert [t.astimezone(UTC).hour for t in fire] == [3, 2, 2]
    remote.delete_schedule("n")
    with pytest.raises(NotFound):
        remote.get_schedule("n")


def test_a_worker_runs_through_the_client(remote: Client, store: Store) -> None:
    app = App(store)
    seen: list[int] = []

    @app.job("double")
    def double(n: int) -> int:
        seen.append(n)
        return n * 2

    ids = [store.submit("double", inputs={"n": i}).id for i in range(20)]
    worker = Worker(remote, app.registry, WorkerOptions(owner="remote-1", poll_interval=0.01))
    worker.start()
    try:
        deadline = datetime.now(UTC).timestamp() + 20
        while datetime.now(UTC).timestamp() < deadline:
            if all(store.get(i).state is State.SUCCEEDED for i in ids):
                break
            worker.join(0.05)
        registered = [n.id for n in store.nodes()]
    finally:
        worker.stop()
        worker.join(10)
    assert registered == ["remote-1"]  # through PUT /nodes/{id}
    assert [store.get(i).result for i in ids] == [i * 2 for i in range(20)]
    assert sorted(seen) == list(range(20))
    assert store.nodes() == []  # it registered through the service and left on stop


def test_tokens_and_scopes(store: Store) -> None:
    token = "w" * 20
    auth = Auth({token: Principal(name="worker", scopes=frozenset({Scope.WORK}))})
    with TestClient(create_app(store, auth=auth)) as http:
        worker = Client("http://testserver", token=token, http=http)
        store.submit("x")
        assert len(worker.claim("w")) == 1
        with pytest.raises(Forbidden):
            worker.submit("x")
    with TestClient(create_app(store, auth=auth)) as http, pytest.raises(Unauthorized):
        Client("http://testserver", http=http).claim("w")


def test_an_unreachable_service_is_store_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    with Client(f"http://127.0.0.1:{port}", timeout=2) as remote, pytest.raises(StoreUnavailable):
        remote.claim("w")


def test_one_occurrence_through_the_client(remote: Client, store: Store) -> None:
    """A worker that runs one slot of a schedule claims and completes it by name."""
    schedule = store.add_schedule("tick", every=1, id="tick")
    slot = next(rule_of(schedule).slots(schedule.created_at))
    deadline = time.monotonic() + 5
    while store.clock.now() < slot and time.monotonic() < deadline:
        time.sleep(0.05)  # the first slot is at most a second away on the real clock
    text = slot_text(slot)
    lease = remote.claim_occurrence("tick", text, "w", ttl=30)
    assert (lease.schedule_id, lease.slot) == ("tick", text)
    done = remote.complete_occurrence("tick", text, lease, {"ran": text})
    assert done.state is State.SUCCEEDED
    with pytest.raises(InvalidTransition):
        remote.claim_occurrence("tick", text, "other")
    later = slot_text(next(rule_of(schedule).slots(slot + timedelta(seconds=5))))
    with pytest.raises(NotDue):
        remote.claim_occurrence("tick", later, "w")


def test_query_newest_first(remote: Client, store: Store) -> None:
    made = [store.submit("x").id for _ in range(3)]
    assert [e.id for e in remote.query(newest_first=True).items] == made[::-1]


def test_stats_are_the_stores(remote: Client, store: Store) -> None:
    store.submit("a")
    [lease] = store.claim("w", ids=[store.submit("b").id])
    store.complete(lease, None)
    got, want = remote.stats(window=60), store.stats(window=60)
    assert (got.by_state, got.by_job, got.due_backlog) == (
        want.by_state,
        want.by_job,
        want.due_backlog,
    )
    assert got.claim_lateness.count == want.claim_lateness.count == 1
    assert got.window.total_seconds() == 60


def test_slo_and_buckets_are_the_stores(remote: Client, store: Store) -> None:
    store.submit("a", bucket_key="k")
    [lease] = store.claim("w")
    store.complete(lease, None)
    store.register_node("n1", buckets=[0, 1])
    store.register_node("n2", buckets=[1])
    got, want = remote.slo(window=3600, worst=5), store.slo(window=3600, worst=5)
    # Taken a moment apart: the instant, and the window's start with it, differ.
    assert dataclasses.replace(got, at=want.at, start=want.start) == want
    assert got.claimed.total == 1
    waiting = store.submit("b", bucket_key="tenant-9")
    report = remote.bucket_report(orphaned_after=0)
    assert report == store.bucket_report(orphaned_after=0)
    assert (report.duplicated, report.owners[0]) == ({1: ["n1", "n2"]}, ["n1"])
    assert waiting.bucket not in (0, 1)  # blake2b("tenant-9") lands in a hole
    assert [e.id for e in report.orphans] == [waiting.id]


def test_held_back_and_too_slow_answers_are_outages_to_a_remote_worker(store: Store) -> None:
    """429 (this address failed authentication too often) and 408 are not the caller's fault.

    A remote worker sharing an address with a misconfigured one must keep its outcomes
    and retry, as it does for a 503, rather than give up on them.
    """
    token = "valid-token-0123456789abcdef"
    auth = Auth({token: Principal(name="worker", scopes=frozenset({Scope.WORK, Scope.READ}))})
    with TestClient(create_app(store, auth=auth)) as http:
        for _ in range(25):
            http.get("/executions", headers={"Authorization": "Bearer wrong-0123456789abcdef"})
        with (
            # No retries: a read would wait out the Retry-After (test_client_retries.py).
            Client("http://testserver", token=token, http=http, retry_timeout=0) as remote,
            pytest.raises(StoreUnavailable) as held,
        ):
            remote.stats()
    assert held.value.status == 429  # type: ignore[attr-defined]
    from fencepost.client.errors import error_of

    assert isinstance(error_of(408, {"type": "x", "detail": "slow"}), StoreUnavailable)
    assert not isinstance(error_of(404, {"detail": "no"}), StoreUnavailable)


def test_a_remote_claim_carries_queues_and_their_limits(remote: Client, store: Store) -> None:
    made = {q: [remote.submit("x", queue=q) for _ in range(3)] for q in ("a", "b", "c")}
    assert all(e.queue == q for q, es in made.items() for e in es)
    assert [e.queue for e in remote.query(queue="b").items] == ["b"] * 3
    leases = remote.claim("w", limit=10, queues={"a": 2, "b": 1})
    assert sorted(lease.queue for lease in leases) == ["a", "a", "b"]
    assert all(store.get(lease.execution_id).queue == lease.queue for lease in leases)
    rest = remote.claim("w", limit=10, queues=["a", "b"])
    assert sorted(lease.queue for lease in rest) == ["a", "b", "b"]
    with pytest.raises(ValidationError) as refused:
        remote.claim("w", queues="c")
    assert refused.value.field == "queues"
    with pytest.raises(ValidationError) as refused:
        remote.claim("w", queues={"c": -1})
    assert refused.value.field.startswith("queues")
    assert {e.state for e in made["c"]} == {State.SCHEDULED}
    assert {store.get(e.id).state for e in made["c"]} == {State.SCHEDULED}

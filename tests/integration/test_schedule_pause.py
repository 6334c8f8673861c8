"""Pause pauses, and a live materializer is known: on SQLite and PostgreSQL, with real processes.

* The occurrences a materializer stored ahead of a schedule's slots do not run once the
  schedule is paused: a real ``fencepost worker --with-scheduler`` runs beside them for
  as long as it takes a later execution to run, and none of them starts; each is
  SKIPPED (reason ``paused``, audited with who paused it).
* A claim racing a pause either takes an occurrence (it runs) or finds it SKIPPED,
  never both, whatever the interleaving: several claimers on their own connections
  against one pauser, round after round.
* A materializer that runs is a live node of kind ``"scheduler"`` until it stops, and
  owns no bucket; a plain ``fencepost worker`` warns as it starts when schedules exist
  and no materializer is alive, and one with a materializer alive says nothing of it.
* Over HTTP, ``POST /schedules`` answers that warning in ``warnings``, and a pause is
  audited as the token that made it.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost import Event, State, Store
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.models import Occurrence
from fencepost.scheduler.materializer import NO_SCHEDULER, Materializer, MaterializerOptions
from tests.acceptance.cli import fencepost as cli
from tests.api.support import TestClient
from tests.integration._tools import Procs
from tests.integration.test_worker_processes import APP, Workers, wait_until, workers

pytestmark = pytest.mark.slow

__all__ = ["workers"]  # fixture


@pytest.fixture
def store(shared_db: str) -> Iterator[Store]:
    with fencepost.connect(shared_db) as opened:
        yield opened


def test_a_paused_schedule_s_materialized_occurrences_do_not_run(
    shared_db: str, store: Store, workers: Workers
) -> None:
    url = shared_db
    start = store.clock.now() + timedelta(seconds=2)
    store.add_schedule("quick", every=1, id="tick", start_at=start, inputs={"n": 7})
    # A real materializer stores the next minute of slots, as it does for `allow`.
    materializer = Materializer(store, MaterializerOptions(owner="test:scheduler", lookahead=60))
    assert materializer.run_once() == 1
    stored = store.query(schedule="tick", limit=1000).items
    assert len(stored) >= 55
    assert {e.state for e in stored} == {State.SCHEDULED}

    paused = cli("schedule", "pause", "tick", "--json", db=url)
    assert paused.json()["paused"] is True
    listing = cli("schedule", "ls", db=url).ok()
    assert listing.row("tick")[3:] == ["paused", "coalesce", "allow", "paused"], listing.stdout

    # A later execution of the same job: once it has run, a worker claiming in due
    # order has passed every occurrence due before it that it could have claimed.
    canary = store.submit("quick", {"n": 1}, execute_at=start + timedelta(seconds=3)).id
    worker = workers.start(url, "worker", APP, "--with-scheduler")
    wait_until(lambda: store.get(canary).state is State.SUCCEEDED, 60, "the later execution")
    # Its materializer has looked at the paused schedule too (it records slots as they
    # pass): its node is live, and it leased and released the schedule.
    assert [n.id for n in store.live_schedulers()] == ["worker:scheduler"]
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert store.live_schedulers() == [], "a clean stop deregisters the materializer"

    after = store.query(schedule="tick", limit=1000).items
    originals = {e.id for e in stored}
    assert originals <= {e.id for e in after}
    for e in after:
        trail = store.transitions(e.id)
        assert e.state is State.SKIPPED, e
        assert Event.CLAIMED not in {t.event for t in trail}, f"{e.id} ran"
        assert trail[-1].reason == "paused"
        if e.id in originals:  # skipped by the pause: audited with who paused it
            assert trail[-1].actor is not None
            assert trail[-1].actor.startswith("cli:")
    assert store.get(canary).result == 1
    assert NO_SCHEDULER not in workers.log("worker")


def race(claimers: list[Store], pauser: Store, schedule_id: str, job: str, head: int) -> set[str]:
    """Claim the schedule's due occurrences one by one on each of ``claimers`` at once,
    and pause it on ``pauser`` once ``head`` have been claimed; the ids claimed."""
    go = threading.Barrier(len(claimers) + 1)
    paused = threading.Event()
    taken: list[str] = []
    errors: list[BaseException] = []

    def claim(claimer: Store) -> None:
        try:
            go.wait(10)
            while True:
                leases = claimer.claim("w", limit=1, jobs=[job], ttl=60)
                taken.extend(lease.execution_id for lease in leases)
                if not leases and paused.is_set():
                    return
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(c,)) for c in claimers]
    for thread in threads:
        thread.start()
    go.wait(10)
    wait_until(lambda: len(taken) >= head, 10, "the first claims")
    pauser.pause_schedule(schedule_id, actor="racer")
    paused.set()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert len(taken) == len(set(taken)), "no occurrence claimed twice"
    return set(taken)


def test_a_claim_racing_a_pause_either_runs_or_is_skipped_never_both(
    shared_db: str, store: Store
) -> None:
    claimers = [fencepost.connect(shared_db) for _ in range(3)]
    pauser = fencepost.connect(shared_db)
    claimed_any = skipped_any = False
    try:
        # Round by round, the pause lands after a different number of claims.
        for round_ in range(8):
            schedule_id, job = f"race-{round_}", f"race-job-{round_}"
            store.add_schedule(job, every=60, id=schedule_id)
            now = store.clock.now()
            store.add_occurrences(
                schedule_id,
                [
                    Occurrence(slot=now + timedelta(minutes=n), due_at=now - timedelta(seconds=1))
                    for n in range(1, 61)
                ],
            )
            taken = race(claimers, pauser, schedule_id, job, head=round_ * 3)
            executions = store.query(schedule=schedule_id, limit=1000).items
            assert len(executions) == 60
            for e in executions:
                events = [t.event for t in store.transitions(e.id)]
                ran, skipped = Event.CLAIMED in events, Event.SKIPPED in events
                assert ran != skipped, (e.id, events)
                assert e.state is (State.RUNNING if ran else State.SKIPPED)
                assert ran == (e.id in taken)
                claimed_any |= ran
                skipped_any |= skipped
    finally:
        for opened in [*claimers, pauser]:
            opened.close()
    assert claimed_any
    assert skipped_any


def test_a_running_materializer_is_a_live_scheduler_that_owns_no_bucket(
    shared_db: str, store: Store
) -> None:
    materializer = Materializer(
        store, MaterializerOptions(owner="host:1:scheduler", interval=0.05, node_ttl=30)
    )
    assert store.live_schedulers() == []
    materializer.start()
    try:
        # Registered by the time start() returns: a worker started next finds it.
        [node] = store.live_schedulers()
        assert (node.id, node.kind, node.buckets) == ("host:1:scheduler", "scheduler", None)
        assert node.expires_at - node.heartbeat_at == timedelta(seconds=30)
        report = store.bucket_report(orphaned_after=0)
        assert report.floating == [], "a materializer claims from no bucket"
        assert report.unowned == list(range(store.config.num_buckets))
    finally:
        materializer.stop()
    assert store.live_schedulers() == []
    assert store.nodes(live_only=False) == [], "deregistered, not left to lapse"


def test_a_plain_worker_warns_at_its_start_when_no_scheduler_runs(
    shared_db: str, store: Store, workers: Workers
) -> None:
    url = shared_db
    store.add_schedule("quick", every=60, id="minutely")
    plain = workers.start(url, "plain", APP)
    wait_until(lambda: "started" in workers.log("plain"), 30, "the plain worker's start line")
    wait_until(lambda: NO_SCHEDULER in workers.log("plain"), 10, "its warning")
    [line] = [line for line in workers.log("plain").splitlines() if NO_SCHEDULER in line]
    assert "WARNING" in line
    assert "plain" in line
    plain.send_signal(signal.SIGTERM)
    assert plain.wait(30) == 0

    # With a materializer alive (its own, or another process's), a worker says nothing
    # of the kind. Each runs one job, so that a probe it ran shows it is past its start.
    scheduled = workers.start(url, "scheduled", APP, "--with-scheduler", "--jobs", "quick")
    wait_until(lambda: store.live_schedulers(), 30, "its materializer's node")
    other = workers.start(url, "other", APP, "--jobs", "lease-echo")
    for job, owner in (("quick", "scheduled"), ("lease-echo", "other")):
        probe = store.submit(job).id
        wait_until(lambda p=probe: store.get(p).state is State.SUCCEEDED, 30, f"{owner}'s probe")
        assert f"worker {owner} started" in workers.log(owner)
        assert NO_SCHEDULER not in workers.log(owner)
    for proc in (scheduled, other):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_the_http_api_warns_while_no_scheduler_runs_and_audits_a_pause_as_the_token(
    store: Store,
) -> None:
    secret = "alice-token-0123456789"
    app = create_app(
        store, auth=Auth({secret: Principal(name="alice", scopes=frozenset({Scope.ADMIN}))})
    )
    alice = {"Authorization": f"Bearer {secret}"}
    with TestClient(app) as client:
        body = {"job": "quick", "every_seconds": 60, "id": "minutely"}
        added = client.post("/schedules", json=body, headers=alice)
        assert added.status_code == 201, added.text
        assert added.json()["warnings"] == [NO_SCHEDULER]
        paused = {"job": "quick", "every_seconds": 60, "id": "quiet", "paused": True}
        assert client.post("/schedules", json=paused, headers=alice).json()["warnings"] == []

        now = store.clock.now()
        [ahead] = store.add_occurrences(
            "minutely", [Occurrence(slot=now + timedelta(minutes=1), due_at=now)]
        )
        answer = client.post("/schedules/minutely/pause", headers=alice)
        assert (answer.status_code, answer.json()["next_fire_at"]) == (200, None)
        last = store.transitions(ahead.id)[-1]
        assert (last.event, last.to_state, last.actor, last.reason) == (
            Event.SKIPPED,
            State.SKIPPED,
            "alice",
            "paused",
        )
        listed = client.get("/schedules", headers=alice).json()["items"]
        assert [(s["id"], s["next_fire_at"]) for s in listed] == [
            ("minutely", None),
            ("quiet", None),
        ]

        # A pause through a change is audited the same way.
        [waiting] = store.add_occurrences(
            "quiet", [Occurrence(slot=now + timedelta(minutes=1), due_at=now)]
        )
        assert client.patch("/schedules/quiet", json={"paused": False}, headers=alice).is_success
        changed = client.patch("/schedules/quiet", json={"paused": True}, headers=alice)
        assert (changed.status_code, changed.json()["next_fire_at"]) == (200, None)
        assert store.transitions(waiting.id)[-1].actor == "alice"

        store.register_node("elsewhere:scheduler", kind="scheduler", ttl=60)
        again = client.post("/schedules", json=body, headers=alice)
        assert (again.status_code, again.json()["warnings"]) == (200, [])


APP_WITH_SCHEDULER = """
import sys

import fencepost

app = fencepost.App(sys.argv[1])


@app.job("tock")
def tock(n: int = 0) -> int:
    return n


app.run_worker(owner="app", with_scheduler=True)
"""


def test_app_run_worker_with_scheduler_fires_schedules_and_leaves_no_node(
    shared_db: str, store: Store, tmp_path: Path
) -> None:
    store.add_schedule("tock", every=1, id="every-second", inputs={"n": 3})
    script = tmp_path / "app_worker.py"
    script.write_text(APP_WITH_SCHEDULER)
    procs = Procs(tmp_path)
    try:
        procs.start("app", [sys.executable, str(script), shared_db])
        done = wait_until(
            lambda: store.query(schedule="every-second", state=State.SUCCEEDED, limit=1).items,
            60,
            "an occurrence run by the app's worker",
        )
        assert done[0].result == 3
        assert [n.id for n in store.live_schedulers()] == ["app:scheduler"]
        [proc] = procs.procs
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, procs.log("app")
    finally:
        procs.close()
    assert store.live_schedulers() == [], "stopped with the worker, and deregistered"
    assert "materializer app:scheduler started" in procs.log("app")
    assert NO_SCHEDULER not in procs.log("app")

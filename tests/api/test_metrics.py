"""``GET /metrics``: store gauges read at scrape time, and what this process counts.

Each test drives a real store (memory, SQLite and PostgreSQL, on a ManualClock) that
an app's metrics observe (:class:`~fencepost.api.counters.ProcessCounters`), then
reads the exposition back with Prometheus' own parser and checks exact values.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import fencepost
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.api.counters import ProcessCounters
from fencepost.api.metrics import Metrics, create_metrics
from fencepost.app import App
from fencepost.domain.errors import PermanentFailure, ResultInvalid, StaleLease, StoreUnavailable
from fencepost.domain.models import Lease, Occurrence
from fencepost.domain.reports import Stats
from fencepost.domain.states import State
from fencepost.scheduler.materializer import Materializer, MaterializerOptions
from fencepost.store.base import Store
from fencepost.store.memory import MemoryStore
from fencepost.store.values import StoreConfig
from fencepost.testing import ManualClock
from fencepost.testing.clock import MANUAL_EPOCH
from tests.api.support import TestClient, assert_problem

READ_TOKEN = "read-token-0123456789"
WORK_TOKEN = "work-token-0123456789"

pytestmark = pytest.mark.manual_clock


def at(seconds: float) -> datetime:
    """The instant "t = seconds" of the ManualClock timeline."""
    return MANUAL_EPOCH + timedelta(seconds=seconds)


@pytest.fixture
def metrics(store: Store) -> Metrics:
    return create_metrics(store)


@pytest.fixture
def metered(metrics: Metrics) -> Store:
    """The store as this process's workers, materializer and reaper would use it."""
    return metrics.store


@pytest.fixture
def client(metrics: Metrics) -> Iterator[TestClient]:
    with TestClient(create_app(metrics.store, metrics=metrics)) as c:
        yield c


class Scrape:
    """One parsed exposition: every sample by name and labels."""

    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples: list[Sample] = [s for f in self.families.values() for s in f.samples]

    def value(self, name: str, **labels: str) -> float:
        """The value of the one sample called ``name`` with exactly ``labels``."""
        found = [s.value for s in self.samples if s.name == name and s.labels == labels]
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
        return found[0]

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """Every sample called ``name``, by the value of its one label ``label``."""
        return {s.labels[label]: s.value for s in self.samples if s.name == name}


def scrape(client: TestClient, **headers: str) -> Scrape:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return Scrape(response.text)


def attempts(result: Scrape) -> dict[str, float]:
    return result.by_label("fencepost_attempts_total", "outcome")


def stale(result: Scrape) -> dict[str, float]:
    return result.by_label("fencepost_stale_refused_total", "verb")


# -- gauges read from the store ---------------------------------------------------------------


def test_executions_by_state_queue_depth_and_due_backlog(
    client: TestClient, metered: Store
) -> None:
    for _ in range(3):
        metered.submit("mail")
    metered.submit("report")
    metered.submit("report", execute_at=at(60))
    done, retried = metered.claim("w", jobs=["mail"], limit=2)
    metered.complete(done, "sent")
    metered.fail(retried, "smtp down", retry_in=30)
    metered.claim("w", jobs=["report"])

    result = scrape(client)

    assert result.value("fencepost_store_up") == 1
    assert result.by_label("fencepost_executions", "state") == {
        "SCHEDULED": 2,  # one mail due now, the report due at t=60
        "RUNNING": 1,
        "RETRY_WAIT": 1,
        "SUCCEEDED": 1,
        "FAILED": 0,
        "CANCELLED": 0,
        "SKIPPED": 0,
    }
    assert result.by_label("fencepost_queue_depth", "job") == {"mail": 2, "report": 1}
    assert result.value("fencepost_due_backlog") == 1, "the retry and the t=60 report wait"


def test_unfinished_executions_by_queue_and_state(client: TestClient, metered: Store) -> None:
    for queue in ("mail", "mail", "mail", "report"):
        metered.submit("x", queue=queue)
    done, _still_running = metered.claim("w", queues=["mail"], limit=2)
    metered.complete(done)
    result = scrape(client)
    series = {
        (s.labels["queue"], s.labels["state"]): s.value
        for s in result.samples
        if s.name == "fencepost_queue_executions"
    }
    assert series == {
        ("mail", "SCHEDULED"): 1,
        ("mail", "RETRY_WAIT"): 0,
        ("mail", "RUNNING"): 1,
        ("report", "SCHEDULED"): 1,
        ("report", "RETRY_WAIT"): 0,
        ("report", "RUNNING"): 0,
    }


def test_a_job_with_nothing_waiting_has_queue_depth_zero(
    client: TestClient, metered: Store
) -> None:
    metered.submit("once")
    (lease,) = metered.claim("w")
    metered.complete(lease)
    assert scrape(client).by_label("fencepost_queue_depth", "job") == {"once": 0}


class _FlakyStats(MemoryStore):
    """A memory store whose ``stats`` fails while ``down``, as an unreachable database's would."""

    down = True

    def _stats(self, window: timedelta) -> Stats:
        if self.down:
            raise StoreUnavailable("connection refused")
        return super()._stats(window)


def test_an_unreachable_store_still_scrapes_with_store_up_zero() -> None:
    store = _FlakyStats(StoreConfig(clock=ManualClock()))
    metrics = create_metrics(store)
    with TestClient(create_app(metrics.store, metrics=metrics)) as client:
        store.submit("mail")
        metrics.store.claim("w")

        down = scrape(client)
        assert down.value("fencepost_store_up") == 0
        for gauge in ("fencepost_executions", "fencepost_queue_depth", "fencepost_due_backlog"):
            assert gauge not in down.families
        assert down.value("fencepost_claim_lateness_seconds_count") == 1, "counters stay"

        store.down = False
        up = scrape(client)
    assert up.value("fencepost_store_up") == 1
    assert up.value("fencepost_executions", state="RUNNING") == 1


# -- the claim lateness histogram -------------------------------------------------------------


def test_a_claim_30_s_late_lands_in_the_30_s_bucket(
    client: TestClient, metered: Store, clock: ManualClock
) -> None:
    metered.submit("late", execute_at=at(0))
    clock.set(30)
    metered.submit("on-time")
    (late,) = metered.claim("w", jobs=["late"], ttl=7)
    (on_time,) = metered.claim("w", jobs=["on-time"], ttl=timedelta(seconds=90))
    assert (late.due_at, on_time.due_at) == (at(0), at(30))

    result = scrape(client)

    buckets = result.by_label("fencepost_claim_lateness_seconds_bucket", "le")
    assert buckets["0.01"] == 1, "the on-time claim"
    assert buckets["10.0"] == 1
    assert buckets["30.0"] == 2, "30 s late: bounds are inclusive"
    assert buckets["+Inf"] == 2
    assert result.value("fencepost_claim_lateness_seconds_count") == 2
    assert result.value("fencepost_claim_lateness_seconds_sum") == 30.0


def test_a_takeover_is_late_since_the_execution_fell_due(
    client: TestClient, metered: Store, clock: ManualClock
) -> None:
    metered.submit("job")
    metered.claim("a", ttl=5)
    clock.set(65)
    (taken,) = metered.claim("b", ttl=5)
    assert taken.epoch == 2
    result = scrape(client)
    buckets = result.by_label("fencepost_claim_lateness_seconds_bucket", "le")
    assert (buckets["60.0"], buckets["120.0"]) == (1, 2)
    assert result.value("fencepost_claim_lateness_seconds_sum") == 65.0


# -- counters -------------------------------------------------------------------------------


def test_attempts_by_outcome(client: TestClient, metered: Store) -> None:
    jobs = ("ok", "retry", "slow", "garbage", "batch", "batch", "stop", "cancel", "nap", "nap")
    for job in jobs:
        metered.submit(job, max_attempts=3)
    leases: dict[str, list[Lease]] = {}
    for lease in metered.claim("w", limit=10):
        leases.setdefault(lease.job, []).append(lease)
    metered.complete(leases["ok"][0], {"fine": True})
    metered.fail(leases["retry"][0], "boom", retryable=True)
    metered.fail(leases["slow"][0], "ran past its timeout", timed_out=True)
    with pytest.raises(ResultInvalid):
        metered.complete(leases["garbage"][0], float("nan"))
    good, bad = leases["batch"]
    assert metered.complete_many([(good, [1, 2]), (bad, {1, 2})]) == [None, None]
    metered.release(leases["stop"][0])
    metered.abort(leases["cancel"][0])
    metered.snooze(leases["nap"][0], 60)
    metered.snooze(leases["nap"][1], 60, max_snoozes=0)  # past its bound: a failed attempt

    assert attempts(scrape(client)) == {
        "succeeded": 2,
        "failed": 2,
        "timed_out": 1,
        "cancelled": 1,
        "released": 1,
        "snoozed": 1,
        "result_invalid": 2,
    }
    assert metered.get(bad.execution_id).state is State.FAILED, "what result_invalid means"


def test_stale_calls_after_a_takeover_are_counted_by_verb(
    client: TestClient, metered: Store, clock: ManualClock
) -> None:
    e = metered.submit("job", max_attempts=3)
    (old,) = metered.claim("a", ttl=5)
    clock.set(5)
    (new,) = metered.claim("b", ttl=5)
    with pytest.raises(StaleLease):
        metered.complete(old, "late result")
    (verdict,) = metered.complete_many([(old, "late again")])
    assert isinstance(verdict, StaleLease)
    with pytest.raises(StaleLease):
        metered.heartbeat(old)
    beats = metered.heartbeat_many([(new, None), (old, None)])
    assert isinstance(beats[0], Lease)
    assert isinstance(beats[1], StaleLease)
    with pytest.raises(StaleLease):
        metered.fail(old, "boom")
    with pytest.raises(StaleLease):
        metered.release(old)
    with pytest.raises(StaleLease):
        metered.abort(old)
    with pytest.raises(StaleLease):
        metered.snooze(old, 10)
    metered.complete(new, "the result")

    result = scrape(client)

    assert stale(result) == {
        "complete": 1,
        "complete_many": 1,
        "fail": 1,
        "heartbeat": 1,
        "heartbeat_many": 1,
        "release": 1,
        "snooze": 1,
        "abort": 1,
    }
    assert attempts(result)["succeeded"] == 1, "only the new lease's completion"
    assert metered.get(e.id).result == "the result"


def test_reap_expired_counts_the_leases_it_timed_out(
    client: TestClient, metered: Store, clock: ManualClock
) -> None:
    for _ in range(3):
        metered.submit("job", max_attempts=1)
    metered.claim("w", limit=2, ttl=5)
    clock.set(10)
    assert metered.reap_expired() == 2
    assert metered.reap_expired() == 0
    result = scrape(client)
    assert result.value("fencepost_lease_expiries_total") == 2
    assert result.value("fencepost_executions", state="FAILED") == 2


def test_misfires_after_two_hours_of_downtime(
    client: TestClient, metered: Store, clock: ManualClock
) -> None:
    # A slot every ten minutes; the materializer stores 00:10 at 00:09:30, then nothing
    # runs for two hours: slots 00:20 .. 02:00 are missed and skipped by policy, and
    # 02:10 is ahead and on time (see tests/integration/test_schedule_downtime.py).
    metered.add_schedule("tick", cron="*/10 * * * *", misfire="skip", id="ticker")
    materializer = Materializer(metered, MaterializerOptions(lookahead=60))
    clock.advance(timedelta(minutes=9, seconds=30))
    while materializer.run_once():
        pass
    clock.advance(timedelta(hours=2))
    while materializer.run_once():
        pass

    result = scrape(client)

    assert result.value("fencepost_misfires_total") == 11
    assert result.by_label("fencepost_occurrences_total", "outcome") == {
        "scheduled": 2,
        "skipped": 11,
    }
    assert result.value("fencepost_executions", state="SKIPPED") == 11


def test_only_misfire_skips_of_accepted_plans_count_as_misfires(
    client: TestClient, metered: Store, clock: ManualClock
) -> None:
    metered.add_schedule("tick", every=60, id="ticker")
    (schedule,) = metered.acquire_schedules("m")
    plan = [
        Occurrence(slot=at(60), due_at=at(60)),
        Occurrence(slot=at(120), due_at=at(120), skipped="paused"),
        Occurrence(slot=at(180), due_at=at(180), skipped="misfire: missed, skipped by policy"),
        Occurrence(slot=at(180), due_at=at(180), skipped="misfire: missed, skipped by policy"),
    ]
    stored = metered.materialize([(schedule, plan, at(180), at(240))])
    assert not isinstance(stored[0], StaleLease)
    refused = metered.materialize([(schedule, plan, at(180), at(240))])  # its lease is gone
    assert isinstance(refused[0], StaleLease)

    result = scrape(client)

    assert result.value("fencepost_misfires_total") == 1, "one slot, planned twice"
    assert result.by_label("fencepost_occurrences_total", "outcome") == {
        "scheduled": 1,
        "skipped": 2,
    }


# -- the metered store in a worker ----------------------------------------------------------


def test_a_worker_on_the_metered_store_is_counted(tmp_path: Path) -> None:
    # The real clock: the worker's loop waits in real time.
    metrics = create_metrics(fencepost.connect(f"sqlite:///{tmp_path / 'w.db'}"))
    app = App(metrics.store)

    @app.job("double")
    def double(n: int) -> int:
        return 2 * n

    @app.job("refuse")
    def refuse() -> None:
        raise PermanentFailure("bad account")

    ids = [app.submit("double", {"n": n}).id for n in range(3)] + [app.submit("refuse").id]
    worker = app.worker(concurrency=2)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            not app.store.get(i).state.is_terminal for i in ids
        ):
            time.sleep(0.01)
    finally:
        worker.stop(immediate=True)
        assert worker.join(10), "the worker did not stop"
    assert [app.store.get(i).state for i in ids] == [State.SUCCEEDED] * 3 + [State.FAILED]
    with TestClient(create_app(metrics.store, metrics=metrics)) as client:
        result = scrape(client)
    app.close()
    assert attempts(result) == {
        "succeeded": 3,
        "failed": 1,
        "timed_out": 0,
        "cancelled": 0,
        "released": 0,
        "snoozed": 0,
        "result_invalid": 0,
    }
    assert result.value("fencepost_claim_lateness_seconds_count") == 4


# -- the wrapper, the app and the route ---------------------------------------------------------


def test_the_metrics_observe_the_store_itself(metrics: Metrics, store: Store) -> None:
    assert metrics.store is store
    (observer,) = store.observers
    assert isinstance(observer, ProcessCounters)
    assert observer.instruments is metrics.instruments


def test_each_app_has_its_own_registry_counting_from_its_start(store: Store) -> None:
    first = create_metrics(store)
    first.store.submit("job")
    first.store.claim("w")
    second = create_metrics(store)
    with (
        TestClient(create_app(first.store, metrics=first)) as one,
        TestClient(create_app(second.store, metrics=second)) as two,
    ):
        assert scrape(one).value("fencepost_claim_lateness_seconds_count") == 1
        counted = scrape(two)
    assert counted.value("fencepost_claim_lateness_seconds_count") == 0
    assert counted.value("fencepost_executions", state="RUNNING") == 1, "one database"


def test_an_app_without_metrics_serves_the_store_gauges(store: Store) -> None:
    store.submit("job")
    with TestClient(create_app(store)) as client:
        result = scrape(client)
    assert result.value("fencepost_executions", state="SCHEDULED") == 1
    assert attempts(result)["succeeded"] == 0


def test_openmetrics_is_served_when_asked_for(client: TestClient) -> None:
    response = client.get("/metrics", headers={"accept": "application/openmetrics-text"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")


def test_the_openapi_schema_declares_text_not_json(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/metrics"]["get"]
    assert set(operation["responses"]["200"]["content"]) == {
        "text/plain",
        "application/openmetrics-text",
    }
    assert {"401", "403"} <= set(operation["responses"])


@pytest.fixture
def secured(metrics: Metrics) -> Iterator[TestClient]:
    auth = Auth(
        {
            READ_TOKEN: Principal(name="reader", scopes=frozenset({Scope.READ})),
            WORK_TOKEN: Principal(name="worker", scopes=frozenset({Scope.WORK})),
        }
    )
    with TestClient(create_app(metrics.store, metrics=metrics, auth=auth)) as c:
        yield c


def test_a_read_token_may_scrape(secured: TestClient) -> None:
    response = secured.get("/metrics", headers={"authorization": f"Bearer {READ_TOKEN}"})
    assert response.status_code == 200
    assert Scrape(response.text).value("fencepost_store_up") == 1


def test_a_work_token_may_not_scrape(secured: TestClient) -> None:
    response = secured.get("/metrics", headers={"authorization": f"Bearer {WORK_TOKEN}"})
    assert_problem(response, 403, "forbidden")


def test_no_token_may_not_scrape(secured: TestClient) -> None:
    assert_problem(secured.get("/metrics"), 401, "unauthorized")

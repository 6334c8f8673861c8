"""Work nobody serves, over HTTP: ``GET /stats``, ``GET /jobs`` and ``GET /metrics``.

On every backend (memory, SQLite, PostgreSQL) and a pinned clock: due executions
of a job no live node serves (unpublished and unpinned, or pinned to a version no
live node runs) and active schedules while no scheduler node lives are named in
the stats body the dashboard polls, marked in the job listing, and exported as
gauges with the job as label; once live nodes serve them, they are gone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fencepost.api import create_app
from fencepost.api.metrics import Metrics, create_metrics
from fencepost.domain.catalogue import job_entry
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient

pytestmark = pytest.mark.manual_clock


@pytest.fixture
def metrics(store: Store) -> Metrics:
    return create_metrics(store)


@pytest.fixture
def client(metrics: Metrics) -> Iterator[TestClient]:
    with TestClient(create_app(metrics.store, metrics=metrics)) as c:
        yield c


def leave_work_nobody_serves(store: Store) -> None:
    """Two due executions of ``report`` (never published: unpinned), one of ``ship``
    pinned to version 5 while the only live worker runs version 4, one of ``ship`` v4
    (served), one not due yet, and an active schedule with no scheduler alive."""
    store.submit_many([{"job": "report"}, {"job": "report"}])
    store.publish_jobs([job_entry("ship", 4), job_entry("ship", 5), job_entry("report", 1)])
    store.submit("ship")  # pinned to the latest: 5
    store.submit("ship", version=4)
    store.submit("ship", version=4, delay=60)  # not due
    store.add_schedule("ship", every=3600, id="hourly", version=4)
    store.register_node("w1", jobs=[("ship", 4)], ttl=60)


def serve_everything(store: Store) -> None:
    store.register_node("w2", jobs=[("report", 1), ("ship", 5)], ttl=60)
    store.register_node("materializer", kind="scheduler", ttl=60)


def test_stats_carry_the_unserved_work(client: TestClient, store: Store) -> None:
    leave_work_nobody_serves(store)
    body = client.get("/stats").json()
    assert body["due_backlog"] == 4
    unserved = body["unserved"]
    assert unserved == {
        "at": unserved["at"],
        "due": [
            {"job": "report", "version": None, "count": 2},
            {"job": "ship", "version": 4, "count": 1},
            {"job": "ship", "version": 5, "count": 1},
        ],
        "executions": [
            {"job": "report", "version": None, "count": 2},
            {"job": "ship", "version": 5, "count": 1},
        ],
        "due_unserved": 3,
        "active_schedules": 1,
        "schedulers": [],
        "schedules": 1,
    }
    serve_everything(store)
    served = client.get("/stats").json()["unserved"]
    assert (served["executions"], served["due_unserved"]) == ([], 0)
    assert (served["schedulers"], served["schedules"]) == (["materializer"], 0)


def test_the_job_listing_marks_jobs_no_live_worker_serves(client: TestClient, store: Store) -> None:
    leave_work_nobody_serves(store)
    listed = {job["name"]: job["waiting"] for job in client.get("/jobs").json()["jobs"]}
    assert listed == {
        "report": {"workers": 0, "due": 2, "unserved": 2},
        "ship": {"workers": 1, "due": 2, "unserved": 1},  # v5's has no live worker
    }
    assert client.get("/jobs/ship").json()["waiting"] == {"workers": 1, "due": 2, "unserved": 1}
    serve_everything(store)
    assert client.get("/jobs/report").json()["waiting"] == {"workers": 1, "due": 2, "unserved": 0}


def scrape(client: TestClient) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    return {
        family.name: {tuple(sorted(s.labels.items())): s.value for s in family.samples}
        for family in text_string_to_metric_families(response.text)
    }


def test_the_gauges_name_each_job_and_the_idle_schedules(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    leave_work_nobody_serves(store)
    found = scrape(client)
    # Unpinned report (2) and pinned ship v5 (1): one series per job.
    assert found["fencepost_unserved_due_executions"] == {
        (("job", "report"),): 2.0,
        (("job", "ship"),): 1.0,
    }
    assert found["fencepost_unserved_schedules"] == {(): 1.0}
    serve_everything(store)
    found = scrape(client)
    assert found["fencepost_unserved_due_executions"] == {}
    assert found["fencepost_unserved_schedules"] == {(): 0.0}
    clock.set(60)  # every registration lapsed: nothing serves anything any more
    found = scrape(client)
    assert found["fencepost_unserved_due_executions"] == {
        (("job", "report"),): 2.0,
        (("job", "ship"),): 3.0,  # the one due at 60 is due now
    }
    assert found["fencepost_unserved_schedules"] == {(): 1.0}

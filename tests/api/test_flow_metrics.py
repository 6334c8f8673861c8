"""Limits, paused queues and throttling in ``GET /metrics`` (read each scrape) and ``GET /stats``.

Each test sets limits and pauses through the store on every backend (ManualClock),
holds executions back with them, then reads the exposition with Prometheus' own
parser and checks exact values.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fencepost.api import create_app
from fencepost.api.metrics import Metrics, create_metrics
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient
from tests.api.test_metrics import Scrape, scrape

pytestmark = pytest.mark.manual_clock

#: A queue name that would be markup if a page ever parsed it.
HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture
def metrics(store: Store) -> Metrics:
    return create_metrics(store)


@pytest.fixture
def client(metrics: Metrics) -> Iterator[TestClient]:
    with TestClient(create_app(metrics.store, metrics=metrics)) as c:
        yield c


def series(result: Scrape, name: str) -> dict[str, float]:
    """Every sample of ``name``, by its one label's value."""
    found = [s for s in result.samples if s.name == name]
    return {next(iter(s.labels.values())): s.value for s in found}


def test_throttled_claims_are_counters_per_scope_that_only_grow(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.set_limit("job:mail", rate="1/s", burst=1)
    store.submit_many([{"job": "mail"} for _ in range(3)])
    store.claim("w", limit=10, ttl=3600)  # the burst: not throttled
    first = scrape(client)
    assert series(first, "fencepost_throttled_total") == {}
    assert first.families["fencepost_throttled"].type == "counter"
    clock.set(4)
    store.claim("w", limit=10, ttl=3600)  # held 4 s
    second = scrape(client)
    assert series(second, "fencepost_throttled_total") == {"job:mail": 1}
    assert series(second, "fencepost_throttled_seconds_total") == {"job:mail": 4}
    # Much later: the counters hold every record, not a window's.
    clock.set(7200)
    store.claim("w", limit=10, ttl=3600)  # held 7200 s
    third = scrape(client)
    assert series(third, "fencepost_throttled_total") == {"job:mail": 2}
    assert series(third, "fencepost_throttled_seconds_total") == {"job:mail": 7204}
    clock.set(7200 + 86400)
    assert series(scrape(client), "fencepost_throttled_total") == {"job:mail": 2}


def test_a_paused_queue_is_a_gauge_and_its_wait_is_throttled_on_resume(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.submit("report", queue="reports")
    store.submit("send", queue=HOSTILE)
    store.pause_queue(HOSTILE, actor="ops")
    store.pause_queue("empty", actor="ops")  # no executions: listed by its pause
    paused = scrape(client)
    assert series(paused, "fencepost_queue_paused") == {"reports": 0, HOSTILE: 1, "empty": 1}
    assert "fencepost_limit_info" not in {s.name for s in paused.samples}, "a pause is no limit"
    clock.set(30)
    store.resume_queue(HOSTILE, actor="ops")
    resumed = scrape(client)
    assert series(resumed, "fencepost_queue_paused") == {"reports": 0, HOSTILE: 0, "empty": 1}
    assert series(resumed, "fencepost_throttled_total") == {f"queue:{HOSTILE}": 1}
    assert series(resumed, "fencepost_throttled_seconds_total") == {f"queue:{HOSTILE}": 30}


def test_limits_are_an_info_metric_and_two_gauges(client: TestClient, store: Store) -> None:
    store.set_limit("job:mail", rate="3000/min", burst=10, concurrency=4, per_key=True)
    store.set_limit("queue:reports", concurrency=2)
    store.pause_queue("reports")
    result = scrape(client)
    info = {s.labels["scope"]: s.labels for s in result.samples if s.name == "fencepost_limit_info"}
    assert info == {
        "job:mail": {
            "scope": "job:mail",
            "rate": "3000/min",
            "burst": "10",
            "concurrency": "4",
            "per_key": "true",
            "source": "operator",
        },
        "queue:reports": {
            "scope": "queue:reports",
            "rate": "",
            "burst": "",
            "concurrency": "2",
            "per_key": "false",
            "source": "operator",
        },
    }
    assert all(s.value == 1 for s in result.samples if s.name == "fencepost_limit_info")
    assert series(result, "fencepost_limit_rate_per_second") == {"job:mail": 50}
    assert series(result, "fencepost_limit_concurrency") == {"job:mail": 4, "queue:reports": 2}
    assert series(result, "fencepost_queue_paused") == {"reports": 1}
    store.remove_limit("job:mail")
    after = scrape(client)
    assert series(after, "fencepost_limit_rate_per_second") == {}
    scopes = {s.labels["scope"] for s in after.samples if s.name == "fencepost_limit_info"}
    assert scopes == {"queue:reports"}


def test_get_stats_counts_throttled_claims_apart(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    store.set_limit("job:mail", concurrency=1)
    store.submit_many([{"job": "mail"}, {"job": "mail"}])
    (first,) = store.claim("w", limit=10, ttl=3600)
    clock.set(12)
    store.complete(first)
    store.claim("w", limit=10, ttl=3600)  # held 12 s by the concurrency
    response = client.get("/stats", params={"window": 60})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["throttled"] == [{"scope": "job:mail", "count": 1, "held_seconds": 12.0}]
    assert body["claim_lateness"]["count"] == 1, "the first claim; the second is throttled"
    assert body["claim_lateness"]["max"] == 0

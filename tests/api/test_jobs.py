"""``GET /jobs`` and ``GET /jobs/{name}``: the job catalogue over HTTP, and the client's view."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest

from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain.catalogue import JobDefaults, JobSource, job_entry
from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.jobviews import job_views
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient, assert_problem

pytestmark = pytest.mark.manual_clock

ZEROS = {s.value: 0 for s in State}
REPORT_V2_SCHEMA = {
    "type": "object",
    "properties": {"day": {"type": "string"}, "region": {"type": "string"}},
    "required": ["day"],
}


def publish(store: Store, clock: ManualClock) -> None:
    """Two versions of ``report``, one of ``reports/nightly``; two nodes; a day of runs."""
    store.publish_jobs(
        [
            job_entry("report", 1, input_schema={"type": "object"}),
            job_entry(
                "report",
                2,
                input_schema=REPORT_V2_SCHEMA,
                output_schema={"type": "object", "properties": {"rows": {"type": "integer"}}},
                defaults=JobDefaults(max_attempts=5, timeout=30, queue="reports", priority=2),
                description="<script>alert('x')</script>",
                source=JobSource(kind="code", where="app.jobs:report"),
            ),
            job_entry("reports/nightly", 1),
        ]
    )
    store.submit("report", inputs={"day": "old"})  # created at 0: outside a 1 h window
    clock.set(7200)
    store.register_node("w1", jobs=[("report", 2), ("reports/nightly", 1)], ttl=3600)
    store.register_node("w2", jobs=[("report", 1)], ttl=3600)
    ran = store.submit("report", inputs={"day": "2026-01-01"})
    [lease] = store.claim("w1", ids=[ran.id])
    store.complete(lease, {"rows": 1})
    store.submit("report", inputs={"day": "2026-01-02"}, delay=60)


@pytest.fixture
def published(store: Store, clock: ManualClock) -> Store:
    publish(store, clock)
    return store


def test_jobs_lists_every_job_with_its_latest_version(client: TestClient, published: Store) -> None:
    body = client.get("/jobs", params={"window": 3600}).json()
    assert body["window_seconds"] == 3600
    assert [job["name"] for job in body["jobs"]] == ["report", "reports/nightly"]
    report, nightly = body["jobs"]
    assert report["versions"] == [1, 2]
    assert report["latest"]["version"] == 2
    # As the definition a worker publishes holds them: only those set, durations in seconds.
    assert report["latest"]["defaults"] == {
        "max_attempts": 5,
        "timeout": 30.0,
        "priority": 2,
        "queue": "reports",
    }
    assert report["latest"]["served_by"] == ["w1"], "the nodes serving the latest version"
    assert report["latest"]["input_schema"] == REPORT_V2_SCHEMA
    assert report["latest"]["description"] == "<script>alert('x')</script>"
    assert report["inputs"] == ["day", "region"]
    assert report["nodes"] == ["w1", "w2"]
    # Created in the last hour: the one claimed (now SUCCEEDED) and the one waiting;
    # the one created two hours ago is not counted.
    assert report["counts"] == ZEROS | {"SCHEDULED": 1, "SUCCEEDED": 1}
    assert nightly["versions"] == [1]
    assert nightly["inputs"] == []
    assert nightly["nodes"] == ["w1"]
    assert nightly["counts"] == ZEROS
    day = client.get("/jobs").json()
    assert day["window_seconds"] == 86400, "the default window: a day"
    assert day["jobs"][0]["counts"] == ZEROS | {"SCHEDULED": 2, "SUCCEEDED": 1}


def test_a_job_in_full(client: TestClient, published: Store) -> None:
    body = client.get("/jobs/report", params={"window": 3600}).json()
    assert body["name"] == "report"
    assert [v["version"] for v in body["versions"]] == [1, 2]
    first, second = body["versions"]
    assert first["input_schema"] == {"type": "object"}
    assert first["output_schema"] is None
    assert second["input_schema"] == REPORT_V2_SCHEMA
    assert second["output_schema"] == {
        "type": "object",
        "properties": {"rows": {"type": "integer"}},
    }
    assert second["source"] == {"kind": "code", "where": "app.jobs:report"}
    assert second["digest"] == published.job("report")[1].digest
    assert second["digest"].startswith("sha256:")
    assert (first["served_by"], second["served_by"]) == (["w2"], ["w1"])
    assert body["nodes"] == ["w1", "w2"]
    assert body["counts"] == ZEROS | {"SCHEDULED": 1, "SUCCEEDED": 1}
    assert body["window_seconds"] == 3600
    slashed = client.get("/jobs/reports%2Fnightly").json()
    assert slashed["name"] == "reports/nightly"
    assert [v["served_by"] for v in slashed["versions"]] == [["w1"]]


def test_a_lapsed_node_serves_nothing(
    client: TestClient, published: Store, clock: ManualClock
) -> None:
    published.register_node("w2", jobs=[("report", 1)], ttl=10)
    clock.advance(10)
    body = client.get("/jobs/report").json()
    assert [v["served_by"] for v in body["versions"]] == [[], ["w1"]]
    assert body["nodes"] == ["w1"]


def test_an_unknown_job_is_404(client: TestClient, published: Store) -> None:
    response = client.get("/jobs/nope")
    assert_problem(response, 404, "not-found")
    assert "nope" in response.json()["detail"]


def test_an_empty_catalogue_lists_nothing(client: TestClient, store: Store) -> None:
    store.submit("unpublished")
    assert client.get("/jobs").json()["jobs"] == []


@pytest.mark.parametrize(
    "window", [0, -5, "nan", "inf", "-inf", "1e300", "hour", "", "1e-9"], ids=repr
)
@pytest.mark.parametrize("path", ["/jobs", "/jobs/report"])
def test_a_bad_window_is_422_naming_it(
    client: TestClient, published: Store, path: str, window: Any
) -> None:
    assert_problem(client.get(path, params={"window": window}), 422, "validation", "window")


@pytest.fixture
def tolerant(store: Store) -> Iterator[TestClient]:
    """A client that gets a 500 back rather than the server's exception."""
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize(
    "name",
    ["%00", "a%00b", "%ED%A0%80", "x" * 5000, "%F0%9F%92%A9", "%20", "%2E%2E", "a/b/claim", "%FF"],
    ids=lambda n: n[:12],
)
def test_hostile_names_are_never_a_server_error(
    tolerant: TestClient, published: Store, name: str
) -> None:
    response = tolerant.get(f"/jobs/{name}")
    assert response.status_code in (404, 422), response.text
    kind = "not-found" if response.status_code == 404 else "validation"
    assert_problem(response, response.status_code, kind)
    assert tolerant.get("/jobs").status_code == 200


def test_the_extremes_the_catalogue_accepts_are_listed_and_shown(
    client: TestClient, store: Store
) -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(31):  # the deepest schema a store keeps (64 levels of JSON)
        deep = {"type": "object", "properties": {"a": deep}}
    name = "j\u00f6b \U0001f4a9 <&> " + "n" * 180
    store.publish_jobs(
        [
            job_entry(
                name,
                2**31 - 1,
                input_schema=deep,
                output_schema={"type": "object", "description": "\u2028\ufeff" * 1000},
                defaults=JobDefaults(max_attempts=2**31 - 1, priority=-(2**31), timeout=1e-6),
                description="d" * 8192,
                source=JobSource(kind="file", where="/" + "p" * 4000),
            )
        ]
    )
    listed = client.get("/jobs").json()["jobs"]
    assert [(job["name"], job["versions"]) for job in listed] == [(name, [2**31 - 1])]
    assert listed[0]["latest"]["defaults"]["priority"] == -(2**31)
    assert listed[0]["inputs"] == ["a"]
    shown = client.get(f"/jobs/{quote(name, safe='')}")
    assert shown.status_code == 200, shown.text
    assert shown.json()["versions"][0]["input_schema"] == deep
    with Client("http://testserver", http=client) as remote:
        assert remote.job(name).versions == tuple(store.job(name))


# -- the client ----------------------------------------------------------------------------


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def test_the_client_reads_what_the_store_holds(remote: Client, published: Store) -> None:
    views = job_views(
        published.jobs(), published.nodes(), published.job_counts(window=timedelta(hours=1))
    )
    assert remote.jobs(window=timedelta(hours=1)) == [view.summary() for view in views]
    assert remote.job("report", window=3600) == views[0]
    assert remote.job("reports/nightly", window=3600) == views[1]
    full = remote.job("report")
    assert full.latest == published.job("report")[-1], "every field of the entry, digest included"
    assert full.window == timedelta(days=1)
    assert full.counts[State.SCHEDULED] == 2
    with pytest.raises(NotFound, match="nope"):
        remote.job("nope")
    with pytest.raises(ValidationError) as refused:
        remote.jobs(window=-1)
    assert refused.value.field == "window"

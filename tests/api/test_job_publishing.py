"""The job catalogue over HTTP: publishing from a remote worker, reading it, refusals.

A remote worker (``Client``) publishes through ``POST /jobs``; a changed definition of
a published version is a 409 problem of its own type naming the job, the version and
both digests, raised by the client as a ``CatalogueConflict``; bad definitions are
422s naming the field; and the submits that follow obey what was published.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from fencepost import App
from fencepost.api import create_app
from fencepost.client.http import Client
from fencepost.domain.catalogue import JobDefaults, job_entry
from fencepost.domain.errors import (
    CatalogueConflict,
    RemoteCatalogueConflict,
    RemoteNotFound,
    RemoteValidationError,
    ValidationError,
)
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"day": {"type": "string"}},
    "required": ["day"],
}


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def test_a_remote_worker_publishes_and_every_submit_then_follows_the_job(
    remote: Client, store: Store
) -> None:
    entry = job_entry("report", 1, input_schema=SCHEMA, defaults=JobDefaults(max_attempts=2))
    (stored,) = remote.publish_jobs([entry])
    assert stored.digest == entry.digest
    assert stored.published_at is not None
    assert remote.publish_jobs([entry]) == [stored]  # idempotent
    assert store.jobs() == [stored]
    assert [(s.name, s.latest) for s in remote.jobs()] == [("report", stored)]
    assert remote.job("report").versions == (stored,)
    with pytest.raises(RemoteNotFound):
        remote.job("nope")
    with pytest.raises(RemoteValidationError) as caught:
        remote.submit("report", {"day": 5})
    assert caught.value.field == "inputs.day"
    submitted = remote.submit("report", {"day": "d"})
    assert (submitted.max_attempts, submitted.job_version, submitted.priority) == (2, 1, 0)
    # A job nobody published is accepted, as on every path, unpinned and flagged for
    # the defaults its publication brings (see docs/explanation/catalogue.md).
    unknown = remote.submit("unknown")
    assert (unknown.job_version, unknown.max_attempts) == (None, 3)
    remote.publish_jobs([job_entry("unknown", 1, defaults=JobDefaults(max_attempts=5))])
    assert store.get(unknown.id).max_attempts == 5


def test_a_changed_definition_is_a_conflict_naming_both_digests(
    remote: Client, client: TestClient, store: Store
) -> None:
    (stored,) = store.publish_jobs([job_entry("report", 1)])
    changed = job_entry("report", 1, description="changed")
    with pytest.raises(CatalogueConflict) as caught:
        remote.publish_jobs([job_entry("other", 1), changed])
    assert isinstance(caught.value, RemoteCatalogueConflict)
    assert (caught.value.job, caught.value.version) == ("report", 1)
    assert (caught.value.stored_digest, caught.value.digest) == (stored.digest, changed.digest)
    assert stored.digest in str(caught.value)
    assert changed.digest in str(caught.value)
    assert store.jobs() == [stored]  # "other" was not written either
    answer = client.post("/jobs", json={"entries": [{"name": "report", "version": 1, "x": 1}]})
    assert_problem(answer, 422, "validation")


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"name": "r", "version": 1, "input_schema": {"type": "nope"}}, "entries.0.input_schema"),
        ({"name": "r", "version": 1, "digest": "sha256:" + "0" * 64}, "entries.0.digest"),
        (
            {"name": "r", "version": 1, "defaults": {"retry_base_delay": 5, "retry_max_delay": 1}},
            "entries.0.defaults.retry_max_delay",
        ),
        ({"name": "r", "version": 0}, "entries.0.version"),
        ({"name": "r", "version": 1, "description": "a\u0000b"}, "entries.0.description"),
    ],
)
def test_bad_definitions_are_refused_naming_the_field(
    client: TestClient, store: Store, item: dict[str, Any], field: str
) -> None:
    assert_problem(client.post("/jobs", json={"entries": [item]}), 422, "validation", field)
    assert store.jobs() == []


def test_the_listing_says_which_live_nodes_serve_each_version(
    client: TestClient, store: Store
) -> None:
    store.publish_jobs([job_entry("report", 1), job_entry("report", 2)])
    answer = client.put("/nodes/w1", json={"jobs": [{"job": "report", "version": 2}]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["jobs"] == [{"job": "report", "version": 2}]
    [listed] = client.get("/jobs").json()["jobs"]
    assert (listed["name"], listed["versions"], listed["nodes"]) == ("report", [1, 2], ["w1"])
    assert (listed["latest"]["version"], listed["latest"]["served_by"]) == (2, ["w1"])
    versions = client.get("/jobs/report").json()["versions"]
    assert [(v["version"], v["served_by"]) for v in versions] == [(1, []), (2, ["w1"])]
    assert_problem(client.get("/jobs/nope"), 404, "not-found")


def test_the_service_publishes_its_jobs_and_app_and_store_refuse_alike(store: Store) -> None:
    app = App(store)

    @app.job("nightly", max_attempts=2, timeout=5)
    def nightly(day: str) -> None: ...

    create_app(store, registry=app.registry)
    (entry,) = store.job("nightly")
    assert (entry.defaults.max_attempts, entry.defaults.timeout) == (2, timedelta(seconds=5))
    assert entry.source.kind == "code"
    assert entry.source.where.endswith(".<locals>.nightly")
    refusals = []
    for submit in (app.submit, store.submit):
        with pytest.raises(ValidationError) as caught:
            submit("nightly", {"day": 1})
        refusals.append(caught.value.field)
    assert refusals == ["inputs.day", "inputs.day"]
    assert store.submit("nightly", {"day": "d"}).max_attempts == 2

"""One catalogue rule, whatever started first: real processes on SQLite and PostgreSQL.

- Work submitted with ``store.submit`` *before* any worker published its job takes the
  job's published defaults when a worker starts: a definition file's two attempts and
  its one-second timeout, so it times out exactly twice; inputs its schema refuses fail
  at the first claim, without running the command and without a retry.
- A job published by a separate ``fencepost worker`` is accepted by ``POST /executions``
  of a ``fencepost serve`` whose own application declares other jobs, by
  ``Client.submit`` and by ``fencepost submit``, each with the job's defaults, and its
  inputs are checked the same way by each.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

import fencepost
from fencepost import AttemptOutcome, State, Store
from fencepost.client import Client
from tests.acceptance.cli import fencepost as fencepost_cli
from tests.integration.test_service_processes import (
    APP,
    Processes,
    free_port,
    processes,
    wait_ready,
)
from tests.integration.test_worker_catalogue import NIGHTLY, published
from tests.integration.test_worker_processes import (
    Workers,
    wait_until,
    workers,
    write_definition,
)

pytestmark = pytest.mark.slow

__all__ = ["processes", "workers"]  # fixtures


@pytest.fixture
def store(shared_db: str) -> Iterator[Store]:
    opened = fencepost.connect(shared_db)
    yield opened
    opened.close()


def test_work_submitted_before_the_worker_started_takes_the_published_defaults(
    shared_db: str, store: Store, workers: Workers, tmp_path: Path
) -> None:
    # The database fixtures come first: torn down last, after every process has stopped
    # (a schema dropped under a live worker deadlocks with it on PostgreSQL).
    early = store.submit("nightly-report", {"day": "2026-12-06"}).id
    wrong = store.submit("nightly-report", {"day": 20261206}).id  # unchecked: not published
    assert store.get(early).max_attempts == 3  # the store's, until the job is published
    by_cli = fencepost_cli("submit", "nightly-report", "--input", "day=d", "--json", db=shared_db)
    assert by_cli.returncode == 0
    assert "no worker has published job 'nightly-report' yet" in by_cli.stderr

    definitions = write_definition(tmp_path / "defs", "nightly", NIGHTLY)
    workers.start(shared_db, "worker-a", "--definitions", str(definitions), "--concurrency", "2")

    for eid in (early, by_cli.json()["id"]):
        done = wait_until(
            lambda eid=eid: store.get(eid).state is State.FAILED and store.get(eid),
            30,
            f"{eid} to be dead-lettered",
        )
        assert (done.max_attempts, done.timeout, done.attempt) == (2, timedelta(seconds=1), 2)
        assert [a.outcome for a in store.attempts(eid)] == [AttemptOutcome.TIMED_OUT] * 2

    refused = wait_until(
        lambda: store.get(wrong).state is State.FAILED and store.get(wrong), 30, "the bad inputs"
    )
    assert refused.attempt == 1  # no retry can mend inputs
    assert refused.error is not None
    assert refused.error.startswith("inputs_invalid: inputs.day")
    [attempt] = store.attempts(wrong)
    assert attempt.outcome is AttemptOutcome.FAILED  # failed at once: the command never ran


def test_a_job_published_by_a_separate_worker_is_accepted_by_every_submit_path(
    shared_db: str, store: Store, processes: Processes, workers: Workers, tmp_path: Path
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # The service's own application declares other jobs (lease-echo, ...); it runs none.
    service = processes.start(
        "serve", "serve", APP, "--db", shared_db, "--port", str(port), "--workers", "0"
    )
    wait_ready(base, service)
    definitions = write_definition(tmp_path / "defs", "nightly", NIGHTLY)
    workers.start(shared_db, "worker-a", "--definitions", str(definitions))
    wait_until(lambda: published(store, "nightly-report"), 20, "the worker to publish")

    by_http = httpx.post(
        f"{base}/executions", json={"job": "nightly-report", "inputs": {"day": "d1"}}, timeout=10
    )
    assert by_http.status_code == 201, by_http.text
    with Client(base) as client:
        by_client = client.submit("nightly-report", {"day": "d2"})
        with pytest.raises(fencepost.ValidationError) as caught:
            client.submit("nightly-report", {"day": 2})
        assert caught.value.field == "inputs.day"
    by_cli = fencepost_cli(
        "submit", "nightly-report", "--input", "day=d3", "--json", db=shared_db
    ).json()

    for eid in (by_http.json()["id"], by_client.id, by_cli["id"]):
        submitted = store.get(eid)
        assert (submitted.job_version, submitted.max_attempts, submitted.timeout) == (
            1,
            2,
            timedelta(seconds=1),
        )
    bad = httpx.post(
        f"{base}/executions", json={"job": "nightly-report", "inputs": {"day": 3}}, timeout=10
    )
    assert bad.status_code == 422
    assert "inputs.day" in bad.text
    bad_cli = fencepost_cli("submit", "nightly-report", "--input-json", '{"day": 4}', db=shared_db)
    assert bad_cli.returncode == 2
    assert "inputs.day" in bad_cli.errors[0]

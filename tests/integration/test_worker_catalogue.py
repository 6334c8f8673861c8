"""A real ``fencepost worker`` publishes its jobs, and every submitter then follows them.

The job is a definition file (retry ``max_attempts: 2``, ``timeout: 1s``, a command
that sleeps longer): an execution submitted by another ``fencepost submit`` process
and one by ``store.submit`` without ``max_attempts`` each get the job's two attempts
and its timeout, both time out, and both end FAILED, as the audit trail shows. Inputs
that do not match the published schema are refused on the command line, and a
worker whose definition differs from the published one stops before claiming.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from fencepost import AttemptOutcome, Event, NotFound, State, Store
from fencepost.domain.catalogue import job_entry
from tests.acceptance.cli import fencepost
from tests.integration.test_worker_processes import (
    Workers,
    db,
    wait_until,
    workers,
    write_definition,
)

pytestmark = pytest.mark.slow

__all__ = ["db", "workers"]  # fixtures

NIGHTLY = """
name: nightly-report
version: 1
inputs:
  type: object
  properties: {day: {type: string}}
  required: [day]
timeout: 1s
retry: {max_attempts: 2, base_delay: 0.1, max_delay: 0.1}
run:
  command: [python, -c, "import time; time.sleep(30)"]
"""


def published(store: Store, job: str) -> bool:
    try:
        return bool(store.job(job))
    except NotFound:
        return False


def test_every_submitter_gets_the_published_attempts_and_timeout(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    definitions = write_definition(tmp_path / "defs", "nightly", NIGHTLY)
    workers.start(url, "worker-a", "--definitions", str(definitions), "--concurrency", "2")
    wait_until(lambda: published(store, "nightly-report"), 20, "the worker to publish")

    by_cli = fencepost(
        "submit", "nightly-report", "--input", "day=2026-11-28", "--json", db=url
    ).json()["id"]
    by_store = store.submit("nightly-report", {"day": "2026-11-29"}).id  # no max_attempts

    for eid in (by_cli, by_store):
        done = wait_until(
            lambda eid=eid: store.get(eid).state is State.FAILED and store.get(eid),
            30,
            f"{eid} to be dead-lettered",
        )
        assert (done.max_attempts, done.timeout, done.job_version) == (
            2,
            timedelta(seconds=1),
            1,
        )
        assert done.attempt == 2
        assert [a.outcome for a in store.attempts(eid)] == [AttemptOutcome.TIMED_OUT] * 2
        trail = store.transitions(eid)
        assert [t.event for t in trail].count(Event.TIMED_OUT) == 2
        assert trail[-1].to_state is State.FAILED


def test_inputs_that_break_the_published_schema_are_refused_on_the_command_line(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    definitions = write_definition(tmp_path / "defs", "nightly", NIGHTLY)
    workers.start(url, "worker-a", "--definitions", str(definitions))
    wait_until(lambda: published(store, "nightly-report"), 20, "the worker to publish")

    run = fencepost("submit", "nightly-report", "--input", "day=20261128", db=url)
    assert run.returncode == 2
    assert len(run.errors) == 1
    assert "inputs.day" in run.errors[0]
    assert store.query(job="nightly-report").items == []


def test_a_worker_whose_definition_differs_from_the_published_one_stops_before_claiming(
    workers: Workers, db: tuple[str, Store], tmp_path: Path
) -> None:
    url, store = db
    (other,) = store.publish_jobs([job_entry("nightly-report", 1, description="another")])
    waiting = store.submit("nightly-report", {"day": "d"}).id
    definitions = write_definition(tmp_path / "defs", "nightly", NIGHTLY)
    worker = workers.start(url, "worker-a", "--definitions", str(definitions))
    assert worker.wait(30) == 4  # a conflict with the stored state (fencepost.cli.common.Exit)
    lines = [line for line in workers.log("worker-a").splitlines() if "digest" in line]
    assert len(lines) == 1
    assert "'nightly-report' version 1" in lines[0]
    assert other.digest in lines[0]
    assert lines[0].count("sha256:") == 2
    assert store.get(waiting).state is State.SCHEDULED
    assert store.get(waiting).attempt == 0
    assert store.jobs() == [other]

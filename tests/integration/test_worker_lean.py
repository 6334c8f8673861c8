"""A worker process loads what running its jobs takes, and nothing of the service.

``fencepost worker MODULE:app --db ...`` and ``fencepost --help`` must not import
the HTTP service's stack (FastAPI, Starlette, uvicorn, pydantic, Prometheus),
jsonschema, YAML, rich or httpx: a worker's memory and start-up are what every
machine running jobs pays. Measured on real processes: the worker reports the
packages loaded in it from inside one of its own handlers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from uuid import UUID

import pytest

import fencepost
from fencepost import State
from tests.integration.test_worker_processes import APP, ROOT, Workers, wait_until, workers

#: The worker app plus a job with rich type hints (tests/integration/_typed_worker_app.py).
TYPED_APP = "tests.integration._typed_worker_app:app"

pytestmark = pytest.mark.slow

__all__ = ["workers"]  # fixture

#: Packages only the service, the operator tables, definition files or --server need.
HEAVY = {
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "pydantic_core",
    "prometheus_client",
    "jsonschema",
    "yaml",
    "rich",
    "httpx",
    "sqlalchemy",
}


def test_a_worker_process_loads_none_of_the_service_stack(shared_db: str, workers: Workers) -> None:
    url = shared_db
    with fencepost.connect(url) as store:
        probe = store.submit("loaded-modules").id
        workers.start(url, "lean", APP)
        done = wait_until(
            lambda: (e := store.get(probe)).state is State.SUCCEEDED and e, 30, "the probe job"
        )
    loaded = set(done.result)
    assert "fencepost" in loaded  # the probe did run in the worker
    assert not loaded & HEAVY, f"a worker loaded {sorted(loaded & HEAVY)}"


def test_json_native_jobs_refuse_bad_inputs_at_once_without_pydantic(
    shared_db: str, workers: Workers
) -> None:
    """JSON-native jobs bind their inputs without pydantic, refusing missing and unknown
    ones as a permanent failure (a submit before any worker published the job's schema)."""
    url = shared_db
    with fencepost.connect(url) as store:
        unknown = store.submit("quick", {"bogus": 1}).id  # quick takes only n: never retried
        workers.start(url, "lean-refusing", APP)
        refused = wait_until(
            lambda: (e := store.get(unknown)).state is State.FAILED and e, 30, "the refusal"
        )
        probe = store.submit("loaded-modules").id
        lean = wait_until(
            lambda: (e := store.get(probe)).state is State.SUCCEEDED and e, 30, "the probe"
        )
    assert refused.attempt == 1
    assert "inputs.bogus: is not an input of this job" in (refused.error or "")
    assert not set(lean.result) & HEAVY, f"a worker loaded {sorted(set(lean.result) & HEAVY)}"


def test_a_job_with_rich_hints_converts_and_bad_inputs_fail_at_once(
    shared_db: str, workers: Workers
) -> None:
    """A worker serving a job typed ``datetime`` loads pydantic (to publish the job's
    schema, and to convert); inputs stored before its schema was published and that do
    not convert fail at once, never retried. jsonschema is still never loaded."""
    url = shared_db
    with fencepost.connect(url) as store:
        bad = store.submit("typed-clock", {"at": "not a date", "ref": "x"}).id
        workers.start(url, "typed", TYPED_APP)
        typed = store.submit(
            "typed-clock", {"at": "2026-11-28T02:00:00Z", "ref": str(UUID(int=7))}
        ).id
        converted = wait_until(
            lambda: (e := store.get(typed)).state is State.SUCCEEDED and e, 30, "the typed job"
        )
        failed = wait_until(
            lambda: (e := store.get(bad)).state is State.FAILED and e, 30, "the bad typed job"
        )
        after = store.submit("loaded-modules").id
        loaded = wait_until(
            lambda: (e := store.get(after)).state is State.SUCCEEDED and e, 30, "the probe"
        )
    assert converted.result == ["datetime", "2026-11-28T02:00:00+00:00", "UUID"]
    assert failed.attempt == 1
    assert "inputs.at: Input should be a valid datetime" in (failed.error or "")
    assert "pydantic" in loaded.result
    assert "jsonschema" not in loaded.result


#: fencepost's own machinery that parsing a command line does not need: each command
#: imports what it runs (the store, the App, the worker runtime, the scheduler) itself.
DEFERRED = {
    "fencepost.app",
    "fencepost.store",
    "fencepost.store.base",
    "fencepost.scheduler.materializer",
    "fencepost.scheduler.handle",
    "fencepost.worker.runtime",
    "fencepost.jobs.spec",
    "asyncio",
}


def test_help_loads_none_of_the_service_stack() -> None:
    code = (
        "import sys\n"
        "from fencepost.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    modules = set(run.stdout.split())
    loaded = {m.partition(".")[0] for m in modules}
    assert "fencepost.cli.main" in modules
    assert not loaded & HEAVY, f"--help loaded {sorted(loaded & HEAVY)}"
    assert not modules & DEFERRED, f"--help loaded {sorted(modules & DEFERRED)}"

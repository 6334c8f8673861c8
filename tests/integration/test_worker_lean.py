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

import pytest

import fencepost
from fencepost import State
from tests.integration.test_worker_processes import APP, ROOT, Workers, wait_until, workers

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
}


def test_a_worker_process_loads_none_of_the_service_stack(workers: Workers, shared_db: str) -> None:
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

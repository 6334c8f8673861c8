"""Jobs for the worker observability tests (metrics, logging), and a script that runs them.

As ``MODULE:app`` the tests pass ``--db``. Run as a script,
``python -m tests.integration._observed_app [basic]`` calls ``app.run_worker()`` on
the store ``$OBSERVED_DB`` names: with ``basic``, after the application configured
logging itself (``logging.basicConfig`` with a format of its own), as many do.
``$OBSERVED_METRICS_PORT`` also serves the worker's metrics.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import fencepost

app = fencepost.App(os.environ.get("OBSERVED_DB", "memory://"))

#: The format of an application that configures logging itself (the test looks for it).
APP_FORMAT = "APP-OWN-FORMAT %(levelname)s %(name)s: %(message)s"


@app.job("ok", lease_ttl=5)
def ok(n: int = 0) -> int:
    """Succeeds after a few milliseconds."""
    time.sleep(0.01)
    return n


@app.job("boom", lease_ttl=5, max_attempts=1)
def boom() -> None:
    """Fails its only attempt."""
    raise RuntimeError("boom, as asked")


@app.job("brief", lease_ttl=1)
def brief(n: int = 0) -> int:
    """Succeeds at once; its 1 s lease lets a buffered lease wait only 0.5 s to start."""
    return n


if __name__ == "__main__":
    if sys.argv[1:] == ["basic"]:
        logging.basicConfig(level=logging.INFO, format=APP_FORMAT)
    port = os.environ.get("OBSERVED_METRICS_PORT")
    app.run_worker(owner="observed", metrics_port=None if port is None else int(port))

"""The benchmark's job: a no-op that reports when its handler started.

``fencepost worker noop_app:app`` runs it (with ``bench/`` on ``PYTHONPATH``).
"""

from __future__ import annotations

import time

import fencepost

app = fencepost.App("memory://")  # the benchmark always passes --db


@app.job("noop", lease_ttl=30)
def noop() -> float:
    """Return the wall-clock time the handler started (lateness = this - due_at)."""
    return time.time()

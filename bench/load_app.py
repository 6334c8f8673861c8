"""The offered-load benchmark's job: sleep 1 ms, report when the handler started.

``fencepost worker load_app:app`` runs it (with ``bench/`` on ``PYTHONPATH``). The
result is the wall-clock time the handler started. When ``FENCEPOST_LOAD_STARTS``
names a file, every handler start also appends ``<execution id> <start>`` to it (one
small ``O_APPEND`` write, atomic between threads), so that a second run of the same
execution would show up even though the stored result keeps only the last one.
"""

from __future__ import annotations

import os
import time

import fencepost

app = fencepost.App("memory://")  # the benchmark always passes --db

_STARTS = os.environ.get("FENCEPOST_LOAD_STARTS")
_FD = os.open(_STARTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if _STARTS else None


@app.job("sleep1", lease_ttl=30)
def sleep1(ctx: fencepost.Context, t: float = 0.0) -> float:
    """Sleep 1 ms; return the start time (claim latency = this - ``t``, the submit time)."""
    started = time.time()
    if _FD is not None:
        os.write(_FD, f"{ctx.execution_id} {started:.6f}\n".encode())
    time.sleep(0.001)
    return started

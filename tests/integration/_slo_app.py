"""The jobs of the SLO process test (tests/integration/test_slo_processes.py), one per
error class it provokes. The store URL is a placeholder: the test passes ``--db``."""

from __future__ import annotations

import time

import fencepost
from fencepost.jobs.context import Context

app = fencepost.App("memory://")


@app.job("on-time", lease_ttl=5)
def on_time(ctx: Context) -> str:
    """Done at once."""
    return "ok"


@app.job("stall", lease_ttl=2, max_attempts=3)
def stall(ctx: Context) -> int:
    """Three seconds of checkpoints: long enough for the test to stop its worker mid-run."""
    for step in range(30):
        ctx.checkpoint(progress={"step": step})
        time.sleep(0.1)
    return 30


@app.job("too-slow", lease_ttl=5, timeout=2.5, max_attempts=1)
def too_slow(ctx: Context) -> str:
    """Runs past its 2.5 s timeout: the worker stops the attempt, a dead letter."""
    time.sleep(8)
    return "too late"


@app.job("doomed", lease_ttl=5, max_attempts=2)
def doomed(ctx: Context) -> None:
    """Fails twice: the first retried after 2.5 s, the second a dead letter."""
    if ctx.attempt == 1:
        raise fencepost.Retry("downstream said later", after=2.5)
    raise RuntimeError("still failing")


@app.job("narrow", lease_ttl=5, concurrency=1)
def narrow(ctx: Context) -> str:
    """One at a time (a concurrency limit), 1.2 s each: the second waits on the first."""
    time.sleep(1.2)
    return "ok"

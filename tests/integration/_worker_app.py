"""The jobs the worker process tests run, as a ``fencepost.App`` (``MODULE:app``).

The store URL given here is a placeholder: the tests always pass ``--db``.
"""

from __future__ import annotations

import os
import sys
import time

import fencepost
from fencepost.jobs.context import Context

app = fencepost.App("memory://")


@app.job("spin", lease_ttl=5)
def spin(ctx: Context, steps: int = 100_000, pause: float = 0.02) -> int:
    """Count ``steps`` checkpoints; progress is the step reached (pause/resume/cancel target)."""
    for step in range(steps):
        ctx.checkpoint(progress={"step": step})
        time.sleep(pause)
    return steps


@app.job("crashy", lease_ttl=2, max_attempts=3)
def crashy(ctx: Context) -> str:
    """Hangs on its first attempt (the test kills the worker); succeeds on later ones."""
    if ctx.attempt == 1:
        time.sleep(60)
    return f"recovered on attempt {ctx.attempt}"


@app.job("deaf", lease_ttl=5)
def deaf(ctx: Context) -> str:
    """Sleeps through every request to stop."""
    time.sleep(60)
    return "woke up"


@app.job("quick", lease_ttl=5, max_attempts=50)
def quick(ctx: Context, n: int = 0) -> int:
    """A few milliseconds of work."""
    time.sleep(0.002)
    return n


@app.job("lease-echo", lease_ttl=5, max_attempts=50)
def lease_echo(ctx: Context) -> dict[str, object]:
    """A few milliseconds of work; the result names the lease that produced it."""
    time.sleep(0.002)
    return {"owner": ctx.owner, "epoch": ctx.epoch}


@app.job("nul-error", lease_ttl=5, max_attempts=3, retry={"base_delay": 0.05, "max_delay": 0.1})
def nul_error(ctx: Context) -> None:
    """Fails every attempt with U+0000 and a lone surrogate in its exception text."""
    raise RuntimeError(f"bad\x00err \ud800 on attempt {ctx.attempt}")


@app.job("step", lease_ttl=30)
def step(ctx: Context, wait_for: str | None = None) -> str:
    """Returns at once, or once the file ``wait_for`` exists (at most a minute)."""
    deadline = time.monotonic() + 60
    while wait_for is not None and not os.path.exists(wait_for) and time.monotonic() < deadline:
        time.sleep(0.01)
    return ctx.owner


@app.job("loaded-modules", lease_ttl=30)
def loaded_modules() -> list[str]:
    """The top-level packages loaded in this worker process, sorted."""
    return sorted({name.partition(".")[0] for name in sys.modules})


def _load_rows(day: str) -> list[int]:
    raise ValueError(f"no rows for {day}")


@app.job("doomed", lease_ttl=5, max_attempts=2, retry={"base_delay": 0.05, "max_delay": 0.1})
def doomed(ctx: Context, day: str = "2026-11-28") -> int:
    """Fails every attempt inside a helper (the traceback names it); two attempts."""
    return len(_load_rows(day))


@app.job("quick-progress", lease_ttl=30)
def quick_progress(ctx: Context, rows: int = 3) -> dict[str, int]:
    """Checkpoints and returns long before its first heartbeat is due."""
    for n in range(rows):
        ctx.checkpoint(progress={"rows": n + 1})
    return {"rows": rows}


@app.job("hold", lease_ttl=10, max_attempts=50)
def hold(seconds: float = 0.05) -> None:
    """Holds its lease for ``seconds`` (the flow-control tests' per-key concurrency)."""
    time.sleep(seconds)

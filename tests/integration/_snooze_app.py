"""The jobs of the snooze process tests, as a ``fencepost.App`` (``MODULE:app``).

The store URL given here is a placeholder: the tests pass ``--db`` or ``--server``.
"""

from __future__ import annotations

import fencepost
from fencepost.jobs.context import Context

app = fencepost.App("memory://")

#: A backoff no test waits out: a retry that came sooner used the handler's own delay.
_HOUR = {"base_delay": 3600, "max_delay": 3600}


@app.job("snooze-thrice", max_attempts=1, lease_ttl=10)
def snooze_thrice(ctx: Context) -> dict[str, int]:
    """Snoozes on its first three leases (epochs 1-3), then succeeds: one attempt in all."""
    if ctx.epoch <= 3:
        ctx.snooze(0.2, f"not ready (epoch {ctx.epoch})")
    return {"attempt": ctx.attempt, "epoch": ctx.epoch}


@app.job("always-snooze", max_attempts=1, lease_ttl=10)
def always_snooze(ctx: Context) -> None:
    """Snoozes every time: ends FAILED ("snoozed too often") past the store's bound."""
    ctx.snooze(0.001)


@app.job("retry-after", max_attempts=2, lease_ttl=10, retry=_HOUR)
def retry_after(ctx: Context) -> int:
    """Asks for a retry in 0.5 s on its first attempt; succeeds on the second."""
    if ctx.attempt == 1:
        raise fencepost.Retry("upstream asked us to wait", after=0.5)
    return ctx.attempt

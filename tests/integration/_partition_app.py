"""The job the network partition tests run, as a ``fencepost.App`` (``MODULE:app``).

The store URL given here is a placeholder: the tests pass ``--db`` or ``--server``.
"""

from __future__ import annotations

import os
import time

import fencepost
from fencepost.jobs.context import Context

app = fencepost.App("memory://")

#: A lease short enough for a partition of two leases to fit a quick test.
LEASE_TTL = 3.0


@app.job(
    "gated-echo",
    lease_ttl=LEASE_TTL,
    max_attempts=5,
    retry={"base_delay": 0.05, "max_delay": 0.1},
)
def gated_echo(ctx: Context, gates: dict[str, str] | None = None) -> dict[str, object]:
    """Names the lease that ran it, once the gate of its epoch is open.

    ``gates`` maps an epoch (as a string) to a file: the handler of that lease
    keeps running until the file exists (at most a minute), whichever host runs
    it. So the test decides when each lease's handler finishes: the partitioned
    host's ones after the partition, a takeover's at once or only later.
    """
    gate = (gates or {}).get(str(ctx.epoch))
    deadline = time.monotonic() + 60
    while gate is not None and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"owner": ctx.owner, "epoch": ctx.epoch}

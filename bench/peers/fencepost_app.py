"""fencepost in the peer benchmark: the no-op job, and its bulk enqueue.

The worker is started as the README's quick start does, with no other flags
(``--concurrency 64`` added for the row labelled tuned)::

    PYTHONPATH=bench/peers .venv/bin/fencepost worker fencepost_app:app --db URL

Jobs are enqueued into ``$PEERS_DB`` by ``.venv/bin/python bench/peers/enqueue.py
fencepost FIRST COUNT [--lead SECONDS]``: ``Store.submit_many`` (the public bulk path,
one transaction per call) in batches of 1,000, with ``execute_at`` = T for a burst.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from peers_common import DB_ENV, chunks, progress, record

import fencepost

app = fencepost.App("memory://")  # the worker's --db names the store


@app.job("noop")
def noop(n: int) -> None:
    """Record the start, nothing else."""
    started = time.time()
    record(n, started)


def enqueue(first: int, count: int, lead: float | None) -> None:
    with fencepost.connect(os.environ[DB_ENV]) as store:
        at = progress.begin(lead)
        due = {} if at is None else {"execute_at": datetime.fromtimestamp(at, UTC)}
        for ids in chunks(first, count):
            store.submit_many([{"job": "noop", "inputs": {"n": i}, **due} for i in ids])
            progress.add(len(ids))

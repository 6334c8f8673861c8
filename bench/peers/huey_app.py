"""Huey in the peer benchmark: a ``SqliteHuey`` with one task, and its enqueue.

``SqliteHuey`` given nothing but its file (``$PEERS_DB``), run by its consumer with the
defaults (one worker thread, as its README says of ``huey_consumer my_app.huey``)::

    PYTHONPATH=bench/peers bench/peers/.venvs/huey/bin/huey_consumer huey_app.huey

Jobs are enqueued by ``bench/peers/.venvs/huey/bin/python bench/peers/enqueue.py huey
FIRST COUNT [--lead SECONDS]``: ``task.map(ids)`` for jobs due now (Huey has no batch
insert: ``map`` is its public bulk path, one enqueue, and one transaction, per task),
``task.schedule((id,), eta=T)`` for a burst.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from huey import SqliteHuey
from peers_common import DB_ENV, chunks, record

huey = SqliteHuey(filename=os.environ[DB_ENV])


@huey.task()
def noop(n: int) -> None:
    """Record the start, nothing else."""
    started = time.time()
    record(n, started)


def enqueue(first: int, count: int, lead: float | None) -> dict[str, float | None]:
    at = None if lead is None else time.time() + lead
    started = time.perf_counter()
    if at is None:
        for ids in chunks(first, count):
            noop.map(ids)
    else:
        eta = datetime.fromtimestamp(at, UTC)
        for i in range(first, first + count):
            noop.schedule((i,), eta=eta)
    return {"seconds": time.perf_counter() - started, "at": at}

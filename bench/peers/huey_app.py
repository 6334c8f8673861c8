"""Huey in the peer benchmark: a ``SqliteHuey`` with one task, and its enqueue.

``SqliteHuey`` given nothing but its file (``$PEERS_DB``), run by its consumer with the
defaults (one worker thread, as its README says of ``huey_consumer my_app.huey``)::

    PYTHONPATH=bench/peers bench/peers/.venvs/huey/bin/huey_consumer huey_app.huey

Jobs are enqueued by ``bench/peers/.venvs/huey/bin/python bench/peers/enqueue.py huey
FIRST COUNT [--lead SECONDS]``: ``task(id)`` for jobs due now, ``task.schedule((id,),
eta=T)`` for a burst, one call per job. Huey has no batch insert: ``task.map(ids)``, its
bulk call, is this same loop of single enqueues (one transaction each), and calling
them one by one tells exactly which were acknowledged if one raises.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

from huey import SqliteHuey
from peers_common import DB_ENV, progress, record

huey = SqliteHuey(filename=os.environ[DB_ENV])


@huey.task()
def noop(n: int) -> None:
    """Record the start, nothing else."""
    started = time.time()
    record(n, started)


def enqueue(first: int, count: int, lead: float | None) -> None:
    at = progress.begin(lead)
    eta = None if at is None else datetime.fromtimestamp(at, UTC)
    for i in range(first, first + count):
        if eta is None:
            noop(i)
        else:
            noop.schedule((i,), eta=eta)
        progress.add(1)

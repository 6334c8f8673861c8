"""What every system's app module in bench/peers shares: the handler's record, bulk batches.

Standard library only: it is imported by fencepost's app (the project's ``.venv``) and by
the PgQueuer and Huey apps (each in its own virtualenv), with ``bench/peers`` on
``PYTHONPATH``.

Every handler, in every system, does the same and nothing else: it takes ``time.time()``
first, then appends one line ``<job id> <start time>`` to the file named by
``$PEERS_STARTS`` (opened once per process in append mode; one ``write`` per job, which
the kernel appends whole even from several threads). The benchmark reads starts,
losses and duplicates back from that file.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

STARTS_ENV = "PEERS_STARTS"  #: the per-run file handlers append to
DB_ENV = "PEERS_DB"  #: the store: a fencepost URL, or Huey's SQLite file
BATCH = 1_000  #: jobs per bulk enqueue call, in every system

_fd: int | None = None
_lock = threading.Lock()


def record(job_id: int, started: float) -> None:
    """Append ``job_id started`` as one line (one write) to the run's starts file."""
    global _fd
    if _fd is None:
        with _lock:
            if _fd is None:
                _fd = os.open(os.environ[STARTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, f"{job_id} {started:.6f}\n".encode())


@dataclass
class Progress:
    """One enqueue's account: when it started, its T, how many jobs its system acknowledged.

    An app's ``enqueue`` calls :meth:`begin` once connected, then :meth:`add` after each
    call the system returned from; enqueue.py reports it even when a call raises.
    """

    started: float | None = None  #: perf_counter at the first enqueue call
    at: float | None = None  #: the burst's due instant T (time.time()), or None
    enqueued: int = 0  #: jobs acknowledged, ids first .. first+enqueued-1

    def begin(self, lead: float | None) -> float | None:
        self.at = None if lead is None else time.time() + lead
        self.started = time.perf_counter()
        return self.at

    def add(self, jobs: int) -> None:
        self.enqueued += jobs


progress = Progress()


def chunks(first: int, count: int) -> list[range]:
    """``first .. first+count-1`` in runs of at most BATCH."""
    end = first + count
    return [range(start, min(start + BATCH, end)) for start in range(first, end, BATCH)]

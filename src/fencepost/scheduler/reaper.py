"""The reaper: times out RUNNING executions whose lease expired.

A worker that dies (or loses its database) stops renewing its leases; once a lease
has expired, :meth:`~fencepost.store.base.Store.reap_expired` ends that attempt
TIMED_OUT and retries the execution or dead-letters it. Every worker and service
sharing a store reaps it; none needs to know of the others.

Three places reap, each through this module:

* a service without embedded workers runs a :class:`Reaper` thread;
* each worker's control thread calls :func:`reap_all` with ``batches=1`` every
  ``reap_interval``, between its claims and heartbeats;
* ``fencepost reconcile`` calls :func:`reap_all` once, until nothing is left.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from fencepost.domain.errors import StoreUnavailable

# The thread runs only in a service (``fencepost serve``): its lines keep that logger.
log = logging.getLogger("fencepost.service")

#: Expired leases timed out per transaction.
REAP_BATCH = 1000


class Reaps(Protocol):
    """What reaping needs of a store: :meth:`Store.reap_expired`."""

    def reap_expired(self, *, limit: int = ...) -> int: ...


def reap_all(store: Reaps, *, limit: int = REAP_BATCH, batches: int | None = None) -> int:
    """Time out expired leases, ``limit`` per transaction; how many were timed out.

    Goes on while a batch comes back full, up to ``batches`` batches (None: no cap).
    A worker takes one batch per pass of its control thread, which also renews its
    own leases; a service's reaper thread and ``reconcile`` take them all.
    """
    total = 0
    done = 0
    while True:
        reaped = store.reap_expired(limit=limit)
        total += reaped
        done += 1
        if reaped < limit or (batches is not None and done >= batches):
            return total


class Reaper:
    """A background thread that calls :func:`reap_all` every ``interval`` seconds.

    It outlives any one failed pass: an unreachable store is logged as a warning, any
    other error with its traceback, and the next pass tries again.
    """

    def __init__(self, store: Reaps, *, interval: float) -> None:
        self.store = store
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fencepost-reaper", daemon=True)

    def start(self) -> None:
        """Start reaping, the first pass one ``interval`` from now."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the pass under way (if any), waiting up to ``timeout`` seconds."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                reap_all(self.store)
            except StoreUnavailable as exc:
                log.warning("reaper: store unavailable (%s); retrying", exc)
            except Exception:  # the reaper must outlive any one bad pass
                log.exception("reaper pass failed")

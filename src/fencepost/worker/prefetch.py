"""The worker's claim buffer: leased executions waiting for a free handler.

A claim is a round trip and a transaction; a handler is a slot. Claiming only
for free slots ties the two together: with ``concurrency`` 8 every claim takes at
most 8 executions, and a worker of fast jobs spends its time in round trips. So a
worker claims ahead: it leases what its free handlers take now *plus* what they
will start soon, and holds the surplus here until a slot frees.

How much it holds ahead is sized by what it does, not by a number to guess:

* **by throughput** — about what the handlers will take in the next
  :data:`HORIZON` seconds, measured as a moving average of handlers finished per
  second (a slot freed is a start to come). A worker of slow jobs finishes few
  per second and so holds nothing ahead: its pending work stays in the store for
  other workers;
* **by lease length** — the horizon is at most a sixteenth of the lease, so a
  buffered lease normally starts long before :data:`HAND_BACK` of its ttl;
* **bounded** — never more than ``prefetch`` leases (default
  :data:`DEFAULT_PREFETCH`; 0 turns buffering off).

A buffered lease is a lease like any other: the worker renews it on the running
leases' schedule, releases it at shutdown (claimable at once; a release does not
count an attempt) and hands it back the same way if it has not started within
:data:`HAND_BACK` of its ttl (all handlers stuck on long jobs), so it can never
starve another worker. Its attempt's timeout starts when its handler starts.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from fencepost.jobs.registry import JobRegistry

#: The most executions one claim asks for (the HTTP worker protocol's batch limit).
MAX_CLAIM = 1000

#: The most leases a worker holds ahead of its handlers unless told otherwise: as many
#: as one claim may take (MAX_CLAIM). The finish rate decides how many a worker holds
#: (half a second of its work); this only caps it. At 256, two workers drained 100,000
#: executions due at one instant at 9,223 a second; at 1,024, 11,794
#: (bench/million_schedules.py): a claim of more costs the store less per row.
DEFAULT_PREFETCH = 1000

#: Seconds of work, at the measured finish rate, a worker holds ahead.
HORIZON = 0.5

#: A buffered lease not started within this fraction of its ttl goes back to the store.
HAND_BACK = 0.5


#: Finishes per second are sampled no more often than this (seconds).
_SAMPLE = 0.02


class BufferedRun(Protocol):
    """What the buffer needs of a claimed execution (the worker's ``Run``)."""

    is_async: bool
    claimed_at: float
    started_at: float | None
    holds_slot: bool


R = TypeVar("R", bound=BufferedRun)


class FinishRate:
    """A moving average of handlers finished per second, and the lead it asks for."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.per_second = 0.0
        self._at: float | None = None
        self._count = 0

    def observe(self, now: float, finished: int) -> None:
        """Note that ``finished`` handlers have finished in all by ``now`` (monotonic)."""
        if self._at is None:
            self._at, self._count = now, finished
            return
        elapsed = now - self._at
        if elapsed < _SAMPLE:
            return
        instant = (finished - self._count) / elapsed
        # Half-life of about one sample: quick to follow a burst, quick to forget it.
        self.per_second = 0.5 * self.per_second + 0.5 * instant
        self._at, self._count = now, finished

    def lead(self, ttl: float) -> int:
        """How many leases of ``ttl`` seconds to hold ahead of the free handlers."""
        horizon = min(HORIZON, ttl * HAND_BACK / 8)
        return min(self.bound, int(self.per_second * horizon))


class ClaimBuffer(Generic[R]):
    """Claimed executions waiting to start, and the handler slots they start in.

    Thread-safe: the control thread adds, hands back and dispatches coroutine
    runs; handler threads take plain-function runs as slots free. A run holds a
    slot from its start until :meth:`free` (called once its handler returned, or
    when the worker abandons it), so at most ``slots`` handlers run at once.
    """

    def __init__(self, slots: int, monotonic: Callable[[], float]) -> None:
        self._total = self._slots = slots
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._plain: deque[R] = deque()
        self._coroutines: deque[R] = deque()
        self._closed = False
        self.freed = 0  #: slots freed (handlers finished or abandoned) since the start

    def __len__(self) -> int:
        return len(self._plain) + len(self._coroutines)

    @property
    def busy(self) -> int:
        """Slots in use: handlers started and not yet freed."""
        return self._total - self._slots

    def add(self, runs: Iterable[R]) -> None:
        """Queue claimed runs, in claim order."""
        with self._cond:
            for run in runs:
                (self._coroutines if run.is_async else self._plain).append(run)
            self._cond.notify_all()

    def take(self) -> R | None:
        """For a handler thread: the next plain run once a slot is free; None once closed."""
        with self._cond:
            while not self._closed and not (self._plain and self._slots > 0):
                self._cond.wait()
            if self._closed:
                return None
            return self._start(self._plain.popleft())

    def take_coroutines(self) -> list[R]:
        """For the control thread: the coroutine runs that free slots can start now."""
        taken: list[R] = []
        with self._cond:
            while self._coroutines and self._slots > 0:
                taken.append(self._start(self._coroutines.popleft()))
        return taken

    def free(self, run: R) -> bool:
        """Give back the slot ``run`` holds; True for the one call that did (idempotent)."""
        with self._cond:
            if not run.holds_slot:
                return False
            run.holds_slot = False
            self._slots += 1
            self.freed += 1
            self._cond.notify()
            return True

    def remove(self, run: R) -> bool:
        """Take ``run`` out if it has not started; True if it was waiting."""
        with self._cond:
            queue = self._coroutines if run.is_async else self._plain
            try:
                queue.remove(run)
            except ValueError:
                return False
            return True

    def stale(self, now: float, max_wait: Callable[[R], float]) -> list[R]:
        """Take out and return the runs that have waited longer than ``max_wait(run)``."""
        with self._cond:
            old: list[R] = []
            for queue in (self._plain, self._coroutines):
                keep = [r for r in queue if now - r.claimed_at <= max_wait(r)]
                if len(keep) != len(queue):
                    old.extend(r for r in queue if now - r.claimed_at > max_wait(r))
                    queue.clear()
                    queue.extend(keep)
            return old

    def clear(self) -> list[R]:
        """Take out and return every run that has not started."""
        with self._cond:
            waiting = [*self._plain, *self._coroutines]
            self._plain.clear()
            self._coroutines.clear()
            return waiting

    def close(self) -> None:
        """Let every handler thread blocked in :meth:`take` return None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _start(self, run: R) -> R:
        self._slots -= 1
        run.holds_slot = True
        run.started_at = self._monotonic()
        return run


#: Handlers a worker runs at once by default (``fencepost worker`` and ``serve`` alike).
DEFAULT_CONCURRENCY = 8


def claim_groups(
    registry: JobRegistry,
) -> dict[timedelta, tuple[list[str], list[tuple[str, int]]]]:
    """Jobs grouped by lease length: one claim per group, so each job gets its own ttl."""
    groups: dict[timedelta, tuple[list[str], list[tuple[str, int]]]] = {}
    for spec in registry:
        names, versions = groups.setdefault(spec.lease_ttl, ([], []))
        if spec.name not in names:
            names.append(spec.name)
        versions.append(spec.key)
    return groups

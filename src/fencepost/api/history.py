"""The history charts: ``GET /history`` and ``GET /history/summary``, and the roll-up
that feeds them.

The charts read the store's minute rows (:mod:`fencepost.domain.history`), which a
roll-up adds finished executions to. Two things roll up: the service
(``fencepost serve``) every :data:`ROLL_UP_INTERVAL` seconds in a
:class:`HistoryRoller` thread, and each ``GET /history`` (and summary) first, a
bounded amount (:data:`~fencepost.domain.history.READ_ROLL_UP_ROWS`) and without
waiting for a roll-up another process has under way, so that a chart read right
after work finished shows it. Workers do not roll up.
"""

from __future__ import annotations

import logging
import threading
from typing import Annotated

from fastapi import APIRouter, Query

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import StoreDep, guarded
from fencepost.domain.errors import StoreUnavailable
from fencepost.domain.history import (
    READ_ROLL_UP_ROWS,
    SummaryBy,
    Window,
)
from fencepost.store.history import RollsUp, roll_up_all
from fencepost.wire.history import History, HistorySummary

# The thread runs only in a service (``fencepost serve``): its lines keep that logger.
log = logging.getLogger("fencepost.service")

router = APIRouter()

#: Seconds between the service's roll-ups.
ROLL_UP_INTERVAL = 30.0


class HistoryRoller:
    """A background thread that calls :func:`roll_up_all` every ``interval`` seconds.

    It outlives any one failed pass: an unreachable store is logged as a warning,
    any other error with its traceback, and the next pass tries again. ``passes``
    counts the passes done (each sets :attr:`passed`).
    """

    def __init__(self, store: RollsUp, *, interval: float = ROLL_UP_INTERVAL) -> None:
        self.store = store
        self.interval = interval
        self.passes = 0
        #: Set after each pass (tests and probes wait on it; whoever waits clears it).
        self.passed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fencepost-history", daemon=True)

    def start(self) -> None:
        """Start rolling up: a first pass at once, then one every ``interval``."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the batch under way (if any), waiting up to ``timeout`` seconds."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                roll_up_all(self.store, stop=self._stop)
            except StoreUnavailable as exc:
                log.warning("history roll-up: store unavailable (%s); retrying", exc)
            except Exception:  # the roller must outlive any one bad pass
                log.exception("history roll-up failed")
            self.passes += 1
            self.passed.set()
            self._stop.wait(self.interval)


WindowQuery = Annotated[
    Window,
    Query(description="hour: 60 points of 60 s; day: 96 of 900 s; week: 168 of 3600 s"),
]


def _name(value: str | None) -> str | None:
    """A filter as a form sends it: an empty value is no filter."""
    return value or None


@router.get(
    "/history",
    response_model=History,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def history(
    store: StoreDep,
    window: WindowQuery = Window.HOUR,
    job: Annotated[str | None, Query(description="one job's executions (exact name)")] = None,
    queue: Annotated[str | None, Query(description="one queue's executions (exact name)")] = None,
) -> History:
    """A chart of the window, one point per step, oldest first, the last holding now:
    outcomes, first claims and their lateness percentiles, throttled time, and the SLO's
    misses and burn rates, from the stored minute rows (see ``Store.history``). Rolls up
    what finished since the last roll-up first (a bounded amount); ``rolled_up_to``
    says how far the counts go. An empty ``job`` or ``queue`` is no filter."""
    store.roll_up_history(max_rows=READ_ROLL_UP_ROWS, wait=False)
    chart = store.history(window=window, job=_name(job), queue=_name(queue))
    return History.from_domain(chart)


@router.get(
    "/history/summary",
    response_model=HistorySummary,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def history_summary(
    store: StoreDep,
    window: WindowQuery = Window.HOUR,
    by: Annotated[SummaryBy, Query(description="one row per job or per queue")] = SummaryBy.JOB,
) -> HistorySummary:
    """The window's totals per job or per queue (``by``), by name (see
    ``Store.history_summary``); rolls up first as ``GET /history`` does."""
    store.roll_up_history(max_rows=READ_ROLL_UP_ROWS, wait=False)
    return HistorySummary.from_domain(store.history_summary(window=window, by=by))

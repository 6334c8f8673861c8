"""Reports: the validated arguments of ``slo`` and the pure assembly of ``stats``.

What every backend shares of the report verbs, with no connection: a backend reads
its figures (the parameters it classifies errors with come from here, so its SQL
names no reason text of its own) and these turn them into the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.limits import ThrottleCount
from fencepost.domain.machine import stale_reason
from fencepost.domain.reports import (
    Lateness,
    SloOffender,
    SloReport,
    Stats,
    error_counts,
    tabulate,
)
from fencepost.domain.slo import (
    BURN_WINDOWS,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_WITHIN,
    ErrorClass,
    Objective,
    SloMark,
    Tally,
    objective,
    window_start,
)
from fencepost.domain.states import State


@dataclass(frozen=True, kw_only=True, slots=True)
class SloRequest:
    """The validated arguments of :meth:`Store.slo`."""

    window: timedelta
    claim_within: timedelta
    finish_within: timedelta
    claim_target: float
    finish_target: float
    worst: int

    def start(self, at: datetime) -> datetime:
        """The window's first instant (inclusive) for a report at ``at``."""
        return window_start(at, self.window)

    @property
    def at_defaults(self) -> bool:
        """Whether the objectives are the defaults the rollups were taken at."""
        return (self.claim_within, self.finish_within) == (
            DEFAULT_CLAIM_WITHIN,
            DEFAULT_FINISH_WITHIN,
        )

    def report(
        self,
        at: datetime,
        tallies: Mapping[str, Tally],
        worst: list[SloOffender],
        rolled_up: int = 0,
    ) -> SloReport:
        """The report taken at ``at`` from its tallies and its worst offenders.

        ``tallies`` by name: ``claim`` and ``finish`` over the window (rollups
        included), and ``claim:1h``/``finish:1h``, ``claim:6h``/``finish:6h`` over the
        burn windows (see :func:`burn_key`); a missing name is an empty tally.
        """
        empty = Tally()

        def one(name: str, within: timedelta, target: float) -> Objective:
            recent = {w: tallies.get(burn_key(name, w), empty) for w in BURN_WINDOWS}
            return objective(name, within, target, tallies.get(name, empty), recent)

        return SloReport(
            at=at,
            window=self.window,
            start=self.start(at),
            claimed=one("claim", self.claim_within, self.claim_target),
            finished=one("finish", self.finish_within, self.finish_target),
            worst=worst,
            rolled_up=rolled_up,
        )


def burn_key(objective_name: str, window: timedelta) -> str:
    """The name of an objective's tally over a burn window: ``claim:1h``, ``finish:6h``."""
    return f"{objective_name}:{int(window.total_seconds() // 3600)}h"


def stats_report(
    now: datetime,
    window: timedelta,
    counts: Iterable[tuple[str, str, State | str, int]],
    backlog: int,
    lateness: Lateness,
    refused: int | None,
    expiries: int | None,
    throttled: Iterable[tuple[str, int, timedelta]] = (),
    errors: Mapping[ErrorClass, int] | None = None,
) -> Stats:
    """:class:`Stats` at ``now`` from the figures a backend read: executions by
    ``(job, queue, state, count)``, the due backlog, claim lateness, the lease events,
    the window's throttle records as ``(scope, count, total held)`` and its error
    classes (THROTTLED, the throttle records, is counted here)."""
    rows = [(job, queue, State(state), n) for job, queue, state, n in counts]
    by_state, by_job = tabulate((job, state, n) for job, _, state, n in rows)
    _, by_queue = tabulate((queue, state, n) for _, queue, state, n in rows)
    throttled = list(throttled)
    classes = dict(errors or {})
    classes[ErrorClass.THROTTLED] = sum(int(n) for _, n, _ in throttled)
    return Stats(
        at=now,
        window=window,
        by_state=by_state,
        by_job=by_job,
        by_queue=by_queue,
        due_backlog=backlog,
        claim_lateness=lateness,
        stale_refused=refused or 0,
        lease_expiries=expiries or 0,
        throttled=[ThrottleCount(scope, int(n), held) for scope, n, held in sorted(throttled) if n],
        errors=error_counts(classes),
    )


def stats_error_params() -> dict[str, Any]:
    """The parameters the SQL stores' stats blocks classify errors with, so that the
    SQL names no reason text, bit or objective of its own: the refused heartbeat's
    audit reason, the marks that leave an execution out of the claim objective
    (backfill, replay), and the objective's default (a ``timedelta``, converted by
    the dialect)."""
    return {
        "heartbeat_refused": stale_reason("heartbeat"),
        "excluded_marks": int(SloMark.BACKFILL | SloMark.REPLAYED),
        "claim_within": DEFAULT_CLAIM_WITHIN,
    }


def throttle_lookback(now: datetime, window: timedelta) -> datetime:
    """The earliest throttle record (exclusive) that :meth:`Store.stats` reads to tell
    throttled claims from late ones: one more window before the window's start.

    A claim's own throttle record is written with it; a paused queue's, when it is
    resumed, before its executions are claimed. Reading back a whole extra window
    keeps the cost in proportion to the window (the records are indexed by time
    only) while still recognising executions claimed up to a window after their
    queue was resumed.
    """
    return now - 2 * window

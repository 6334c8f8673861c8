"""The bodies of the history charts: ``GET /history`` and ``GET /history/summary``.

Durations are seconds as numbers (lateness percentiles as bucket bounds, see
:func:`fencepost.domain.history.percentile`), so a chart can plot them as they are.
"""

from __future__ import annotations

from datetime import datetime

from fencepost.domain import history
from fencepost.wire.mapping import WireModel


class HistoryPoint(WireModel[history.HistoryPoint]):
    """One step of a chart: what finished, was claimed and was held in ``[at, at + step)``."""

    at: datetime
    succeeded: int
    #: Dead letters: executions that finished FAILED.
    dead: int
    #: Executions that finished after more than one attempt.
    retried: int
    #: Executions that finished after an attempt timed out.
    timed_out: int
    cancelled: int
    skipped: int
    #: First claims in the step (of executions finished since).
    claims: int
    #: Nearest-rank claim lateness percentiles, in seconds: the upper bound of the
    #: histogram bucket holding them (null without claims).
    lateness_p50: float | None
    lateness_p99: float | None
    #: Seconds limits and paused queues held executions back (throttle records).
    throttled_seconds: float
    #: Executions whose claim objective was decided (met or missed) in the step.
    claim_counted: int
    claim_missed: int
    #: Executions whose finish objective was decided in the step.
    finish_counted: int
    finish_missed: int
    #: The missed share over ``1 - target`` at the default targets (null: none decided).
    claim_burn: float | None
    finish_burn: float | None


class History(WireModel[history.History]):
    """A chart: one point per step of the window, oldest first, every step present."""

    window: str
    step_seconds: float
    start: datetime
    end: datetime
    job: str | None
    queue: str | None
    #: Everything that finished before it is counted; null before the first roll-up.
    rolled_up_to: datetime | None
    points: list[HistoryPoint]


class SummaryRow(WireModel[history.SummaryRow]):
    """One job's or queue's totals over the window."""

    name: str
    succeeded: int
    dead: int
    retried: int
    claims: int
    lateness_p50: float | None
    lateness_p99: float | None
    throttled_seconds: float


class HistorySummary(WireModel[history.HistorySummary]):
    """A window's totals per job or per queue, by name."""

    window: str
    by: str
    start: datetime
    end: datetime
    rolled_up_to: datetime | None
    rows: list[SummaryRow]

"""The bodies of the read-only reports: nodes, bucket ownership, stats and the SLO report.

Durations are seconds as numbers, so a chart can plot them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, Field

from fencepost.domain import nodes, reports, slo
from fencepost.wire.executions import Execution
from fencepost.wire.flow import ThrottleCount
from fencepost.wire.mapping import WireModel

# -- nodes and buckets ---------------------------------------------------------------------


class ServedJob(BaseModel):
    """One job version a node serves."""

    job: str
    version: int


class Node(WireModel[nodes.Node]):
    """A live scheduler or worker process and the buckets it claims from."""

    id: str
    kind: str
    #: The buckets it declared, in bucket order; None: it claims from any bucket.
    buckets: list[int] | None
    started_at: datetime
    heartbeat_at: datetime
    expires_at: datetime
    #: The job versions it serves (a worker's jobs).
    jobs: list[ServedJob] = Field(default_factory=list)

    @classmethod
    def from_domain(cls, obj: nodes.Node, /, **given: Any) -> Self:
        """The body of a node, its buckets in bucket order."""
        buckets = None if obj.buckets is None else sorted(set(obj.buckets))
        jobs = [ServedJob(job=job, version=version) for job, version in obj.jobs]
        return super().from_domain(obj, buckets=buckets, **{"jobs": jobs, **given})

    def to_domain(self, **given: Any) -> nodes.Node:
        """The node, its jobs as ``(job, version)`` pairs."""
        jobs = tuple((served.job, served.version) for served in self.jobs)
        return super().to_domain(**{"jobs": jobs, **given})


class Bucket(BaseModel):
    """One bucket: who claims from it and how much unfinished work it holds."""

    bucket: int
    #: Live nodes that declared this bucket (nodes claiming from any bucket are not listed).
    owners: list[str]
    #: Unfinished executions (SCHEDULED, RUNNING, RETRY_WAIT) in it.
    executions: int
    #: Declared by two or more live nodes.
    duplicated: bool
    #: No live node claims from it (a hole).
    unowned: bool


class BucketReport(WireModel[nodes.BucketReport]):
    """Ownership of every bucket among the live nodes, and the work nobody will pick up."""

    num_buckets: int
    buckets: list[Bucket]
    #: Buckets declared by two or more live nodes, in bucket order.
    duplicated: list[int]
    #: Buckets no live node claims from, in bucket order (empty while a floating node lives).
    unowned: list[int]
    #: Live nodes that claim from any bucket.
    floating: list[str]
    #: Unfinished executions in unowned buckets, unchanged for ``orphaned_after`` seconds.
    orphans: list[Execution]

    @classmethod
    def from_domain(
        cls, obj: nodes.BucketReport, /, *, counts: Mapping[int, int] | None = None, **given: Any
    ) -> Self:
        """The body of a report, every bucket listed with ``counts`` (unfinished, by bucket)."""
        counts = counts or {}
        unowned = set(obj.unowned)
        buckets = [
            Bucket(
                bucket=b,
                owners=obj.owners.get(b, []),
                executions=counts.get(b, 0),
                duplicated=b in obj.duplicated,
                unowned=b in unowned,
            )
            for b in range(obj.num_buckets)
        ]
        return super().from_domain(obj, buckets=buckets, duplicated=list(obj.duplicated), **given)

    def to_domain(self, **given: Any) -> nodes.BucketReport:
        """The report, without the per-bucket counts (the domain's report has none)."""
        owners = {b.bucket: b.owners for b in self.buckets if b.owners}
        duplicated = {b: owners[b] for b in self.duplicated}
        return super().to_domain(owners=owners, duplicated=duplicated, **given)


# -- stats and SLO -------------------------------------------------------------------------


class Lateness(WireModel[reports.Lateness]):
    """How late claims were, in seconds: nearest-rank percentiles (None without claims)."""

    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None


class DueCount(WireModel[reports.DueCount]):
    """Due executions of one job: pinned to ``version``, or (``version`` null) unpinned."""

    job: str
    #: The version they are pinned to; null: they run on any version of the job.
    version: int | None
    count: int


class Unserved(WireModel[reports.Unserved]):
    """Work waiting for a process that is not running (see ``Store.unserved``)."""

    at: datetime
    #: Every due (job, version) group, by job, then version (unpinned first).
    due: list[DueCount]
    #: The groups of ``due`` that no live worker serves.
    executions: list[DueCount]
    #: How many due executions no live worker serves (the sum over ``executions``).
    due_unserved: int
    #: Schedules not paused with a slot still to come.
    active_schedules: int
    #: Live nodes of kind "scheduler" (running materializers), by id.
    schedulers: list[str]
    #: Active schedules that will not fire: all of them while no scheduler lives, else 0.
    schedules: int

    @classmethod
    def from_domain(cls, obj: reports.Unserved, /, **given: Any) -> Self:
        """The body of the report, its two totals included."""
        totals = {"due_unserved": obj.due_unserved, "schedules": obj.schedules}
        return super().from_domain(obj, **{**totals, **given})


class Stats(WireModel[reports.Stats]):
    """The store at one instant, and what happened in the window before it."""

    at: datetime
    window_seconds: float
    #: Every state, zeros included.
    by_state: dict[str, int]
    #: Per job (by name), every state, zeros included.
    by_job: dict[str, dict[str, int]]
    #: Per queue (by name), every state, zeros included.
    by_queue: dict[str, dict[str, int]]
    #: SCHEDULED and RETRY_WAIT executions already due and not yet claimed.
    due_backlog: int
    #: Claims in the window: claim time minus due time (throttled claims left out).
    claim_lateness: Lateness
    #: Fenced calls from stale workers refused in the window, heartbeats included
    #: (``errors`` tells renewal failures from stale completions).
    stale_refused: int
    #: Leases that ran out in the window (reaped or taken over).
    lease_expiries: int
    #: Throttle records in the window, per scope (scopes with none left out).
    throttled: list[ThrottleCount] = Field(default_factory=list)
    #: Due work and schedules no live process serves.
    unserved: Unserved | None = None
    #: The window's error classes, zeros included: ``late_claim`` (first claims more
    #: than 10 s after the planned time, net of held time), ``renewal_failed``
    #: (heartbeats refused, leases expired or taken over), ``timed_out``,
    #: ``handler_failed``, ``stale_completion_refused`` (refused calls other than
    #: heartbeats), ``throttled`` (throttle records).
    errors: dict[str, int] = Field(default_factory=dict)

    @classmethod
    def from_domain(cls, obj: reports.Stats, /, **given: Any) -> Self:
        """The body of the figures, the unserved work's with them."""
        unserved = None if obj.unserved is None else Unserved.from_domain(obj.unserved)
        return super().from_domain(obj, **{"unserved": unserved, **given})

    def to_domain(self, **given: Any) -> reports.Stats:
        """The figures, the unserved work's with them."""
        unserved = None if self.unserved is None else self.unserved.to_domain()
        return super().to_domain(**{"unserved": unserved, **given})


class BurnRate(WireModel[slo.BurnRate]):
    """How fast an objective's budget burned over a recent window (1 h, 6 h)."""

    window_seconds: float
    met: int
    #: Decided and counted in the window: met plus misses.
    total: int
    #: The window's miss share over ``1 - target``: 1.0 spends exactly the budget
    #: over the report's window; null when nothing in the window was decided.
    rate: float | None


class SloObjective(WireModel[slo.Objective]):
    """One objective over the report's window, its misses by class and its error budget."""

    #: ``claim`` or ``finish``.
    name: str
    within_seconds: float
    #: The share it must reach, between 0 and 1 (exclusive).
    target: float
    met: int
    #: Decided and counted: met plus misses (exclusions are not in it).
    total: int
    #: ``met / total``; null when ``total`` is 0.
    share: float | None
    #: Whether ``share`` is below ``target`` (false while nothing was decided).
    missed: bool
    #: Misses by error class (``late_claim``, ``renewal_failed``, ``timed_out``,
    #: ``handler_failed``, ``stale_completion_refused``, ``ran_long``: those the
    #: objective can miss by), zeros included.
    misses: dict[str, int]
    #: Left out of ``total`` and counted here: ``backfill``, ``replay``, ``throttled``.
    excluded: dict[str, int]
    #: The misses the target allows over the window: ``(1 - target) * total``.
    budget: float
    #: Misses so far.
    consumed: int
    #: ``budget - consumed``: negative once overspent.
    remaining: float
    #: Over the last hour, then the last six hours.
    burn: list[BurnRate]

    @classmethod
    def from_domain(cls, obj: slo.Objective, /, **given: Any) -> Self:
        """The body of an objective, with whether it is missed."""
        return super().from_domain(obj, **{"missed": obj.missed, **given})


class SloOffender(WireModel[reports.SloOffender]):
    """One of the executions claimed latest (or not claimed yet) in the window."""

    execution_id: str
    job: str
    state: str
    #: Its planned time, which retries, takeovers and replays never move.
    planned_at: datetime
    #: Its first claim; null while never claimed.
    claimed_at: datetime | None
    #: ``claimed_at - planned_at`` (at least 0), or up to the report's ``at`` while unclaimed.
    lateness_seconds: float
    #: Its claim objective's verdict (``met``, ``late_claim``, ``throttled``,
    #: ``backfill``, ``replay``); null while undecided.
    verdict: str | None


class Slo(WireModel[reports.SloReport]):
    """The service-level report: both objectives over the executions planned in the
    window, each miss in its error class, the exclusions, the error budgets."""

    at: datetime
    window_seconds: float
    #: The window's first instant: executions planned in ``[start, at]`` count (a UTC
    #: midnight for a window of a day or more).
    start: datetime
    #: ``claimed.within_seconds``, kept at the top level for existing readers.
    claim_within_seconds: float
    #: ``finished.within_seconds``, likewise.
    finish_within_seconds: float
    claimed: SloObjective
    finished: SloObjective
    #: By claim lateness, latest first (stored executions only).
    worst: list[SloOffender]
    #: Executions counted from prune's daily rollups (no longer stored).
    rolled_up: int = 0

    @classmethod
    def from_domain(cls, obj: reports.SloReport, /, **given: Any) -> Self:
        """The body of the report, each objective's ``within`` also at the top level."""
        within = {
            "claim_within_seconds": obj.claim_within.total_seconds(),
            "finish_within_seconds": obj.finish_within.total_seconds(),
        }
        return super().from_domain(obj, **{**within, **given})

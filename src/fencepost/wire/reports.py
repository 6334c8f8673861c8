"""The bodies of the read-only reports: nodes, bucket ownership, stats and the SLO report.

Durations are seconds as numbers, so a chart can plot them as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, Field

from fencepost.domain import nodes, reports
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
    #: Completions and failures from stale workers refused in the window.
    stale_refused: int
    #: Leases that ran out in the window (reaped or taken over).
    lease_expiries: int
    #: Throttle records in the window, per scope (scopes with none left out).
    throttled: list[ThrottleCount] = Field(default_factory=list)
    #: Due work and schedules no live process serves.
    unserved: Unserved | None = None

    @classmethod
    def from_domain(cls, obj: reports.Stats, /, **given: Any) -> Self:
        """The body of the figures, the unserved work's with them."""
        unserved = None if obj.unserved is None else Unserved.from_domain(obj.unserved)
        return super().from_domain(obj, **{"unserved": unserved, **given})

    def to_domain(self, **given: Any) -> reports.Stats:
        """The figures, the unserved work's with them."""
        unserved = None if self.unserved is None else self.unserved.to_domain()
        return super().to_domain(**{"unserved": unserved, **given})


class SloShare(WireModel[reports.SloShare]):
    """One objective: ``met`` out of ``total``; ``share`` is None when ``total`` is 0."""

    met: int
    total: int
    share: float | None


class SloOffender(WireModel[reports.SloOffender]):
    """One of the executions claimed latest (or not claimed yet) in the window."""

    execution_id: str
    job: str
    state: str
    due_at: datetime
    claimed_at: datetime | None
    lateness_seconds: float


class Slo(WireModel[reports.SloReport]):
    """The scheduler's service-level report over the executions due in the window."""

    at: datetime
    window_seconds: float
    claim_within_seconds: float
    finish_within_seconds: float
    claimed: SloShare
    finished: SloShare
    worst: list[SloOffender]

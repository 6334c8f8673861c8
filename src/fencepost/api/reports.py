"""Read-only reports for operators and the dashboard: nodes, bucket ownership, stats, SLO.

Every figure comes from the store at request time (nothing is kept between
requests). Durations are seconds as numbers, so a chart can plot them as they are.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import Limit, StoreDep, guarded
from fencepost.api.schemas import MIN_SECONDS, Execution
from fencepost.domain import nodes, reports

router = APIRouter()

#: The longest window or threshold a report accepts: ten years. Far beyond any useful
#: report, and far enough from ``datetime``'s range that ``now - window`` cannot overflow.
MAX_SECONDS = 10 * 366 * 86400.0


def _seconds(description: str, *, zero: bool) -> object:
    """A query parameter of seconds: finite, at most :data:`MAX_SECONDS`.

    At least a microsecond unless ``zero``: the store keeps durations to the
    microsecond and refuses one that would round to nothing.
    """
    low = 0.0 if zero else MIN_SECONDS
    return Query(description=description, ge=low, le=MAX_SECONDS, allow_inf_nan=False)


Window = Annotated[float, _seconds("the span of the figures, in seconds", zero=False)]


def _as_seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


# -- nodes and buckets ---------------------------------------------------------------------


class Node(BaseModel):
    """A live scheduler or worker process and the buckets it claims from."""

    id: str
    kind: str
    #: The buckets it declared, in bucket order; None: it claims from any bucket.
    buckets: list[int] | None
    started_at: datetime
    heartbeat_at: datetime
    expires_at: datetime

    @classmethod
    def of(cls, node: nodes.Node) -> Node:
        """The response body of a domain node."""
        return cls(
            id=node.id,
            kind=node.kind,
            buckets=None if node.buckets is None else sorted(set(node.buckets)),
            started_at=node.started_at,
            heartbeat_at=node.heartbeat_at,
            expires_at=node.expires_at,
        )


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


class BucketReport(BaseModel):
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


@router.get(
    "/nodes",
    response_model=list[Node],
    **guarded(Scope.READ, p.STORE_UNAVAILABLE),
)
def list_nodes(store: StoreDep) -> list[Node]:
    """The live nodes (registration not yet lapsed), by id."""
    return [Node.of(n) for n in store.nodes(live_only=True)]


@router.get(
    "/buckets",
    response_model=BucketReport,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def bucket_report(
    store: StoreDep,
    orphaned_after: Annotated[
        float, _seconds("unchanged this long in an unowned bucket is an orphan", zero=True)
    ] = 300.0,
    limit: Limit = 100,
) -> BucketReport:
    """Buckets declared twice, buckets nobody covers (holes), and orphans (at most ``limit``)."""
    report = store.bucket_report(orphaned_after=orphaned_after, limit=limit)
    counts = store.bucket_counts()
    unowned = set(report.unowned)
    return BucketReport(
        num_buckets=report.num_buckets,
        buckets=[
            Bucket(
                bucket=b,
                owners=report.owners.get(b, []),
                executions=counts.get(b, 0),
                duplicated=b in report.duplicated,
                unowned=b in unowned,
            )
            for b in range(report.num_buckets)
        ],
        duplicated=list(report.duplicated),
        unowned=report.unowned,
        floating=report.floating,
        orphans=[Execution.of(e) for e in report.orphans],
    )


# -- stats and SLO -------------------------------------------------------------------------


class Lateness(BaseModel):
    """How late claims were, in seconds: nearest-rank percentiles (None without claims)."""

    count: int
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, late: reports.Lateness) -> Lateness:
        """The response body of a domain lateness summary."""
        return cls(
            count=late.count,
            p50=_as_seconds(late.p50),
            p90=_as_seconds(late.p90),
            p99=_as_seconds(late.p99),
            max=_as_seconds(late.max),
        )


class Stats(BaseModel):
    """The store at one instant, and what happened in the window before it."""

    at: datetime
    window_seconds: float
    #: Every state, zeros included.
    by_state: dict[str, int]
    #: Per job (by name), every state, zeros included.
    by_job: dict[str, dict[str, int]]
    #: SCHEDULED and RETRY_WAIT executions already due and not yet claimed.
    due_backlog: int
    #: Claims in the window: claim time minus due time.
    claim_lateness: Lateness
    #: Completions and failures from stale workers refused in the window.
    stale_refused: int
    #: Leases that ran out in the window (reaped or taken over).
    lease_expiries: int


class SloShare(BaseModel):
    """One objective: ``met`` out of ``total``; ``share`` is None when ``total`` is 0."""

    met: int
    total: int
    share: float | None


class SloOffender(BaseModel):
    """One of the executions claimed latest (or not claimed yet) in the window."""

    execution_id: str
    job: str
    state: str
    due_at: datetime
    claimed_at: datetime | None
    lateness_seconds: float


class Slo(BaseModel):
    """The scheduler's service-level report over the executions due in the window."""

    at: datetime
    window_seconds: float
    claim_within_seconds: float
    finish_within_seconds: float
    claimed: SloShare
    finished: SloShare
    worst: list[SloOffender]


@router.get(
    "/stats",
    response_model=Stats,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def stats(store: StoreDep, window: Window = 3600.0) -> Stats:
    """Counts by state, due backlog, and the window's claim lateness, refusals and expiries."""
    figures = store.stats(window=window)
    return Stats(
        at=figures.at,
        window_seconds=figures.window.total_seconds(),
        by_state={s.value: n for s, n in figures.by_state.items()},
        by_job={
            job: {s.value: n for s, n in counts.items()} for job, counts in figures.by_job.items()
        },
        due_backlog=figures.due_backlog,
        claim_lateness=Lateness.of(figures.claim_lateness),
        stale_refused=figures.stale_refused,
        lease_expiries=figures.lease_expiries,
    )


@router.get(
    "/slo",
    response_model=Slo,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def slo(
    store: StoreDep,
    window: Window = 30 * 86400.0,
    claim_within: Annotated[float, _seconds("the claim objective, in seconds", zero=True)] = 10.0,
    finish_within: Annotated[
        float, _seconds("the finish objective, in seconds", zero=True)
    ] = 300.0,
    worst: Annotated[int, Query(ge=0, le=1000, description="offenders listed")] = 10,
) -> Slo:
    """Shares claimed within ``claim_within`` and finished within ``finish_within`` of due."""
    report = store.slo(
        window=window, claim_within=claim_within, finish_within=finish_within, worst=worst
    )
    return Slo(
        at=report.at,
        window_seconds=report.window.total_seconds(),
        claim_within_seconds=report.claim_within.total_seconds(),
        finish_within_seconds=report.finish_within.total_seconds(),
        claimed=SloShare(**report.claimed._asdict()),
        finished=SloShare(**report.finished._asdict()),
        worst=[
            SloOffender(
                execution_id=o.execution_id,
                job=o.job,
                state=o.state.value,
                due_at=o.due_at,
                claimed_at=o.claimed_at,
                lateness_seconds=o.lateness.total_seconds(),
            )
            for o in report.worst
        ],
    )

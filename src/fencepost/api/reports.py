"""Read-only reports for operators and the dashboard: nodes, bucket ownership, stats, SLO.

Every figure comes from the store at request time (nothing is kept between
requests). Durations are seconds as numbers, so a chart can plot them as they are.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import Limit, StoreDep, guarded
from fencepost.domain.slo import (
    DEFAULT_CLAIM_TARGET,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_TARGET,
    DEFAULT_FINISH_WITHIN,
    DEFAULT_SLO_WINDOW,
)
from fencepost.wire.fields import MIN_SECONDS
from fencepost.wire.reports import BucketReport, Node, Slo, Stats

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


# The report's defaults, in the seconds the query parameters take.
_SLO_WINDOW = DEFAULT_SLO_WINDOW.total_seconds()
_CLAIM_WITHIN = DEFAULT_CLAIM_WITHIN.total_seconds()
_FINISH_WITHIN = DEFAULT_FINISH_WITHIN.total_seconds()


def _target(description: str) -> object:
    """A query parameter of a target share: a finite number strictly between 0 and 1."""
    return Query(description=description, gt=0.0, lt=1.0, allow_inf_nan=False)


# -- nodes and buckets ---------------------------------------------------------------------


@router.get(
    "/nodes",
    response_model=list[Node],
    **guarded(Scope.READ, p.STORE_UNAVAILABLE),
)
def list_nodes(store: StoreDep) -> list[Node]:
    """The live nodes (registration not yet lapsed), by id."""
    return [Node.from_domain(n) for n in store.nodes(live_only=True)]


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
    return BucketReport.from_domain(report, counts=store.bucket_counts())


# -- stats and SLO -------------------------------------------------------------------------


@router.get(
    "/stats",
    response_model=Stats,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def stats(store: StoreDep, window: Window = 3600.0) -> Stats:
    """Counts by state, due backlog, and the window's claim lateness, refusals, expiries,
    throttled executions per scope (throttled claims are not in the lateness) and
    error classes (``errors``: the names of the SLO report's classes)."""
    return Stats.from_domain(store.stats(window=window))


@router.get(
    "/slo",
    response_model=Slo,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def slo(
    store: StoreDep,
    window: Window = _SLO_WINDOW,
    claim_within: Annotated[
        float, _seconds("the claim objective, in seconds", zero=True)
    ] = _CLAIM_WITHIN,
    finish_within: Annotated[
        float, _seconds("the finish objective, in seconds", zero=True)
    ] = _FINISH_WITHIN,
    claim_target: Annotated[
        float, _target("the share the claim objective must reach")
    ] = DEFAULT_CLAIM_TARGET,
    finish_target: Annotated[
        float, _target("the share the finish objective must reach")
    ] = DEFAULT_FINISH_TARGET,
    worst: Annotated[int, Query(ge=0, le=1000, description="offenders listed")] = 10,
) -> Slo:
    """Both objectives over the executions planned in the window (claimed within
    ``claim_within`` and finished within ``finish_within`` of the planned time), each
    miss in its error class, the exclusions, the error budgets at ``claim_target`` and
    ``finish_target`` with their 1 h and 6 h burn rates, and the executions claimed
    latest; see ``Store.slo``."""
    report = store.slo(
        window=window,
        claim_within=claim_within,
        finish_within=finish_within,
        claim_target=claim_target,
        finish_target=finish_target,
        worst=worst,
    )
    return Slo.from_domain(report)

"""The job catalogue, read: every published job, and one job in full.

``GET /jobs`` lists what the deployment runs (each job's latest version, its
defaults, the live nodes serving it, its executions created in the window by
state); ``GET /jobs/{name}`` shows every version of one job. The same view as
``fencepost jobs`` (:mod:`fencepost.domain.jobviews`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import StoreDep, guarded
from fencepost.api.reports import Window
from fencepost.domain.jobviews import job_views
from fencepost.wire.jobs import JobList, JobSummary, JobView

router = APIRouter()

#: The default window of the counts: the last day.
DEFAULT_WINDOW = 86400.0

# A job's name may hold a slash ("reports/nightly"): the path converter takes the rest.
JobName = Annotated[str, Path(description="the job's name, percent-encoded")]


@router.get(
    "/jobs",
    response_model=JobList,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def list_jobs(store: StoreDep, window: Window = DEFAULT_WINDOW) -> JobList:
    """Every published job by name: versions, latest defaults, serving nodes, and its
    executions created in the last ``window`` seconds by current state."""
    counts = store.job_counts(window=window)
    views = job_views(store.jobs(), store.nodes(live_only=True), counts)
    return JobList(
        at=counts.at,
        window_seconds=counts.window / timedelta(seconds=1),
        jobs=[JobSummary.from_domain(view.summary()) for view in views],
    )


@router.get(
    "/jobs/{name:path}",
    response_model=JobView,
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_job(name: JobName, store: StoreDep, window: Window = DEFAULT_WINDOW) -> JobView:
    """One job in full: every version (schemas, defaults, source, digest), the live nodes
    serving each, and its executions created in the last ``window`` seconds by state."""
    entries = store.job(name)
    counts = store.job_counts(window=window, job=name)
    (view,) = job_views(entries, store.nodes(live_only=True), counts)
    return JobView.from_domain(view)

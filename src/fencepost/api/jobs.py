"""The job catalogue over HTTP: workers publish their jobs, operators read them.

``POST /jobs`` (scope ``work``) is what a remote worker (``fencepost worker
--server``) and a service started with jobs publish through before anything is
claimed; ``POST /jobs/limits`` (scope ``work``) declares the limits its jobs declare.
``GET /jobs`` lists what the deployment runs (each job's latest version, its
defaults, the live nodes serving it, its due executions waiting now and how many of
them no live worker serves, its executions created in the window by state);
``GET /jobs/{name}`` shows every version of one job. The same view as ``fencepost
jobs`` (:mod:`fencepost.domain.jobviews`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import ActorDep, StoreDep, guarded
from fencepost.api.reports import Window
from fencepost.domain import jobviews
from fencepost.domain.errors import ValidationError
from fencepost.domain.jobviews import job_views
from fencepost.domain.reports import Unserved
from fencepost.wire.catalogue import DeclareLimitsRequest, JobEntry, PublishRequest
from fencepost.wire.jobs import JobList, JobSummary, JobView, Waiting

router = APIRouter()

#: The default window of the counts: the last day.
DEFAULT_WINDOW = 86400.0

# A job's name may hold a slash ("reports/nightly"): the path converter takes the rest.
JobName = Annotated[str, Path(description="the job's name, percent-encoded")]


@router.post(
    "/jobs",
    response_model=list[JobEntry],
    **guarded(
        Scope.WORK, p.VALIDATION, p.CATALOGUE_CONFLICT, p.BODY_TOO_LARGE, p.STORE_UNAVAILABLE
    ),
)
def publish_jobs(body: PublishRequest, store: StoreDep) -> list[JobEntry]:
    """Publish job versions in one transaction; see ``Store.publish_jobs``.

    A version already published with the same definition is left as it is; one
    published with another definition is refused (409, naming the job, the version
    and both digests) and nothing of the request is stored.
    """
    entries = []
    for index, item in enumerate(body.entries):
        try:
            entries.append(item.to_domain())
        except ValidationError as exc:
            raise ValidationError(f"entries.{index}.{exc.field}", exc.message) from None
    try:
        stored = store.publish_jobs(entries)
    except ValidationError as exc:  # the store names "[2].digest"; pydantic "entries.2.x"
        position, _, field = exc.field.removeprefix("[").partition("].")
        raise ValidationError(f"entries.{position}.{field}", exc.message) from None
    return [JobEntry.from_domain(entry) for entry in stored]


@router.post(
    "/jobs/limits",
    status_code=status.HTTP_204_NO_CONTENT,
    **guarded(Scope.WORK, p.VALIDATION, p.BODY_TOO_LARGE, p.STORE_UNAVAILABLE),
)
def declare_limits(body: DeclareLimitsRequest, store: StoreDep, actor: ActorDep) -> Response:
    """Declare the limits of the jobs a worker publishes (``job:NAME`` scopes only), in
    one transaction; see ``Store.declare_limits``: a declaration replaces an earlier
    declaration, never a limit an operator set. Audited with the token's name.
    """
    limits = []
    for index, item in enumerate(body.limits):
        try:
            limits.append(item.to_domain())
        except ValidationError as exc:
            raise ValidationError(
                f"limits.{index}.{_DECLARED.get(exc.field, exc.field)}", exc.message
            ) from None
    store.declare_limits(limits, actor=actor)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


#: ``new_limit``'s names for the fields of a declaration (the job names its scope).
_DECLARED = {"scope": "job"}


@router.get(
    "/jobs",
    response_model=JobList,
    **guarded(Scope.READ, p.VALIDATION, p.STORE_UNAVAILABLE),
)
def list_jobs(store: StoreDep, window: Window = DEFAULT_WINDOW) -> JobList:
    """Every published job by name: versions, latest defaults, serving nodes, its due
    executions waiting now (``waiting``: and how many no live worker serves), and its
    executions created in the last ``window`` seconds by current state."""
    counts = store.job_counts(window=window)
    views = job_views(store.jobs(), store.nodes(live_only=True), counts)
    unserved = store.unserved()
    return JobList(
        at=counts.at,
        window_seconds=counts.window / timedelta(seconds=1),
        jobs=[
            JobSummary.from_domain(view.summary(), waiting=waiting(view, unserved))
            for view in views
        ],
    )


@router.get(
    "/jobs/{name:path}",
    response_model=JobView,
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def get_job(name: JobName, store: StoreDep, window: Window = DEFAULT_WINDOW) -> JobView:
    """One job in full: every version (schemas, defaults, source, digest), the live nodes
    serving each, its due executions waiting now (``waiting``), and its executions
    created in the last ``window`` seconds by state."""
    entries = store.job(name)
    counts = store.job_counts(window=window, job=name)
    (view,) = job_views(entries, store.nodes(live_only=True), counts)
    return JobView.from_domain(view, waiting=waiting(view, store.unserved()))


def waiting(view: jobviews.JobView, unserved: Unserved) -> Waiting:
    """The job's live workers and due executions, from the store's :class:`Unserved`."""
    due, left = unserved.due_of(view.name)
    return Waiting(workers=len(view.nodes), due=due, unserved=left)

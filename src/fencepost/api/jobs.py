"""The job catalogue over HTTP: workers publish their jobs, operators read them.

``POST /jobs`` (scope ``work``) is what a remote worker (``fencepost worker
--server``) publishes through before it claims anything; ``GET /jobs`` and
``GET /jobs/{name}`` (scope ``read``) list the published versions, each with the
live nodes that serve it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from fencepost.api import problems as p
from fencepost.api.auth import Scope
from fencepost.api.deps import StoreDep, guarded
from fencepost.domain.catalogue import JobEntry as Entry
from fencepost.domain.catalogue import served_by
from fencepost.domain.errors import ValidationError
from fencepost.store.base import Store
from fencepost.wire.catalogue import JobEntry, PublishRequest

router = APIRouter()


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
            raise ValidationError(f"entries[{index}].{exc.field}", exc.message) from None
    try:
        stored = store.publish_jobs(entries)
    except ValidationError as exc:  # "[2].digest": the request's item
        raise ValidationError(f"entries{exc.field}", exc.message) from None
    return [JobEntry.from_domain(entry) for entry in stored]


@router.get(
    "/jobs",
    response_model=list[JobEntry],
    **guarded(Scope.READ, p.STORE_UNAVAILABLE),
)
def list_jobs(store: StoreDep) -> list[JobEntry]:
    """Every published version of every job, by name then version, with its live servers."""
    return _bodies(store, store.jobs())


@router.get(
    "/jobs/{name}",
    response_model=list[JobEntry],
    **guarded(Scope.READ, p.VALIDATION, p.NOT_FOUND, p.STORE_UNAVAILABLE),
)
def job_versions(name: Annotated[str, Path(min_length=1)], store: StoreDep) -> list[JobEntry]:
    """Every published version of one job, oldest first (404 if none was published)."""
    return _bodies(store, store.job(name))


def _bodies(store: Store, entries: list[Entry]) -> list[JobEntry]:
    servers = served_by(store.nodes(live_only=True))
    return [JobEntry.from_domain(e, servers.get(e.key, [])) for e in entries]

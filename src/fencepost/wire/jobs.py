"""The JSON shapes of the job catalogue's routes: ``GET /jobs`` and ``GET /jobs/{name}``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, Field

from fencepost.domain import catalogue, jobviews
from fencepost.wire.mapping import WireModel


class JobDefaults(WireModel[catalogue.JobDefaults]):
    """What a job's executions get when their submitter leaves it out (null: not set)."""

    max_attempts: int | None = None
    retry_base_delay_seconds: float | None = None
    retry_max_delay_seconds: float | None = None
    timeout_seconds: float | None = None
    lease_ttl_seconds: float | None = None
    priority: int | None = None
    queue: str | None = None


class JobSource(WireModel[catalogue.JobSource]):
    """Where a job is defined: ``code`` (``module:function``) or ``file`` (a path)."""

    kind: str
    where: str


class JobEntry(WireModel[catalogue.JobEntry]):
    """One published version of a job, as the catalogue holds it."""

    name: str
    version: int
    input_schema: dict[str, Any]
    #: None: the job declares no output schema.
    output_schema: dict[str, Any] | None
    defaults: JobDefaults
    description: str
    source: JobSource
    #: ``sha256:<hex>`` of the canonical JSON of the definition.
    digest: str
    published_at: datetime | None

    # The API calls an execution's job version ``version`` and maps it to the domain's
    # ``job_version``; an entry's own attribute is ``version``, so it is passed by hand.

    @classmethod
    def from_domain(cls, obj: catalogue.JobEntry, /, **given: Any) -> Self:
        """The body of one entry."""
        return super().from_domain(obj, **{"version": obj.version, **given})

    def to_domain(self, **given: Any) -> catalogue.JobEntry:
        """The entry this body mirrors."""
        return super().to_domain(**{"version": self.version, **given})


class JobSummary(WireModel[jobviews.JobSummary]):
    """One job of the listing: its latest version in full, the others by number."""

    name: str
    latest: JobEntry
    #: Every published version, ascending.
    versions: list[int]
    #: The names of the latest version's inputs (its schema's ``properties``).
    inputs: list[str]
    #: Live nodes serving any version, by id.
    nodes: list[str]
    #: Executions created in the window, by current state (every state listed).
    counts: dict[str, int]

    @classmethod
    def from_domain(cls, obj: jobviews.JobSummary, /, **given: Any) -> Self:
        """The body of one job of the listing."""
        return super().from_domain(obj, **{"inputs": obj.inputs, **given})


class JobList(BaseModel):
    """``GET /jobs``: every published job, by name, with the window its counts cover."""

    at: datetime
    window_seconds: float
    jobs: list[JobSummary] = Field(default_factory=list)


class JobView(WireModel[jobviews.JobView]):
    """``GET /jobs/{name}``: one job in full."""

    name: str
    #: Every published version, oldest first.
    versions: list[JobEntry]
    #: Version -> the live nodes serving it (versions no one serves left out).
    served_by: dict[int, list[str]]
    #: Live nodes serving any version, by id.
    nodes: list[str]
    #: Executions created in the window, by current state (every state listed).
    counts: dict[str, int]
    at: datetime
    window_seconds: float

    @classmethod
    def from_domain(cls, obj: jobviews.JobView, /, **given: Any) -> Self:
        """The body of one job."""
        return super().from_domain(obj, **{"nodes": list(obj.nodes), **given})

    def to_domain(self, **given: Any) -> jobviews.JobView:
        """The job, its versions as a tuple."""
        versions = tuple(entry.to_domain() for entry in self.versions)
        return super().to_domain(**{"versions": versions, **given})

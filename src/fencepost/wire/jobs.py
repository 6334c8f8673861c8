"""The JSON shapes of the job catalogue's read routes: ``GET /jobs`` and ``GET /jobs/{name}``.

A published version travels as :meth:`fencepost.domain.catalogue.JobEntry.definition`
gives it (durations in seconds, named as a job definition names them), with its
digest, its publication time and the live nodes serving it: the same definition a
worker publishes, so a client reading it back gets the digest's input as it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, Field

from fencepost.domain import catalogue, jobviews
from fencepost.wire.mapping import WireModel


class JobEntry(BaseModel):
    """One published job version, and the live nodes that serve it."""

    name: str
    version: int
    digest: str
    published_at: datetime | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    defaults: dict[str, Any]
    description: str
    source: dict[str, str]
    #: Live nodes that declared this version when they registered.
    served_by: list[str] = Field(default_factory=list)

    @classmethod
    def from_domain(cls, entry: catalogue.JobEntry, served_by: list[str] | None = None) -> Self:
        """The body of ``entry``."""
        return cls.model_validate(
            {
                **entry.definition(),
                "digest": entry.digest,
                "published_at": entry.published_at,
                "served_by": served_by or [],
            }
        )

    def to_domain(self) -> catalogue.JobEntry:
        """The entry this body holds (its digest checked against its definition)."""
        definition = self.model_dump(exclude={"digest", "published_at", "served_by"})
        return catalogue.entry_from_definition(
            definition, digest=self.digest, published_at=self.published_at
        )


class JobSummary(WireModel[jobviews.JobSummary]):
    """One job of the listing: its latest version in full, the others by number."""

    name: str
    latest: JobEntry
    #: Every published version, ascending.
    versions: list[int]
    #: The names of the latest version's inputs (its schema's ``properties``), by name.
    inputs: list[str]
    #: Live nodes serving any version, by id.
    nodes: list[str]
    #: Executions created in the window, by current state (every state listed).
    counts: dict[str, int]

    @classmethod
    def from_domain(cls, obj: jobviews.JobSummary, /, **given: Any) -> Self:
        """The body of one job of the listing."""
        latest = JobEntry.from_domain(obj.latest, list(obj.latest_nodes))
        return super().from_domain(obj, **{"latest": latest, "inputs": obj.inputs, **given})

    def to_domain(self, **given: Any) -> jobviews.JobSummary:
        """The job as listed (``at`` and ``window`` are the listing's: give them)."""
        latest = self.latest.to_domain()
        nodes = tuple(self.latest.served_by)
        return super().to_domain(**{"latest": latest, "latest_nodes": nodes, **given})


class JobList(BaseModel):
    """``GET /jobs``: every published job, by name, and the window its counts cover."""

    at: datetime
    window_seconds: float
    jobs: list[JobSummary] = Field(default_factory=list)


class JobView(WireModel[jobviews.JobView]):
    """``GET /jobs/{name}``: one job in full."""

    name: str
    #: Every published version, oldest first, each with the live nodes serving it.
    versions: list[JobEntry]
    #: Live nodes serving any version, by id.
    nodes: list[str]
    #: Executions created in the window, by current state (every state listed).
    counts: dict[str, int]
    at: datetime
    window_seconds: float

    @classmethod
    def from_domain(cls, obj: jobviews.JobView, /, **given: Any) -> Self:
        """The body of one job."""
        versions = [
            JobEntry.from_domain(e, list(obj.served_by.get(e.version, ()))) for e in obj.versions
        ]
        return super().from_domain(obj, **{"versions": versions, "nodes": list(obj.nodes), **given})

    def to_domain(self, **given: Any) -> jobviews.JobView:
        """The job, the nodes serving each version gathered by version."""
        versions = tuple(entry.to_domain() for entry in self.versions)
        served = {e.version: tuple(e.served_by) for e in self.versions if e.served_by}
        return super().to_domain(**{"versions": versions, "served_by": served, **given})

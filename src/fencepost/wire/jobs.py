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

from fencepost.domain import jobviews
from fencepost.wire.catalogue import JobEntry
from fencepost.wire.mapping import WireModel

__all__ = ["JobEntry", "JobList", "JobSummary", "JobView", "Waiting"]


class Waiting(BaseModel):
    """A job's due executions now, as ``GET /jobs`` and ``GET /jobs/{name}`` show them."""

    #: Live nodes serving any version of the job.
    workers: int
    #: Its due executions (SCHEDULED or RETRY_WAIT, due_at passed) waiting now.
    due: int
    #: How many of those no live worker serves (no live node serves their version).
    unserved: int


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
    #: Due executions of the job waiting now, and how many of them no live worker serves
    #: (``Store.unserved``); None where the body was built without that report.
    waiting: Waiting | None = None

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
    #: Its due executions waiting now (see :class:`JobSummary`).
    waiting: Waiting | None = None

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

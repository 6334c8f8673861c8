"""The job catalogue as an operator reads it: each job's versions, who serves them, what ran.

``fencepost jobs``, ``GET /jobs`` and the dashboard's Jobs view show the same thing,
built here once from three reads of a store: its catalogue (``Store.jobs`` or
``Store.job``), its live nodes (``Store.nodes``) and the executions created in a
window (``Store.job_counts``). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.catalogue import JobEntry, served_by
from fencepost.domain.nodes import Node
from fencepost.domain.reports import JobCounts, counts_by_state
from fencepost.domain.states import State


@dataclass(frozen=True, kw_only=True)
class JobView:
    """One job in full: every published version, the live nodes serving each, and its
    executions created in the window ``(at - window, at]`` by current state."""

    name: str
    versions: tuple[JobEntry, ...]  #: oldest first, never empty
    #: Version -> ids of the live nodes serving it (versions no one serves left out).
    served_by: dict[int, tuple[str, ...]]
    counts: dict[State, int]  #: every state, zeros included
    at: datetime
    window: timedelta

    @property
    def latest(self) -> JobEntry:
        """The highest version: what a submit that names no version runs."""
        return self.versions[-1]

    @property
    def nodes(self) -> tuple[str, ...]:
        """The live nodes serving any version of the job, by id."""
        return tuple(sorted({node for ids in self.served_by.values() for node in ids}))

    def summary(self) -> JobSummary:
        """The job as one row of the catalogue's listing."""
        return JobSummary(
            name=self.name,
            latest=self.latest,
            versions=tuple(entry.version for entry in self.versions),
            nodes=self.nodes,
            latest_nodes=self.served_by.get(self.latest.version, ()),
            counts=self.counts,
            at=self.at,
            window=self.window,
        )


@dataclass(frozen=True, kw_only=True)
class JobSummary:
    """One job as the listing shows it: its latest version in full, the others by number."""

    name: str
    latest: JobEntry
    versions: tuple[int, ...]  #: every published version, ascending
    nodes: tuple[str, ...]  #: live nodes serving any version, by id
    latest_nodes: tuple[str, ...]  #: live nodes serving the latest version, by id
    counts: dict[State, int]  #: executions created in the window, every state listed
    at: datetime
    window: timedelta

    @property
    def inputs(self) -> list[str]:
        """The names of the latest version's inputs (see :func:`input_fields`)."""
        return input_fields(self.latest.input_schema)


def job_views(
    entries: Iterable[JobEntry], nodes: Iterable[Node], counts: JobCounts
) -> list[JobView]:
    """Every job of ``entries`` (a store's catalogue, or one job's versions), by name.

    ``nodes`` are the live ones; ``counts`` the store's :class:`JobCounts`. A job with
    no execution in the window has every count at zero; executions of jobs no one
    published are not shown (``fencepost stats`` counts them).
    """
    by_name: dict[str, list[JobEntry]] = {}
    for entry in sorted(entries, key=lambda e: e.key):
        by_name.setdefault(entry.name, []).append(entry)
    serving = served_by(nodes)
    return [
        JobView(
            name=name,
            versions=tuple(versions),
            served_by={e.version: tuple(serving[e.key]) for e in versions if serving.get(e.key)},
            counts=counts_by_state(counts.by_job.get(name, {})),
            at=counts.at,
            window=counts.window,
        )
        for name, versions in by_name.items()
    ]


def input_fields(schema: Mapping[str, Any]) -> list[str]:
    """The top-level input names a JSON Schema declares (``properties``), by name.

    By name, not in the schema's order: a store keeps a schema as canonical JSON
    (SQLite, sorted keys) or as ``jsonb`` (PostgreSQL, shorter keys first), so the
    order it was written in is gone. Empty when the schema names none
    (``{"type": "object"}`` takes any inputs).
    """
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    return sorted(str(name) for name in properties)

"""A job's entry in the store's catalogue, as the process that runs it publishes it.

:func:`entry_of` uses the spec's ``input_schema`` as it is (for a handler whose hints
are plain JSON types, deriving it takes no pydantic) and only hashlib and json
besides: a worker publishes its jobs without loading jsonschema, since a spec's
schema was checked when the spec was built.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Any, Protocol

from fencepost.domain.catalogue import JobDefaults, JobEntry, JobSource, job_entry
from fencepost.domain.limits import Limit
from fencepost.jobs.spec import JobSpec

#: The suffixes of job definition files (see :mod:`fencepost.jobs.definitions`).
_DEFINITION_SUFFIXES = (".yaml", ".yml", ".json")


def entry_of(spec: JobSpec) -> JobEntry:
    """The catalogue entry of ``spec``: its schemas, defaults, description and source.

    A job defined in a file names the file without its directory, so the same file
    deployed to different paths on two hosts gives the same digest; a job defined
    in code names ``module:function``.
    """
    retry = spec.retry
    defaults = JobDefaults(
        max_attempts=spec.max_attempts,
        retry_base_delay=None if retry is None else retry.base_delay,
        retry_max_delay=None if retry is None else retry.max_delay,
        timeout=spec.timeout,
        lease_ttl=spec.lease_ttl,
        priority=spec.priority,
        queue=spec.queue,
    )
    if spec.source.endswith(_DEFINITION_SUFFIXES):
        source = JobSource(kind="file", where=PurePath(spec.source).name)
    else:
        source = JobSource(kind="code", where=spec.source)
    return job_entry(
        spec.name,
        spec.version,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        defaults=defaults,
        description=spec.description,
        source=source,
        check_schemas=False,  # a JobSpec's schema is valid: checked or derived at its making
    )


def entries_of(specs: Iterable[JobSpec]) -> list[JobEntry]:
    """The entries of every spec (a registry), in its order."""
    return [entry_of(spec) for spec in specs]


def limits_of(specs: Iterable[JobSpec]) -> list[Limit]:
    """The limits the jobs of ``specs`` declare, one a job, by job name.

    A job's limit is its latest version's: versions of one job share its limit
    (the scope is ``job:NAME``), so an older version's declaration gives way to a
    newer one's, and a latest version that declares none declares nothing.
    """
    latest: dict[str, JobSpec] = {}
    for spec in specs:
        if spec.name not in latest or spec.version > latest[spec.name].version:
            latest[spec.name] = spec
    return [spec.limit for _, spec in sorted(latest.items()) if spec.limit is not None]


class Publisher(Protocol):
    """Where jobs are published: a store, or the HTTP client of a remote worker."""

    def publish_jobs(self, entries: Iterable[JobEntry]) -> Any: ...

    def declare_limits(self, limits: Iterable[Limit], *, actor: str = ...) -> Any: ...


def publish(
    target: Publisher, specs: Iterable[JobSpec], entries: Sequence[JobEntry] | None = None
) -> None:
    """Publish ``specs`` (their ``entries``, when built already) to ``target``'s job
    catalogue, then declare the limits they declare (:func:`limits_of`).

    Declaring never replaces an operator's limit, and a job that stops declaring one
    leaves its earlier declaration in place (an operator removes it: publishing
    workers of several releases at once would otherwise turn it off and on).
    """
    specs = list(specs)
    target.publish_jobs(entries_of(specs) if entries is None else entries)
    limits = limits_of(specs)
    if limits:
        target.declare_limits(limits)

"""A job's entry in the store's catalogue, as the process that runs it publishes it.

:func:`entry_of` uses the spec's ``input_schema`` as it is (for a handler whose hints
are plain JSON types, deriving it takes no pydantic) and only hashlib and json
besides: a worker publishes its jobs without loading jsonschema, since a spec's
schema was checked when the spec was built.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePath

from fencepost.domain.catalogue import JobDefaults, JobEntry, JobSource, job_entry
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

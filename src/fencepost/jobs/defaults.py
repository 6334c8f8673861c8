"""A job's defaults, applied to a submit or a schedule: one place for ``App`` and the HTTP API.

With a :class:`~fencepost.jobs.registry.JobRegistry`, a submit must name a registered
job: it is pinned to the version asked for (the latest when none), its inputs are
checked against that version's schema (nothing is stored when they do not match), and
the job's ``max_attempts``, ``timeout``, ``priority`` and ``queue`` fill in what the
caller left out. Without a
registry (a service that runs no jobs itself), the caller's values pass through as given
and the store checks them.

It returns keyword arguments for the store (``job``, ``inputs``,
``version`` and, only when known, ``max_attempts``, ``timeout``, ``priority`` and
``queue``): a value left out keeps the store's own default. Their errors are the
registry's and the schema's :class:`~fencepost.domain.errors.ValidationError`, naming
``job``, ``version`` or the offending input (``inputs.day``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fencepost.domain.models import JSON
from fencepost.jobs.registry import JobRegistry
from fencepost.jobs.spec import JobSpec


def job_defaults(
    registry: JobRegistry | None,
    job: str,
    inputs: JSON,
    *,
    version: int | None = None,
    max_attempts: int | None = None,
    timeout: float | timedelta | None = None,
    priority: int | None = None,
    queue: str | None = None,
    schedule: bool = False,
) -> dict[str, Any]:
    """``Store.submit``'s (or, with ``schedule``, ``Store.add_schedule``'s) job, inputs,
    version, attempts, timeout, priority and queue.

    What the caller gives wins; what it leaves out (None) comes from the job's spec.
    A schedule has no timeout of its own: its executions take the job's when they run.
    """
    spec, arguments = _pinned(registry, job, inputs, version, max_attempts, priority, queue)
    if schedule:
        return arguments
    if timeout is None and spec is not None:
        timeout = spec.timeout
    if timeout is not None:
        arguments["timeout"] = timeout
    return arguments


def _pinned(
    registry: JobRegistry | None,
    job: str,
    inputs: JSON,
    version: int | None,
    max_attempts: int | None,
    priority: int | None,
    queue: str | None,
) -> tuple[JobSpec | None, dict[str, Any]]:
    """The registered spec (None without a registry) and the arguments it decides."""
    spec = None
    if registry is not None:
        spec = registry.get(job, version)
        job, version, inputs = spec.name, spec.version, spec.check_inputs(inputs)
        max_attempts = spec.max_attempts if max_attempts is None else max_attempts
        priority = spec.priority if priority is None else priority
        queue = spec.queue if queue is None else queue
    arguments: dict[str, Any] = {"job": job, "inputs": inputs, "version": version}
    for name, value in (("max_attempts", max_attempts), ("priority", priority), ("queue", queue)):
        if value is not None:
            arguments[name] = value
    return spec, arguments

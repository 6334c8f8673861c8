"""The runners behind definition-file jobs: each is a ``JobSpec.run(ctx, inputs)``.

- :class:`CommandRunner` runs an external command (no shell) in its own process group;
- :class:`HttpRunner` sends one HTTP request;
- ``python:`` definitions need no runner of their own: they become
  :func:`~fencepost.jobs.spec.spec_from_function` specs.

Command arguments, URLs, header values and JSON bodies are templates
(:mod:`fencepost.jobs.runners.templates`).

Errors they raise, besides :class:`~fencepost.domain.errors.Cancelled` and
:class:`~fencepost.domain.errors.PermanentFailure`::

    FencepostError
     ├── CommandFailed   non-zero exit or killed by a signal (retryable)
     ├── HttpFailed      5xx, 408, 429, network error or timeout (retryable)
     └── Retry           429 or 503 with a Retry-After: retried exactly then
"""

from fencepost.domain.errors import CommandFailed, HttpFailed
from fencepost.jobs.runners.command import CommandRunner
from fencepost.jobs.runners.http import HttpRunner

__all__ = ["CommandFailed", "CommandRunner", "HttpFailed", "HttpRunner"]

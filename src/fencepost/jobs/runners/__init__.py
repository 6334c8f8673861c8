"""The runners behind definition-file jobs: each is a ``JobSpec.run(ctx, inputs)``.

- :class:`CommandRunner` runs an external command (no shell) in its own process group;
- :class:`HttpRunner` sends one HTTP request;
- ``python:`` definitions need no runner of their own: they become
  :func:`~fencepost.jobs.spec.spec_from_function` specs.

Command arguments, URLs, header values and JSON bodies are templates
(:mod:`fencepost.jobs.runners.templates`).

Errors they raise, besides :class:`~fencepost.worker.errors.Cancelled` and
:class:`~fencepost.worker.errors.PermanentFailure`::

    FencepostError
     ├── CommandFailed   non-zero exit or killed by a signal (retryable)
     └── HttpFailed      5xx, 408, 429, network error or timeout (retryable)
"""

from fencepost.jobs.runners.command import CommandFailed, CommandRunner
from fencepost.jobs.runners.http import HttpFailed, HttpRunner

__all__ = ["CommandFailed", "CommandRunner", "HttpFailed", "HttpRunner"]

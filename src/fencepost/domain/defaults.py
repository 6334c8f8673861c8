"""Defaults every side of the store shares: the store itself, its HTTP client, the worker.

They live in the domain so that the client and the worker, which reach a store only
through its verbs, need not import the store to agree with it.
"""

from __future__ import annotations

#: Default lease duration in seconds.
DEFAULT_TTL = 30.0
#: Default duration of a command claim in seconds: short, so that a command taken by
#: a worker that does not hold the execution soon reaches the one that does.
DEFAULT_COMMAND_TTL = 5.0

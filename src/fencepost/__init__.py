"""fencepost: a durable job scheduler with fenced leases.

Register jobs on an :class:`App` (``@app.job``), submit executions, and run
workers that claim them under leases that a stale worker can never use to
overwrite a newer result. :func:`connect` opens the store directly
(``sqlite:///path.db``, ``postgresql://...``, ``memory://``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The errors load at once, not lazily like the names below: they are listed once, in the
# error module's __all__, and taken from there. Importing it is cheap (pure Python, none of
# our other modules: about 0.5 ms) and ``fencepost --help`` and every worker load it anyway.
from fencepost.domain import errors as _errors
from fencepost.domain.errors import *  # noqa: F403 (the names are _errors.__all__)

if TYPE_CHECKING:
    from fencepost.app import App
    from fencepost.domain.history import History, HistoryPoint, HistorySummary
    from fencepost.domain.models import (
        Attempt,
        Command,
        Execution,
        Lease,
        Occurrence,
        Page,
        Schedule,
        SchedulePage,
        Transition,
    )
    from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
    from fencepost.domain.reports import Lateness, SloOffender, SloReport, Stats
    from fencepost.domain.retry import RetryPolicy
    from fencepost.domain.states import AttemptOutcome, CommandKind, CommandState, Event, State
    from fencepost.jobs.context import Context
    from fencepost.jobs.spec import JobSpec
    from fencepost.store import Store, StoreConfig, connect
    from fencepost.store.asyncstore import AsyncStore, connect_async
    from fencepost.timing.clock import Clock, SystemClock
    from fencepost.timing.rules import fire_times
    from fencepost.worker.runtime import Worker, WorkerOptions

#: The release, written here only: the package metadata takes it from this line
#: (pyproject.toml, ``[tool.hatch.version]``), and ``fencepost --version`` prints it.
__version__ = "0.1.0"

__all__ = [
    "App",
    "AsyncStore",
    "Attempt",
    "AttemptOutcome",
    "Clock",
    "Command",
    "CommandKind",
    "CommandState",
    "Context",
    "DstFold",
    "DstGap",
    "Event",
    "Execution",
    "History",
    "HistoryPoint",
    "HistorySummary",
    "JobSpec",
    "Lateness",
    "Lease",
    "Misfire",
    "Occurrence",
    "Overlap",
    "Page",
    "RetryPolicy",
    "Schedule",
    "SchedulePage",
    "SloOffender",
    "SloReport",
    "State",
    "Stats",
    "Store",
    "StoreConfig",
    "SystemClock",
    "Transition",
    "Worker",
    "WorkerOptions",
    "__version__",
    "connect",
    "connect_async",
    "fire_times",
]
__all__ += _errors.__all__  # a form type checkers read (the typing spec's "library interface")
__all__.sort()  # one sorted list, as dir() shows it

#: Where each public name lives. They load on first use (PEP 562): ``fencepost --help``
#: and a worker's CLI import only what they use, not the App, scheduler and store at once.
_LAZY = {
    "App": "fencepost.app",
    "AsyncStore": "fencepost.store.asyncstore",
    "Attempt": "fencepost.domain.models",
    "AttemptOutcome": "fencepost.domain.states",
    "Clock": "fencepost.timing.clock",
    "Command": "fencepost.domain.models",
    "CommandKind": "fencepost.domain.states",
    "CommandState": "fencepost.domain.states",
    "Context": "fencepost.jobs.context",
    "DstFold": "fencepost.domain.policies",
    "DstGap": "fencepost.domain.policies",
    "Event": "fencepost.domain.states",
    "Execution": "fencepost.domain.models",
    "History": "fencepost.domain.history",
    "HistoryPoint": "fencepost.domain.history",
    "HistorySummary": "fencepost.domain.history",
    "JobSpec": "fencepost.jobs.spec",
    "Lateness": "fencepost.domain.reports",
    "Lease": "fencepost.domain.models",
    "Misfire": "fencepost.domain.policies",
    "Occurrence": "fencepost.domain.models",
    "Overlap": "fencepost.domain.policies",
    "Page": "fencepost.domain.models",
    "RetryPolicy": "fencepost.domain.retry",
    "Schedule": "fencepost.domain.models",
    "SchedulePage": "fencepost.domain.models",
    "SloOffender": "fencepost.domain.reports",
    "SloReport": "fencepost.domain.reports",
    "State": "fencepost.domain.states",
    "Stats": "fencepost.domain.reports",
    "Store": "fencepost.store",
    "StoreConfig": "fencepost.store",
    "SystemClock": "fencepost.timing.clock",
    "Transition": "fencepost.domain.models",
    "Worker": "fencepost.worker.runtime",
    "WorkerOptions": "fencepost.worker.runtime",
    "connect": "fencepost.store",
    "connect_async": "fencepost.store.asyncstore",
    "fire_times": "fencepost.timing.rules",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

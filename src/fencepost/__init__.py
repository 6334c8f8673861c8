"""fencepost: a durable job scheduler with fenced leases.

Register jobs on an :class:`App` (``@app.job``), submit executions, and run
workers that claim them under leases that a stale worker can never use to
overwrite a newer result. :func:`connect` opens the store directly
(``sqlite:///path.db``, ``postgresql://...``, ``memory://``).
"""

from fencepost.app import App
from fencepost.domain.errors import (
    FencepostError,
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    NotRunning,
    ResultInvalid,
    StaleLease,
    StoreRefused,
    StoreUnavailable,
    ValidationError,
)
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
from fencepost.domain.reports import Lateness, SloOffender, SloReport, Stats
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.states import AttemptOutcome, CommandKind, CommandState, Event, State
from fencepost.store import Store, StoreConfig, connect
from fencepost.timing.clock import Clock, SystemClock
from fencepost.timing.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.timing.rules import fire_times
from fencepost.worker.context import Context
from fencepost.worker.errors import Cancelled, PermanentFailure
from fencepost.worker.jobs import JobSpec
from fencepost.worker.runtime import Worker, WorkerOptions

__version__ = "0.1.0"

__all__ = [
    "App",
    "Attempt",
    "AttemptOutcome",
    "Cancelled",
    "Clock",
    "Command",
    "CommandKind",
    "CommandState",
    "Context",
    "DstFold",
    "DstGap",
    "Event",
    "Execution",
    "FencepostError",
    "IdempotencyConflict",
    "InvalidTransition",
    "JobSpec",
    "Lateness",
    "Lease",
    "Misfire",
    "NotFound",
    "NotRunning",
    "Occurrence",
    "Overlap",
    "Page",
    "PermanentFailure",
    "ResultInvalid",
    "RetryPolicy",
    "Schedule",
    "SchedulePage",
    "SloOffender",
    "SloReport",
    "StaleLease",
    "State",
    "Stats",
    "Store",
    "StoreConfig",
    "StoreRefused",
    "StoreUnavailable",
    "SystemClock",
    "Transition",
    "ValidationError",
    "Worker",
    "WorkerOptions",
    "__version__",
    "connect",
    "fire_times",
]

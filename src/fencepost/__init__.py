"""fencepost: a durable job scheduler with fenced leases.

Open a store with :func:`connect` (``sqlite:///path.db``, ``memory://``), submit
executions, and let workers claim them under leases that a stale worker can
never use to overwrite a newer result.
"""

from fencepost.domain.errors import (
    FencepostError,
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    ResultInvalid,
    StaleLease,
    StoreUnavailable,
    ValidationError,
)
from fencepost.domain.models import Attempt, Execution, Lease, Page, Transition
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.states import AttemptOutcome, Event, State
from fencepost.store import Store, StoreConfig, connect
from fencepost.timing.clock import Clock, SystemClock

__version__ = "0.1.0"

__all__ = [
    "Attempt",
    "AttemptOutcome",
    "Clock",
    "Event",
    "Execution",
    "FencepostError",
    "IdempotencyConflict",
    "InvalidTransition",
    "Lease",
    "NotFound",
    "Page",
    "ResultInvalid",
    "RetryPolicy",
    "StaleLease",
    "State",
    "Store",
    "StoreConfig",
    "StoreUnavailable",
    "SystemClock",
    "Transition",
    "ValidationError",
    "__version__",
    "connect",
]

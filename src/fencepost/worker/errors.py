"""Exceptions a handler raises (or receives) to talk to the worker.

::

    FencepostError
     ├── Cancelled         raised by ctx.checkpoint(): stop now (cancel, timeout, lost lease)
     └── PermanentFailure  raised by a handler: fail without retrying
"""

from __future__ import annotations

from fencepost.domain.errors import FencepostError


class Cancelled(FencepostError):
    """The handler was asked to stop; ``reason`` says why.

    Raised by :meth:`Context.checkpoint` when a cancel was requested, the
    attempt ran past its timeout, the lease was lost, or the worker is stopping
    for good. A handler may catch it to clean up, and should then return or re-raise.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"cancelled: {reason}")
        self.reason = reason


class PermanentFailure(FencepostError):
    """Raise from a handler to fail the execution without retrying (a dead letter at once)."""

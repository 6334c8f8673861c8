"""The worker app of ``_worker_app`` plus a job with rich type hints.

A worker publishes every job's input schema when it starts, and a rich hint's schema is
pydantic's: a process serving this app loads pydantic, one serving ``_worker_app`` does not.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from tests.integration._worker_app import app

__all__ = ["app"]


@app.job("typed-clock", lease_ttl=30, max_attempts=5)
def typed_clock(at: datetime, ref: UUID) -> list[str]:
    """Rich hints, converted by pydantic: the types received."""
    return [type(at).__name__, at.isoformat(), type(ref).__name__]

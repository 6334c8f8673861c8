"""The one source of time for a store.

Lease arbitration uses a single clock: the database server's on PostgreSQL, the
process clock on SQLite and in memory. Callers never pass "now"; stores ask their
clock. Tests pin time by giving the store a ``ManualClock``
(:mod:`fencepost.testing`), never by patching globals.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """What a store needs to know about time."""

    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        ...

    def now_or_none(self) -> datetime | None:
        """A pinned instant for SQL to use, or ``None`` to let the database use its own.

        Production clocks return ``None`` so that a server-side store arbitrates
        leases with ``clock_timestamp()``; a test clock returns its pinned time.
        """
        ...


class SystemClock:
    """The process's wall clock (UTC)."""

    def now(self) -> datetime:
        """The current instant, timezone-aware UTC."""
        return datetime.now(UTC)

    def now_or_none(self) -> datetime | None:
        """``None``: let a database server use its own clock."""
        return None

"""A clock that moves only when a test moves it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from fencepost.domain.durations import as_aware_utc

#: Where a ManualClock starts when given a number of seconds: 2026-01-01T00:00:00Z + seconds.
MANUAL_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class ManualClock:
    """A pinned clock for tests; give it to a store with ``connect(url, clock=...)``.

    ``start`` and ``set`` accept an aware datetime, or seconds after
    :data:`MANUAL_EPOCH` (so ``ManualClock(10)`` reads "t=10").
    """

    def __init__(self, start: datetime | float = 0) -> None:
        self._lock = threading.Lock()
        self._now = _instant(start)

    def now(self) -> datetime:
        """The pinned instant."""
        with self._lock:
            return self._now

    def now_or_none(self) -> datetime:
        """The pinned instant: SQL must use it rather than the database's own clock."""
        return self.now()

    def set(self, t: datetime | float) -> None:
        """Jump to ``t`` (forwards or backwards)."""
        instant = _instant(t)
        with self._lock:
            self._now = instant

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move forward by ``seconds`` and return the new instant."""
        step = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        with self._lock:
            self._now += step
            return self._now

    def seconds(self) -> float:
        """Seconds since :data:`MANUAL_EPOCH`: the "t" of a timeline."""
        return (self.now() - MANUAL_EPOCH).total_seconds()


def _instant(value: datetime | float) -> datetime:
    if isinstance(value, datetime):
        return as_aware_utc(value, field="t")
    return MANUAL_EPOCH + timedelta(seconds=value)

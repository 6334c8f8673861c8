"""Retry policy: capped exponential backoff with full jitter; and reading ``Retry-After``."""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from fencepost.domain.errors import ValidationError


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How long to wait before attempt ``n + 1`` after attempt ``n`` failed.

    ``delay = uniform(0, min(max_delay, base_delay * 2 ** (attempt - 1)))`` —
    "full jitter", which spreads a burst of failures over the whole window
    instead of retrying them in lockstep.
    """

    base_delay: float = 1.0  #: seconds; the cap for the first retry
    max_delay: float = 300.0  #: seconds; no retry waits longer

    def __post_init__(self) -> None:
        if not self.base_delay > 0:
            raise ValidationError("base_delay", f"must be > 0, got {self.base_delay!r}")
        if not self.max_delay >= self.base_delay:
            raise ValidationError(
                "max_delay", f"must be >= base_delay ({self.base_delay}), got {self.max_delay!r}"
            )

    def cap(self, attempt: int) -> float:
        """The upper bound of the delay after failed attempt ``attempt`` (1-based)."""
        if attempt < 1:
            raise ValidationError("attempt", f"must be >= 1, got {attempt}")
        # 2**63 seconds is beyond any max_delay; stop doubling before floats overflow.
        exponent = min(attempt - 1, 63)
        return min(self.max_delay, self.base_delay * 2.0**exponent)

    def delay(self, attempt: int, rng: _random.Random | None = None) -> timedelta:
        """A jittered delay in ``[0, cap(attempt)]``, drawn from ``rng``."""
        source = rng if rng is not None else _random
        return timedelta(seconds=source.uniform(0.0, self.cap(attempt)))


def retry_after(value: str | None, now: Callable[[], datetime] | None = None) -> float | None:
    """A ``Retry-After`` value in seconds from now: delay-seconds or an HTTP date (a past
    date is 0); None when absent or unreadable. ``now`` gives the current time (the
    system's by default) that an HTTP date is measured from.

    One reading for fencepost's HTTP clients (which wait it out) and for the HTTP job
    runner (which retries its job after it).
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # "²".isdigit() too, and float() refuses it
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # RFC 9110: an HTTP date is always GMT
    current = now() if now is not None else datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())

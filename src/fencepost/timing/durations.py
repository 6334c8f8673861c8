"""Checks for the instants and durations that cross the API edge."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from fencepost.domain.errors import ValidationError


def as_duration(value: object, *, field: str, allow_zero: bool = False) -> timedelta:
    """Seconds (int or float) or a ``timedelta`` -> ``timedelta``; anything else names ``field``.

    Negative durations are refused, and so is zero unless ``allow_zero``.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ValidationError(field, f"must be seconds or a timedelta, got {value!r}")
    if not math.isfinite(seconds):
        raise ValidationError(field, f"must be finite, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValidationError(field, f"must be {bound} seconds, got {seconds:g}")
    return value if isinstance(value, timedelta) else timedelta(seconds=seconds)


def as_aware_utc(value: object, *, field: str) -> datetime:
    """An aware ``datetime`` converted to UTC; naive ones are refused, never guessed."""
    if not isinstance(value, datetime):
        raise ValidationError(field, f"must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must be timezone-aware (got a naive datetime)")
    return value.astimezone(UTC)

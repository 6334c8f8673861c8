"""Checks for the instants and durations that cross the API edge."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from fencepost.domain.errors import ValidationError

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# "ms" before "m", or "500ms" would read as 500 minutes followed by a stray "s".
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION = re.compile(rf"(?:{_DURATION_PART.pattern})+")


#: The longest duration accepted anywhere (a delay, a timeout, an interval): 100 years.
#: Longer ones are mistakes, and would overflow the calendar when added to a time.
MAX_DURATION = timedelta(days=36_525)


def as_duration(value: object, *, field: str, allow_zero: bool = False) -> timedelta:
    """Seconds (int or float) or a ``timedelta`` -> ``timedelta``; anything else names ``field``.

    Negative durations are refused, and so is zero unless ``allow_zero``.
    """
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int past the largest float: too long, as below
            raise ValidationError(field, "is too long: at most 100 years") from None
    else:
        raise ValidationError(field, f"must be seconds or a timedelta, got {value!r}")
    if not math.isfinite(seconds):
        raise ValidationError(field, f"must be finite, got {value!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValidationError(field, f"must be {bound} seconds, got {seconds:g}")
    if seconds > MAX_DURATION.total_seconds():
        raise ValidationError(field, f"is too long: at most 100 years, got {seconds:g} seconds")
    duration = value if isinstance(value, timedelta) else timedelta(seconds=seconds)
    if not duration and not allow_zero:  # below a microsecond: it would be stored as zero
        raise ValidationError(field, f"must be at least one microsecond, got {seconds:g}")
    return duration


def as_aware_utc(value: object, *, field: str) -> datetime:
    """An aware ``datetime`` converted to UTC; naive ones are refused, never guessed."""
    if not isinstance(value, datetime):
        raise ValidationError(field, f"must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(field, "must be timezone-aware (got a naive datetime)")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is before datetime.min in UTC
        raise ValidationError(field, f"is out of range in UTC: {value.isoformat()}") from None


def parse_duration(
    value: object, *, field: str, allow_zero: bool = False, numbers: bool = True
) -> timedelta:
    """Seconds (a number) or a duration string (``"500ms"``, ``"10m"``, ``"1h30m"``) -> timedelta.

    Units are ``ms``, ``s``, ``m``, ``h`` and ``d``; a string needs at least one
    (``"600"`` is refused: in a file or on a command line, a bare number is too
    easily read in the wrong unit). With ``numbers=False`` an int or float is
    refused too (the message then offers only duration strings). Negative and
    non-finite durations are refused with a :class:`ValidationError` on ``field``,
    and so is zero unless ``allow_zero``.
    """
    seconds: float | None = None
    if isinstance(value, str) and _DURATION.fullmatch(value):
        seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(value))
    elif numbers and isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value
    if seconds is not None:
        return as_duration(seconds, field=field, allow_zero=allow_zero)
    examples = "'30s', '10m', '1h', '500ms'"
    kinds = "a number of seconds or a duration" if numbers else "a duration"
    raise ValidationError(field, f"must be {kinds} like {examples}, got {value!r}")

"""Checks for instants and durations, at their older address.

Submissions and schedule definitions check them too, so they live in
:mod:`fencepost.domain.durations` (the domain imports nothing outside itself).
"""

from fencepost.domain.durations import MAX_DURATION, as_aware_utc, as_duration, parse_duration

__all__ = ["MAX_DURATION", "as_aware_utc", "as_duration", "parse_duration"]

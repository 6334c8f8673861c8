"""The names of a schedule's policies: what to do about DST, missed slots and overlaps.

Each is a ``StrEnum`` so that it round-trips through JSON, SQL and the CLI as
its lower-case name; :func:`parse_policy` turns user input into a member or a
:class:`~fencepost.domain.errors.ValidationError` naming the field.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from fencepost.domain.errors import ValidationError


class DstGap(StrEnum):
    """A wall time that does not exist (clocks spring forward over it)."""

    SHIFT = "shift"  #: run at the first instant after the gap
    SKIP = "skip"  #: do not run


class DstFold(StrEnum):
    """A wall time that happens twice (clocks fall back over it)."""

    ONCE = "once"  #: run at its first occurrence only
    TWICE = "twice"  #: run at both occurrences


class Misfire(StrEnum):
    """Slots whose time passed by more than the grace period while nothing fired them."""

    CATCH_UP = "catch_up"  #: run every missed slot (at most ``max_catch_up``; older ones SKIPPED)
    COALESCE = "coalesce"  #: run the latest missed slot once; the others SKIPPED
    SKIP = "skip"  #: run none of them: all SKIPPED


class Overlap(StrEnum):
    """A slot falls due while the schedule's previous run is still RUNNING."""

    ALLOW = "allow"  #: run it anyway, side by side
    SKIP = "skip"  #: record it SKIPPED
    BUFFER_ONE = "buffer_one"  #: hold it until the previous run ends; later ones SKIPPED
    BUFFER_ALL = "buffer_all"  #: hold every one; start each in turn as the previous ends
    REPLACE = "replace"  #: cancel the running one (command channel), then start


P = TypeVar("P", DstGap, DstFold, Misfire, Overlap)


def parse_policy(kind: type[P], value: object, field: str) -> P:
    """``value`` (a member or its name) as a member of ``kind``, or ValidationError on ``field``."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value in kind._value2member_map_:
        return kind(value)
    names = ", ".join(m.value for m in kind)
    raise ValidationError(field, f"must be one of {names}, got {value!r}")

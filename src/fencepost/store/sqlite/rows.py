"""Mapping between SQLite rows and domain objects.

Times are stored as integer microseconds since the Unix epoch (UTC): exact,
compact, and compared as plain integers in the claim and fence predicates.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fencepost.domain import payloads
from fencepost.domain.models import Command, Execution, Schedule, Transition
from fencepost.domain.nodes import Node
from fencepost.store import rows as shared

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_us(value: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch."""
    return (value - _EPOCH) // _MICROSECOND


def from_us(value: int) -> datetime:
    """Integer microseconds since the epoch as an aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=value)


def opt_us(value: datetime | None) -> int | None:
    """:func:`to_us` that lets ``None`` through."""
    return None if value is None else to_us(value)


def opt_duration(value: int | None) -> timedelta | None:
    """Microseconds as a timedelta, ``None`` through."""
    return None if value is None else timedelta(microseconds=value)


def us_duration(value: int) -> timedelta:
    """Microseconds as a timedelta."""
    return timedelta(microseconds=value)


def duration_us(value: timedelta | None) -> int | None:
    """A timedelta as integer microseconds, ``None`` through."""
    return None if value is None else value // _MICROSECOND


#: Times and durations are stored as microseconds, JSON as text.
_COLUMNS = shared.Columns(instant=from_us, duration=us_duration, payload=payloads.decode)


def execution(row: tuple[Any, ...]) -> Execution:
    """An :class:`Execution` from a row of the ``execution_rows`` view."""
    return shared.execution(row, _COLUMNS)


def schedule(row: tuple[Any, ...]) -> Schedule:
    """A :class:`Schedule` from a row of the schedule statements."""
    return shared.schedule(row, _COLUMNS)


def transition(row: tuple[Any, ...]) -> Transition:
    """A :class:`Transition` from a row of ``select_transitions``."""
    return shared.transition(row, _COLUMNS)


def command(row: tuple[Any, ...]) -> Command:
    """A :class:`Command` from a row of the command statements."""
    return shared.command(row, _COLUMNS)


def node(row: tuple[Any, ...]) -> Node:
    """A :class:`Node` from a row of ``select_nodes`` or ``register_node``."""
    id_, kind, buckets, started_at, heartbeat_at, expires_at, jobs = row
    return Node(
        id=id_,
        kind=kind,
        buckets=None if buckets is None else tuple(payloads.decode(buckets)),
        started_at=from_us(started_at),
        heartbeat_at=from_us(heartbeat_at),
        expires_at=from_us(expires_at),
        jobs=tuple((name, version) for name, version in payloads.decode(jobs)),
    )


#: A time and a duration as a row holds them (microseconds), and a JSON value a
#: statement built (text), as the SQL base reads them.
instant = from_us
duration = us_duration
document = payloads.decode

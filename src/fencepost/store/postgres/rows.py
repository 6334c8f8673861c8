"""Row mapping for PostgreSQL: psycopg loads times, intervals and JSONB natively."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.nodes import Node
from fencepost.store.rows import command, execution, schedule, transition

__all__ = [
    "command",
    "document",
    "duration",
    "execution",
    "instant",
    "node",
    "schedule",
    "transition",
]


def node(row: Any) -> Node:
    """A node from a row of ``register_node`` or ``select_nodes``."""
    id_, kind, buckets, started_at, heartbeat_at, expires_at, jobs = row
    return Node(
        id=id_,
        kind=kind,
        buckets=None if buckets is None else tuple(buckets),
        started_at=started_at,
        heartbeat_at=heartbeat_at,
        expires_at=expires_at,
        jobs=tuple((name, version) for name, version in jobs),
    )


def instant(value: datetime) -> datetime:
    """A time as psycopg loads it: already an aware datetime."""
    return value


def duration(value: timedelta) -> timedelta:
    """An interval as psycopg loads it: already a timedelta."""
    return value


def document(value: Any) -> Any:
    """A JSON value as psycopg loads it: already decoded."""
    return value

"""Row mapping for PostgreSQL: psycopg loads times, intervals and JSONB natively."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.models import Schedule
from fencepost.domain.nodes import Node
from fencepost.store.rows import command, execution, schedule, submitted, transition

__all__ = [
    "command",
    "duration",
    "execution",
    "instant",
    "node",
    "schedule",
    "schedule_params",
    "submitted",
    "transition",
]


def schedule_params(s: Schedule, inputs_json: str) -> dict[str, Any]:
    """The parameters of ``insert_schedule`` and ``write_schedule``."""
    return {
        "id": s.id,
        "job": s.job,
        "job_version": s.job_version,
        "inputs": inputs_json,
        "cron": s.cron,
        "every": s.every,
        "timezone": s.timezone,
        "dst_gap": s.dst_gap.value,
        "dst_fold": s.dst_fold.value,
        "misfire": s.misfire.value,
        "misfire_grace": s.misfire_grace,
        "max_catch_up": s.max_catch_up,
        "overlap": s.overlap.value,
        "start_at": s.start_at,
        "end_at": s.end_at,
        "max_attempts": s.max_attempts,
        "priority": s.priority,
        "paused": s.paused,
        "watermark": s.watermark,
        "next_due": s.next_due,
        "materializer": s.materializer,
        "lease_until": s.lease_until,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


def node(row: Any) -> Node:
    """A node from a row of ``register_node`` or ``select_nodes``."""
    id_, kind, buckets, started_at, heartbeat_at, expires_at = row
    return Node(
        id=id_,
        kind=kind,
        buckets=None if buckets is None else tuple(buckets),
        started_at=started_at,
        heartbeat_at=heartbeat_at,
        expires_at=expires_at,
    )


def instant(value: datetime) -> datetime:
    """A time as psycopg loads it: already an aware datetime."""
    return value


def duration(value: timedelta) -> timedelta:
    """An interval as psycopg loads it: already a timedelta."""
    return value

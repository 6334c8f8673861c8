"""The JSON shapes of executions, schedules and nodes, shared by every command.

One shape per kind, whichever command prints it, with every key present
(``null`` when unset) so that scripts can rely on them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fencepost.cli.output import span
from fencepost.domain.states import WAITING_STATES, State
from fencepost.timing.planning import HELD

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from fencepost.domain.models import Execution, Schedule
    from fencepost.domain.nodes import Node


def is_held(execution: Execution) -> bool:
    """Stored by an overlap policy to wait for the previous run (``due_at`` is HELD)."""
    return execution.due_at >= HELD


def lease_remaining(execution: Execution, now: datetime) -> timedelta | None:
    """How long a RUNNING execution's lease still runs (negative once it has expired)."""
    if execution.state is not State.RUNNING or execution.lease_until is None:
        return None
    return execution.lease_until - now


def lateness(execution: Execution, now: datetime) -> timedelta | None:
    """How long a waiting execution has been due (None unless it is due and unclaimed)."""
    if execution.state not in WAITING_STATES or execution.due_at > now:
        return None
    return now - execution.due_at


def execution(e: Execution, now: datetime) -> dict[str, Any]:
    """An execution as JSON-ready values, with its lease remaining and lateness at ``now``."""
    return {
        "id": e.id,
        "job": e.job,
        "job_version": e.job_version,
        "state": e.state,
        "attempt": e.attempt,
        "max_attempts": e.max_attempts,
        "epoch": e.epoch,
        "owner": e.lease_owner,
        "lease_until": e.lease_until,
        "lease_remaining": lease_remaining(e, now),
        "planned_at": e.planned_at,
        "due_at": e.due_at,
        "held": is_held(e),
        "lateness": lateness(e, now),
        "priority": e.priority,
        "queue": e.queue,
        "limit_key": e.limit_key,
        "bucket": e.bucket,
        "bucket_key": e.bucket_key,
        "idempotency_key": e.idempotency_key,
        "schedule_id": e.schedule_id,
        "slot": e.slot,
        "timeout": e.timeout,
        "inputs": e.inputs,
        "result": e.result,
        "error": e.error,
        "progress": e.progress,
        "created_at": e.created_at,
        "updated_at": e.updated_at,
    }


def compact(value: Any, width: int = 120) -> str:
    """A JSON value on one short line, for a table cell."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 1] + "…"


def rule_text(s: Schedule) -> str:
    """``cron 30 2 * * * Europe/Berlin`` or ``every 10m``, for a table cell."""
    if s.cron is not None:
        return f"cron {s.cron} ({s.timezone})"
    assert s.every is not None
    return f"every {span(s.every)}"


def schedule(s: Schedule, next_fires: list[datetime] | None = None) -> dict[str, Any]:
    """A schedule as JSON-ready values; ``next_fires`` when the command computed them."""
    doc: dict[str, Any] = {
        "id": s.id,
        "job": s.job,
        "job_version": s.job_version,
        "cron": s.cron,
        "every": s.every,
        "timezone": s.timezone,
        "inputs": s.inputs,
        "paused": s.paused,
        "misfire": s.misfire,
        "misfire_grace": s.misfire_grace,
        "max_catch_up": s.max_catch_up,
        "overlap": s.overlap,
        "dst_gap": s.dst_gap,
        "dst_fold": s.dst_fold,
        "start_at": s.start_at,
        "end_at": s.end_at,
        "max_attempts": s.max_attempts,
        "priority": s.priority,
        "queue": s.queue,
        "limit_key": s.limit_key,
        "watermark": s.watermark,
        "next_due": s.next_due,
        "materializer": s.materializer,
        "lease_until": s.lease_until,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }
    if next_fires is not None:
        doc["next_fires"] = next_fires
    return doc


def node(n: Node) -> dict[str, Any]:
    """A registered node as JSON-ready values (``buckets`` null: it claims from any bucket)."""
    return {
        "id": n.id,
        "kind": n.kind,
        "buckets": None if n.buckets is None else list(n.buckets),
        "started_at": n.started_at,
        "heartbeat_at": n.heartbeat_at,
        "expires_at": n.expires_at,
    }

"""Mapping between SQLite rows and domain objects.

Times are stored as integer microseconds since the Unix epoch (UTC): exact,
compact, and compared as plain integers in the claim and fence predicates.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fencepost.domain import payloads
from fencepost.domain.models import Execution, Transition
from fencepost.domain.nodes import Node
from fencepost.domain.states import Event, State

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


def execution(row: tuple[Any, ...]) -> Execution:
    """An :class:`Execution` from a row of the ``execution_rows`` view."""
    (
        id_,
        job,
        job_version,
        state,
        due_at,
        priority,
        attempt,
        max_attempts,
        epoch,
        lease_owner,
        lease_until,
        timeout_us,
        idempotency_key,
        schedule_id,
        slot,
        bucket,
        bucket_key,
        created_at,
        updated_at,
        inputs,
        result,
        error,
        progress,
    ) = row
    return Execution(
        id=id_,
        job=job,
        job_version=job_version,
        inputs=payloads.decode(inputs),
        state=State(state),
        due_at=from_us(due_at),
        priority=priority,
        attempt=attempt,
        max_attempts=max_attempts,
        epoch=epoch,
        lease_owner=lease_owner,
        lease_until=None if lease_until is None else from_us(lease_until),
        timeout=opt_duration(timeout_us),
        idempotency_key=idempotency_key,
        schedule_id=schedule_id,
        slot=slot,
        bucket=bucket,
        bucket_key=bucket_key,
        result=payloads.decode(result),
        error=error,
        progress=payloads.decode(progress),
        created_at=from_us(created_at),
        updated_at=from_us(updated_at),
    )


def transition(row: tuple[Any, ...]) -> Transition:
    """A :class:`Transition` from a row of ``select_transitions``."""
    seq, execution_id, event, from_state, to_state, epoch, actor, reason, at = row
    return Transition(
        execution_id=execution_id,
        seq=seq,
        event=Event(event),
        from_state=None if from_state is None else State(from_state),
        to_state=State(to_state),
        epoch=epoch,
        actor=actor,
        reason=reason,
        at=from_us(at),
    )


def node(row: tuple[Any, ...]) -> Node:
    """A :class:`Node` from a row of ``select_nodes`` or ``register_node``."""
    id_, kind, buckets, started_at, heartbeat_at, expires_at = row
    return Node(
        id=id_,
        kind=kind,
        buckets=None if buckets is None else tuple(payloads.decode(buckets)),
        started_at=from_us(started_at),
        heartbeat_at=from_us(heartbeat_at),
        expires_at=from_us(expires_at),
    )

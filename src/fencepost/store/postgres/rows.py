"""Mapping between PostgreSQL rows and domain objects (psycopg loads types natively)."""

from __future__ import annotations

from typing import Any

from fencepost.domain.models import Execution, Transition
from fencepost.domain.states import Event, State


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
        timeout,
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
        inputs=inputs,
        state=State(state),
        due_at=due_at,
        priority=priority,
        attempt=attempt,
        max_attempts=max_attempts,
        epoch=epoch,
        lease_owner=lease_owner,
        lease_until=lease_until,
        timeout=timeout,
        idempotency_key=idempotency_key,
        schedule_id=schedule_id,
        slot=slot,
        bucket=bucket,
        bucket_key=bucket_key,
        result=result,
        error=error,
        progress=progress,
        created_at=created_at,
        updated_at=updated_at,
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
        at=at,
    )

"""Row mapping shared by the SQL backends: one column order, per-backend conversions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from fencepost.domain.models import Command, Execution, Schedule, Transition
from fencepost.domain.nodes import Node
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.domain.states import CommandKind, CommandState, Event, State


class RowMapping(Protocol):
    """How a dialect turns its rows into domain values (a module satisfies it)."""

    def execution(self, row: tuple[Any, ...]) -> Execution:
        """An execution from a row of ``execution_rows``."""

    def transition(self, row: tuple[Any, ...]) -> Transition:
        """An audit transition from a row of ``select_transitions``."""

    def command(self, row: tuple[Any, ...]) -> Command:
        """A command from a row of ``select_commands`` (or a claim's)."""

    def schedule(self, row: tuple[Any, ...]) -> Schedule:
        """A schedule from a row of ``get_schedule`` or ``list_schedules``."""

    def node(self, row: tuple[Any, ...]) -> Node:
        """A node from a row of ``register_node`` or ``select_nodes``."""

    def instant(self, value: Any) -> datetime:
        """A time as a row holds it, as an aware datetime."""

    def duration(self, value: Any) -> timedelta:
        """A duration as a row holds it, as a timedelta."""

    def document(self, value: Any) -> Any:
        """A JSON value a statement built (an aggregate), decoded."""


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class Columns:
    """How a dialect's driver hands back stored values, and how they become ours.

    ``instant``, ``duration`` and ``payload`` convert a stored time, interval and
    JSON value (never called with ``None``); PostgreSQL's driver needs none.
    """

    instant: Callable[[Any], Any] = _same
    duration: Callable[[Any], Any] = _same
    payload: Callable[[Any], Any] = _same


#: Values the driver already loads as ours (psycopg: datetimes, timedeltas, JSON).
NATIVE = Columns()


def execution(row: tuple[Any, ...], columns: Columns = NATIVE) -> Execution:
    """An :class:`Execution` from a row of a backend's ``execution_rows`` view."""
    instant, duration, payload = columns.instant, columns.duration, columns.payload
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
        queue,
        limit_key,
        planned_at,
    ) = row
    return Execution(
        id=id_,
        job=job,
        job_version=job_version,
        inputs=payload(inputs),
        state=State(state),
        due_at=instant(due_at),
        priority=priority,
        queue=queue,
        limit_key=limit_key,
        attempt=attempt,
        max_attempts=max_attempts,
        epoch=epoch,
        lease_owner=lease_owner,
        lease_until=None if lease_until is None else instant(lease_until),
        timeout=None if timeout is None else duration(timeout),
        idempotency_key=idempotency_key,
        schedule_id=schedule_id,
        slot=slot,
        bucket=bucket,
        bucket_key=bucket_key,
        result=None if result is None else payload(result),
        error=error,
        progress=None if progress is None else payload(progress),
        created_at=instant(created_at),
        updated_at=instant(updated_at),
        planned_at=instant(planned_at),
    )


def transition(row: tuple[Any, ...], columns: Columns = NATIVE) -> Transition:
    """A :class:`Transition` from a row of a backend's ``select_transitions``."""
    instant = columns.instant
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
        at=instant(at),
    )


def command(row: tuple[Any, ...], columns: Columns = NATIVE) -> Command:
    """A :class:`Command` from a row of a backend's command statements.

    Column order: id, execution_id, kind, state, requested_by, requested_at,
    owner, claim_until, epoch, done_at.
    """
    instant = columns.instant
    (
        id_,
        execution_id,
        kind,
        state,
        requested_by,
        requested_at,
        owner,
        claim_until,
        epoch,
        done_at,
    ) = row
    return Command(
        id=id_,
        execution_id=execution_id,
        kind=CommandKind(kind),
        state=CommandState(state),
        requested_by=requested_by,
        requested_at=instant(requested_at),
        owner=owner,
        claim_until=None if claim_until is None else instant(claim_until),
        epoch=epoch,
        done_at=None if done_at is None else instant(done_at),
    )


def schedule(row: tuple[Any, ...], columns: Columns = NATIVE) -> Schedule:
    """A :class:`Schedule` from the first 26 columns of a backend's schedule statements.

    Column order: id, job, job_version, inputs, cron, every, timezone, dst_gap,
    dst_fold, misfire, misfire_grace, max_catch_up, overlap, start_at, end_at,
    max_attempts, priority, paused, watermark, next_due, materializer,
    lease_until, created_at, updated_at, queue, limit_key (any further columns
    are ignored).
    """
    instant, duration, payload = columns.instant, columns.duration, columns.payload
    (
        id_,
        job,
        job_version,
        inputs,
        cron,
        every,
        timezone,
        dst_gap,
        dst_fold,
        misfire,
        misfire_grace,
        max_catch_up,
        overlap,
        start_at,
        end_at,
        max_attempts,
        priority,
        paused,
        watermark,
        next_due,
        materializer,
        lease_until,
        created_at,
        updated_at,
        queue,
        limit_key,
    ) = row[:26]
    return Schedule(
        id=id_,
        job=job,
        job_version=job_version,
        inputs=payload(inputs),
        cron=cron,
        every=None if every is None else duration(every),
        timezone=timezone,
        dst_gap=DstGap(dst_gap),
        dst_fold=DstFold(dst_fold),
        misfire=Misfire(misfire),
        misfire_grace=duration(misfire_grace),
        max_catch_up=max_catch_up,
        overlap=Overlap(overlap),
        start_at=None if start_at is None else instant(start_at),
        end_at=None if end_at is None else instant(end_at),
        max_attempts=max_attempts,
        priority=priority,
        queue=queue,
        limit_key=limit_key,
        paused=bool(paused),
        watermark=instant(watermark),
        next_due=instant(next_due),
        materializer=materializer,
        lease_until=None if lease_until is None else instant(lease_until),
        created_at=instant(created_at),
        updated_at=instant(updated_at),
    )


def version_keys(versions: tuple[tuple[str, int], ...]) -> list[str]:
    """``(job, version)`` pairs as the ``'job:version'`` text claims compare with.

    Unambiguous even for job names holding ``:``: the version after the last
    one is an integer.
    """
    return [f"{job}:{version}" for job, version in versions]

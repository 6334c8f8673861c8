"""Row mapping shared by the SQL backends: one column order, per-backend conversions."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from fencepost.domain.models import Command, Execution, Schedule, Transition
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.domain.states import CommandKind, CommandState, Event, State
from fencepost.domain.submission import NewExecution

T = TypeVar("T")


def slot_builder(cls: type[T]) -> Callable[..., T]:
    """A constructor of the frozen, slotted dataclass ``cls`` that takes every field.

    It makes the same object as ``cls(**fields)``, at a third to a half of the cost:
    a frozen dataclass's ``__init__`` assigns each field with ``object.__setattr__``,
    a lookup by name per field, while this one stores each through its slot's
    descriptor. Like dataclasses' own ``__init__``, it is generated source. The
    store builds one execution per submitted item, which made ``__init__`` a fifth
    of ``submit_many``. Only for classes whose ``__init__`` does nothing but assign:
    no ``__post_init__``, every field an ``__init__`` argument.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields):
        raise TypeError(f"{cls.__name__}.__init__ does more than assign its fields")
    names = [f.name for f in fields]
    setters = {f"_set_{name}": cls.__dict__[name].__set__ for name in names}
    source = "\n".join(
        [
            f"def build(*, {', '.join(names)}):",
            "    self = _new(_cls)",
            *(f"    _set_{name}(self, {name})" for name in names),
            "    return self",
        ]
    )
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, **setters}
    exec(source, namespace)  # the source names only the dataclass's own fields
    build: Callable[..., T] = namespace["build"]
    return build


_execution = slot_builder(Execution)


def submitted(new: NewExecution, *, due_at: datetime, created_at: datetime) -> Execution:
    """The execution ``new`` became when inserted at ``created_at`` (the store's now).

    :meth:`NewExecution.to_execution` with the times the backend resolved on its
    own clock, built once (a ``dataclasses.replace`` of it cost twice the building).
    """
    return _execution(
        id=new.id,
        job=new.job,
        job_version=new.job_version,
        inputs=new.inputs,
        state=State.SCHEDULED,
        due_at=due_at,
        priority=new.priority,
        attempt=0,
        max_attempts=new.max_attempts,
        epoch=0,
        lease_owner=None,
        lease_until=None,
        timeout=new.timeout,
        idempotency_key=new.idempotency_key,
        schedule_id=None,
        slot=None,
        bucket=new.bucket,
        bucket_key=new.bucket_key,
        result=None,
        error=None,
        progress=None,
        created_at=created_at,
        updated_at=created_at,
    )


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
    ) = row
    return Execution(
        id=id_,
        job=job,
        job_version=job_version,
        inputs=payload(inputs),
        state=State(state),
        due_at=instant(due_at),
        priority=priority,
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
    """A :class:`Schedule` from the first 24 columns of a backend's schedule statements.

    Column order: id, job, job_version, inputs, cron, every, timezone, dst_gap,
    dst_fold, misfire, misfire_grace, max_catch_up, overlap, start_at, end_at,
    max_attempts, priority, paused, watermark, next_due, materializer,
    lease_until, created_at, updated_at (any further columns are ignored).
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
    ) = row[:24]
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

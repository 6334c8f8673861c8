"""How the SQL stores write what the state machine decides, and read what a claim
returns: written once for both dialects over their named blocks.

* :func:`persist_steps`: one change (``domain.machine.Change``) with its audit record;
* :func:`claim_params`: a claim's parameters; :func:`claimed_leases`: its rows as leases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import StaleLease
from fencepost.domain.machine import RECORDS_ERROR, Change
from fencepost.domain.models import Fence, Lease
from fencepost.domain.slo import FINISHED_STATES, mark_for
from fencepost.domain.states import Event
from fencepost.store.executors import Statement, Steps
from fencepost.store.rows import version_keys
from fencepost.store.values import ClaimArguments, claimed_inputs

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


#: The events with which each fenced verb of :meth:`SqlStore._fenced_apply` ends a
#: lease (a ``complete`` reaches it only with a refused result, which fails it).
ENDED_BY: Mapping[str, tuple[Event, ...]] = {
    "complete": (Event.FAILED,),
    "fail": (Event.FAILED, Event.TIMED_OUT),
    "release": (Event.RELEASED,),
    "snooze": (Event.SNOOZED, Event.FAILED),  # FAILED: a snooze past its bound
    "abort": (Event.CANCELLED,),
}


def fence_key(fence: Fence) -> tuple[str, str, int]:
    """A fence's three fields (a :class:`Lease` itself is not hashable: its inputs)."""
    return (fence.execution_id, fence.owner, fence.epoch)


def stale(fence: Fence) -> StaleLease:
    """The refusal of a fenced call made under ``fence``."""
    return StaleLease(fence.execution_id, fence.owner, fence.epoch)


def changed_rows(
    store: SqlStore, statement: str, rows: Sequence[Mapping[str, Any]]
) -> Steps[list[bool]]:
    """Run a fenced one-row statement once per parameter set of ``rows``, in order:
    which ones changed their row (the fence is the statement's WHERE clause, the
    changed-row count its verdict).

    A batch is one ``executemany``; only when its total count says a row was refused
    (rare: a lost lease) is it undone to a savepoint and run again row by row, to
    learn which.
    """
    verdicts: list[bool] = []
    if len(rows) > 1:
        yield Statement(store._q("savepoint"))
        if (yield Statement(statement, rows, "many")) == len(rows):
            yield Statement(store._q("release_savepoint"))
            return [True] * len(rows)
        yield Statement(store._q("rollback_to_savepoint"))
    for row in rows:
        verdicts.append((yield Statement(statement, row, "count")) == 1)
    if len(rows) > 1:
        yield Statement(store._q("release_savepoint"))
    return verdicts


def persist_steps(store: SqlStore, change: Change, now: datetime) -> Steps[None]:
    """Write a change decided by the state machine, with its audit transition, as steps
    of a plan: the row (checked to be the one held) and its SLO facts, its error, its record."""
    new = change.execution
    changed = yield Statement(
        store._q("write_change"),
        {
            "id": new.id,
            "state": str(new.state),
            "due_at": store._t(new.due_at),
            "attempt": new.attempt,
            "epoch": new.epoch,
            "lease_owner": new.lease_owner,
            "lease_until": store._t_opt(new.lease_until),
            "updated_at": store._t(new.updated_at),
            "from_state": str(change.from_state),
            "from_epoch": change.from_epoch,
            # The facts of the SLO (fencepost.domain.slo), on the same statement.
            "marks": int(mark_for(change.event, change.from_state, change.reason)),
            "finished_at": store._t(new.updated_at) if new.state in FINISHED_STATES else None,
        },
        "count",
    )
    # The row was read and held in this same transaction; a miss is a bug, not a race.
    assert changed == 1, f"lost update on {new.id}"
    if change.event in RECORDS_ERROR:
        yield Statement(store._q("set_error"), {"id": new.id, "error": new.error})
    yield Statement(store._q("insert_transition"), transition_params(store, change, now))


def transition_params(store: SqlStore, change: Change, now: datetime) -> dict[str, Any]:
    """The parameters of ``insert_transition`` for the audit record of ``change``."""
    t = change.transition(0, now)  # its seq is the database's
    return {
        "execution_id": t.execution_id,
        "event": str(t.event),
        "from_state": None if t.from_state is None else str(t.from_state),
        "to_state": str(t.to_state),
        "epoch": t.epoch,
        "actor": t.actor,
        "reason": t.reason,
        "at": store._t(now),
    }


def claim_params(store: SqlStore, request: ClaimArguments) -> dict[str, Any]:
    """The filters of the claim blocks (the dialect adds its ``now``, owner and ttl)."""
    versions, queues = request.versions, request.queues
    return {
        "limit": request.limit,
        "jobs": None if request.jobs is None else store._array(request.jobs),
        "ids": None if request.ids is None else store._array(request.ids),
        "buckets": None if request.buckets is None else store._array(request.buckets),
        "versions": None if versions is None else store._array(version_keys(versions)),
        "cap": request.max_per_bucket,
        # A claim restricted to queues: their names, and each one's limit (at
        # most ``limit``), for the dialect's queue blocks.
        "queues": None if queues is None else store._array([name for name, _ in queues]),
        "queue_limits": None if queues is None else store._array([n for _, n in queues]),
    }


def claimed_leases(
    owner: str, claimed: Sequence[tuple[Any, ...]]
) -> tuple[list[Lease], dict[int, str]]:
    """The leases of claimed rows, and by index why a row's inputs cannot be delivered.

    Each row holds, as the execution is after the claim: id, epoch, attempt,
    max_attempts, job, job_version, timeout, schedule_id, slot, lease_until,
    due_at, the stored inputs text (decoded here, see :func:`claimed_inputs`), the
    queue and the stored trace context.
    """
    inputs, unreadable = claimed_inputs([row[11] for row in claimed])
    leases = [
        Lease(
            execution_id=id_,
            owner=owner,
            epoch=epoch,
            lease_until=lease_until,
            due_at=due_at,
            attempt=attempt,
            max_attempts=max_attempts,
            job=job,
            job_version=job_version,
            inputs=inputs[i],
            timeout=timeout,
            schedule_id=schedule_id,
            slot=slot,
            queue=queue,
            trace_context=trace_context,
        )
        for i, (
            id_,
            epoch,
            attempt,
            max_attempts,
            job,
            job_version,
            timeout,
            schedule_id,
            slot,
            lease_until,
            due_at,
            _,
            queue,
            trace_context,
        ) in enumerate(claimed)
    ]
    return leases, unreadable

"""The command verbs of the SQL stores as plans: an operator's request to a running
execution (a cancel), decided on the execution held by the transaction; and the
worker's side, claiming the open commands of its executions, completing and
releasing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fencepost.domain.commands import new_command, on_request
from fencepost.domain.events import ExecutionCancelled
from fencepost.domain.machine import apply
from fencepost.domain.models import Command, Execution, Fence
from fencepost.domain.states import CommandKind, CommandState
from fencepost.store.executors import Plan, Statement, Steps, returning
from fencepost.store.verbs import sql_changes

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


def request_plan(
    store: SqlStore, execution_id: str, kind: CommandKind, *, actor: str, command_id: str
) -> Plan[Command]:
    """``Store.request`` as a plan."""

    def steps() -> Steps[Command]:
        now = yield from store._now_steps()
        current = yield from store._get_steps(execution_id, lock=True)
        return (yield from command_steps(store, current, kind, actor, command_id, now))

    return Plan(steps())


def command_steps(
    store: SqlStore,
    current: Execution,
    kind: CommandKind,
    actor: str,
    command_id: str,
    now: datetime,
) -> Steps[Command]:
    """A request decided on ``current``, held by this transaction (see ``Store.request``)."""
    state = on_request(current, kind)
    if state is CommandState.DONE:
        cancel = apply(current, ExecutionCancelled(actor=actor), now)
        yield from sql_changes.persist_steps(store, cancel, now)
    yield Statement(
        store._q("insert_command"),
        {
            "id": command_id,
            "execution_id": current.id,
            "kind": str(kind),
            "state": str(state),
            "requested_by": actor,
            "requested_at": store._t(now),
            "done_at": store._t(now) if state is CommandState.DONE else None,
        },
    )
    return new_command(command_id, current.id, kind, state, actor, now)


def claim_commands_plan(
    store: SqlStore, owner: str, execution_ids: Sequence[str], *, ttl: timedelta, limit: int
) -> Plan[list[Command]]:
    """``CommandVerbs._claim_commands``: one statement claiming the open commands of
    ``execution_ids`` for ``ttl``, oldest request first."""
    ids = [i for i in execution_ids if store._can_name(i)]  # others name no execution
    if not ids:
        return Plan(returning([]), atomic=False)
    params = {
        "execution_ids": store._array(ids),
        "owner": owner,
        "ttl": store._d(ttl),
        "limit": limit,
    }

    def steps() -> Steps[list[Command]]:
        now = store._now_param()  # read in the write transaction, its lock held
        # A claimed command's claim may have expired: judged by this now, so SQLite
        # first checks the clock it reads (None: the database's clock judges).
        if now is not None and not store._may_judge_leases(store.rows.instant(now)):
            return []
        found = yield Statement(store._q("claim_commands"), params | {"now": now}, "all")
        return sorted(map(store.rows.command, found), key=lambda c: (c.requested_at, c.id))

    return Plan(steps(), atomic=store._now_after_lock)


def complete_command_plan(store: SqlStore, command: Command, lease: Fence) -> Plan[Command | None]:
    """``CommandVerbs._complete_command``: one statement, fenced by the lease it names
    (None when it is not the command's to complete, or names no row at all)."""
    if not (store._can_name(command.id) and store._can_name(command.execution_id)):
        return Plan(returning(None), atomic=False)
    params = {
        "id": command.id,
        "execution_id": command.execution_id,
        "owner": lease.owner,
        "epoch": lease.epoch,
    }

    def steps() -> Steps[Command | None]:
        now = store._now_param()  # read in the write transaction, its lock held
        row = yield Statement(store._q("complete_command"), params | {"now": now}, "one")
        return None if row is None else store.rows.command(row)

    return Plan(steps())


def release_command_plan(store: SqlStore, command: Command) -> Plan[None]:
    """``CommandVerbs._release_command``: back to PENDING if ``command.owner`` holds it."""

    if not store._can_name(command.id):
        return Plan(returning(None), atomic=False)  # it names no row: nothing to release

    def steps() -> Steps[None]:
        yield Statement(store._q("release_command"), {"id": command.id, "owner": command.owner})

    return Plan(steps())

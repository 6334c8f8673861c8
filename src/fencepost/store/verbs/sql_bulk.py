"""Acting on many and deleting, for the SQL stores, as plans: a bulk action's group in
one transaction, a deletion, and the record of deletions (see store.bulk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fencepost.domain.bulk import DELETED, RETRY_NOW_REASON, Action, Deletion, DeletionPage
from fencepost.domain.errors import InvalidTransition, NotFound
from fencepost.domain.events import ExecutionReplayed, ExecutionRescheduled
from fencepost.domain.machine import apply
from fencepost.domain.states import CommandKind, State
from fencepost.store.bulk import applicable
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import unix_ms
from fencepost.store.verbs import sql_changes, sql_commands

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


def act_group_plan(
    store: SqlStore, action: Action, execution_ids: Sequence[str], actor: str
) -> Plan[list[str]]:
    """A group of a bulk action in one transaction: each execution held, checked again
    (:func:`~fencepost.store.bulk.applicable` at this transaction's now) and changed
    as its own verb changes it; the ids changed, in order."""

    def steps() -> Steps[list[str]]:
        now = yield from store._now_steps()
        done: list[str] = []
        for execution_id in execution_ids:
            try:
                current = yield from store._get_steps(execution_id, lock=True)
            except NotFound:
                continue  # deleted meanwhile, or never was: skipped
            if not applicable(action, current, now):
                continue
            if action is Action.CANCEL:
                command_id = store._ids.new(unix_ms(now))
                yield from sql_commands.command_steps(
                    store, current, CommandKind.CANCEL, actor, command_id, now
                )
            elif action is Action.DELETE:
                yield from store._delete_steps(current, actor, now)
            else:
                event = (
                    ExecutionReplayed(actor=actor)
                    if action is Action.REPLAY
                    else ExecutionRescheduled(due_at=now, actor=actor, reason=RETRY_NOW_REASON)
                )
                yield from sql_changes.persist_steps(store, apply(current, event, now), now)
            done.append(execution_id)
        return done

    return Plan(steps())


def delete_plan(store: SqlStore, execution_id: str, actor: str) -> Plan[Deletion]:
    """``Store.delete`` as a plan: the execution held, then every row of it deleted."""

    def steps() -> Steps[Deletion]:
        now = yield from store._now_steps()
        current = yield from store._get_steps(execution_id, lock=True)
        if not current.state.is_terminal:
            raise InvalidTransition(current.id, current.state, DELETED)
        return (yield from store._delete_steps(current, actor, now))

    return Plan(steps())


def deletions_plan(store: SqlStore, limit: int, after: int | None) -> Plan[DeletionPage]:
    """``Store.deletions`` as a plan (``select_deletions``: one more than ``limit``)."""

    def steps() -> Steps[DeletionPage]:
        params = {"after": 0 if after is None else after, "limit": limit + 1}
        found = yield Statement(store._q("select_deletions"), params, "all")
        items = [(int(row[0]), deletion(store, row[1:])) for row in found]
        more = len(items) > limit
        items = items[:limit]
        return DeletionPage(
            items=[d for _, d in items], next_cursor=str(items[-1][0]) if more else None
        )

    return Plan(steps(), atomic=False)


def deletion(store: SqlStore, row: Sequence[Any]) -> Deletion:
    """A ``deletions`` row (without its number) as a record."""
    execution_id, job, queue, state, actor, at = row
    return Deletion(
        execution_id=str(execution_id),
        job=job,
        queue=queue,
        state=State(state),
        actor=actor,
        at=store.rows.instant(at),
    )

"""The reading verbs of the SQL stores as plans, written once for both dialects:
an execution by id or idempotency key, a page of a query, a count by state, and an
execution's audit trail and commands.

A query or a count reads the most selective index its filters allow first
(:func:`first_index`); every block checks all the filters on the rows it finds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from fencepost.domain.errors import NotFound
from fencepost.domain.machine import ending_events
from fencepost.domain.models import Command, Execution, Page, Transition
from fencepost.domain.states import State
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import ExecutionFilter, like_pattern

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

R = TypeVar("R")


#: The blocks that read each index a query or a count may read first (see
#: :func:`first_index`): (a page oldest first, newest first, a count by state). The other
#: filters are checked on the rows it finds: every block includes them all.
BLOCKS = {
    "schedule": (
        "query_schedule_executions",
        "query_schedule_executions_newest_first",
        "count_schedule_by_state",
    ),
    "key": ("query_key_executions", "query_key_executions_newest_first", "count_key_by_state"),
    "error": (
        "query_error_executions",
        "query_error_executions_newest_first",
        "count_error_by_state",
    ),
    "finished": (
        "query_finished_executions",
        "query_finished_executions_newest_first",
        "count_finished_by_state",
    ),
    # A count by finish time and nothing but states, job and queue.
    "finished narrow": (
        "query_finished_executions",
        "query_finished_executions_newest_first",
        "count_finished_narrow_by_state",
    ),
    "states": (
        "query_state_executions",
        "query_state_executions_newest_first",
        "count_states_by_state",
    ),
    "all": ("query_executions", "query_executions_newest_first", "count_filtered_by_state"),
    "covering": ("query_executions", "query_executions_newest_first", "count_by_state"),
}


def first_index(filters: ExecutionFilter, *, counting: bool) -> str:
    """Which index :meth:`SqlStore.query` or :meth:`~SqlStore.count_by_state` reads
    first (a key of :data:`BLOCKS`): the most selective that a filter given allows,
    in this order: one schedule's (executions_schedule_state), one limit key's
    (executions_limit_key), the errored payload rows (execution_data_errors), a finish
    time range (executions_finished; a list needs a lower bound, and sorts the range),
    some states or an owner (executions_state, one state at a time; for a count by
    states, job and queue alone, that index covers it); else the primary key (a list
    in order, within the ids the bounds allow)."""
    if filters.schedule is not None:
        return "schedule"
    if filters.limit_key is not None:
        return "key"
    if filters.error is not None:
        return "error"
    narrow = replace(
        filters, states=None, job=None, queue=None, limit=1, after=None, newest_first=False
    )
    if filters.finished_after is not None or (counting and filters.finished_before is not None):
        by_finish_only = replace(narrow, finished_after=None, finished_before=None)
        return "finished narrow" if counting and by_finish_only == NO_FILTER else "finished"
    if counting and narrow == NO_FILTER:
        return "covering"
    if filters.states is not None or filters.owner is not None:
        return "states"
    return "all"


#: A count's filters when none is given (the covering count_by_state reads job and queue).
NO_FILTER = ExecutionFilter(
    states=None,
    job=None,
    schedule=None,
    bucket=None,
    buckets=None,
    due_after=None,
    due_before=None,
    limit=1,
    after=None,
)


def states_to_read(filters: ExecutionFilter) -> tuple[State, ...]:
    """The states a query by state reads, one at a time, in the enum's order: those
    asked for (an owner holds RUNNING executions only: none if RUNNING is not asked)."""
    asked = set(State if filters.states is None else filters.states)
    if filters.owner is not None:
        asked &= {State.RUNNING}
    return tuple(s for s in State if s in asked)


def get_plan(store: SqlStore, execution_id: str) -> Plan[Execution]:
    """``Store.get`` as a plan."""
    return Plan(store._get_steps(execution_id), atomic=False)


def find_plan(store: SqlStore, idempotency_key: str) -> Plan[Execution | None]:
    """``Store.find`` as a plan."""

    def steps() -> Steps[Execution | None]:
        row = yield Statement(store._q("find_execution"), {"key": idempotency_key}, "one")
        return None if row is None else store.rows.execution(row)

    return Plan(steps(), atomic=False)


def query_plan(store: SqlStore, filters: ExecutionFilter) -> Plan[Page]:
    """``Store.query`` as a plan.

    By state (:func:`first_index`), one statement a state, each a page in id order
    read through executions_state; merged here, in id order, the first ``limit``
    kept. (An execution that changes state between two of them may be read twice:
    it is listed once.)
    """
    driver = first_index(filters, counting=False)
    params = filter_params(store, filters, driver) | {
        "after": filters.after,
        "limit": filters.limit + 1,
    }
    query = store._q(BLOCKS[driver][1 if filters.newest_first else 0])
    states = states_to_read(filters) if driver == "states" else (None,)

    def steps() -> Steps[Page]:
        rows: dict[str, Execution] = {}
        for state in states:
            found = yield Statement(query, params | {"state": state}, "all")
            for r in found:
                e = store.rows.execution(r)
                rows[e.id] = e
        ordered = sorted(rows, reverse=filters.newest_first)[: filters.limit + 1]
        items = [rows[i] for i in ordered[: filters.limit]]
        more = len(ordered) > filters.limit
        return Page(items=items, next_cursor=items[-1].id if more else None)

    return Plan(steps(), atomic=False)


def filter_params(store: SqlStore, filters: ExecutionFilter, driver: str) -> dict[str, Any]:
    """The parameters of the shared filters (fragments query_filters and
    query_ranges, and the ids the filters allow) every query_* and count_* block
    reads, for the blocks of ``driver``. The error blocks match the error as they
    read the errored rows (``error_driving``), not again in query_filters."""
    id_above, id_below = filters.id_range
    error = None if filters.error is None else like_pattern(filters.error)
    driving = driver == "error"
    return {
        "error": None if driving else error,
        "error_driving": error if driving else None,
        "states": None if filters.states is None else store._array(filters.states),
        "job": filters.job,
        "queue": filters.queue,
        "schedule": filters.schedule,
        "bucket": filters.bucket,
        "buckets": None if filters.buckets is None else store._array(filters.buckets),
        "due_after": store._t_opt(filters.due_after),
        "due_before": store._t_opt(filters.due_before),
        "outcome_events": None
        if filters.outcome is None
        else store._array(sorted(ending_events(filters.outcome))),
        "limit_key": filters.limit_key,
        "owner": filters.owner,
        "id_above": id_above,
        "id_below": id_below,
        "created_after": store._t_opt(filters.created_after),
        "created_before": store._t_opt(filters.created_before),
        "finished_after": store._t_opt(filters.finished_after),
        "finished_before": store._t_opt(filters.finished_before),
    }


def count_by_state_plan(store: SqlStore, filters: ExecutionFilter) -> Plan[dict[State, int]]:
    """``Store.count_by_state`` as a plan (the index it reads: :func:`first_index`)."""
    driver = first_index(filters, counting=True)
    params = filter_params(store, filters, driver)
    if driver == "states":
        params["states"] = store._array(states_to_read(filters))

    def steps() -> Steps[dict[State, int]]:
        found = yield Statement(store._q(BLOCKS[driver][2]), params, "all")
        return {State(state): int(n) for state, n in found}

    return Plan(steps(), atomic=False)


def transitions_plan(store: SqlStore, execution_id: str) -> Plan[list[Transition]]:
    """``Store.transitions`` as a plan."""
    return trail_plan(store, "select_transitions", execution_id, store.rows.transition)


def commands_plan(store: SqlStore, execution_id: str) -> Plan[list[Command]]:
    """``Store.commands`` as a plan."""
    return trail_plan(store, "select_commands", execution_id, store.rows.command)


def trail_plan(
    store: SqlStore, block: str, execution_id: str, row: Callable[[tuple[Any, ...]], R]
) -> Plan[list[R]]:
    """The rows of ``block`` for one execution, each mapped by ``row``;
    :class:`NotFound` if the execution does not exist."""
    if not store._can_name(execution_id):
        raise NotFound(execution_id)

    def steps() -> Steps[list[R]]:
        found = yield Statement(store._q(block), {"id": execution_id}, "all")
        if found:
            return [row(r) for r in found]
        exists = yield Statement(store._q("execution_exists"), {"id": execution_id}, "one")
        if exists:
            return []
        raise NotFound(execution_id)

    return Plan(steps(), atomic=False)

"""The outcome verbs of the SQL stores as plans: completing held leases.

A completion is fenced in SQL: per round (see :func:`~fencepost.store.batching.rounds`)
one set-based statement (PostgreSQL), or one statement stepped once per lease (SQLite),
ends the leases whose owner, epoch and liveness still hold; every other completion is refused,
and audited in the same transaction when its id can name a row at all. A result the
store refused (``Outcome.invalid``) fails its execution through the state machine
instead. The dialect binds the fences (``SqlDialect._fence_params``), may give a
statement's text for the days it touches (``SqlDialect._text_for``), and says whether
its fenced statement also stores each result and COMPLETED transition
(``SqlDialect._writes_many_tables``) and whether it runs once per lease instead
(``SqlDialect._fences_row_by_row``: SQLite); the plan decides everything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fencepost.domain.errors import StaleLease
from fencepost.domain.models import Execution
from fencepost.domain.states import Event
from fencepost.store.batching import rounds
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import Outcome
from fencepost.store.verbs import sql_changes

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

#: What a retry recognises as its own earlier attempt's completion.
_COMPLETED = (Event.COMPLETED,)


def complete_plan(
    store: SqlStore, outcomes: Sequence[Outcome], *, again: bool = False
) -> Plan[list[StaleLease | None]]:
    """``OutcomeVerbs._complete`` as a plan: ``None`` for each completion accepted (its
    execution SUCCEEDED, or FAILED with its refused result), else the
    :class:`StaleLease` that refused it, in the order given.

    ``again``: a retry whose earlier attempt may have committed (see
    ``SqlDialect._retried``): a completion refused because that attempt completed it
    is accepted, and a refusal it already audited is not audited twice. The rounds and
    their statements' texts are chosen here, before the plan holds a connection.

    The usual batch (one round, every result valid) is one statement where the
    dialect's fenced statement writes everything (PostgreSQL), so it needs no
    transaction: its refusals, if any, are audited by the next statement, and change
    no state.
    """
    # An id that cannot name a row here is refused without asking (and not audited).
    usable = [
        i
        for i, o in enumerate(outcomes)
        if o.invalid is None and store._can_name(o.lease.execution_id)
    ]
    batches: list[_Round] = []
    for round_ in rounds([outcomes[i].lease for i in usable]):
        chosen = [usable[i] for _, i in sorted(round_.items())]
        ids = [outcomes[i].lease.execution_id for i in chosen]
        batches.append((chosen, store._text_for("complete_fenced", ids)))
    alone = store._writes_many_tables and len(batches) == 1 and len(usable) == len(outcomes)
    return Plan(_complete_steps(store, outcomes, usable, batches, again), atomic=not alone)


#: A round of a completion: the indexes of its outcomes in the statement's order, and
#: the statement's text.
_Round = tuple[list[int], str]


def _complete_steps(
    store: SqlStore,
    outcomes: Sequence[Outcome],
    usable: list[int],
    batches: list[_Round],
    again: bool,
) -> Steps[list[StaleLease | None]]:
    now = store._now_param()  # read in the write transaction, its lock held
    accepted: set[int] = set()
    for chosen, text in batches:
        found = yield from _fenced_steps(store, [outcomes[i] for i in chosen], text, now)
        by_id = {outcomes[i].lease.execution_id: i for i in chosen}
        accepted.update(by_id[id_] for id_ in found)
    if again:  # refused now, maybe because an earlier attempt completed them
        unsure = [outcomes[i].lease for i in usable if i not in accepted]
        ended = yield from store._ended_steps(unsure, _COMPLETED)
        accepted.update(i for i in usable if sql_changes.fence_key(outcomes[i].lease) in ended)
    refused = [outcomes[i].lease for i in usable if i not in accepted]
    yield from store._refuse_steps(refused, "complete", now, again=again)
    out: list[StaleLease | None] = []
    at: datetime | None = None  # the machine's now, read once if a result was refused
    for i, o in enumerate(outcomes):
        if o.invalid is not None:
            if at is None:
                at = yield from store._now_steps()
            out.append((yield from store._fail_invalid_steps(o, at, again=again)))
        else:
            out.append(None if i in accepted else sql_changes.stale(o.lease))
    return out


def _fenced_steps(
    store: SqlStore, chosen: Sequence[Outcome], text: str, now: Any
) -> Steps[list[str]]:
    """One round's fenced statement, and where the dialect's does not write them, the
    results and COMPLETED transitions of the leases it ended: the ids it ended."""
    if store._fences_row_by_row:
        rows = [
            {"now": now, "id": o.lease.execution_id, "owner": o.lease.owner, "epoch": o.lease.epoch}
            for o in chosen
        ]
        verdicts = yield from sql_changes.changed_rows(store, text, rows)
        ended = [o.lease.execution_id for o, ok in zip(chosen, verdicts, strict=True) if ok]
    else:
        params = {"now": now} | store._fence_params([o.lease for o in chosen])
        if store._writes_many_tables:
            params["results"] = [o.result_json for o in chosen]
        found = yield Statement(text, params, "all", prepare=store._prepare_for(len(chosen)))
        ended = [id_ for id_, *_ in found]
    if not store._writes_many_tables and ended:
        done = set(ended)
        completed = [o for o in chosen if o.lease.execution_id in done]
        yield Statement(
            store._q("set_result"),
            [{"id": o.lease.execution_id, "result": o.result_json} for o in completed],
            "many",
        )
        yield Statement(
            store._q("insert_completed"),
            [
                {
                    "execution_id": o.lease.execution_id,
                    "epoch": o.lease.epoch,
                    "actor": o.lease.owner,
                    "at": now,
                }
                for o in completed
            ],
            "many",
        )
    return ended


def complete_one_plan(
    store: SqlStore, outcome: Outcome, *, again: bool = False
) -> Plan[Execution | StaleLease]:
    """``OutcomeVerbs._complete_one`` as a plan: the execution as its completion left
    it, read in the same transaction; or, audited, the :class:`StaleLease` that refused
    it, returned, not raised, so that its audit commits (the caller raises it).

    Where the dialect's fenced statement writes everything (PostgreSQL), one
    statement, ``complete_returning``, completes and returns the row it wrote, in
    autocommit (a refusal is audited by the next statement: it changes nothing).
    ``again``: see :func:`complete_plan`; a retry refused because its earlier attempt
    completed the execution (and lost the answer) returns the execution that attempt
    left.
    """
    fence = outcome.lease
    if not store._can_name(fence.execution_id):
        raise sql_changes.stale(fence)  # names no execution here: refused without asking
    one = store._writes_many_tables
    text = store._text_for("complete_returning" if one else "complete_fenced", [fence.execution_id])
    return Plan(_complete_one_steps(store, outcome, text, again), atomic=not one)


def _complete_one_steps(
    store: SqlStore, outcome: Outcome, text: str, again: bool
) -> Steps[Execution | StaleLease]:
    fence = outcome.lease
    now = store._now_param()
    if store._writes_many_tables:
        params = {"now": now, "results": [outcome.result_json]} | store._fence_params([fence])
        row = yield Statement(text, params, "one")
        if row is not None:
            return store.rows.execution(row)
    elif (yield from _fenced_steps(store, [outcome], text, now)):
        # Read back in this same transaction: what it wrote, not a later state.
        return (yield from store._get_steps(fence.execution_id))
    if again and (yield from store._ended_steps([fence], _COMPLETED)):
        return (yield from store._get_steps(fence.execution_id))
    yield from store._refuse_steps([fence], "complete", now, again=again)
    return sql_changes.stale(fence)

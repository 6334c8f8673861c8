"""The nodes, the orphaned executions and prune, for the SQL stores, as plans: a node's
registration (renewed by every heartbeat of its process), the nodes, the unfinished
executions of some buckets untouched for a while, what a prune would delete, and one
batch of prune.

The store's now is the dialect's (``SqlDialect._now_param``: SQLite's process clock, the
PostgreSQL server's unless a test pins it), and durations are added to it in SQL.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain.ids import first_id_after
from fencepost.domain.models import Execution
from fencepost.domain.nodes import Node, Registration
from fencepost.store.executors import Plan, Statement, Steps, returning
from fencepost.store.values import BucketsResized, check_resize, plan_resize
from fencepost.store.verbs.sql_reports import rollup_params

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


def register_node_plan(store: SqlStore, r: Registration) -> Plan[Node]:
    """``OperatingVerbs._register_node``: insert or renew the node's row (a renewal
    keeps its ``started_at``); it is live until ``now + ttl``."""
    params = {
        "id": r.node_id,
        "kind": r.kind,
        "buckets": None if r.buckets is None else store._array(list(r.buckets)),
        "ttl": store._d(r.ttl),
        "jobs": json.dumps(r.jobs),
    }

    def steps() -> Steps[Node]:
        now = store._now_param()  # read as the statement runs (see SqlStore._now_after_lock)
        row = yield Statement(store._q("register_node"), params | {"now": now}, "one")
        return store.rows.node(row)

    return Plan(steps(), atomic=store._now_after_lock)


def nodes_plan(store: SqlStore, *, live_only: bool) -> Plan[list[Node]]:
    """``Store.nodes``: every registered node by id, or only those still live."""
    params = {"now": store._now_param(), "live_only": live_only}

    def steps() -> Steps[list[Node]]:
        found = yield Statement(store._q("select_nodes"), params, "all")
        return [store.rows.node(r) for r in found]

    return Plan(steps(), atomic=False)


def orphans_plan(
    store: SqlStore, buckets: tuple[int, ...], *, older_than: timedelta, limit: int
) -> Plan[list[Execution]]:
    """``OperatingVerbs._orphans``: unfinished executions of ``buckets`` not updated for
    ``older_than``, oldest first."""
    params = {
        "now": store._now_param(),
        "buckets": store._array(list(buckets)),
        "older_than": store._d(older_than),
        "limit": limit,
    }

    def steps() -> Steps[list[Execution]]:
        found = yield Statement(store._q("orphans"), params, "all")
        return [store.rows.execution(r) for r in found]

    return Plan(steps(), atomic=False)


def recorded_num_buckets_plan(store: SqlStore) -> Plan[int]:
    """The bucket count the database records: the store's own when none is (an emptied
    settings table); another process may have resized it since this one opened."""
    return Plan(_recorded_num_buckets_steps(store), atomic=False)


def _recorded_num_buckets_steps(store: SqlStore) -> Steps[int]:
    row = yield Statement(store._q("recorded_num_buckets"), None, "one")
    return store.config.num_buckets if row is None else int(row[0])


#: Executions one statement of a resize moves (two arrays of this many values).
MOVES_PER_STATEMENT = 10_000


def resize_buckets_plan(store: SqlStore, num_buckets: int, *, force: bool) -> Plan[BucketsResized]:
    """``OperatingVerbs._resize_buckets``, in one transaction: serialized first with
    migrations and every writer of executions where the dialect must say so
    (``SqlDialect._resize_locks``; SQLite's write transaction holds the file's lock),
    so that nothing committed before it commits keeps a bucket of the old count;
    refused while live nodes are registered and the count changes, unless ``force``;
    then every unfinished execution moved to its bucket of the new count, and the
    count recorded."""

    def steps() -> Steps[BucketsResized]:
        for block in store._resize_locks:
            yield Statement(store._q(block))
        params = {"now": store._now_param(), "live_only": True}
        live = [str(row[0]) for row in (yield Statement(store._q("select_nodes"), params, "all"))]
        previous = yield from _recorded_num_buckets_steps(store)
        check_resize(live, previous, num_buckets, force=force)
        found = yield Statement(store._q("unfinished_buckets"), None, "all")
        moves, resized = plan_resize(
            live, previous, num_buckets, force=force, unfinished=lambda: found
        )
        for start in range(0, len(moves), MOVES_PER_STATEMENT):
            chunk = moves[start : start + MOVES_PER_STATEMENT]
            yield Statement(
                store._q("move_to_buckets"),
                {
                    "ids": store._array([i for i, _ in chunk]),
                    "buckets": store._array([b for _, b in chunk]),
                },
            )
        yield Statement(
            store._q("set_num_buckets"), {"num_buckets": num_buckets, "at": store._now_param()}
        )
        return resized

    return Plan(steps())


def deregister_node_plan(store: SqlStore, node_id: str) -> Plan[None]:
    """``OperatingVerbs.deregister_node``: the node's row deleted, if there is one."""
    if not store._storable(node_id):
        return Plan(returning(None), atomic=False)  # no node can have this id

    def steps() -> Steps[None]:
        yield Statement(store._q("deregister_node"), {"id": node_id})

    return Plan(steps())


def count_prunable_plan(store: SqlStore, cutoff: datetime) -> Plan[int]:
    """``OperatingVerbs._count_prunable``: how many finished executions are unchanged
    since ``cutoff``, what a prune at ``cutoff`` would delete.

    ``before`` bounds the ids a dialect may read: ids are time-ordered, so every row
    created by ``cutoff`` sorts below the first id of the millisecond after it.
    """
    params = {"cutoff": store._t(cutoff), "before": first_id_after(cutoff)}

    def steps() -> Steps[int]:
        (count,) = yield Statement(store._q("count_prunable"), params, "one")
        return int(count)

    return Plan(steps(), atomic=False)


#: One batch of prune: how many executions went, and where a dialect walks the ids
#: (SQLite) the last id of a full batch, after which the next batch of the same prune
#: resumes (None: start again).
PruneBatch = tuple[int, str | None]

#: What goes with a pruned execution where one statement cannot delete it all, in order.
_PRUNED_WITH = ("prune_commands", "prune_transitions", "prune_execution_data", "prune_executions")


def prune_batch_plan(
    store: SqlStore, cutoff: datetime, batch: int, *, after: str = ""
) -> Plan[PruneBatch]:
    """``OperatingVerbs._prune_batch``: delete up to ``batch`` finished executions
    unchanged since ``cutoff``, oldest first, with what hangs off them, their service
    level verdicts rolled up first (a crash loses neither the rows nor their counts,
    and never counts them twice).

    Where one statement writes many tables (PostgreSQL), one statement in autocommit:
    the batch is its own short transaction, its rollups written by the statement that
    deletes, the store's now read in it. Else one write transaction (SQLite's write
    lock held for one batch; claims run between batches) that walks the primary key
    from ``after`` (where the previous batch of the same prune stopped), so that a
    prune reads each row once.
    """
    if store._writes_many_tables:
        return Plan(_prune_in_one_statement(store, cutoff, batch), atomic=False)
    return Plan(_prune_walking_ids(store, cutoff, batch, after))


def _prune_in_one_statement(store: SqlStore, cutoff: datetime, batch: int) -> Steps[PruneBatch]:
    params = rollup_params(store) | {"cutoff": store._t(cutoff), "batch": batch}
    (deleted,) = yield Statement(store._q("prune_batch"), params, "one")
    return int(deleted), None


def _prune_walking_ids(
    store: SqlStore, cutoff: datetime, batch: int, after: str
) -> Steps[PruneBatch]:
    params = rollup_params(store) | {
        "cutoff": store._t(cutoff),
        "before": first_id_after(cutoff),
        "after": after,
        "batch": batch,
    }
    found = yield Statement(store._q("prunable"), params, "all")
    if not found:
        return 0, None
    ids = [row[0] for row in found]
    yield Statement(store._q("slo_rollup"), slo_rollups(found), "many")
    gone = {"ids": store._array(ids)}
    for block in _PRUNED_WITH:
        yield Statement(store._q(block), gone)
    return len(ids), (max(ids) if len(ids) == batch else None)


def slo_rollups(found: Sequence[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The ``slo_rollup`` rows of executions about to go: rows of (id, day, job, claim
    verdict, finish verdict) counted by day, job, objective and verdict (undecided
    verdicts, NULL, are not rolled up).

    Counted by the four values first: a batch holds a few dozen distinct ones.
    """
    counts: Counter[tuple[int, str, str, str]] = Counter()
    for (day, job, claim, finish), n in Counter(row[1:] for row in found).items():
        if claim is not None:
            counts[day, job, "claim", claim] += n
        if finish is not None:
            counts[day, job, "finish", finish] += n
    return [
        {"day": day, "job": job, "objective": objective, "verdict": verdict, "count": n}
        for (day, job, objective, verdict), n in counts.items()
    ]

"""The nodes and the orphaned executions, for the SQL stores, as plans of one statement
each: a node's registration (renewed by every heartbeat of its process), the nodes, and
the unfinished executions of some buckets untouched for a while.

The store's now is the dialect's (``SqlDialect._now_param``: SQLite's process clock, the
PostgreSQL server's unless a test pins it), and durations are added to it in SQL.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from fencepost.domain.ids import first_id_after
from fencepost.domain.models import Execution
from fencepost.domain.nodes import Node, Registration
from fencepost.store.executors import Plan, Statement, Steps, returning

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

    def steps() -> Steps[int]:
        row = yield Statement(store._q("recorded_num_buckets"), None, "one")
        return store.config.num_buckets if row is None else int(row[0])

    return Plan(steps(), atomic=False)


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

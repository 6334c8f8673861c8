"""PostgreSQL's claim and fenced completion reach rows by key, whatever the planner believes.

The plans are read with EXPLAIN ANALYZE under both plan modes a prepared statement
can get (the generic plan psycopg's prepared statements soon run, and a plan made
for the call), on a table whose statistics were taken before anything was RUNNING:
no scan of a whole table, and no loop over the batch once per lease.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost.domain.catalogue import job_entry
from fencepost.domain.machine import TAKEOVER_REASON_FORMAT
from fencepost.store.postgres.connection import QUERIES
from tests import postgres

_TYPES = {
    "claim": {
        "now": "timestamptz",
        "owner": "text",
        "limit": "integer",
        "ttl": "interval",
        "jobs": "text[]",
        "ids": "uuid[]",
        "buckets": "integer[]",
        "versions": "text[]",
        "takeover_reason": "text",
    },
    "complete_fenced": {
        "now": "timestamptz",
        "ids": "uuid[]",
        "owners": "text[]",
        "epochs": "bigint[]",
        "results": "jsonb[]",
    },
}

#: A claim restricted to queues binds two parameters more.
_TYPES["claim_queues"] = _TYPES["claim"] | {"queues": "text[]", "queue_limits": "integer[]"}


def _plan(
    conn: psycopg.Connection[Any], name: str, params: dict[str, Any], *, generic: bool
) -> str:
    """EXPLAIN ANALYZE of a query block as a prepared statement, in a rolled-back transaction."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)[sb]", number, QUERIES[name])
    types = _TYPES[name]
    mode = "force_generic_plan" if generic else "force_custom_plan"
    with conn.transaction(force_rollback=True):
        conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
        conn.execute(f"PREPARE probe ({', '.join(types[n] for n in names)}) AS {text}")
        args = ", ".join(f"%s::{types[n]}" for n in names)
        cursor = psycopg.ClientCursor(conn)
        cursor.execute(f"EXPLAIN (ANALYZE) EXECUTE probe({args})", [params[n] for n in names])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        conn.execute("DEALLOCATE probe")
    return plan


def _hot(schema: str) -> str:
    """The day partition of the executions holding the test's rows (made today).

    The history is partitioned by day (migration 10): a plan reads each partition
    through its own indexes, named after the parent's (executions_p20261203_claimable).
    The days made ahead are empty, and a scan of an empty partition costs nothing.
    """
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        row = conn.execute(
            f"SELECT tableoid::regclass::text FROM {schema}.executions LIMIT 1"
        ).fetchone()
    assert row is not None
    return str(row[0]).rpartition(".")[2]


def _claim_plan(conn: psycopg.Connection[Any], *, generic: bool, **filters: Any) -> str:
    """The plan of a claim of 256 by ``probe``, restricted by ``filters`` (see claim)."""
    params = defaultdict(
        lambda: None,
        owner="probe",
        limit=256,
        ttl=timedelta(seconds=30),
        takeover_reason=TAKEOVER_REASON_FORMAT,
        **filters,
    )
    return _plan(conn, "claim", params, generic=generic)


@pytest.mark.parametrize("generic", [True, False], ids=["generic", "custom"])
def test_postgres_claim_and_complete_reach_rows_by_key(generic: bool) -> None:
    postgres.require_postgres()
    name = postgres.new_schema()
    try:
        with fencepost.connect(postgres.store_url(name)) as store:
            for _ in range(5):
                store.submit_many([{"job": "bench", "inputs": {"n": i}} for i in range(1000)])
            with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                for table in ("executions", "execution_data", "transitions"):
                    conn.execute(f"VACUUM ANALYZE {name}.{table}")  # nothing RUNNING yet
            leases = store.claim("probe", limit=256, ttl=600)
        hot = _hot(name)
        data = hot.replace("executions", "execution_data", 1)
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"SET search_path TO {name}")
            claim = _claim_plan(conn, generic=generic)
            complete = _plan(
                conn,
                "complete_fenced",
                {
                    "now": None,
                    "ids": [lease.execution_id for lease in leases],
                    "owners": [lease.owner for lease in leases],
                    "epochs": [lease.epoch for lease in leases],
                    "results": ['{"ok": true}'] * len(leases),
                },
                generic=generic,
            )
        for plan in (claim, complete):
            assert f"Seq Scan on {data} " not in plan, plan
            assert "rows=256 loops=1)" in plan, plan  # the batch was really processed
        assert f"Seq Scan on {hot} " not in complete, complete
        if generic:  # what a prepared claim runs; a plan made per call may still hash-join
            assert f"Seq Scan on {hot} " not in claim, claim  # a small table (see claim)
        # The fenced completion never looks every lease up once per lease.
        assert not re.search(r"Function Scan on l .*loops=(?!1\))\d+", complete), complete
        assert not re.search(r"CTE Scan on l .*loops=(?!1\))\d+", complete), complete
        assert "executions_running_bucket" not in complete, complete
    finally:
        postgres.drop_schema(name)


def _claim_of_16(queues: list[str] | None = None) -> defaultdict[str, Any]:
    """A claim's parameters: 16 by ``probe``, of ``queues`` (16 each) if given."""
    params: defaultdict[str, Any] = defaultdict(
        lambda: None,
        owner="probe",
        limit=16,
        ttl=timedelta(seconds=30),
        takeover_reason=TAKEOVER_REASON_FORMAT,
    )
    if queues is not None:
        params.update(queues=queues, queue_limits=[16] * len(queues))
    return params


def test_postgres_queue_claims_walk_the_queue_index() -> None:
    """A claim of one queue walks that queue's part of executions_queue_claimable; a
    claim without queues still walks executions_claimable.

    Only the plan made for the call: the store never prepares a queue claim (see the
    claim_queues block), and the plain claim's generic plan is checked above.
    """
    postgres.require_postgres()
    name = postgres.new_schema()
    try:
        with fencepost.connect(postgres.store_url(name)) as store:
            for queue in ("bulk", "bulk", "bulk", "bulk", "mail"):
                store.submit_many([{"job": "bench", "queue": queue} for _ in range(1000)])
            with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                conn.execute(f"VACUUM ANALYZE {name}.executions")
        hot = _hot(name)
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"SET search_path TO {name}")
            one_queue = _plan(conn, "claim_queues", _claim_of_16(queues=["mail"]), generic=False)
            every_queue = _plan(conn, "claim", _claim_of_16(), generic=False)
        assert f"Index Scan using {hot}_queue_claimable on {hot} " in one_queue, one_queue
        assert "Bitmap" not in one_queue, one_queue  # not the whole queue, then a sort
        assert f"Seq Scan on {hot} " not in one_queue, one_queue
        assert "rows=16 loops=1)" in one_queue, one_queue  # the claim really took 16
        assert "_queue_claimable" not in every_queue, every_queue
        assert f"Index Scan using {hot}_claimable on {hot} " in every_queue, every_queue
    finally:
        postgres.drop_schema(name)


@pytest.mark.parametrize("generic", [True, False], ids=["generic", "custom"])
def test_postgres_a_versioned_claim_walks_the_claimable_index(generic: bool) -> None:
    """A worker's claim names the versions it serves. Once every waiting row carries a
    version (a catalogued job's submits pin one), the claim still walks the claimable
    index and stops at its limit: not a scan of every due row and a sort, which the
    planner chose while it had no statistics of the version filter (migration 8)."""
    postgres.require_postgres()
    name = postgres.new_schema()
    try:
        with fencepost.connect(postgres.store_url(name)) as store:
            store.publish_jobs([job_entry("bench", 1, input_schema={"type": "object"})])
            for _ in range(10):
                store.submit_many([{"job": "bench", "inputs": {"n": i}} for i in range(1000)])
            assert store.query(limit=1).items[0].job_version == 1
        hot = _hot(name)
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"VACUUM ANALYZE {name}.executions")
            conn.execute(f"SET search_path TO {name}")
            claim = _claim_plan(conn, generic=generic, jobs=["bench"], versions=["bench:1"])
        waiting = claim.split("CTE waiting", 1)[1].split("CTE expired", 1)[0]
        assert f"Index Scan using {hot}_claimable on {hot} " in waiting, claim
        assert not re.search(r"(^|->)\s*Sort\s+\(", waiting, re.M), claim  # no Sort node
        assert "Bitmap" not in waiting, claim
        assert f"Seq Scan on {hot} " not in waiting, claim
        assert "rows=256 loops=1)" in waiting, claim  # the claim really took 256
    finally:
        postgres.drop_schema(name)


def test_postgres_a_queue_with_few_due_rows_is_not_found_by_walking_the_others() -> None:
    """A claim of a queue holding a few due rows beside another holding thousands walks
    its own queue's index entries, not every due row in claim order.

    The planner cannot know the queue's share (its name comes from the claim's array of
    queues): with two queues it takes each for half of the due rows, and walking
    executions_claimable for the claim's few then looked as cheap. After a bulk replay
    made 100,000 dead letters of one queue due, each claim of another queue read all of
    them (20 ms instead of 1.7; bench/bulk_actions.py).
    """
    postgres.require_postgres()
    name = postgres.new_schema()
    try:
        with fencepost.connect(postgres.store_url(name)) as store:
            # The worker's queue: thousands done, four due; the other: thousands due.
            store.submit_many([{"job": "bench", "queue": "work"} for _ in range(5000)])
            while leases := store.claim("worker", limit=1000, queues=["work"]):
                store.complete_many([(lease, None) for lease in leases])
            for _ in range(10):
                store.submit_many([{"job": "bench", "queue": "replayed"} for _ in range(1000)])
            store.submit_many([{"job": "bench", "queue": "work"} for _ in range(4)])
            with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                conn.execute(f"VACUUM ANALYZE {name}.executions")
        hot = _hot(name)
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"SET search_path TO {name}")
            plan = _plan(conn, "claim_queues", _claim_of_16(queues=["work"]), generic=False)
        assert f"Index Scan using {hot}_queue_claimable on {hot} " in plan, plan
        assert "rows=4 loops=1)" in plan, plan  # the claim really took the four
        assert "Rows Removed by Filter" not in plan, plan  # no other queue's row was read
    finally:
        postgres.drop_schema(name)


def test_postgres_a_large_bulk_action_refreshes_the_statistics() -> None:
    """A bulk action counts the executions it changed toward the store's own ANALYZE, as
    inserts do: a replay of many dead letters makes them all due, and a claim planned on
    statistics that had them FAILED walked every one of them (15 ms instead of 1.7 after
    a replay of 100,000, until autovacuum's ANALYZE; bench/bulk_actions.py)."""
    postgres.require_postgres()
    name = postgres.new_schema()
    try:
        with fencepost.connect(postgres.store_url(name)) as store:
            store.submit_many([{"job": "dead", "max_attempts": 1} for _ in range(300)])
            while leases := store.claim("worker", limit=100):
                for lease in leases:
                    store.fail(lease, "down", retryable=False)
            hot = _hot(name)

            def analyzed() -> int:
                with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT analyze_count FROM pg_stat_user_tables"
                        " WHERE schemaname = %s AND relname = %s",
                        (name, hot),
                    ).fetchone()
                assert row is not None
                return int(row[0])

            before = analyzed()
        # The operator's store (the console's, say), whose threshold is made small.
        with fencepost.connect(postgres.store_url(name)) as console:
            console.ANALYZE_AFTER_ROWS = 250  # type: ignore[attr-defined]
            result = console.act("replay", filter={"job": "dead"}, actor="ops", limit=1000)
            assert result.done == 300
            assert analyzed() == before + 1  # after 250 (not again for the last 50)
    finally:
        postgres.drop_schema(name)

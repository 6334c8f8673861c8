"""The history partitioned by day on a real PostgreSQL server (migration 10).

Idempotency keys hold across days, prune drops whole days with their keys and
commands (and gives back a day a replay revived meanwhile), and a database made
before migration 10 is converted with its rows readable where they were.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost import IdempotencyConflict, State, Store
from fencepost.domain.ids import IdGenerator
from fencepost.store.postgres import history
from fencepost.store.postgres.connection import MIGRATIONS_PACKAGE, QUERIES
from fencepost.store.sql import migration_files
from fencepost.testing import ManualClock
from tests.integration import _pg
from tests.postgres import require_postgres


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


def _days_ago(days: int) -> ManualClock:
    return ManualClock(_pg.server_now() - timedelta(days=days))


def _partitions(schema: str) -> list[str]:
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        return [p.name for p in history.partitions(conn)]


def _tables(schema: str) -> set[str]:
    with _pg.connect() as conn:
        found = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
    return {str(name) for (name,) in found}


def _finish(store: Store, job: str) -> None:
    while leases := store.claim("setup", limit=100, jobs=[job]):
        assert store.complete_many([(lease, "done") for lease in leases]) == [None] * len(leases)


def test_an_idempotency_key_holds_across_days(schema: str) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(3)) as old:
        first = old.submit("report", inputs={"day": "a"}, idempotency_key="report-a")
    with fencepost.connect(_pg.url(schema)) as store:
        again = store.submit("report", inputs={"day": "a"}, idempotency_key="report-a")
        assert again.id == first.id  # found in the older day, not stored twice
        with pytest.raises(IdempotencyConflict):
            store.submit("report", inputs={"day": "b"}, idempotency_key="report-a")
        (batch,) = store.submit_many(
            [{"job": "report", "inputs": {"day": "a"}, "idempotency_key": "report-a"}]
        )
        assert batch.id == first.id
        assert store.find("report-a") == store.get(first.id)
        assert store.query(job="report").items == [store.get(first.id)]
    assert history.partition_name("executions", history.day_of(first.id)) in _partitions(schema)


def test_prune_drops_whole_days_with_their_keys_and_commands(schema: str) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        kept = old.submit_many([{"job": "old", "idempotency_key": f"old-{i}"} for i in range(50)])
        cancelled = old.submit("old-cancelled", idempotency_key="old-cancelled")
        old.request(cancelled.id, "cancel", actor="ops")  # cancelled, and a command row
        _finish(old, "old")
    day = history.partition_name("executions", history.day_of(kept[0].id))
    assert day in _partitions(schema)
    with fencepost.connect(_pg.url(schema)) as store:
        fresh = store.submit("fresh", idempotency_key="fresh-1")
        assert store.prune(older_than=timedelta(days=5), dry_run=True) == 51
        seen: list[int] = []
        assert store.prune(older_than=timedelta(days=5), on_batch=seen.append) == 51
        assert seen == [51]  # one day, dropped whole
        for table in ("executions", "execution_data", "transitions"):
            assert history.sibling(day, table) not in _tables(schema)
        with pytest.raises(fencepost.NotFound):
            store.get(kept[0].id)
        # The keys went with their day: a key can name a new execution again.
        assert store.find("old-0") is None
        reused = store.submit("old", idempotency_key="old-0")
        assert reused.id != kept[0].id
        assert store.get(fresh.id).state is State.SCHEDULED
        with _pg.connect() as conn:
            left = conn.execute(
                f"SELECT (SELECT count(*) FROM {schema}.commands),"
                f" (SELECT count(*) FROM {schema}.execution_keys)"
            ).fetchone()
        assert left == (0, 2)  # fresh-1 and the reused old-0


def test_a_day_a_replay_revived_while_it_was_detached_is_attached_back(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(10)) as old:
        dead = old.submit("flaky", max_attempts=1, idempotency_key="flaky-1")
        (lease,) = old.claim("setup", jobs=["flaky"])
        old.fail(lease, "boom", retryable=False)
    store = fencepost.connect(_pg.url(schema))
    real_detach = history._detach

    def replay_first(
        conn: psycopg.Connection[Any], p: history.Partition, concurrently: bool
    ) -> None:
        if store.get(dead.id).state is State.FAILED:
            store.replay(dead.id, actor="ops")  # after prune decided the day could go
        real_detach(conn, p, concurrently)

    monkeypatch.setattr(history, "_detach", replay_first)
    try:
        assert store.prune(older_than=timedelta(days=5)) == 0
        revived = store.get(dead.id)
        assert revived.state is State.SCHEDULED
        assert store.find("flaky-1") == revived
        assert history.partition_name("executions", history.day_of(dead.id)) in _partitions(schema)
        assert [e.execution_id for e in store.claim("worker", jobs=["flaky"])] == [dead.id]
    finally:
        store.close()


def _version_9(schema: str) -> None:
    """The schema as a release before migration 10 made it."""
    with _pg.connect() as conn, conn.transaction():
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(QUERIES["create_migrations_table"])
        for version, name, sql in migration_files(MIGRATIONS_PACKAGE):
            if version < 10:
                conn.execute(sql)
                conn.execute(QUERIES["record_migration"], {"version": version, "name": name})


def test_a_database_from_before_partitions_is_converted_with_its_rows(schema: str) -> None:
    _version_9(schema)
    ids = IdGenerator()
    made = int((_pg.server_now() - timedelta(days=4)).timestamp() * 1000)
    rows = [ids.new(made + i) for i in range(100)]
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(
            "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket, created_at,"
            " updated_at, idempotency_key) SELECT i, 'legacy', 'SUCCEEDED', now(), 3, 0, now(),"
            " now(), 'legacy-' || g FROM unnest(%s::uuid[]) WITH ORDINALITY AS t(i, g)",
            (rows,),
        )
        conn.execute("INSERT INTO execution_data SELECT id, '{}' FROM executions")
        conn.execute(
            "INSERT INTO transitions (execution_id, event, to_state, epoch, at)"
            " SELECT id, 'SUBMITTED', 'SCHEDULED', 0, now() FROM executions"
        )
        conn.execute(
            "INSERT INTO commands (id, execution_id, kind, state, requested_by, requested_at)"
            " VALUES (gen_random_uuid(), %s, 'cancel', 'DONE', 'ops', now())",
            (rows[0],),
        )
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.migrations_applied == [10]
        assert store.get(rows[5]).job == "legacy"
        assert store.find("legacy-6") == store.get(rows[5])
        assert [t.event.value for t in store.transitions(rows[0])] == ["SUBMITTED"]
        assert len(store.commands(rows[0])) == 1
        # A key of a converted row still holds; a new one is stored in a day partition.
        with pytest.raises(IdempotencyConflict):
            store.submit("legacy", inputs={"other": 1}, idempotency_key="legacy-1")
        new = store.submit("new")
        assert store.get(new.id).job == "new"
        with _pg.connect() as conn:
            (where,) = conn.execute(
                f"SELECT tableoid::regclass::text FROM {schema}.executions WHERE id = %s",
                (rows[0],),
            ).fetchone() or (None,)
        assert str(where).endswith("executions_p0")
        # The audit's seq carries on after the converted rows'.
        seqs = [t.seq for t in store.transitions(new.id)]
        assert seqs
        assert min(seqs) > 100
    parts = _partitions(schema)
    assert parts[0] == "executions_p0"
    assert len(parts) >= 3


def test_prune_by_row_deletes_keys_and_commands_at_the_edges(schema: str) -> None:
    with fencepost.connect(_pg.url(schema), clock=_days_ago(3)) as old:
        done = old.submit("old", idempotency_key="edge-1")
        old.submit("keeper")  # still waiting: its day stays, prune deletes by row
        old.request(done.id, "cancel", actor="ops")  # finished, with a command row
        _finish(old, "old")
    with fencepost.connect(_pg.url(schema)) as store:
        assert store.prune(older_than=timedelta(days=1)) == 1
        assert store.find("edge-1") is None
        with _pg.connect() as conn:
            left = conn.execute(
                f"SELECT (SELECT count(*) FROM {schema}.commands),"
                f" (SELECT count(*) FROM {schema}.execution_keys)"
            ).fetchone()
        assert left == (0, 0)
        assert store.submit("old", idempotency_key="edge-1").id != done.id

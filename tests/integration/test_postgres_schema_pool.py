"""The test suite's schema pool hands a later test an empty schema, or none at all.

``store_factory`` reuses a PostgreSQL schema once its test's stores are closed
(tests/postgres.py, SchemaPool). The PostgreSQL tests are only as good as that
schema's emptiness: these tests show what a schema holds when it is handed on.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import fencepost
from fencepost.testing import ManualClock
from tests import postgres


@pytest.fixture
def pool() -> Iterator[postgres.SchemaPool]:
    postgres.require_postgres()
    made = postgres.SchemaPool()
    yield made
    made.close()


def _exists(schema: str) -> bool:
    with psycopg.connect(postgres.dsn()) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,))
        return row.fetchone() == (1,)


def test_a_used_schema_comes_back_empty_with_its_sequence_restarted(
    pool: postgres.SchemaPool,
) -> None:
    schema = pool.take()
    url = postgres.store_url(schema)
    with fencepost.connect(url, clock=ManualClock(0)) as store:
        store.add_schedule("job", every=60)
        first = store.submit("job", {"n": 1}, idempotency_key="k")
        store.claim("w", ttl=30)
        first_seq = store.transitions(first.id)[0].seq
    pool.give_back(schema)

    assert pool.take() == schema
    with fencepost.connect(url, clock=ManualClock(0)) as store:
        assert store.query().items == []
        assert store.schedules().items == []
        again = store.submit("job", {"n": 1}, idempotency_key="k")  # the key is free again
        assert again.id != first.id
        assert store.transitions(again.id)[0].seq == first_seq
        assert store.migrations_applied == []  # migrated when it was first made


def test_a_schema_a_test_changed_is_dropped_not_handed_on(pool: postgres.SchemaPool) -> None:
    schema = pool.take()
    fencepost.connect(postgres.store_url(schema)).close()
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(
            f"CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {schema}.nodes "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.refuse()"
        )
    pool.give_back(schema)

    assert schema not in pool.free
    assert pool.take() != schema
    pool.close()
    assert not _exists(schema)


def test_a_schema_that_cannot_be_emptied_is_not_handed_on() -> None:
    postgres.require_postgres()
    pool = postgres.SchemaPool(lock_timeout="100ms")
    schema = pool.take()
    with fencepost.connect(postgres.store_url(schema)) as store:
        store.submit("job", {})
    with psycopg.connect(postgres.dsn()) as holder:  # a lock a test left held
        holder.execute(f"LOCK TABLE {schema}.executions IN ACCESS EXCLUSIVE MODE")
        pool.give_back(schema)
        assert schema not in pool.free
    assert pool.take() != schema
    pool.close()
    assert not _exists(schema)

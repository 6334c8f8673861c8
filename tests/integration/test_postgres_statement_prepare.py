"""A plan's statement says whether psycopg may prepare it, and a caller's connection
overrides it: checked on a real server through ``pg_prepared_statements``.

The PostgreSQL dialect plans a fenced statement over many rows afresh each call
(``_prepare_for``): a plan prepared for one batch's arrays may be a poor one for the
next. A caller's connection is never left with prepared statements of fencepost's.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from fencepost.store.executors import (
    Statement,
    psycopg_async_execute,
    psycopg_execute,
    run,
    run_async,
)
from fencepost.store.postgres.store import PLAN_PER_CALL, PostgresStore
from tests import postgres

pytestmark = pytest.mark.usefixtures("_server")

COUNT = "SELECT count(*) FROM pg_prepared_statements"


@pytest.fixture
def _server() -> None:
    postgres.require_postgres()


def _prepared(conn: psycopg.Connection) -> int:
    row = conn.execute(COUNT, prepare=False).fetchone()
    assert row is not None
    return int(row[0])


def _steps(statement: Statement, times: int):  # type: ignore[no-untyped-def]
    for _ in range(times):
        yield statement


@pytest.mark.parametrize(
    ("statement_says", "connection_says", "prepared"),
    [
        (True, None, 1),  # the statement asks: prepared at once
        (None, None, 1),  # the driver decides: prepared after its threshold (5 runs)
        (False, None, 0),  # planned afresh each call, however often it runs
        (True, False, 0),  # a caller's connection: never, whatever the statement says
    ],
)
def test_a_statement_s_prepare_reaches_the_server(
    statement_says: bool | None, connection_says: bool | None, prepared: int
) -> None:
    statement = Statement("SELECT %(n)s::int + 1", {"n": 1}, "one", prepare=statement_says)
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        run(_steps(statement, 8), psycopg_execute(conn, prepare=connection_says))
        assert _prepared(conn) == prepared


@pytest.mark.parametrize(("statement_says", "prepared"), [(True, 1), (False, 0)])
def test_the_async_executor_passes_it_too(statement_says: bool, prepared: int) -> None:
    statement = Statement("SELECT %(n)s::int + 1", {"n": 1}, "one", prepare=statement_says)

    async def main() -> int:
        async with await psycopg.AsyncConnection.connect(postgres.dsn(), autocommit=True) as conn:
            await run_async(_steps(statement, 8), psycopg_async_execute(conn))
            cursor = await conn.execute(COUNT, prepare=False)
            row = await cursor.fetchone()
            assert row is not None
            return int(row[0])

    assert asyncio.run(main()) == prepared


def test_the_dialect_plans_a_large_batch_afresh() -> None:
    assert PostgresStore._prepare_for(object.__new__(PostgresStore), PLAN_PER_CALL - 1) is None
    assert PostgresStore._prepare_for(object.__new__(PostgresStore), PLAN_PER_CALL) is False

"""examples/fastapi_orders.py, as a user runs it: the lifespan opens the AsyncStore, a
route writes its own row and submits its job in one transaction, a real worker runs it.

The example gets a PostgreSQL database of its own (its tables live in ``public``, as
an application's would), dropped afterwards.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

import httpx
import psycopg
import pytest

import fencepost
from fencepost.domain.states import State
from tests import postgres

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def dsn() -> Iterator[str]:
    postgres.require_postgres()
    name = f"fp_fastapi_{os.getpid()}"
    admin = postgres.dsn()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    url = psycopg.conninfo.make_conninfo(admin, dbname=name)
    yield f"postgresql://{_userhost(url)}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _userhost(conninfo: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    user = params.get("user", "postgres")
    return f"{user}@{params.get('host', '127.0.0.1')}:{params.get('port', 5432)}"


def _example(dsn: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh import of the example with ORDERS_DSN = ``dsn``."""
    monkeypatch.setenv("ORDERS_DSN", dsn)
    spec = importlib.util.spec_from_file_location("fastapi_orders", EXAMPLES / "fastapi_orders.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def _served(example: ModuleType) -> AsyncIterator[httpx.AsyncClient]:
    """The example's app with its lifespan running, and a client to it."""
    async with example.lifespan(example.app):
        transport = httpx.ASGITransport(app=example.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orders") as client:
            yield client


def _orders(dsn: str) -> list[tuple[int, float]]:
    with psycopg.connect(dsn) as conn:
        return [(int(i), float(t)) for i, t in conn.execute("SELECT id, total FROM orders")]


def test_an_order_and_its_job_commit_together_or_not_at_all(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = _example(dsn, monkeypatch)

    async def orders() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with _served(example) as client:
            made = await client.post("/orders", json={"total": 12.5})
            # Refused after the submit: the order and its job are both rolled back.
            over = await client.post("/orders", json={"total": 2_000_000})
            # Refused by the table before the submit.
            negative = await client.post("/orders", json={"total": -1})
            return made, over, negative

    made, over, negative = asyncio.run(orders())
    assert made.status_code == 201, made.text
    order_id, execution_id = made.json()["order"], made.json()["invoice_execution"]
    assert over.status_code == 422, over.text
    assert "review" in over.json()["detail"]
    assert negative.status_code == 422, negative.text
    assert _orders(dsn) == [(order_id, 12.5)]
    with fencepost.connect(dsn) as store:
        execution = store.get(execution_id)
        assert (execution.job, execution.inputs) == ("send-invoice", {"order_id": order_id})
        assert execution.idempotency_key == f"invoice:{order_id}"
        assert [e.id for e in store.query().items] == [execution_id]


def test_a_worker_runs_the_job_the_route_enqueued(
    dsn: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    example = _example(dsn, monkeypatch)

    async def order() -> str:
        async with _served(example) as client:
            made = await client.post("/orders", json={"total": 7})
            assert made.status_code == 201, made.text
            return str(made.json()["invoice_execution"])

    execution_id = asyncio.run(order())
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES), "ORDERS_DSN": dsn}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [FENCEPOST, "worker", "fastapi_orders:jobs", "--db", dsn],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with fencepost.connect(dsn) as store:
            deadline = time.monotonic() + 30
            while store.get(execution_id).state is not State.SUCCEEDED:
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                time.sleep(0.1)
            order_id = store.get(execution_id).inputs["order_id"]
            assert store.get(execution_id).result == {"invoiced": order_id}
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()

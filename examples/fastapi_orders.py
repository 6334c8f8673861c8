"""FastAPI and fencepost: the store opened by the lifespan, a job enqueued in the route's
own transaction.

``POST /orders`` inserts an order row and submits its ``send-invoice`` job in ONE
PostgreSQL transaction: both are committed together, or neither is (an order whose
total is refused by the table's CHECK leaves no job behind, and no worker is woken).
Run it with::

    ORDERS_DSN=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/uvicorn --app-dir examples fastapi_orders:app

and a worker for the job beside it::

    PYTHONPATH=examples .venv/bin/fencepost worker fastapi_orders:jobs --db "$ORDERS_DSN"

An order over the review limit is refused after its job was submitted: the route
raises inside the transaction, so the order and its job are rolled back together.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from psycopg import errors
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

import fencepost

DSN = os.environ.get("ORDERS_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REVIEW_LIMIT = 1_000_000  #: orders above this total wait for a human (refused here)

#: The application's own tables (a real application has its migrations for these).
SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    total  numeric NOT NULL CHECK (total > 0)
)
"""

jobs = fencepost.App(DSN)  #: the worker's side: `fencepost worker fastapi_orders:jobs`


@jobs.job("send-invoice")
def send_invoice(order_id: int) -> dict[str, int]:
    """Stands in for rendering and mailing the invoice of ``order_id``."""
    return {"invoiced": order_id}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the AsyncStore and the application's pool at start-up; close both at shutdown."""
    pool = AsyncConnectionPool(DSN, open=False)
    await pool.open()
    async with pool.connection() as conn:
        await conn.execute(SCHEMA)
    async with fencepost.connect_async(DSN) as store:
        app.state.store, app.state.pool = store, pool
        try:
            yield
        finally:
            await pool.close()


app = FastAPI(lifespan=lifespan)


class Order(BaseModel):
    total: float


@app.post("/orders", status_code=201)
async def create_order(order: Order, request: Request) -> dict[str, object]:
    """Insert the order and enqueue its invoice in the same transaction."""
    store: fencepost.AsyncStore = request.app.state.store
    pool: AsyncConnectionPool = request.app.state.pool
    try:
        # pool.connection() commits when the block ends, rolls back if it raises.
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "INSERT INTO orders (total) VALUES (%s) RETURNING id", [order.total]
            )
            row = await cursor.fetchone()
            assert row is not None
            order_id = int(row[0])
            execution = await store.submit(
                "send-invoice",
                {"order_id": order_id},
                idempotency_key=f"invoice:{order_id}",
                connection=conn,
            )
            if order.total > REVIEW_LIMIT:  # raising here rolls back the order AND its job
                raise HTTPException(422, f"total: over {REVIEW_LIMIT}, needs a review")
    except errors.CheckViolation:
        raise HTTPException(422, "total: must be greater than 0") from None
    return {"order": order_id, "invoice_execution": execution.id}

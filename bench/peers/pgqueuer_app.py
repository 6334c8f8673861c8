"""PgQueuer in the peer benchmark: the consumer factory, and its bulk enqueue.

Written as PgQueuer's quick start (docs/getting-started/quickstart.md) writes a
consumer: an ``@asynccontextmanager`` factory that opens one ``asyncpg.connect()``
(configured by the libpq environment), wraps it with
``PgQueuer.from_asyncpg_connection`` and yields it, with one async entrypoint. (The
README's older form, a coroutine returning ``PgQueuer``, is refused by 1.6.0: "Factory
must return an async context manager".) Installed with ``pgq install`` and run with its
CLI, defaults untouched (batch size 10; ``--batch-size 100`` for the row labelled
tuned)::

    PYTHONPATH=bench/peers bench/peers/.venvs/pgqueuer/bin/pgq run pgqueuer_app:main

Jobs are enqueued by ``bench/peers/.venvs/pgqueuer/bin/python bench/peers/enqueue.py
pgqueuer FIRST COUNT [--lead SECONDS]``: ``Queries.enqueue`` with lists (its batch
insert, one statement per call) in batches of 1,000; the payload is the job's id. A
burst's ``execute_after`` is T minus the moment each batch is sent (PgQueuer adds it to
the server's ``NOW()``, on this same machine).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import asyncpg
from peers_common import chunks, progress, record
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    connection = await asyncpg.connect()
    pgq = PgQueuer.from_asyncpg_connection(connection)

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        """Record the start, nothing else."""
        started = time.time()
        record(int(job.payload or b"-1"), started)

    try:
        yield pgq
    finally:
        await connection.close()


async def _enqueue(first: int, count: int, lead: float | None) -> None:
    connection = await asyncpg.connect()
    try:
        queries = Queries(AsyncpgDriver(connection))
        at = progress.begin(lead)
        for ids in chunks(first, count):
            after = None if at is None else [timedelta(seconds=at - time.time())] * len(ids)
            await queries.enqueue(
                ["noop"] * len(ids), [str(i).encode() for i in ids], [0] * len(ids), after
            )
            progress.add(len(ids))
    finally:
        await connection.close()


def enqueue(first: int, count: int, lead: float | None) -> None:
    asyncio.run(_enqueue(first, count, lead))

"""The AsyncStore's submit_many beside the sync store's, and how soon a waiter wakes.

Run::

    .venv/bin/python bench/async_wait.py [--db postgresql://postgres@127.0.0.1:5432/test]
        [--n 20000] [--repeat 3] [--wakes 100]

Both on PostgreSQL, each in private schemas (bench/pg_common.py), at the defaults a
user gets from ``fencepost.connect(url)`` and ``fencepost.connect_async(url)``:

* **submit_many**: ``--n`` executions in batches of 1,000 through the sync store, then
  through the AsyncStore (``await store.submit_many(batch)`` one batch after the other),
  each on a fresh schema, interleaved ``--repeat`` times (who goes first alternates);
  median rates and their ratio (async / sync).
* **wake-up**: ``--wakes`` rounds of: submit one execution, a waiter starts
  ``wait(id)``, the execution is claimed and completed through another store, and the
  waiter's wake-up is timed from the moment ``complete`` returned (its commit, which
  sends the notification). Median, p95 and max, for ``Store.wait`` (a thread) and
  ``AsyncStore.wait`` (a coroutine), each woken by the store's one LISTEN connection.

It prints figures; it asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from typing import Any

import fencepost
from pg_common import Run, Server, batches, median_rate, progress, spread

DEFAULT_DB = "postgresql://postgres@127.0.0.1:5432/test"


def submit_sync(url: str, n: int) -> Run:
    todo = batches(n)
    with fencepost.connect(url) as store:
        started = time.perf_counter()
        for batch in todo:
            store.submit_many(batch)
        return Run(n, time.perf_counter() - started)


def submit_async(url: str, n: int) -> Run:
    todo = batches(n)

    async def go() -> Run:
        async with fencepost.connect_async(url) as store:
            await store.submit_many(todo[0][:1])  # opens the async pool (untimed)
            started = time.perf_counter()
            for batch in todo:
                await store.submit_many(batch)
            return Run(n, time.perf_counter() - started)

    return asyncio.run(go())


def _complete(worker: Any, execution_id: str) -> float:
    """Claim and complete ``execution_id``; the instant ``complete`` returned."""
    [lease] = worker.claim("bench", ids=[execution_id], ttl=30)
    worker.complete(lease, {"ok": True})
    return time.perf_counter()


def wakes_sync(url: str, rounds: int) -> list[float]:
    out: list[float] = []
    with fencepost.connect(url) as store, fencepost.connect(url) as worker:
        for _ in range(rounds):
            execution = store.submit("bench")
            woke: list[float] = []

            def wait(execution_id: str = execution.id, woke: list[float] = woke) -> None:
                store.wait(execution_id, timeout=30)
                woke.append(time.perf_counter())

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.02)  # the waiter is registered and listening
            done = _complete(worker, execution.id)
            waiter.join()
            out.append(woke[0] - done)
    return out


def wakes_async(url: str, rounds: int) -> list[float]:
    async def go() -> list[float]:
        out: list[float] = []
        with fencepost.connect(url) as worker:
            async with fencepost.connect_async(url) as store:
                for _ in range(rounds):
                    execution = await store.submit("bench")
                    waiting = asyncio.ensure_future(store.wait(execution.id, timeout=30))
                    await asyncio.sleep(0.02)
                    done = await asyncio.to_thread(_complete, worker, execution.id)
                    await waiting
                    out.append(time.perf_counter() - done)
        return out

    return asyncio.run(go())


def _summary(samples: list[float]) -> str:
    ms = sorted(1000 * s for s in samples)
    p95 = ms[max(0, round(0.95 * len(ms)) - 1)]
    return f"median {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms   max {ms[-1]:6.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wakes", type=int, default=100)
    args = parser.parse_args()
    with Server(args.db, "async").session() as server:
        for line in server.describe():
            print(line)
        runs: dict[str, list[Run]] = {"sync": [], "async": []}
        for i in range(args.repeat):
            order = [("sync", submit_sync), ("async", submit_async)]
            for key, measure in order if i % 2 == 0 else order[::-1]:
                schema = server.new_schema(f"{key}{i}")
                progress(f"submit_many {key} (run {i + 1} of {args.repeat})")
                runs[key].append(measure(server.url(schema), args.n))
                server.drop(schema)
        sync_rate, async_rate = median_rate(runs["sync"]), median_rate(runs["async"])
        print(f"\nsubmit_many, {args.n:,} executions in batches of 1,000 (median of {args.repeat})")
        print(f"  sync store   {spread(runs['sync'])} /s")
        print(f"  AsyncStore   {spread(runs['async'])} /s")
        print(f"  async / sync {async_rate / sync_rate:.2f}x")
        print(f"\nwake-up after the completing commit, {args.wakes} rounds each")
        for key, measure_wakes in (("Store.wait", wakes_sync), ("AsyncStore.wait", wakes_async)):
            schema = server.new_schema(key.split(".")[0].lower())
            progress(f"wakes {key}")
            print(f"  {key:<16} {_summary(measure_wakes(server.url(schema), args.wakes))}")
            server.drop(schema)


if __name__ == "__main__":
    main()

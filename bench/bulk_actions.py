"""A bulk replay of 100,000 dead letters while a worker keeps claiming: what it costs the claims.

Run by hand::

    .venv/bin/python bench/bulk_actions.py [--n 100000] [--batch 1000] [--idle 20]
    .venv/bin/python bench/bulk_actions.py --db sqlite:///PATH
    .venv/bin/python bench/bulk_actions.py \
        --db 'postgresql://postgres@127.0.0.1:5432/test?schema=fpbench_bulk'

Without ``--db``, a SQLite file in a temporary directory. On PostgreSQL the schema the
URL names is dropped and made again (by fencepost's migrations), and dropped at the end;
a SQLite file is made afresh (an existing one is refused).

Setup (untimed): one dead letter (job ``dead``, queue ``replayed``) is submitted,
claimed and failed through the store, then copied ``--n`` times in SQL (its row, its
payload row and its audit rows) with ids of its own millisecond.

Timed: a worker process submits its own work (job ``fresh``, queue ``work``, 500 a
second from a feeder thread) and claims it (``claim(limit=16, queues=["work"])``, then
``complete_many``), timing every claim call: first ``--idle`` seconds alone, then while
the main process replays every dead letter with ``Store.act("replay", filter={"job":
"dead"}, limit=--batch)``, batch after batch until ``next_cursor`` is None (each batch
many transactions of ``Store.bulk_group`` executions, 5 on SQLite and 50 on PostgreSQL,
each followed by a pause as long as it took, on SQLite at least 5 ms), then ``--idle``
seconds alone again. The worker claims from its own queue: the replayed executions (due
now, in another queue) must not lengthen its claims by being there, during the replay or
after it (on PostgreSQL that rests on two things: a claim of one queue walks only that
queue's index entries, and a bulk action refreshes the planner's statistics as it goes).

Reported: the claim latency p50 / p99 / max idle, during the replay and after it, the
p99 ratio (the target is at most 2x), the replay's duration and rate, and the checks
(every dead letter SCHEDULED, every fresh execution SUCCEEDED). Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import fencepost

# -- seeding: one dead letter, copied in SQL ----------------------------------------------

#: (table, id column) the copies are made of, in this order.
_TABLES = (("executions", "id"), ("execution_data", "execution_id"), ("transitions", None))
_TRANSITION_COLUMNS = "event, from_state, to_state, epoch, actor, reason, at"


def template(url: str) -> str:
    """One dead letter made through the store; its id."""
    with fencepost.connect(url) as store:
        dead = store.submit("dead", {"n": 1}, queue="replayed", max_attempts=1)
        (lease,) = store.claim("setup", queues=["replayed"])
        store.fail(lease, "downstream was down", retryable=False)
        return dead.id


def seed_sqlite(path: Path, count: int, original: str) -> None:
    prefix = original[:23]
    with sqlite3.connect(path) as conn:
        for table, id_column in _TABLES:
            if id_column is None:
                columns, values = f"execution_id, {_TRANSITION_COLUMNS}", _TRANSITION_COLUMNS
                where = "execution_id"
            else:
                names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
                rest = ", ".join(c for c in names if c != id_column)
                columns, values, where = f"{id_column}, {rest}", rest, id_column
            conn.execute(
                f"""WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq
                    WHERE n < :count)
                INSERT INTO {table} ({columns})
                SELECT printf('%s-%012x', :prefix, seq.n), {values}
                FROM seq, {table} WHERE {table}.{where} = :template""",
                {"count": count, "prefix": prefix, "template": original},
            )
        conn.execute("ANALYZE")


def seed_postgres(conninfo: str, schema: str, count: int, original: str) -> None:
    import psycopg

    prefix = original[:23]
    with psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}") as conn:
        for table, id_column in _TABLES:
            if id_column is None:
                columns, values = f"execution_id, {_TRANSITION_COLUMNS}", _TRANSITION_COLUMNS
                where = "execution_id"
            else:
                names = [
                    row[0]
                    for row in conn.execute(
                        "SELECT column_name FROM information_schema.columns"
                        " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
                        (schema, table),
                    )
                ]
                rest = ", ".join(c for c in names if c != id_column)
                columns, values, where = f"{id_column}, {rest}", rest, id_column
            conn.execute(
                f"""INSERT INTO {table} ({columns})
                SELECT (%(prefix)s || '-' || lpad(to_hex(n), 12, '0'))::uuid, {values}
                FROM generate_series(1, %(count)s) AS n, {table} AS t
                WHERE t.{where} = %(template)s::uuid""",
                {"count": count, "prefix": prefix, "template": original},
            )
        for table, _ in _TABLES:
            conn.execute(f"VACUUM ANALYZE {table}")


# -- the worker ----------------------------------------------------------------------------


def worker(url: str, stop: Any, ready: Any, results: Any) -> None:
    """Feed 500 executions/s into queue ``work`` and claim+complete them, timing each claim."""
    store = fencepost.connect(url)
    feeding = threading.Event()

    def feed() -> None:
        while not feeding.is_set():
            store.submit_many([{"job": "fresh", "queue": "work"}] * 50)
            time.sleep(0.1)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    samples: list[tuple[float, float]] = []
    ready.set()
    while not stop.is_set():
        started = time.perf_counter()
        leases = store.claim("bench", limit=16, queues=["work"])
        samples.append((time.time(), time.perf_counter() - started))
        if leases:
            store.complete_many([(lease, None) for lease in leases])
        else:
            time.sleep(0.005)
    feeding.set()
    feeder.join()
    while leases := store.claim("bench", limit=256, queues=["work"]):  # what the feeder left
        store.complete_many([(lease, None) for lease in leases])
    results.put(samples)
    store.close()


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    return (
        f"{statistics.median(ordered) * 1000:,.1f} / {p99(ordered) * 1000:,.1f} / "
        f"{ordered[-1] * 1000:,.1f} ms ({len(ordered):,} claims)"
    )


def replay_all(url: str, batch: int) -> tuple[int, int, int]:
    """Every dead letter replayed in batches; (done, skipped, batches)."""
    done = skipped = batches = 0
    cursor: str | None = None
    with fencepost.connect(url) as store:
        while True:
            result = store.act(
                "replay", filter={"job": "dead"}, actor="bench", limit=batch, after=cursor
            )
            done, skipped, batches = done + result.done, skipped + result.skipped, batches + 1
            cursor = result.next_cursor
            if cursor is None:
                return done, skipped, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="dead letters to replay")
    parser.add_argument("--batch", type=int, default=1000, help="Store.act's limit")
    parser.add_argument(
        "--idle", type=float, default=20.0, help="seconds of claims alone, before and after"
    )
    parser.add_argument("--db", help="sqlite:///PATH or postgresql://...?schema=NAME")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fencepost-bulk-") as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'bulk.db'}"
        drop = prepare(url, args.n)
        try:
            run(url, args)
        finally:
            drop()


def prepare(url: str, count: int) -> Any:
    """The store ``url`` names, fresh, holding ``count`` dead letters; a function undoing it."""
    print(f"  .. preparing {count:,} dead letters", file=sys.stderr, flush=True)
    if url.startswith(("postgresql://", "postgres://")):
        import psycopg

        from fencepost.store.postgres.connection import split_url

        conninfo, own = split_url(url)
        schema = own.get("schema")
        if not schema:
            raise SystemExit("--db: name the schema the benchmark makes and drops: ?schema=NAME")

        def drop() -> None:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        drop()
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        seed_postgres(conninfo, schema, count, template(url))
        return drop
    path = Path(url.removeprefix("sqlite:///"))
    if path.exists():
        raise SystemExit(f"--db: {path} exists; the benchmark makes its own file")
    seed_sqlite(path, count, template(url))
    return lambda: None


def run(url: str, args: argparse.Namespace) -> None:
    ctx = mp.get_context("spawn")
    stop, ready, results = ctx.Event(), ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=worker, args=(url, stop, ready, results))
    proc.start()
    ready.wait(60)
    time.sleep(args.idle)
    started = time.time()
    done, skipped, batches = replay_all(url, args.batch)
    ended = time.time()
    time.sleep(args.idle)
    stop.set()
    samples = results.get(timeout=300)
    proc.join(60)
    with fencepost.connect(url) as store:
        dead = store.count_by_state(job="dead")
        fresh = store.count_by_state(job="fresh")
    idle = [lat for at, lat in samples if at < started]
    during = [lat for at, lat in samples if started <= at <= ended]
    after = [lat for at, lat in samples if at > ended]
    took = ended - started
    backend = "PostgreSQL" if url.startswith("postgres") else "SQLite"
    print(f"# {backend}: a bulk replay of {args.n:,} dead letters beside a claiming worker")
    print()
    print(f"command: {' '.join(sys.argv)}")
    print(f"settings: batch {args.batch:,}, {args.idle:g} s idle first, worker at 500/s")
    print()
    print("| measure | figure |")
    print("|---|---:|")
    print(f"| claim latency idle, p50 / p99 / max | {summary(idle)} |")
    print(f"| claim latency during the replay, p50 / p99 / max | {summary(during)} |")
    print(f"| claim latency after it, p50 / p99 / max | {summary(after)} |")
    ratio = p99(during) / p99(idle)
    print(f"| p99 during / p99 idle (target <= 2x) | {ratio:,.2f}x |")
    print(
        f"| the replay: {done:,} replayed, {skipped:,} skipped, {batches:,} batches | "
        f"{took:,.1f} s ({done / took:,.0f} executions/s) |"
    )
    waiting = {s.value: n for s, n in dead.items() if n}
    finished = {s.value: n for s, n in fresh.items() if n}
    print(f"| dead letters by state after / fresh work by state | {waiting} / {finished} |")


if __name__ == "__main__":
    main()

"""Claim+complete at batch 256 on PostgreSQL under two conditions: history, idle transaction.

Run by hand::

    .venv/bin/python bench/drain_conditions.py --db postgresql://USER@HOST:PORT/DB
        [--history 5000000] [--n 50000] [--repeat 3] [--only history|idle]

Both measure the same drain as ``store_throughput.py`` at batch 256 (one process,
``claim(limit=256)`` then ``complete_many`` until nothing is due), in private
schemas made by fencepost's migrations and dropped at the end.

History: the same drain of ``--n`` due executions in a schema that also holds
``--history`` finished executions, and in an empty schema. The history is made in
SQL (INSERT ... SELECT FROM generate_series, in chunks, progress on stderr): per
execution one ``executions`` row (SUCCEEDED, attempt 1, epoch 1, spread over the
past 30 days, 16 job names, 64 buckets, every 4th with an idempotency key), one
``execution_data`` row (small inputs, result ``{"ok": true}``) and three
``transitions`` (SUBMITTED, CLAIMED, COMPLETED), as fencepost itself writes them.
Ids are time-ordered UUIDv7-shaped values, as fencepost makes them. Then VACUUM
ANALYZE. Each run submits ``--n`` executions through fencepost (untimed), runs
VACUUM ANALYZE on both schemas (as autovacuum would, so that both runs start
from the same kind of tables; the empty side is a fresh schema each run) and
times the drain. The history grows by ``--n`` finished executions per run.

Idle in transaction: the drain on a fresh copy of ``--n`` due executions, while
another connection holds a transaction open and idle for the whole drain
(``BEGIN; SELECT txid_current();`` and nothing more), against the same drain
without it. The open transaction holds back the xmin horizon, so nothing the
drain leaves dead can be pruned or marked dead in indexes while it runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

import pg_common as pg

TARGET_HISTORY = 0.20  # history may cost at most 20% of the empty-schema figure

HISTORY_CHUNK = 250_000
# One chunk of history: executions, their data and three transitions each, for
# i in [first, last]. Execution i finished at origin + i * step; its id is a
# UUIDv7 of that instant (48-bit ms, version 7, 12-bit counter, variant, md5 bits).
HISTORY_SQL = """
WITH s AS (
    SELECT i, t.at,
           (lpad(to_hex((extract(epoch FROM t.at) * 1000)::bigint), 12, '0') || '7'
            || lpad(to_hex(i %% 4096), 3, '0') || to_hex(8 + i %% 4)
            || substr(md5(i::text), 1, 15))::uuid AS id
    FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i,
         LATERAL (SELECT %(origin)s::timestamptz + i * %(step)s::interval AS at) AS t
),
hot AS (
    INSERT INTO executions (
        id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
        lease_owner, lease_until, timeout, idempotency_key, request_hash, schedule_id,
        slot, bucket, bucket_key, created_at, updated_at, planned_at
    )
    SELECT id, 'job-' || i %% 16, NULL, 'SUCCEEDED', at, 0, 1, 3, 1,
           NULL, NULL, NULL,
           CASE WHEN i %% 4 = 0 THEN 'order-' || i END,
           CASE WHEN i %% 4 = 0 THEN md5('request-' || i) END,
           NULL, NULL, (i %% 64)::integer, NULL, at, at + interval '40 ms', at
    FROM s
),
cold AS (
    INSERT INTO execution_data (execution_id, inputs, result)
    SELECT id, jsonb_build_object('n', i, 'customer', 'c' || i %% 1000), '{"ok": true}'
    FROM s
)
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, at)
SELECT s.id, v.event, v.from_state, v.to_state, v.epoch,
       CASE WHEN v.epoch > 0 THEN 'worker-' || s.i %% 8 END, s.at + v.after
FROM s CROSS JOIN (
    VALUES (1, 'SUBMITTED', NULL, 'SCHEDULED', 0, interval '0'),
           (2, 'CLAIMED', 'SCHEDULED', 'RUNNING', 1, interval '10 ms'),
           (3, 'COMPLETED', 'RUNNING', 'SUCCEEDED', 1, interval '40 ms')
) AS v(ord, event, from_state, to_state, epoch, after)
ORDER BY s.id, v.ord
"""

# Sessions of any database holding the xmin horizon back: an open transaction with
# an xid or a snapshot, open for more than a second.
OPEN_TRANSACTIONS_SQL = """
SELECT count(*), coalesce(max(extract(epoch FROM now() - xact_start)), 0)
FROM pg_stat_activity
WHERE pid <> pg_backend_pid()
  AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
  AND xact_start < now() - interval '1 s'
"""


def build_history(server: pg.Server, schema: str, count: int) -> float:
    """Fill ``schema`` with ``count`` finished executions; return the seconds it took."""
    started = time.perf_counter()
    with server.connect(schema) as conn:
        row = conn.execute("SELECT now() - interval '30 days'").fetchone()
        assert row is not None
        origin = row[0]
        step = f"{30 * 86_400 / max(count, 1):.6f} seconds"
        for first in range(0, count, HISTORY_CHUNK):
            last = min(first + HISTORY_CHUNK, count) - 1
            conn.execute(
                HISTORY_SQL, {"first": first, "last": last, "origin": origin, "step": step}
            )
            done = last + 1
            rate = done / (time.perf_counter() - started)
            pg.progress(f"history {done:,} of {count:,} executions ({rate:,.0f}/s)")
    pg.progress("VACUUM ANALYZE of the history")
    server.vacuum_analyze(schema)
    return time.perf_counter() - started


def sizes(server: pg.Server, schema: str) -> str:
    with server.connect(schema) as conn:
        row = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('executions')),"
            " pg_size_pretty(pg_total_relation_size('execution_data')),"
            " pg_size_pretty(pg_total_relation_size('transitions')),"
            " (SELECT count(*) FROM transitions)"
        ).fetchone()
    assert row is not None
    return (
        f"executions {row[0]}, execution_data {row[1]}, transitions {row[2]}"
        f" ({row[3]:,} rows), indexes included"
    )


class OpenTransactions:
    """Notes other sessions with old open transactions: they hold back every schema's vacuum."""

    def __init__(self, server: pg.Server) -> None:
        self.server = server
        self.seen = 0
        self.oldest = 0.0

    def check(self) -> None:
        with self.server.connect() as conn:
            row = conn.execute(OPEN_TRANSACTIONS_SQL).fetchone()
        if row and row[0]:
            self.seen = max(self.seen, int(row[0]))
            self.oldest = max(self.oldest, float(row[1]))


def history(
    server: pg.Server, n: int, size: int, repeat: int, others: OpenTransactions
) -> dict[str, list[pg.Run]]:
    pg.progress(f"building {size:,} finished executions of history")
    big = server.new_schema("history")
    seconds = build_history(server, big, size)
    print(f"history: {size:,} finished executions built in {seconds:.0f} s")
    print(f"  {sizes(server, big)}")
    runs: dict[str, list[pg.Run]] = {"empty": [], "history": []}

    def on_empty(r: int) -> pg.Run:
        schema = server.new_schema(f"empty{r}")
        try:
            return drained(schema)
        finally:
            server.drop(schema)

    def drained(schema: str) -> pg.Run:
        pg.prefill(server.url(schema), n)
        server.vacuum_analyze(schema)
        others.check()
        run = pg.drain_fencepost(server.url(schema), 256)
        if run.count != n:
            raise SystemExit(f"drained {run.count} of {n}")
        return run

    for r in range(repeat):
        sides: list[tuple[str, Callable[[], pg.Run]]] = [
            ("empty", lambda r=r: on_empty(r)),
            ("history", lambda: drained(big)),
        ]
        if r % 2:
            sides.reverse()
        for label, measure in sides:
            pg.progress(f"drain with {label} (run {r + 1} of {repeat})")
            runs[label].append(measure())
    server.drop(big)
    return runs


def idle_in_transaction(
    server: pg.Server, n: int, repeat: int, others: OpenTransactions
) -> dict[str, list[pg.Run]]:
    pg.progress(f"prefilling {n:,} executions through fencepost")
    template = server.new_schema("filled")
    pg.prefill(server.url(template), n)
    runs: dict[str, list[pg.Run]] = {"alone": [], "idle in transaction": []}

    def alone(schema: str) -> pg.Run:
        others.check()
        return pg.drain_fencepost(server.url(schema), 256)

    def beside_idle(schema: str) -> pg.Run:
        others.check()
        with server.connect() as idle:
            idle.execute("BEGIN")
            idle.execute("SELECT txid_current()")
            try:
                return pg.drain_fencepost(server.url(schema), 256)
            finally:
                idle.execute("ROLLBACK")

    for r in range(repeat):
        sides: list[tuple[str, Callable[[str], pg.Run]]] = [
            ("alone", alone),
            ("idle in transaction", beside_idle),
        ]
        if r % 2:
            sides.reverse()
        for label, measure in sides:
            pg.progress(f"drain {label} (run {r + 1} of {repeat})")
            run = pg.timed_on_copy(server, template, "run", measure)
            if run.count != n:
                raise SystemExit(f"drained {run.count} of {n}")
            runs[label].append(run)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", required=True, help="postgresql://user@host:port/db")
    parser.add_argument("--history", type=int, default=5_000_000, help="finished executions")
    parser.add_argument("--n", type=int, default=50_000, help="due executions per drain")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median wins)")
    parser.add_argument("--only", choices=("history", "idle"), default=None)
    args = parser.parse_args(argv)
    if not pg.is_postgres(args.db):
        parser.error("--db takes a postgresql:// URL")
    if args.n < 1 or args.repeat < 1 or args.history < 0:
        parser.error("--n and --repeat must be at least 1, --history at least 0")

    server = pg.Server(args.db, "dc")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("fencepost drain conditions (PostgreSQL)")
    print(f"  python   {platform.python_version()} ({platform.python_implementation()})")
    for line in server.describe():
        print(line)
    print(f"  cpus     {os.cpu_count()} ({platform.machine()}), shared with the server")
    print(f"  load     {load} (1, 5, 15 min averages at start)")
    print(f"  drain    {args.n:,} due executions, claim(limit=256) + complete_many, one process")
    print(f"  figures  median of {args.repeat} runs (min-max), jobs/s")
    print()
    started = time.perf_counter()
    others = OpenTransactions(server)
    verdicts = []
    with server.session():
        if args.only in (None, "history"):
            runs = history(server, args.n, args.history, args.repeat, others)
            empty, full = pg.median_rate(runs["empty"]), pg.median_rate(runs["history"])
            print(f"  {'empty schema':<24}{pg.spread(runs['empty'])}")
            print(f"  {f'{args.history:,} finished':<24}{pg.spread(runs['history'])}")
            cost = 1 - full / empty
            print(f"  history costs {100 * cost:.1f}% of the empty-schema throughput")
            print()
            label = f"history within {TARGET_HISTORY:.0%}"
            verdicts.append((label, f"{100 * cost:.1f}%", cost <= TARGET_HISTORY))
        if args.only in (None, "idle"):
            runs = idle_in_transaction(server, args.n, args.repeat, others)
            alone, idle = (pg.median_rate(runs[k]) for k in ("alone", "idle in transaction"))
            print("idle in transaction: the drain beside a transaction held open and idle")
            print(f"  {'alone':<24}{pg.spread(runs['alone'])}")
            print(f"  {'idle in transaction':<24}{pg.spread(runs['idle in transaction'])}")
            cost = 1 - idle / alone
            print(f"  the open transaction costs {100 * cost:.1f}% of the throughput")
            print()
    if others.seen:
        print(
            f"note: other sessions held transactions open when runs started (up to"
            f" {others.seen}, the oldest open {others.oldest:.0f} s); they hold back"
            " pruning and vacuum in every schema, so every figure paid for them"
        )
    for label, value, goal in verdicts:
        print(f"target {label:<27}{value:>18}  {pg.verdict(goal)}")
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

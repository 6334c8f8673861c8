"""Pruning 1,000,000 finished executions while a worker keeps claiming, on SQLite.

Run by hand::

    .venv/bin/python bench/prune_under_load.py [--n 1000000] [--batch 1000] [--db sqlite:///PATH]

Setup (untimed): one execution is submitted, claimed and completed through the
store; it is copied ``--n`` times in SQL (its row, its payload row and its three
audit rows) with ids of 1970 and ``updated_at`` 30 days ago, then removed. A
claimer process loops ``claim(limit=16)`` + ``complete_many`` on fresh executions
that a feeder thread in the same process submits at 500/s, timing every claim
call. After 5 s of that baseline, ``fencepost prune --older-than 14d --batch N``
runs as a separate process (each batch its own short transaction). Reported: the
claim latency p50 / p99 / max before and during the prune, the prune's duration
and rate, and that every old execution is gone while every fresh one succeeded.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import fencepost

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
DAY_US = 86_400 * 1_000_000

COPY = {
    "executions": """
        WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < :count)
        INSERT INTO executions
        SELECT printf('00000000-0000-7000-8000-%012d', seq.n), {columns_but_id}
        FROM seq, executions WHERE executions.id = :template""",
    "execution_data": """
        WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < :count)
        INSERT INTO execution_data
        SELECT printf('00000000-0000-7000-8000-%012d', seq.n), {columns_but_id}
        FROM seq, execution_data WHERE execution_data.execution_id = :template""",
    "transitions": """
        WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < :count)
        INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor,
                                 reason, at)
        SELECT printf('00000000-0000-7000-8000-%012d', seq.n), event, from_state, to_state,
               epoch, actor, reason, at
        FROM seq, transitions WHERE transitions.execution_id = :template""",
}


def prepare(path: Path, count: int) -> None:
    url = f"sqlite:///{path}"
    with fencepost.connect(url) as store:
        template = store.submit("old").id
        (lease,) = store.claim("setup")
        store.complete(lease, {"ok": True})
    with sqlite3.connect(path) as conn:
        for table, sql in COPY.items():
            id_column = "execution_id" if table != "executions" else "id"
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            rest = ", ".join(c for c in columns if c != id_column)
            conn.execute(sql.format(columns_but_id=rest), {"count": count, "template": template})
        old = int((time.time() - 30 * 86_400) * 1_000_000)
        conn.execute("UPDATE executions SET updated_at = ? WHERE job = 'old'", (old,))
        # The template itself goes: its id says "created today", which no row that
        # finished 30 days ago can have (prune on SQLite walks the time-ordered ids).
        for table, column in (("transitions", "execution_id"), ("execution_data",
                              "execution_id"), ("executions", "id")):  # fmt: skip
            conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (template,))
        conn.execute("ANALYZE")


def claimer(url: str, stop: Any, results: Any) -> None:
    """Feed 500 executions/s and claim+complete them, timing each claim call."""
    store = fencepost.connect(url)
    feeding = threading.Event()

    def feed() -> None:
        while not feeding.is_set():
            store.submit_many([{"job": "fresh"}] * 50)
            time.sleep(0.1)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    samples: list[tuple[float, float]] = []
    while not stop.is_set():
        started = time.perf_counter()
        leases = store.claim("bench", limit=16, jobs=["fresh"])
        samples.append((time.time(), time.perf_counter() - started))
        if leases:
            store.complete_many([(lease, None) for lease in leases])
        else:
            time.sleep(0.005)
    feeding.set()
    feeder.join()
    # Drain what the feeder left, so that every fresh execution ends SUCCEEDED.
    while leases := store.claim("bench", limit=256, jobs=["fresh"]):
        store.complete_many([(lease, None) for lease in leases])
    results.put(samples)
    store.close()


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"{statistics.median(ordered) * 1000:,.1f} / {p99 * 1000:,.1f} / "
        f"{ordered[-1] * 1000:,.1f} ms ({len(ordered):,} claims)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fencepost-prune-") as tmp:
        path = Path(tmp) / "prune.db"
        url = f"sqlite:///{path}"
        print(f"  .. preparing {args.n:,} finished executions", file=sys.stderr)
        prepare(path, args.n)
        ctx = mp.get_context("spawn")
        stop, results = ctx.Event(), ctx.Queue()
        proc = ctx.Process(target=claimer, args=(url, stop, results))
        proc.start()
        time.sleep(5.0)
        prune_started = time.time()
        out = subprocess.run(
            [FENCEPOST, "prune", "--db", url, "--older-than", "14d", "--batch",
             str(args.batch), "--json"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        prune_ended = time.time()
        time.sleep(2.0)
        stop.set()
        samples = results.get(timeout=120)
        proc.join(60)
        pruned = json.loads(out)
        with sqlite3.connect(path) as conn:
            (old_left,) = conn.execute(
                "SELECT count(*) FROM executions WHERE job = 'old'"
            ).fetchone()
            states = dict(
                conn.execute(
                    "SELECT state, count(*) FROM executions WHERE job = 'fresh' GROUP BY state"
                ).fetchall()
            )
    before = [lat for at, lat in samples if at < prune_started]
    during = [lat for at, lat in samples if prune_started <= at <= prune_ended]
    took = prune_ended - prune_started
    print(f"# SQLite, {args.n:,} finished executions, prune batches of {args.batch:,}")
    print()
    print("| measure | figure |")
    print("|---|---:|")
    removed = int(pruned["executions"])
    print(f"| prune (`fencepost prune --older-than 14d`): {removed:,} executions | "
          f"{took:,.1f} s ({removed / took:,.0f} executions/s) |")  # fmt: skip
    print(f"| claim latency before the prune, p50 / p99 / max | {summary(before)} |")
    print(f"| claim latency during the prune, p50 / p99 / max | {summary(during)} |")
    print(f"| old executions left / fresh ones by state | {old_left} / {states} |")


if __name__ == "__main__":
    main()

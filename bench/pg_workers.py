"""Workers on PostgreSQL: throughput of N claiming processes, and lateness of a burst.

Run by hand::

    .venv/bin/python bench/pg_workers.py --db postgresql://USER@HOST:PORT/DB
        [--workers 2] [--n 100000] [--late-n 10000] [--repeat 3] [--only throughput|lateness]

The worker loop is written here, without the runtime (``worker_throughput.py``
measures the runtime): each worker is a process of its own (multiprocessing,
spawn) with its own store, running ``claim(limit=256)`` then ``complete_many``
with no-op handlers (every result is ``{'ok': True}``). It measures the store
under several claimers, not a runtime.

Throughput: ``--n`` executions due now, submitted through fencepost beforehand
(untimed) and copied into a fresh schema per run (then VACUUM ANALYZE); the
workers start together and stop when a claim comes back empty. Total jobs/s is
all jobs over the time from the first start to the last finish.

Lateness: ``--late-n`` executions all due at one instant T, ``--lead`` seconds
after submission starts (on the server's clock, which is the clock that claims
use). The workers poll: claim; when nothing is claimed, sleep 50 ms. Lateness is
the CLAIMED transition's ``at`` minus ``due_at``, read with one SQL query joining
``transitions`` and ``executions``. All schemas are private and dropped at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import fencepost
import pg_common as pg

BATCH = 256
POLL = 0.050
TARGET_JOBS = 5_000
TARGET_P99 = 1.0

LATENESS_SQL = """
SELECT count(*),
       percentile_cont(0.50) WITHIN GROUP (ORDER BY late),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY late),
       max(late), min(late),
       extract(epoch FROM max(at) - min(at))
FROM (
    SELECT extract(epoch FROM t.at - e.due_at) AS late, t.at
    FROM transitions AS t JOIN executions AS e ON e.id = t.execution_id
    WHERE t.event = 'CLAIMED'
) AS claims
"""


@dataclass(frozen=True)
class Report:
    """What one worker process did."""

    owner: str
    jobs: int
    started: float  # time.monotonic(): one clock for every process on Linux
    finished: float
    empty_claims: list[float]  # seconds taken by claims that found nothing


def work(
    url: str,
    owner: str,
    poll: float | None,
    total: int,
    deadline: float,
    start: Any,
    done: Any,
    reports: Any,
) -> None:
    """One worker: claim up to BATCH, complete them all, repeat.

    ``poll`` None: stop at the first empty claim (a drain). Otherwise sleep ``poll``
    after an empty claim and stop once ``done`` (shared by all workers) reaches
    ``total``, or at ``deadline``.
    """
    empty: list[float] = []
    jobs = 0
    with fencepost.connect(url) as store:
        start.wait()
        started = time.monotonic()
        while True:
            asked = time.perf_counter()
            leases = store.claim(owner, limit=BATCH, ttl=pg.TTL)
            if leases:
                refused = store.complete_many([(lease, pg.RESULT) for lease in leases])
                if any(r is not None for r in refused):
                    raise SystemExit(f"{owner}: fencepost refused a completion: {refused[:3]}")
                jobs += len(leases)
                with done.get_lock():
                    done.value += len(leases)
                continue
            empty.append(time.perf_counter() - asked)
            if poll is None or done.value >= total or time.monotonic() > deadline:
                break
            time.sleep(poll)
        finished = time.monotonic()
    reports.put(Report(owner, jobs, started, finished, empty))


def run_workers(
    url: str, workers: int, *, poll: float | None, total: int, before_start: Any = None
) -> list[Report]:
    """Start ``workers`` processes, call ``before_start()``, release them together, collect."""
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(workers + 1)
    done = ctx.Value("q", 0)
    reports = ctx.Queue()
    deadline = time.monotonic() + 600
    procs = [
        ctx.Process(
            target=work,
            args=(url, f"worker-{k}", poll, total, deadline, start, done, reports),
            daemon=True,
        )
        for k in range(workers)
    ]
    for p in procs:
        p.start()
    if before_start is not None:
        before_start()
    start.wait(timeout=120)
    out = [reports.get(timeout=900) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise SystemExit(f"a worker exited with {p.exitcode}")
    return out


def throughput(server: pg.Server, template: str, workers: int, expected: int) -> pg.Run:
    schema = server.copy(template, "thr")
    try:
        reports = run_workers(server.url(schema), workers, poll=None, total=expected)
        states = server.count_states(schema)
    finally:
        server.drop(schema)
    jobs = sum(r.jobs for r in reports)
    if jobs != expected or states != {"SUCCEEDED": expected}:
        raise SystemExit(f"drained {jobs} of {expected}; states {states}")
    elapsed = max(r.finished for r in reports) - min(r.started for r in reports)
    return pg.Run(jobs, elapsed)


@dataclass(frozen=True)
class Lateness:
    count: int
    p50: float
    p99: float
    max: float
    min: float
    spread: float  # seconds from the first claim to the last
    empty_claim: float  # median seconds of a claim that found nothing
    lead_left: float  # seconds between the end of submission and T


def lateness(server: pg.Server, run: int, workers: int, n: int, lead: float) -> Lateness:
    schema = server.new_schema(f"late{run}")
    url = server.url(schema)
    left: list[float] = []

    def submit() -> None:
        with server.connect() as conn:
            row = conn.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        due = row[0] + timedelta(seconds=lead)
        pg.prefill(url, n, execute_at=due)
        with server.connect() as conn:
            row = conn.execute("SELECT clock_timestamp()").fetchone()
        assert row is not None
        left.append((due - row[0]).total_seconds())

    try:
        reports = run_workers(url, workers, poll=POLL, total=n, before_start=submit)
        with server.connect(schema) as conn:
            row = conn.execute(LATENESS_SQL).fetchone()
    finally:
        server.drop(schema)
    assert row is not None
    count, p50, p99, worst, best, spread = row
    if count != n or sum(r.jobs for r in reports) != n:
        raise SystemExit(f"claimed {count} of {n}")
    empty = [s for r in reports for s in r.empty_claims]
    return Lateness(
        count=count,
        p50=float(p50),
        p99=float(p99),
        max=float(worst),
        min=float(best),
        spread=float(spread),
        empty_claim=statistics.median(empty) if empty else float("nan"),
        lead_left=left[0],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--db", required=True, help="postgresql://user@host:port/db")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--n", type=int, default=100_000, help="executions per throughput run")
    parser.add_argument("--late-n", type=int, default=10_000, help="executions due at T")
    parser.add_argument("--lead", type=float, default=5.0, help="T = now + LEAD seconds")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median wins)")
    parser.add_argument("--only", choices=("throughput", "lateness"), default=None)
    args = parser.parse_args(argv)
    if not pg.is_postgres(args.db):
        parser.error("--db takes a postgresql:// URL")
    if args.workers < 1 or args.repeat < 1 or args.n < 1 or args.late_n < 1:
        parser.error("--workers, --repeat, --n and --late-n must be at least 1")

    server = pg.Server(args.db, "wt")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("fencepost workers (PostgreSQL)")
    print(f"  python   {platform.python_version()} ({platform.python_implementation()})")
    for line in server.describe():
        print(line)
    print(f"  cpus     {os.cpu_count()} ({platform.machine()}), shared with the server")
    print(f"  load     {load} (1, 5, 15 min averages at start)")
    print(
        f"  workers  {args.workers} processes, each its own store (pool_max={server.pool_max}),"
        f" claim(limit={BATCH}) + complete_many, no-op handlers"
    )
    print(f"  figures  median of {args.repeat} runs (min-max)")
    print()
    started = time.perf_counter()
    verdicts = []
    with server.session():
        if args.only in (None, "throughput"):
            pg.progress(f"prefilling {args.n:,} executions through fencepost")
            template = server.new_schema("filled")
            pg.prefill(server.url(template), args.n)
            runs = []
            for r in range(args.repeat):
                pg.progress(f"throughput run {r + 1} of {args.repeat}")
                runs.append(throughput(server, template, args.workers, args.n))
            rate = pg.median_rate(runs)
            print(f"throughput: {args.n:,} due executions, {args.workers} workers  (jobs/s)")
            print(f"  {pg.spread(runs)}")
            print()
            verdicts.append(
                (
                    f"throughput, {args.workers} processes",
                    f"{rate:,.0f} jobs/s",
                    rate >= TARGET_JOBS,
                )
            )
        if args.only in (None, "lateness"):
            results = []
            for r in range(args.repeat):
                pg.progress(f"lateness run {r + 1} of {args.repeat}")
                results.append(lateness(server, r, args.workers, args.late_n, args.lead))
            print(
                f"lateness: {args.late_n:,} executions due at one instant T, {args.workers}"
                f" workers polling every {POLL * 1000:.0f} ms when idle  (seconds after due_at)"
            )
            print(
                f"  {'run':<5}{'p50':>8}{'p99':>8}{'max':>8}{'first':>8}"
                f"{'burst':>8}{'jobs/s':>9}{'idle claim':>12}{'T-submit':>10}"
            )
            for r, x in enumerate(results):
                print(
                    f"  {r + 1:<5}{x.p50:>8.3f}{x.p99:>8.3f}{x.max:>8.3f}{x.min:>8.3f}"
                    f"{x.spread:>8.2f}{x.count / x.spread:>9,.0f}"
                    f"{x.empty_claim * 1000:>10.1f}ms{x.lead_left:>9.1f}s"
                )
            p50, p99, worst = (
                statistics.median(getattr(x, f) for x in results) for f in ("p50", "p99", "max")
            )
            print(f"  {'med':<5}{p50:>8.3f}{p99:>8.3f}{worst:>8.3f}")
            print(
                "  first: the earliest claim's lateness; burst: seconds from the first claim"
                " to the last, and"
            )
            print(
                "  the claim rate over it; idle claim: median duration of a claim that found"
                " nothing"
            )
            print("  (while waiting for T); T-submit: how long before T submission ended.")
            print()
            verdicts.append(("lateness p99", f"{p99:.3f} s", p99 <= TARGET_P99))
    for label, value, goal in verdicts:
        print(f"target {label:<27}{value:>18}  {pg.verdict(goal)}")
    print(
        f"       (targets: >= {TARGET_JOBS:,} jobs/s with 2 processes; lateness p99 <="
        f" {TARGET_P99:g} s)"
    )
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

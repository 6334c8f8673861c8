"""The history charts over 1,000,000 executions: the roll-up and ``GET /history``.

Run by hand::

    .venv/bin/python bench/history.py --db sqlite:///PATH [--n 1000000] [--repeat 40]
    .venv/bin/python bench/history.py \\
        --db 'postgresql://postgres@127.0.0.1:5432/test?schema=fpbench_history' [...]

Setup (untimed): ``--n`` executions planned evenly over the last day, written in SQL
by bench/slo_report.py's generator for the dialect (the same mix: on time, late,
dead letters, time-outs, throttled, skipped, cancelled; 50 jobs), then spread over
four queues (``q0`` .. ``q3``, by bucket). The database is overwritten.

Timed, on a store whose clock is pinned at the generator's now plus a few seconds
(a ManualClock: the roll-up reads up to ``now - 60 s``):

1. the one-off full roll-up: ``roll_up_history()`` batch after batch (10,000 rows
   each, the default) until caught up: wall time, rows, rows per second, minute rows;
2. an incremental roll-up of one minute's rows: ``--n / 1440`` executions submitted,
   claimed and completed through the store, the clock moved 61 s, one
   ``roll_up_history()``;
3. ``GET /history`` for hour, day and week x (all, one job, one queue), ``--repeat``
   times each, in process (FastAPI's TestClient over the app ``fencepost serve``
   runs, auth off): p50, p95 and max in milliseconds, each request rolling up first
   (nothing left to read) as the service does; and ``GET /history/summary?by=job``.

Nothing here asserts a timing; it prints the figures and the command.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import fencepost
import slo_report  # bench/slo_report.py: the generators
from fencepost.api import create_app
from fencepost.testing import ManualClock

QUEUES_SQL = "UPDATE executions SET queue = 'q' || (bucket % 4)"


def spread_queues(url: str) -> None:
    """Four queues instead of the generator's one."""
    if url.startswith("sqlite"):
        with sqlite3.connect(slo_report.sqlite_path(url), isolation_level=None) as conn:
            conn.execute(QUEUES_SQL)
            conn.execute("ANALYZE")
        conn.close()
        return
    with slo_report._pg_connect(url) as conn:
        conn.execute(QUEUES_SQL)
        conn.execute("VACUUM ANALYZE executions")


def minute_rows(store: Any) -> int:
    """How many minute rows the store holds (the week window's, summed by queue)."""
    return sum(1 for p in store.history(window="week").points if p.succeeded or p.claims)


def full_roll_up(store: Any) -> tuple[float, int, int]:
    started = time.perf_counter()
    rows = batches = 0
    while True:
        done = store.roll_up_history()
        rows += done.executions
        batches += 1
        if done.caught_up:
            return time.perf_counter() - started, rows, batches


def one_minute(store: Any, clock: ManualClock, n: int) -> tuple[float, int]:
    """``n`` executions finished now, then the clock past the grace and one roll-up."""
    for i in range(n):
        store.submit(f"job-{i % 50}", queue=f"q{i % 4}")
    for lease in store.claim("bench", limit=n, ttl=600):
        store.complete(lease, {"ok": True})
    clock.advance(61)
    started = time.perf_counter()
    done = store.roll_up_history()
    return time.perf_counter() - started, done.executions


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(fraction * len(ordered)) - 1))]


def time_requests(client: Any, path: str, params: dict[str, str], repeat: int) -> list[float]:
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path, params=params)
        took.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--db", required=True, help="sqlite:///PATH or postgresql://...?schema=NAME (overwritten)"
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=40, help="requests per variant")
    args = parser.parse_args()
    dialect = slo_report.DIALECTS[args.db.split(":", 1)[0]]
    print(f"command: {' '.join(sys.argv)}")
    sqlite = f", SQLite {sqlite3.sqlite_version}" if args.db.startswith("sqlite") else ""
    print(f"fencepost {fencepost.__version__}{sqlite}")

    started = time.perf_counter()
    dialect.generate(args.db, args.n, 1)
    spread_queues(args.db)
    print(
        f"generated {args.n:,} executions over the last day in "
        f"{time.perf_counter() - started:.1f} s ({dialect.size(args.db)})"
    )

    clock = ManualClock(datetime.now(UTC) + timedelta(seconds=5))
    with fencepost.connect(args.db, clock=clock) as store:
        seconds, rows, batches = full_roll_up(store)
        print(
            f"full roll-up: {seconds:.2f} s, {rows:,} executions in {batches} batches "
            f"({rows / seconds:,.0f}/s)"
        )
        per_minute = max(1, args.n // 1440)
        seconds, rows = one_minute(store, clock, per_minute)
        print(f"incremental roll-up of one minute: {seconds * 1000:.1f} ms, {rows:,} executions")

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from fastapi.testclient import TestClient

        with TestClient(create_app(store)) as client:
            print(f"GET /history, {args.repeat} requests each (ms: p50 / p95 / max)")
            for window in ("hour", "day", "week"):
                for name, extra in (
                    ("all", {}),
                    ("job", {"job": "job-7"}),
                    ("queue", {"queue": "q1"}),
                ):
                    took = time_requests(
                        client, "/history", {"window": window, **extra}, args.repeat
                    )
                    print(
                        f"  {window:>4} {name:>5}: {statistics.median(took):6.1f} / "
                        f"{percentile(took, 0.95):6.1f} / {max(took):6.1f}"
                    )
            for window in ("hour", "day", "week"):
                took = time_requests(
                    client, "/history/summary", {"window": window, "by": "job"}, args.repeat
                )
                print(
                    f"  summary by job, {window:>4}: {statistics.median(took):6.1f} / "
                    f"{percentile(took, 0.95):6.1f} / {max(took):6.1f}"
                )
        day = store.history(window="day")
        print(
            f"the day's chart: {sum(p.succeeded for p in day.points):,} succeeded, "
            f"{sum(p.dead for p in day.points):,} dead, {sum(p.claims for p in day.points):,} "
            f"claims; rolled up to {day.rolled_up_to}"
        )


if __name__ == "__main__":
    main()

"""Schedules at scale on SQLite: one hour of 1,000,000 hourly schedules, and a top-of-minute burst.

Run by hand::

    .venv/bin/python bench/schedules_scale.py [--n 1000000] [--small 100000] [--burst 100000]

* **Materialize one hour**: ``--n`` hourly schedules (``M * * * *``, the minute
  spread over the hour) are created (untimed: one through ``add_schedule``, the
  rest copied from it in SQL), all last planned at one instant T. A
  materializer process whose clock stays at T (``lookahead`` one hour, batches
  of 1,000) stores the hour after T — exactly one execution per schedule — and
  reports its elapsed time and peak RSS. The same is done with ``--small``
  schedules, to show that memory does not grow with the number of schedules.
* **Burst**: ``--burst`` schedules all firing at the same minute (the next whole
  minute at least 90 s ahead), materialized ahead of time; one ``fencepost
  worker`` process (no-op handler, ``--concurrency 256``) claims them when they
  fall due. Claim lateness = the CLAIMED transition's time - ``due_at``, read
  from the database: p50 / p99 / max.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fencepost
from children import child_env
from fencepost.scheduler.materializer import Materializer, MaterializerOptions

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TARGET_SECONDS = 300
TARGET_RSS_MB = 300
TARGET_P99 = 10.0

# Copies the template schedule n - 1 times; the minute of its cron comes from the row number.
COPY_SQL = """
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < :count)
INSERT INTO schedules (
    id, job, job_version, inputs, cron, every_us, timezone, dst_gap, dst_fold, misfire,
    misfire_grace_us, max_catch_up, overlap, start_at, end_at, max_attempts, priority,
    paused, watermark, next_due, materializer, lease_until, request_hash, created_at,
    updated_at, queue
)
SELECT printf('s%08d', seq.n), job, job_version, inputs,
       CASE WHEN :spread THEN (seq.n % 60) || ' * * * *' ELSE cron END,
       every_us, timezone, dst_gap, dst_fold, misfire, misfire_grace_us, max_catch_up,
       overlap, start_at, end_at, max_attempts, priority, paused, watermark, next_due,
       materializer, lease_until, request_hash, created_at, updated_at, queue
FROM seq, schedules WHERE schedules.id = 'template'
"""


def create(path: Path, count: int, cron: str, *, spread: bool) -> None:
    """``count`` schedules of the job ``noop`` in a new database at ``path``."""
    with fencepost.connect(f"sqlite:///{path}") as store:
        store.add_schedule("noop", cron=cron, id="template")
    with sqlite3.connect(path) as conn:
        conn.execute(COPY_SQL, {"count": count - 1, "spread": spread})
        conn.execute("ANALYZE")


class FixedClock:
    """One instant for the whole run: "the next hour" is the same hour for every schedule."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def now_or_none(self) -> datetime:
        return self.at


def materialize_child(url: str, lookahead: float, at: str | None) -> None:
    """In a child process: materialize until nothing is due; print a JSON report."""
    clock = None if at is None else FixedClock(datetime.fromisoformat(at))
    store = fencepost.connect(url, clock=clock)
    materializer = Materializer(
        store, MaterializerOptions(owner="bench", lookahead=lookahead, batch=1000)
    )
    started = time.perf_counter()
    schedules = 0
    while passed := materializer.run_once():
        schedules += passed
    elapsed = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"elapsed": elapsed, "schedules": schedules, "stored": materializer.stored,
                      "rss_mb": rss_mb}))  # fmt: skip


def materialize(path: Path, lookahead: float, at: datetime | None = None) -> dict[str, float]:
    fixed = [] if at is None else ["--at", at.isoformat()]
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            f"sqlite:///{path}",
            "--lookahead",
            str(lookahead),
            *fixed,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    report: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return report


def one_hour(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="fencepost-sched-") as tmp:
        path = Path(tmp) / "s.db"
        create(path, count, "0 * * * *", spread=True)
        # Every schedule was last planned at ``start``, and the materializer's clock stays
        # there: the hour after it holds exactly one slot of each schedule.
        start = datetime.now(UTC).replace(microsecond=0)
        start_us = int(start.timestamp() * 1_000_000)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE schedules SET watermark = ?, next_due = ?", (start_us, start_us))
        report = materialize(path, lookahead=3600, at=start)
        with sqlite3.connect(path) as conn:
            (stored,) = conn.execute("SELECT count(*) FROM executions").fetchone()
        if stored != count:
            raise SystemExit(f"{stored} executions for {count} hourly schedules")
        report["stored"] = stored
        return report


def burst(count: int) -> list[float]:
    now = datetime.now(UTC)
    fire = (now + timedelta(seconds=90)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    with tempfile.TemporaryDirectory(prefix="fencepost-burst-") as tmp:
        path = Path(tmp) / "b.db"
        create(path, count, f"{fire.minute} {fire.hour} * * *", spread=False)
        materialize(path, lookahead=600)
        if datetime.now(UTC) > fire - timedelta(seconds=5):
            raise SystemExit("materializing took too long: the burst minute has passed")
        worker = subprocess.Popen(
            [FENCEPOST, "worker", "noop_app:app", "--db", f"sqlite:///{path}",
             "--concurrency", "256", "--log-level", "WARNING"],
            env=child_env(),
        )  # fmt: skip
        try:
            conn = sqlite3.connect(path)
            while (
                conn.execute(
                    "SELECT count(*) FROM executions WHERE state = 'SUCCEEDED'"
                ).fetchone()[0]
                < count
            ):
                time.sleep(0.5)
            rows = conn.execute(
                "SELECT (t.at - e.due_at) / 1e6 FROM transitions AS t "
                "JOIN executions AS e ON e.id = t.execution_id WHERE t.event = 'CLAIMED'"
            ).fetchall()
            conn.close()
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)
        return sorted(late for (late,) in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--lookahead", type=float, default=3600, help=argparse.SUPPRESS)
    parser.add_argument("--at", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        materialize_child(args.child, args.lookahead, args.at)
        return
    small = one_hour(args.small)
    large = one_hour(args.n)
    lateness = burst(args.burst)
    p50 = statistics.median(lateness)
    p99 = lateness[min(len(lateness) - 1, round(0.99 * (len(lateness) - 1)))]
    print(f"# SQLite, {os.cpu_count()} cores; one materializer process, one worker process")
    print()
    print("| measure | figure | target |")
    print("|---|---:|---|")
    print(
        f"| materialize one hour of {args.n:,} hourly schedules | {large['elapsed']:,.1f} s "
        f"({args.n / large['elapsed']:,.0f} schedules/s) | ≤ {TARGET_SECONDS} s — "
        f"{'met' if large['elapsed'] <= TARGET_SECONDS else '**missed**'} |"
    )
    print(
        f"| materializer peak RSS, {args.small:,} / {args.n:,} schedules | "
        f"{small['rss_mb']:,.0f} / {large['rss_mb']:,.0f} MB | ≤ {TARGET_RSS_MB} MB, flat — "
        f"{'met' if large['rss_mb'] <= TARGET_RSS_MB else '**missed**'} |"
    )
    print(
        f"| {args.burst:,} schedules firing in one minute: claim lateness p50 / p99 / max | "
        f"{p50:,.2f} / {p99:,.2f} / {lateness[-1]:,.2f} s | p99 ≤ {TARGET_P99:.0f} s — "
        f"{'met' if p99 <= TARGET_P99 else '**missed**'} |"
    )


if __name__ == "__main__":
    main()

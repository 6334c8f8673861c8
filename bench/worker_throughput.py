"""One ``fencepost worker`` process with a no-op handler: throughput, burst lateness, idle latency.

Run by hand::

    .venv/bin/python bench/worker_throughput.py [--db sqlite:///PATH[?synchronous=normal] | postgresql://...]
        [--n 20000] [--burst 10000] [--idle 50] [--concurrency 256] [--repeat 3]

Each run uses a fresh database (a new SQLite file in a temporary directory, or a
private PostgreSQL schema) and one real worker process (the ``fencepost worker``
command running ``bench/noop_app.py``), which is stopped with SIGTERM at the end.
The no-op handler returns ``time.time()`` when it starts; that result is how
start times are read back.

* **Throughput**: ``--n`` executions due now are submitted (untimed) before the
  worker starts. jobs/s = n / (last COMPLETED transition - first CLAIMED
  transition), both stamped by the store; the worker's start-up is not counted.
* **Burst lateness**: ``--burst`` executions all due at one instant T, submitted
  while the worker idles; lateness = handler start - T. p50 / p99 / max.
* **Idle latency**: ``--idle`` times, one execution due now is submitted to the
  idle worker; latency = handler start - the moment ``submit`` was called. Median.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fencepost
from fencepost import Event, State, Store

BENCH = Path(__file__).resolve().parent
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TARGET_JOBS = 10_000
TARGET_P99 = 0.5
TARGET_IDLE = 0.1


@contextmanager
def database(url: str | None) -> Iterator[str]:
    """A fresh, empty database URL for one run (removed afterwards)."""
    if url is None or url.startswith("sqlite"):
        # A fresh file each run; the URL's options are kept (``?synchronous=normal``).
        options = "" if url is None or "?" not in url else "?" + url.split("?", 1)[1]
        with tempfile.TemporaryDirectory(prefix="fencepost-bench-") as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}{options}"
        return
    import pg_common as pg

    server = pg.Server(url, "wrk")
    schema = server.new_schema("wrk")
    try:
        yield server.url(schema)
    finally:
        server.drop(schema)


@contextmanager
def worker(url: str, concurrency: int) -> Iterator[subprocess.Popen[bytes]]:
    """A running ``fencepost worker`` process; SIGTERM and wait on exit."""
    proc = subprocess.Popen(
        [
            FENCEPOST,
            "worker",
            "noop_app:app",
            "--db",
            url,
            "--concurrency",
            str(concurrency),
            "--owner",
            "bench",
            "--log-level",
            "WARNING",
        ],
        env={**os.environ, "PYTHONPATH": str(BENCH)},
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def wait_idle(store: Store, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the worker has registered itself (it is then polling)."""
    deadline = time.monotonic() + 30
    while not store.nodes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the worker did not start")
        time.sleep(0.05)
    time.sleep(0.5)


def wait_done(store: Store, n: int, timeout: float = 600) -> None:
    """Wait until nothing is left to run (one small query a poll), then check the count."""
    deadline = time.monotonic() + timeout
    while store.query(state=["SCHEDULED", "RETRY_WAIT", "RUNNING"], limit=1).items:
        if time.monotonic() > deadline:
            raise SystemExit("the worker did not finish in time")
        time.sleep(0.2)
    done = sum(1 for _ in succeeded(store))
    if done != n:
        raise SystemExit(f"{done} of {n} executions succeeded")


def succeeded(store: Store) -> Iterator[fencepost.Execution]:
    after = None
    while True:
        page = store.query(state=State.SUCCEEDED, limit=1000, after=after)
        yield from page.items
        if page.next_cursor is None:
            return
        after = page.next_cursor


def throughput(url: str, n: int, concurrency: int) -> float:
    with database(url) as db, fencepost.connect(db) as store:
        for start in range(0, n, 1000):
            store.submit_many([{"job": "noop"}] * min(1000, n - start))
        with worker(db, concurrency):
            wait_done(store, n)
        first_claim: datetime | None = None
        last_completion: datetime | None = None
        for execution in succeeded(store):
            for t in store.transitions(execution.id):
                if t.event is Event.CLAIMED and (first_claim is None or t.at < first_claim):
                    first_claim = t.at
                if t.event is Event.COMPLETED and (
                    last_completion is None or t.at > last_completion
                ):
                    last_completion = t.at
        if first_claim is None or last_completion is None:
            raise SystemExit("no claims or completions were recorded")
        return n / (last_completion - first_claim).total_seconds()


def burst(url: str, n: int, concurrency: int, lead: float = 4.0) -> list[float]:
    with database(url) as db, fencepost.connect(db) as store, worker(db, concurrency) as proc:
        wait_idle(store, proc)
        due = datetime.now(UTC) + timedelta(seconds=lead)
        for start in range(0, n, 1000):
            store.submit_many([{"job": "noop", "execute_at": due}] * min(1000, n - start))
        if datetime.now(UTC) >= due:
            raise SystemExit("submitting took longer than the lead; raise --lead")
        wait_done(store, n)
        return sorted(float(e.result) - due.timestamp() for e in succeeded(store))  # type: ignore[arg-type]


def idle(url: str, samples: int, concurrency: int) -> list[float]:
    with database(url) as db, fencepost.connect(db) as store, worker(db, concurrency) as proc:
        wait_idle(store, proc)
        latencies = []
        for _ in range(samples):
            asked = time.time()
            eid = store.submit("noop").id
            while (execution := store.get(eid)).state is not State.SUCCEEDED:
                time.sleep(0.002)
            latencies.append(float(execution.result) - asked)  # type: ignore[arg-type]
            # A random pause: a fixed one would line submissions up with the poll phase.
            time.sleep(random.uniform(0.1, 0.3))
        return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="postgresql://... (default: a fresh SQLite file per run)")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--idle", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    backend = "PostgreSQL" if args.db and args.db.startswith("postgres") else "SQLite"
    print(f"# {backend}, one worker process, --concurrency {args.concurrency}, no-op handler")
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, median of {args.repeat} runs"
    )
    rates = [throughput(args.db, args.n, args.concurrency) for _ in range(args.repeat)]
    bursts = [burst(args.db, args.burst, args.concurrency) for _ in range(args.repeat)]
    idles = [idle(args.db, args.idle, args.concurrency) for _ in range(args.repeat)]
    p50 = statistics.median(percentile(b, 0.50) for b in bursts)
    p99 = statistics.median(percentile(b, 0.99) for b in bursts)
    worst = statistics.median(max(b) for b in bursts)
    idle_median = statistics.median(statistics.median(i) for i in idles)
    rate = statistics.median(rates)
    print()
    print("| measure | figure | target |")
    print("|---|---:|---|")
    print(
        f"| throughput, {args.n:,} executions | {rate:,.0f} jobs/s "
        f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}) | ≥ {TARGET_JOBS:,} jobs/s — "
        f"{'met' if rate >= TARGET_JOBS else '**missed**'} |"
    )
    print(
        f"| {args.burst:,} due at one instant: lateness p50 / p99 / max | "
        f"{p50 * 1000:,.0f} / {p99 * 1000:,.0f} / {worst * 1000:,.0f} ms | p99 ≤ "
        f"{TARGET_P99 * 1000:.0f} ms — {'met' if p99 <= TARGET_P99 else '**missed**'} |"
    )
    print(
        f"| idle worker, one execution due now: start latency, median of {args.idle} | "
        f"{idle_median * 1000:,.1f} ms | ≤ {TARGET_IDLE * 1000:.0f} ms — "
        f"{'met' if idle_median <= TARGET_IDLE else '**missed**'} |"
    )


if __name__ == "__main__":
    main()

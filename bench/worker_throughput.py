"""One ``fencepost worker`` process with a no-op handler: throughput, burst lateness, idle latency.

Run by hand::

    .venv/bin/python bench/worker_throughput.py [--db sqlite:///PATH[?synchronous=normal] | postgresql://...]
        [--n 20000] [--burst 10000] [--lead 4] [--idle 50] [--workers 1]
        [--worker-args "--concurrency 256"] [--only throughput|burst|idle] [--repeat 3]

Each run uses a fresh database (a new SQLite file in a temporary directory, or a
private PostgreSQL schema) and ``--workers`` real worker processes (the
``fencepost worker noop_app:app --db URL`` command of the README's quick start,
with nothing else unless ``--worker-args`` adds it: without it the figures are at
the defaults a user gets), stopped with SIGTERM at the end.
The no-op handler returns ``time.time()`` when it starts; that result is how
start times are read back.

* **Throughput**: ``--n`` executions due now are submitted (untimed) before the
  worker starts. jobs/s = n / (last COMPLETED transition - first CLAIMED
  transition), both stamped by the store; the worker's start-up is not counted.
* **Burst lateness**: ``--burst`` executions all due at one instant T, submitted
  while the worker idles; lateness = handler start - T. p50 / p99 / max.
* **Idle latency**: ``--idle`` times, one execution due now is submitted to the
  idle worker; latency = handler start - the moment ``submit`` was called. Median.
  Also the idle worker's CPU: its user+system time over ten idle seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shlex
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
from children import child_env
from fencepost import Event, State, Store

BENCH = Path(__file__).resolve().parent
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TARGET_JOBS = 20_000  # SQLite, one worker at its defaults
TARGET_P99 = 0.5  # 10,000 due at one instant; 5 s for 100,000
TARGET_IDLE = 0.05


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
def workers(url: str, count: int, extra: list[str]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` running ``fencepost worker`` processes; SIGTERM and wait on exit."""
    procs = [
        subprocess.Popen(
            [
                FENCEPOST,
                "worker",
                "noop_app:app",
                "--db",
                url,
                *extra,
                "--owner",
                f"bench-{i}",
                "--log-level",
                "WARNING",
            ],
            env=child_env(),
        )
        for i in range(count)
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)


def wait_idle(store: Store, procs: list[subprocess.Popen[bytes]]) -> None:
    """Wait until every worker has registered itself (it is then polling)."""
    deadline = time.monotonic() + 30
    while len(store.nodes()) < len(procs):
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise SystemExit("the workers did not start")
        time.sleep(0.05)
    time.sleep(0.5)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def throughput(url: str, n: int, count: int, extra: list[str]) -> float:
    with database(url) as db, fencepost.connect(db) as store:
        for start in range(0, n, 1000):
            store.submit_many([{"job": "noop"}] * min(1000, n - start))
        with workers(db, count, extra):
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


def burst(url: str, n: int, count: int, extra: list[str], lead: float) -> list[float]:
    with database(url) as db, fencepost.connect(db) as store, workers(db, count, extra) as procs:
        wait_idle(store, procs)
        due = datetime.now(UTC) + timedelta(seconds=lead)
        for start in range(0, n, 1000):
            store.submit_many([{"job": "noop", "execute_at": due}] * min(1000, n - start))
        if datetime.now(UTC) >= due:
            raise SystemExit("submitting took longer than the lead; raise --lead")
        wait_done(store, n)
        return sorted(float(e.result) - due.timestamp() for e in succeeded(store))  # type: ignore[arg-type]


def idle(url: str, samples: int, extra: list[str]) -> tuple[list[float], float]:
    """Start latencies of single executions, and CPU seconds the idle worker used in 10 s."""
    with database(url) as db, fencepost.connect(db) as store, workers(db, 1, extra) as procs:
        wait_idle(store, procs)
        before = cpu_seconds(procs[0].pid)
        time.sleep(10)
        idle_cpu = cpu_seconds(procs[0].pid) - before
        latencies = []
        for _ in range(samples):
            asked = time.time()
            eid = store.submit("noop").id
            while (execution := store.get(eid)).state is not State.SUCCEEDED:
                time.sleep(0.002)
            latencies.append(float(execution.result) - asked)  # type: ignore[arg-type]
            # A random pause: a fixed one would line submissions up with the poll phase.
            time.sleep(random.uniform(0.1, 0.3))
        return latencies, idle_cpu


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="postgresql://... (default: a fresh SQLite file per run)")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--lead", type=float, default=4.0, help="burst due at now + LEAD s")
    parser.add_argument("--idle", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--worker-args", default="", help='flags for each worker, e.g. "--concurrency 256"'
    )
    parser.add_argument("--only", choices=("throughput", "burst", "idle"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH))
    extra = shlex.split(args.worker_args)
    backend = "PostgreSQL" if args.db and args.db.startswith("postgres") else "SQLite"
    settings = " ".join(extra) if extra else "defaults (no flags)"
    print(f"# {backend}, {args.workers} worker process(es), {settings}, no-op handler")
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, median of {args.repeat} runs"
    )
    print()
    print("| measure | figure | target |")
    print("|---|---:|---|")
    if args.only in (None, "throughput"):
        rates = [throughput(args.db, args.n, args.workers, extra) for _ in range(args.repeat)]
        rate = statistics.median(rates)
        print(
            f"| throughput, {args.n:,} executions | {rate:,.0f} jobs/s "
            f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}) | ≥ {TARGET_JOBS:,} jobs/s — "
            f"{'met' if rate >= TARGET_JOBS else '**missed**'} |",
            flush=True,
        )
    if args.only in (None, "burst"):
        bursts = [
            burst(args.db, args.burst, args.workers, extra, args.lead) for _ in range(args.repeat)
        ]
        p50 = statistics.median(percentile(b, 0.50) for b in bursts)
        p99s = [percentile(b, 0.99) for b in bursts]
        p99 = statistics.median(p99s)
        worst = statistics.median(max(b) for b in bursts)
        target = TARGET_P99 if args.burst <= 10_000 else 5.0
        print(
            f"| {args.burst:,} due at one instant: lateness p50 / p99 / max | "
            f"{p50 * 1000:,.0f} / {p99 * 1000:,.0f} / {worst * 1000:,.0f} ms "
            f"(p99 runs: {', '.join(f'{x * 1000:,.0f}' for x in p99s)}) | p99 ≤ "
            f"{target * 1000:,.0f} ms — {'met' if p99 <= target else '**missed**'} |",
            flush=True,
        )
    if args.only in (None, "idle"):
        idles = [idle(args.db, args.idle, extra) for _ in range(args.repeat)]
        idle_median = statistics.median(statistics.median(i) for i, _ in idles)
        cpu = statistics.median(c for _, c in idles)
        print(
            f"| idle worker, one execution due now: start latency, median of {args.idle} | "
            f"{idle_median * 1000:,.1f} ms | ≤ {TARGET_IDLE * 1000:.0f} ms — "
            f"{'met' if idle_median <= TARGET_IDLE else '**missed**'} |"
        )
        print(f"| idle worker: CPU over 10 s idle | {cpu * 1000:,.0f} ms ({cpu / 10:.1%}) | |")


if __name__ == "__main__":
    main()

"""The HTTP API's throughput: submissions/s, and a remote worker's jobs/s through the service.

Run by hand (or ``make bench-api``)::

    .venv/bin/python bench/api_throughput.py [--db postgresql://...] [--submits 5000]
        [--threads 4] [--batched 50000] [--batch 500] [--jobs 20000] [--concurrency 256]
        [--quick]

Each part uses a fresh database (a new SQLite file in a temporary directory, or a
private PostgreSQL schema, as ``worker_throughput.py`` makes them) and, where it
talks HTTP, its own ``fencepost serve --workers 0 --no-scheduler`` process on a
free loopback port, with access logs off. The figures are wall-clock times on this
machine, with the client, the service and the database sharing its cores.

* **HTTP floor**: ``GET /healthz`` ``--submits`` times over one keep-alive
  connection: what a request costs before the store, auth and validation.
* **POST /executions**: ``--submits`` single submissions (``{"job": "noop",
  "inputs": {"n": i}}``), each one request over a keep-alive ``httpx.Client``;
  then the same number again from ``--threads`` threads, each with its own
  client. Every answer must be 201.
* **Batch submit**: ``Client.submit_many`` (``POST /executions/batch``) in batches
  of ``--batch``, ``--batched`` executions in all; the requests are built beforehand.
* **Remote worker**: ``--jobs`` no-op executions are put straight into the store
  (untimed); then one ``fencepost worker --server URL noop_app:app`` process starts,
  and the clock runs from just before it starts until no execution is left to run
  (the store is polled every 20 ms), process start-up included. The same is then
  done on another fresh database with ``fencepost worker --db URL``, the worker that
  talks to the database directly: the floor that shows what the HTTP hop costs.
  "first claim -> done" leaves out the start-up: its clock starts when the first
  execution is seen RUNNING or SUCCEEDED.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

import fencepost
import worker_throughput as wt
from children import child_env
from fencepost import State, Store
from fencepost.client import Client

HOST = "127.0.0.1"
READY_TIMEOUT = 30.0
DRAIN_TIMEOUT = 600.0
POLL = 0.02
LEFT_TO_RUN = [State.SCHEDULED, State.RETRY_WAIT, State.RUNNING]


@dataclass(frozen=True)
class Run:
    """``count`` things done in ``seconds``."""

    count: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds


@dataclass(frozen=True)
class Drain:
    """A worker draining the queue: from its process start, and from its first claim."""

    from_start: Run
    from_first_claim: Run


def progress(message: str) -> None:
    """Progress goes to stderr, so that stdout holds only the report."""
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- the service ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def service(db: str) -> Iterator[str]:
    """A ready ``fencepost serve`` over ``db`` with no workers and no scheduler; its URL.

    Stopped with SIGTERM on exit. Its output goes to a temporary file, shown if it
    fails to start.
    """
    port = free_port()
    url = f"http://{HOST}:{port}"
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            [
                wt.FENCEPOST,
                "serve",
                "--db",
                db,
                "--host",
                HOST,
                "--port",
                str(port),
                "--workers",
                "0",
                "--no-scheduler",
                "--log-level",
                "WARNING",  # also turns uvicorn's access log off
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_ready(url, proc, log)
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    with httpx.Client(base_url=url, timeout=2.0) as http:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                output = log.read().decode(errors="replace")
                raise SystemExit(f"the service exited ({proc.returncode}):\n{output}")
            try:
                if http.get("/readyz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise SystemExit(f"the service was not ready within {READY_TIMEOUT:g} s")
            time.sleep(0.05)


def check_scheduled(db: str, expected: int) -> None:
    """The figures count only stored work: the store must hold exactly what was submitted."""
    with fencepost.connect(db) as store:
        got = store.stats().by_state[State.SCHEDULED]
    if got != expected:
        raise SystemExit(f"the store holds {got:,} scheduled executions, expected {expected:,}")


# -- submissions -------------------------------------------------------------------------


def body(i: int) -> dict[str, Any]:
    return {"job": "noop", "inputs": {"n": i}}


def post_each(url: str, numbers: range, start: threading.Barrier | None = None) -> None:
    """``POST /executions`` once per number, over one keep-alive connection."""
    with httpx.Client(base_url=url, timeout=30.0) as http:
        if start is not None:
            start.wait()
        for i in numbers:
            response = http.post("/executions", json=body(i))
            if response.status_code != 201:
                raise SystemExit(f"POST /executions: {response.status_code} {response.text}")


def get_health(url: str, n: int) -> Run:
    """``GET /healthz`` ``n`` times: the HTTP floor (uvicorn, FastAPI, the thread hop, httpx)."""
    with httpx.Client(base_url=url, timeout=30.0) as http:
        started = time.perf_counter()
        for _ in range(n):
            if http.get("/healthz").status_code != 200:
                raise SystemExit("GET /healthz: not 200")
        return Run(n, time.perf_counter() - started)


def submit_single(url: str, n: int) -> Run:
    started = time.perf_counter()
    post_each(url, range(n))
    return Run(n, time.perf_counter() - started)


def submit_threads(url: str, n: int, threads: int) -> Run:
    """``n`` submits shared among ``threads`` threads, timed from their common start."""
    start = threading.Barrier(threads + 1)
    shares = [range(n + t, 2 * n, threads) for t in range(threads)]  # numbers after the 1st n
    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(post_each, url, share, start) for share in shares]
        start.wait()  # every thread has built its client; each connects on its first POST
        started = time.perf_counter()
        for future in futures:
            future.result()
        elapsed = time.perf_counter() - started
    return Run(n, elapsed)


def submit_batches(url: str, n: int, batch: int, first: int) -> Run:
    todo = [
        [body(i) for i in range(lo, min(lo + batch, first + n))]
        for lo in range(first, first + n, batch)
    ]
    with Client(url) as client:
        started = time.perf_counter()
        for requests in todo:
            if len(client.submit_many(requests)) != len(requests):
                raise SystemExit("submit_many returned fewer executions than it was given")
        elapsed = time.perf_counter() - started
    return Run(n, elapsed)


# -- workers -----------------------------------------------------------------------------


@contextmanager
def remote_worker(url: str, concurrency: int) -> Iterator[subprocess.Popen[bytes]]:
    """A running ``fencepost worker --server`` process; SIGTERM and wait on exit."""
    proc = subprocess.Popen(
        [
            wt.FENCEPOST,
            "worker",
            "noop_app:app",
            "--server",
            url,
            "--concurrency",
            str(concurrency),
            "--owner",
            "bench-http",
            "--log-level",
            "WARNING",
        ],
        env=child_env(),
    )
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def prefill(store: Store, n: int) -> str:
    """``n`` no-op executions due now; the id of the first, which the first claim takes."""
    first = store.submit_many([{"job": "noop"}] * min(1000, n))[0].id
    for start in range(1000, n, 1000):
        store.submit_many([{"job": "noop"}] * min(1000, n - start))
    return first


def drain(store: Store, proc: subprocess.Popen[bytes], n: int, first: str, started: float) -> Drain:
    """Poll until nothing is left to run; then check that all ``n`` succeeded.

    The first claim is seen when ``first`` (the earliest due, claimed first) leaves
    SCHEDULED: one lookup by id, where a query for any RUNNING execution would scan
    the whole queue while none matches.
    """
    deadline = started + DRAIN_TIMEOUT
    first_claim: float | None = None
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the worker exited ({proc.returncode}) before it was done")
        now = time.perf_counter()
        if first_claim is None and store.get(first).state is not State.SCHEDULED:
            first_claim = now
        if first_claim is not None and not store.query(state=LEFT_TO_RUN, limit=1).items:
            done_at = now
            break
        if now > deadline:
            raise SystemExit(f"the worker did not finish within {DRAIN_TIMEOUT:g} s")
        time.sleep(POLL)
    done = sum(1 for _ in wt.succeeded(store))
    if done != n:
        raise SystemExit(f"{done:,} of {n:,} executions succeeded")
    return Drain(Run(n, done_at - started), Run(n, done_at - first_claim))


def drain_remote(db_url: str | None, n: int, concurrency: int) -> Drain:
    with wt.database(db_url) as db, fencepost.connect(db) as store:
        first = prefill(store, n)
        with service(db) as url:
            started = time.perf_counter()
            with remote_worker(url, concurrency) as proc:
                return drain(store, proc, n, first, started)


def drain_direct(db_url: str | None, n: int, concurrency: int) -> Drain:
    with wt.database(db_url) as db, fencepost.connect(db) as store:
        first = prefill(store, n)
        started = time.perf_counter()
        with wt.workers(db, 1, ["--concurrency", str(concurrency)]) as procs:
            return drain(store, procs[0], n, first, started)


# -- the report --------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="postgresql://... (default: a fresh SQLite file per part)")
    parser.add_argument("--submits", type=int, default=5_000, help="single POSTs (default 5,000)")
    parser.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--batched", type=int, default=50_000, help="executions batch-submitted")
    parser.add_argument("--batch", type=int, default=500, help="executions per batch (max 1,000)")
    parser.add_argument("--jobs", type=int, default=20_000, help="executions the workers drain")
    parser.add_argument("--concurrency", type=int, default=256, help="worker concurrency")
    parser.add_argument("--quick", action="store_true", help="a small smoke run (tenth sizes)")
    args = parser.parse_args()
    if not 1 <= args.batch <= 1000:
        parser.error(f"--batch: the service takes 1 to 1,000 per batch, got {args.batch}")
    if args.quick:
        args.submits, args.batched, args.jobs = 500, 5_000, 2_000
    backend = "PostgreSQL" if args.db and args.db.startswith("postgres") else "SQLite"
    print(
        f"# {backend}; fencepost serve --workers 0 --no-scheduler; no-op jobs; "
        f"worker --concurrency {args.concurrency}",
        flush=True,
    )
    print(
        f"# {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores shared by the client, the service and the database; one run each",
        flush=True,
    )

    with wt.database(args.db) as db:
        with service(db) as url:
            progress(f"GET /healthz x {args.submits:,}, one thread")
            floor = get_health(url, args.submits)
            progress(f"POST /executions x {args.submits:,}, one thread")
            single = submit_single(url, args.submits)
            progress(f"POST /executions x {args.submits:,}, {args.threads} threads")
            threaded = submit_threads(url, args.submits, args.threads)
            progress(f"Client.submit_many x {args.batched:,} in batches of {args.batch}")
            batched = submit_batches(url, args.batched, args.batch, 2 * args.submits)
        check_scheduled(db, 2 * args.submits + args.batched)
    progress(f"fencepost worker --server: {args.jobs:,} jobs")
    remote = drain_remote(args.db, args.jobs, args.concurrency)
    progress(f"fencepost worker --db: {args.jobs:,} jobs")
    direct = drain_direct(args.db, args.jobs, args.concurrency)

    print()
    print("| measure | figure |")
    print("|---|---:|")
    print(
        f"| `GET /healthz` (no store, no auth: the HTTP floor), 1 client thread | "
        f"{floor.rate:,.0f} requests/s |"
    )
    print(
        f"| `POST /executions`, {args.submits:,} single submits, 1 client thread | "
        f"{single.rate:,.0f} submissions/s |"
    )
    print(
        f"| `POST /executions`, {args.submits:,} single submits, {args.threads} client threads | "
        f"{threaded.rate:,.0f} submissions/s |"
    )
    print(
        f"| `Client.submit_many`, {args.batched:,} in batches of {args.batch} | "
        f"{batched.rate:,.0f} executions/s |"
    )
    for label, run in (
        ("remote worker (`fencepost worker --server`)", remote),
        ("database worker (`fencepost worker --db`, the floor)", direct),
    ):
        print(
            f"| {label}, {args.jobs:,} no-op jobs: start -> done (first claim -> done) | "
            f"{run.from_start.rate:,.0f} ({run.from_first_claim.rate:,.0f}) jobs/s |"
        )
    print(
        f"| remote worker as a share of the database worker | "
        f"{remote.from_start.rate / direct.from_start.rate:.0%} "
        f"({remote.from_first_claim.rate / direct.from_first_claim.rate:.0%}) |"
    )


if __name__ == "__main__":
    main()

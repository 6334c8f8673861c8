"""Flow control: what a limit costs a claim, how closely a rate holds, and fairness between keys.

Run by hand::

    .venv/bin/python bench/flow_limits.py cost [--db URL] [--n 20000] [--batch 16] [--repeat 3]
    .venv/bin/python bench/flow_limits.py fairness [--db URL]
    .venv/bin/python bench/flow_limits.py accuracy [--db URL] [--rate 100] [--seconds 60]

``--db`` is a PostgreSQL URL (a private schema is made and dropped) or omitted for a
SQLite file in a temporary directory (the quick start's default store).

* **cost**: ``n`` due executions drained by one claimer (``claim(limit=batch)`` then
  ``complete_many``) three ways, interleaved per repeat: unlimited; under a rate that
  never binds (``job:noop`` at 1,000,000/s, so every claim takes the limited path and
  spends tokens); and under a per-key concurrency of 2 over 10,000 keys (every
  execution has one of 10,000 ``limit_key`` values). Figures: executions a second,
  and each limited one as a share of the unlimited (the goal: at least 70%).
* **fairness**: one key holds 100,000 due executions and 100 keys hold 10 each, under
  a per-key concurrency of 2; one claimer (batches of 32, completing each batch)
  drains. Figure: seconds until every small key's executions were all claimed (the
  goal: within 5 s), and how many of the big key's ran meanwhile.
* **accuracy**: three ``fencepost worker`` processes (the quick start's command) run a
  no-op job limited to ``--rate``/s for ``--seconds``; the starts are read back from
  the audit trail (CLAIMED transitions). Figures: starts a second over the window
  (the goal: the rate within 5%), and the most starts in any 1-second window against
  ``rate + burst``.

Prints figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import fencepost
from fencepost.domain.states import Event

ROOT = Path(__file__).resolve().parents[1]
JOB = "noop"
#: The ``fencepost`` command of this virtual environment.
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
KEYS = 10_000


@contextmanager
def database(db: str | None) -> Iterator[Callable[[], str]]:
    """Yield a factory of fresh store URLs: SQLite files, or PostgreSQL schemas (dropped after)."""
    made: list[str] = []
    tmp = tempfile.mkdtemp(prefix="fpbench-flow-")
    try:

        def fresh() -> str:
            if db is None:
                return f"sqlite:///{tmp}/{uuid.uuid4().hex}.db"
            schema = f"fpbench_flow_{os.getpid()}_{len(made)}"
            made.append(schema)
            sep = "&" if "?" in db else "?"
            return f"{db}{sep}schema={schema}"

        yield fresh
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if db is not None and made:
            import psycopg

            with psycopg.connect(db, autocommit=True) as conn:
                for schema in made:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def fill(store: fencepost.Store, n: int, keys: Callable[[int], str | None]) -> None:
    for start in range(0, n, 1000):
        store.submit_many(
            [{"job": JOB, "limit_key": keys(i)} for i in range(start, min(n, start + 1000))]
        )


def drain(store: fencepost.Store, batch: int) -> tuple[int, float]:
    """Claim and complete until nothing is claimable: (executions, seconds)."""
    done = 0
    began = time.perf_counter()
    while True:
        leases = store.claim("bench", limit=batch, ttl=60)
        if not leases:
            break
        store.complete_many([(lease, None) for lease in leases])
        done += len(leases)
    return done, time.perf_counter() - began


def cost(args: argparse.Namespace) -> dict[str, float]:
    modes: dict[str, tuple[Callable[[fencepost.Store], None], Callable[[int], str | None]]] = {
        "unlimited": (lambda s: None, lambda i: None),
        "rate": (
            lambda s: s.set_limit(f"job:{JOB}", rate="1000000/s", burst=1_000_000),
            lambda i: None,
        ),
        "per_key": (
            lambda s: s.set_limit(f"job:{JOB}", concurrency=2, per_key=True),
            lambda i: f"tenant-{i % KEYS}",
        ),
    }
    rates: dict[str, list[float]] = {m: [] for m in modes}
    with database(args.db) as fresh:
        for r in range(args.repeat):
            order = list(modes) if r % 2 == 0 else list(reversed(modes))
            for mode in order:
                setup, keys = modes[mode]
                with fencepost.connect(fresh()) as store:
                    setup(store)
                    fill(store, args.n, keys)
                    done, seconds = drain(store, args.batch)
                    if done != args.n:
                        raise SystemExit(f"{mode}: drained {done} of {args.n}")
                    rates[mode].append(done / seconds)
                    print(f"  {mode:9} run {r + 1}: {done / seconds:9,.0f}/s", flush=True)
    medians = {m: statistics.median(v) for m, v in rates.items()}
    print(f"\nclaim+complete, batch {args.batch}, {args.n:,} executions, median of {args.repeat}:")
    for mode, rate in medians.items():
        share = rate / medians["unlimited"]
        print(
            f"  {mode:9} {rate:9,.0f}/s  {share:6.1%} of unlimited  (runs {_spread(rates[mode])})"
        )
    return {f"{m}_{args.batch}": v for m, v in medians.items()}


def fairness(args: argparse.Namespace) -> dict[str, float]:
    with database(args.db) as fresh, fencepost.connect(fresh()) as store:
        store.set_limit(f"job:{JOB}", concurrency=2, per_key=True)
        fill(store, args.big, lambda i: "big")
        fill(store, 100 * 10, lambda i: f"small-{i % 100}")
        small = {e.id for e in _all_small(store)}
        began = time.perf_counter()
        big_ran = 0
        while small:
            leases = store.claim("bench", limit=32, ttl=60)
            for lease in leases:
                if lease.execution_id in small:
                    small.discard(lease.execution_id)
                else:
                    big_ran += 1
            store.complete_many([(lease, None) for lease in leases])
            if time.perf_counter() - began > 120:
                raise SystemExit(f"{len(small)} small-key executions still unclaimed after 120 s")
        seconds = time.perf_counter() - began
    print(
        f"per-key concurrency 2: 1,000 executions over 100 small keys all claimed in "
        f"{seconds:.2f} s beside {args.big:,} due in one key ({big_ran:,} of those ran meanwhile)"
    )
    return {"small_keys_seconds": seconds}


def _all_small(store: fencepost.Store) -> list[fencepost.Execution]:
    out = []
    cursor = None
    while True:
        page = store.query(job=JOB, limit=1000, after=cursor)
        out.extend(e for e in page.items if e.limit_key and e.limit_key.startswith("small-"))
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def accuracy(args: argparse.Namespace) -> dict[str, float]:
    rate, seconds = args.rate, args.seconds
    with database(args.db) as fresh:
        url = fresh()
        with fencepost.connect(url) as store:
            limit = store.set_limit(f"job:{JOB}", rate=f"{rate}/s")
            fill(store, int(rate * (seconds + 15)), lambda i: None)
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'bench'}:{ROOT / 'src'}"}
        workers = [
            subprocess.Popen(
                [FENCEPOST, "worker", "noop_app:app", "--db", url],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(3)
        ]
        try:
            time.sleep(seconds + 10)
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(timeout=60)
        with fencepost.connect(url) as store:
            starts = sorted(_claims(store))
    begin = starts[0] + 5.0  # from 5 s after the first start: every worker is up
    window = [t for t in starts if begin <= t < begin + seconds]
    per_second = len(window) / seconds
    most = _most_in_window(starts, 1.0)
    burst = limit.burst or 0
    print(
        f"rate {rate}/s (burst {burst}) across 3 fencepost workers: {per_second:,.1f} starts/s "
        f"over {seconds} s ({per_second / rate - 1:+.1%}); most in any 1 s window: {most} "
        f"(bound {rate + burst})"
    )
    return {f"accuracy_{rate}": per_second}


def _claims(store: fencepost.Store) -> Iterator[float]:
    cursor = None
    while True:
        page = store.query(job=JOB, limit=1000, after=cursor)
        for e in page.items:
            for t in store.transitions(e.id):
                if t.event is Event.CLAIMED:
                    yield t.at.timestamp()
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _most_in_window(times: list[float], width: float) -> int:
    most, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - width:
            lo += 1
        most = max(most, hi - lo + 1)
    return most


def _spread(values: list[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("what", choices=("cost", "fairness", "accuracy"))
    parser.add_argument("--db", default=None, help="a PostgreSQL URL (default: a SQLite file)")
    parser.add_argument("--n", type=int, default=20_000, help="cost: executions per run")
    parser.add_argument("--batch", type=int, default=16, help="cost: executions per claim")
    parser.add_argument("--repeat", type=int, default=3, help="cost: runs per mode")
    parser.add_argument("--big", type=int, default=100_000, help="fairness: the big key's backlog")
    parser.add_argument("--rate", type=int, default=100, help="accuracy: starts a second")
    parser.add_argument("--seconds", type=int, default=60, help="accuracy: the measured window")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    print(
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{'PostgreSQL' if args.db else 'SQLite'} store"
    )
    figures = {"cost": cost, "fairness": fairness, "accuracy": accuracy}[args.what](args)
    if args.json is not None:
        args.json.write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

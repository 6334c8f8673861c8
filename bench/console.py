"""The console at scale: every list, filter, count, execution page and chart over HTTP.

Run by hand::

    .venv/bin/python bench/console.py --db sqlite:///PATH [--n 1000000] [--days 1] [--repeat 20]
    .venv/bin/python bench/console.py \\
        --db 'postgresql://postgres@127.0.0.1:5432/test?schema=fpbench_console' [...]
    ... --reuse   (time a database a previous run generated, as it is)

Setup (untimed): ``--n`` executions over the last ``--days`` days (default: one day of
the seed's hourly load, a million hourly schedules' occurrences), written in SQL by
the SLO benchmark's generator and shaped for finding by bench/console_find.py (five
queues, limit keys, RUNNING executions under 50 owners, SCHEDULED and RETRY_WAIT
ones, errors on every dead letter and on 3% of the successes, which retried). Then
the history roll-up the service runs in the background catches up once (timed and
printed: a one-off cost of an installation's first start on old data).

Timed: the service (``fencepost serve``'s app, the same store) runs in uvicorn on
loopback; each request the console makes is sent ``--repeat`` times over HTTP with
one client, as the page sends it (lists of 50, newest first, with the filter; the
counts of the filter; an execution's page: the execution, attempts, transitions,
commands and timeline, sent one after the other; the charts of each window, for
all work, one job and one queue). Printed: p50 / p95 / max in milliseconds per
request, then the worst p95 of each kind against the targets (300 ms; 500 ms for
charts). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import console_find
import fencepost
import slo_report
from fencepost.api import create_app
from fencepost.store.base import Store

TARGETS_MS = {"list": 300.0, "count": 300.0, "execution page": 300.0, "chart": 500.0}


def _param(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def params_of(filters: dict[str, Any]) -> list[tuple[str, Any]]:
    """A filter of ``Store.query`` as the page's query string (``state`` repeated)."""
    pairs: list[tuple[str, Any]] = []
    for key, value in filters.items():
        for one in value if isinstance(value, list) else [value]:
            pairs.append((key, _param(one)))
    return pairs


def timed(call: Callable[[], Any], repeat: int) -> list[float]:
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        took.append((time.perf_counter() - started) * 1000)
    return took


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


class Service:
    """The app over ``store`` in uvicorn on a free loopback port, in a thread."""

    def __init__(self, store: Store) -> None:
        config = uvicorn.Config(create_app(store), host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join()


def get(client: httpx.Client, path: str, params: Any = None) -> Any:
    response = client.get(path, params=params)
    if response.status_code != 200:
        raise SystemExit(f"GET {path} {params}: {response.status_code} {response.text[:300]}")
    return response.json()


def sample_ids(client: httpx.Client) -> dict[str, str]:
    """One execution of each kind an operator opens (dead letter, retried success, ...)."""
    found = {}
    for name, params in (
        ("dead letter", {"state": "FAILED"}),
        ("retried, succeeded", {"state": "SUCCEEDED", "error": "reset by peer"}),
        ("running", {"state": "RUNNING"}),
        ("scheduled", {"state": "SCHEDULED"}),
    ):
        items = get(client, "/executions", {**params, "limit": 1, "order": "desc"})["items"]
        if items:
            found[name] = items[0]["id"]
    return found


def measure(base: str, repeat: int) -> dict[str, float]:
    now = datetime.now(UTC)
    worst = dict.fromkeys(TARGETS_MS, 0.0)
    row = "{:44} {:>24}"
    print(row.format("request", "p50 / p95 / max ms"))

    def report(kind: str, name: str, took: list[float]) -> None:
        worst[kind] = max(worst[kind], p95(took))
        figures = f"{statistics.median(took):6.1f} /{p95(took):6.1f} /{max(took):6.1f}"
        print(row.format(f"{kind}: {name}"[:44], figures), flush=True)

    with httpx.Client(base_url=base, timeout=60) as client:
        for name, filters in console_find.cases(now):
            params = params_of(filters)
            listed = [*params, ("limit", 50), ("order", "desc")]
            report("list", name, timed(lambda p=listed: get(client, "/executions", p), repeat))
            report(
                "count", name, timed(lambda p=params: get(client, "/executions/counts", p), repeat)
            )
        for name, execution_id in sample_ids(client).items():

            def page(i: str = execution_id) -> None:
                for tail in ("", "/attempts", "/transitions", "/commands", "/timeline"):
                    get(client, f"/executions/{i}{tail}")

            report("execution page", name, timed(page, repeat))
        for window in ("hour", "day", "week"):
            for scope, extra in (
                ("all", {}),
                ("one job", {"job": "job-7"}),
                ("one queue", {"queue": "q3"}),
            ):
                params = {"window": window, **extra}
                report(
                    "chart",
                    f"{window}, {scope}",
                    timed(lambda p=params: get(client, "/history", p), repeat),
                )
            for by in ("job", "queue"):
                params = {"window": window, "by": by}
                report(
                    "chart",
                    f"{window} summary by {by}",
                    timed(lambda p=params: get(client, "/history/summary", p), repeat),
                )
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", required=True, help="sqlite:///PATH or postgresql://...?schema=NAME"
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--reuse", action="store_true", help="time the database as it is")
    args = parser.parse_args()
    sqlite = args.db.startswith("sqlite:")
    print(f"command: {' '.join(sys.argv)}")
    print(
        f"fencepost {fencepost.__version__}"
        + (f", SQLite {sqlite3.sqlite_version}" if sqlite else "")
    )
    if not args.reuse:
        started = time.perf_counter()
        if sqlite:
            slo_report.generate_sqlite(args.db, args.n, args.days)
            console_find.shape_sqlite(args.db, args.n)
        else:
            slo_report.generate_postgres(args.db, args.n, args.days)
            console_find.shape_postgres(args.db, args.n)
        print(
            f"generated and shaped {args.n:,} executions in {time.perf_counter() - started:.0f} s"
        )
    with fencepost.connect(args.db) as store:
        started = time.perf_counter()
        rolled = 0
        while True:
            step = store.roll_up_history(max_rows=50_000)
            rolled += step.executions
            if step.caught_up:
                break
        print(
            f"history roll-up caught up: {rolled:,} rows in {time.perf_counter() - started:.1f} s"
        )
        with Service(store) as base:
            worst = measure(base, args.repeat)
    print()
    for kind, target in TARGETS_MS.items():
        verdict = "met" if worst[kind] <= target else "MISSED"
        print(f"worst p95 {kind:15} {worst[kind]:7.1f} ms  (target <= {target:.0f} ms: {verdict})")


if __name__ == "__main__":
    main()

"""The console's finding over 1,000,000 executions: every filter, listed and counted.

Run by hand::

    .venv/bin/python bench/console_find.py --db sqlite:///PATH [--n 1000000] [--repeat 7]
    .venv/bin/python bench/console_find.py \\
        --db 'postgresql://postgres@127.0.0.1:5432/test?schema=fpbench_find' [...]
    ... --reuse   (time a database a previous run generated, as it is)

Setup (untimed): ``--n`` executions over the last ``--days`` days, written in SQL by
the SLO benchmark's generator (bench/slo_report.py: mostly SUCCEEDED, 0.5% FAILED,
SKIPPED and CANCELLED ones), then shaped for finding: 5 queues, a limit key on a
tenth of them (300 keys, and 20 executions under the key ``rare``), the newest
5,000 RUNNING under 50 owners, the 20,000 before them SCHEDULED (2,000 of those
RETRY_WAIT, with an error), and an error on every FAILED execution and on 3% of
the SUCCEEDED ones (retried before they succeeded). Vacuumed and analyzed.

Timed: for each filter (alone and in a few pairs), a page of 100 oldest first, one
newest first, and ``count_by_state``, each ``--repeat`` times through the store
(row mapping included); printed as p50 / p95 / max in milliseconds. The target is a
p95 of 300 ms per list and per count. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fencepost
import slo_report
from fencepost.store.base import Store

#: The shaping, in SQLite. Rows are told apart by bucket (n % 64) and job (n % 50).
SQLITE_SHAPE = [
    "UPDATE executions SET queue = 'q' || (bucket % 5)",
    "UPDATE executions SET limit_key = 'tenant-' || "
    "((CAST(substr(job, 5) AS INTEGER) * 7 + bucket) % 300) WHERE bucket < 6",
    "UPDATE executions SET limit_key = 'rare' WHERE id IN "
    "(SELECT id FROM executions ORDER BY id LIMIT 20 OFFSET :half)",
    "UPDATE executions SET state = 'RUNNING', lease_owner = 'worker-' || (bucket % 50), "
    "lease_until = :later WHERE id IN (SELECT id FROM executions ORDER BY id DESC LIMIT 5000)",
    "UPDATE executions SET state = 'SCHEDULED', lease_owner = NULL, lease_until = NULL, "
    "due_at = :later WHERE id IN "
    "(SELECT id FROM executions ORDER BY id DESC LIMIT 20000 OFFSET 5000)",
    "UPDATE executions SET state = 'RETRY_WAIT' WHERE id IN "
    "(SELECT id FROM executions ORDER BY id DESC LIMIT 2000 OFFSET 5000)",
    "UPDATE execution_data SET error = CASE abs(random()) % 3 "
    "WHEN 0 THEN 'TimeoutError: ran past its 30s timeout' "
    "WHEN 1 THEN 'ValueError: bad input for ' || execution_id "
    "ELSE 'ConnectionError: reset by peer (100% of retries used)' END "
    "WHERE execution_id IN (SELECT id FROM executions WHERE state IN ('FAILED', 'RETRY_WAIT') "
    "OR (state = 'SUCCEEDED' AND bucket % 32 = 1))",
]

#: The same shaping in PostgreSQL.
PG_SHAPE = [
    "UPDATE executions SET queue = 'q' || (bucket %% 5)",
    "UPDATE executions SET limit_key = 'tenant-' || "
    "((substr(job, 5)::integer * 7 + bucket) %% 300) WHERE bucket < 6",
    "UPDATE executions SET limit_key = 'rare' WHERE id IN "
    "(SELECT id FROM executions ORDER BY id LIMIT 20 OFFSET %(half)s)",
    "UPDATE executions SET state = 'RUNNING', lease_owner = 'worker-' || (bucket %% 50), "
    "lease_until = %(later)s WHERE id IN "
    "(SELECT id FROM executions ORDER BY id DESC LIMIT 5000)",
    "UPDATE executions SET state = 'SCHEDULED', lease_owner = NULL, lease_until = NULL, "
    "due_at = %(later)s WHERE id IN "
    "(SELECT id FROM executions ORDER BY id DESC LIMIT 20000 OFFSET 5000)",
    "UPDATE executions SET state = 'RETRY_WAIT' WHERE id IN "
    "(SELECT id FROM executions ORDER BY id DESC LIMIT 2000 OFFSET 5000)",
    "UPDATE execution_data SET error = CASE floor(random() * 3)::integer "
    "WHEN 0 THEN 'TimeoutError: ran past its 30s timeout' "
    "WHEN 1 THEN 'ValueError: bad input for ' || execution_id "
    "ELSE 'ConnectionError: reset by peer (100%% of retries used)' END "
    "WHERE execution_id IN (SELECT id FROM executions WHERE state IN ('FAILED', 'RETRY_WAIT') "
    "OR (state = 'SUCCEEDED' AND bucket %% 32 = 1))",
]


def shape_sqlite(url: str, n: int) -> None:
    later = int((time.time() + 3600) * 1_000_000)
    with sqlite3.connect(slo_report.sqlite_path(url), isolation_level=None) as conn:
        conn.execute("BEGIN")
        for statement in SQLITE_SHAPE:
            conn.execute(statement, {"half": n // 2, "later": later})
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def shape_postgres(url: str, n: int) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    with slo_report._pg_connect(url) as conn, conn.transaction():
        for statement in PG_SHAPE:
            conn.execute(statement, {"half": n // 2, "later": later})
    slo_report._pg_vacuum(url)


def cases(now: datetime) -> list[tuple[str, dict[str, Any]]]:
    """Each filter alone, then a few pairs an operator asks for."""
    day = timedelta(days=1)
    return [
        ("no filter", {}),
        ("state FAILED", {"state": "FAILED"}),
        ("state RUNNING", {"state": "RUNNING"}),
        ("state unfinished (ps)", {"state": ["SCHEDULED", "RETRY_WAIT", "RUNNING"]}),
        ("state SUCCEEDED", {"state": "SUCCEEDED"}),
        ("job", {"job": "job-7"}),
        ("queue", {"queue": "q3"}),
        ("limit_key (3k rows)", {"limit_key": "tenant-5"}),
        ("limit_key (20 rows)", {"limit_key": "rare"}),
        ("owner", {"owner": "worker-3"}),
        ("created last hour", {"created_after": now - timedelta(hours=1)}),
        (
            "created a day, 20 d ago",
            {"created_after": now - 20 * day, "created_before": now - 19 * day},
        ),
        ("finished last hour", {"finished_after": now - timedelta(hours=1)}),
        (
            "finished a day, 10 d ago",
            {"finished_after": now - 10 * day, "finished_before": now - 9 * day},
        ),
        ("finished before 29 d ago", {"finished_before": now - 29 * day}),
        ("error common", {"error": "timeout"}),
        ("error absent", {"error": "no such text"}),
        ("FAILED + job", {"state": "FAILED", "job": "job-7"}),
        ("error + queue", {"error": "reset by peer", "queue": "q1"}),
        ("finished last day + job", {"finished_after": now - day, "job": "job-7"}),
        ("since 1 d + state FAILED", {"created_after": now - day, "state": "FAILED"}),
    ]


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


def measure(store: Store, repeat: int) -> None:
    now = datetime.now(UTC)
    print(f"{'filter':28} {'page asc':>22} {'page desc':>22} {'count':>22}")
    print(
        f"{'':28} {'p50 / p95 / max ms':>22} {'p50 / p95 / max ms':>22} {'p50 / p95 / max ms':>22}"
    )
    worst = 0.0
    for name, filters in cases(now):
        row = []
        for call in (
            lambda f=filters: store.query(limit=100, **f),
            lambda f=filters: store.query(limit=100, newest_first=True, **f),
            lambda f=filters: store.count_by_state(**f),
        ):
            took = timed(call, repeat)
            worst = max(worst, p95(took))
            row.append(f"{statistics.median(took):6.1f} /{p95(took):6.1f} /{max(took):6.1f}")
        print(f"{name:28} {row[0]:>22} {row[1]:>22} {row[2]:>22}")
    print(f"worst p95: {worst:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", required=True, help="sqlite:///PATH or postgresql://...?schema=NAME"
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=7)
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
            shape_sqlite(args.db, args.n)
        else:
            slo_report.generate_postgres(args.db, args.n, args.days)
            shape_postgres(args.db, args.n)
        print(
            f"generated and shaped {args.n:,} executions in {time.perf_counter() - started:.0f} s"
        )
    with fencepost.connect(args.db) as store:
        measure(store, args.repeat)


if __name__ == "__main__":
    main()

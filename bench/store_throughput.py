"""Store throughput: submit, submit_many and claim+complete, each beside a raw-SQL floor.

Run by hand (or ``make bench``)::

    .venv/bin/python bench/store_throughput.py [--n N] [--repeat R] [--db-dir DIR]
    .venv/bin/python bench/store_throughput.py --db postgresql://USER@HOST:PORT/DB [--n N]

SQLite by default; ``--db postgresql://...`` measures the PostgreSQL store instead
(see "PostgreSQL" below).

Every figure is measured in this run, on fresh SQLite files in a temporary
directory (under ``--db-dir`` when given: fsync costs what that file system makes
it cost, so the bench prints which one it is). Each figure is the median of
``--repeat`` runs, fencepost and floor interleaved so that both see the same
machine; the spread is printed too, because a shared machine is noisy.

SQLite runs everything twice in the same run: at the default a user gets,
``PRAGMA synchronous = FULL`` (the URL as given; every COMMIT syncs the WAL), and
with ``?synchronous=normal`` (the WAL is synced at checkpoints only). The two
modes alternate within each repeat — which goes first alternates between repeats
— and the tables show FULL first, then NORMAL, then the two side by side. Single
``submit`` calls (one transaction, so one fsync under FULL, each) run on
``n / 20`` executions; the batch paths pay one fsync per call, not per row.

A floor is a bare :mod:`sqlite3` loop over the same schema, pragmas and rows,
doing only the essential writes: no audit trail, no validation, no row mapping,
no payloads read back. It is what this machine can do at all, so that fencepost's
figure reads as a fraction of it; it is not a competitor.

PostgreSQL: the same measurements in private schemas of the ``--db`` server
(``fpbench_<pid>_...``, made by fencepost's migrations, dropped at the end). Each
run gets its own copy of the prefilled rows (INSERT ... SELECT from a template
schema), then VACUUM ANALYZE, as autovacuum would leave a table in steady state;
``--stale-stats`` skips that, leaving the planner no statistics, as after a burst.
The floor is bare psycopg (see ``pg_common``): the fenced claim as one
``UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING id, epoch``
and the fenced complete as one ``UPDATE ... FROM unnest(ids, owners, epochs)``,
each one round trip in autocommit; the submit floor is one ``INSERT ... unnest``
statement (executions + execution_data) per 1,000.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fencepost
from fencepost.domain.ids import IdGenerator
from fencepost.store.sqlite.connection import QUERIES

BATCH_SIZES = (1, 16, 256)
SUBMIT_BATCH = 1_000
TTL = 30.0
OWNER = "bench"
RESULT = {"ok": True}
# The goals set for a 2-core machine, printed as met or MISSED; not asserted anywhere.
TARGET_CLAIM_256 = 30_000
TARGET_SHARE_256 = 0.40
TARGET_SUBMIT = 100_000
# Batch 256 claim+complete under FULL (the default) within 15% of NORMAL.
TARGET_FULL_OF_NORMAL_256 = 0.85
#: The SQLite modes measured, the default first: (label, URL query, pragma block).
MODES = (
    ("full", "", "synchronous_full"),
    ("normal", "?synchronous=normal", "synchronous_normal"),
)
# PostgreSQL (same machine, the server on it): batch 256 only.
TARGET_PG_CLAIM_256 = 8_000
TARGET_PG_SHARE_256 = 0.50

# The floors' SQL. The product keeps its SQL in queries.sql; these strings are the
# baseline it is measured against, so they live here on purpose. The pragmas are
# fencepost's own blocks, so that both sides run with exactly the same settings.
FLOOR_PRAGMAS = {mode: QUERIES["pragmas"] + "\n" + QUERIES[block] + ";" for mode, _, block in MODES}
FLOOR_INSERT = """
INSERT INTO executions (
    id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
    timeout_us, idempotency_key, request_hash, bucket, bucket_key, created_at, updated_at
) VALUES (?, ?, NULL, 'SCHEDULED', ?, 0, 0, 3, 0, NULL, NULL, NULL, ?, NULL, ?, ?)
"""
FLOOR_INSERT_DATA = "INSERT INTO execution_data (execution_id, inputs) VALUES (?, ?)"
FLOOR_CLAIM = """
UPDATE executions
SET state = 'RUNNING', epoch = epoch + 1, attempt = attempt + 1,
    lease_owner = ?, lease_until = ?, updated_at = ?
WHERE id IN (
    SELECT id FROM executions
    WHERE state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= ? {queue}
    ORDER BY priority DESC, due_at, id
    LIMIT ?
)
RETURNING id, epoch
"""
FLOOR_COMPLETE = """
UPDATE executions
SET state = 'SUCCEEDED', lease_owner = NULL, lease_until = NULL, updated_at = ?
WHERE id = ? AND state = 'RUNNING' AND lease_owner = ? AND epoch = ? AND lease_until > ?
"""
FLOOR_RESULT = "UPDATE execution_data SET result = ? WHERE execution_id = ?"


@dataclass(frozen=True)
class Run:
    """One timed run: ``count`` executions or jobs in ``seconds``."""

    count: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds


def _requests(start: int, count: int) -> list[dict[str, object]]:
    return [{"job": "bench", "inputs": {"n": i}} for i in range(start, start + count)]


def _batches(n: int) -> list[list[dict[str, object]]]:
    return [_requests(i, min(SUBMIT_BATCH, n - i)) for i in range(0, n, SUBMIT_BATCH)]


def _url(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}{query}"  # an absolute path gives the sqlite:////abs form


def _now_us() -> int:
    return time.time_ns() // 1_000


def _open_floor(path: Path, mode: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(FLOOR_PRAGMAS[mode])
    return conn


def empty_schema(path: Path) -> None:
    """A file with fencepost's schema (its own migrations) and nothing else."""
    fencepost.connect(_url(path)).close()


#: With --catalogue, the benchmark's job is published before anything is submitted: every
#: submit then pins its version, checks {"n": i} against this schema and takes its
#: defaults, as a deployment's submits do once its workers have published their jobs.
BENCH_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


def publish_bench_job(url: str) -> None:
    """Publish the ``bench`` job (see :data:`BENCH_SCHEMA`) to the store at ``url``."""
    from fencepost.domain.catalogue import job_entry  # not in revisions before the catalogue

    with fencepost.connect(url) as store:
        store.publish_jobs([job_entry("bench", 1, input_schema=BENCH_SCHEMA)])


def prefill(path: Path, n: int) -> None:
    """``n`` executions due now, submitted through fencepost (not timed)."""
    with fencepost.connect(_url(path)) as store:
        for batch in _batches(n):
            store.submit_many(batch)


def submit_one_fencepost(path: Path, n: int, query: str) -> Run:
    """``n`` single ``submit`` calls: one transaction (one fsync under FULL) each."""
    with fencepost.connect(_url(path, query)) as store:
        started = time.perf_counter()
        for i in range(n):
            store.submit("bench", inputs={"n": i})
        elapsed = time.perf_counter() - started
    return Run(n, elapsed)


def submit_one_floor(path: Path, n: int, mode: str) -> Run:
    """The same rows as ``submit_floor``, one BEGIN IMMEDIATE ... COMMIT per execution."""
    rows = _floor_rows(n)
    conn = _open_floor(path, mode)
    try:
        started = time.perf_counter()
        for id_, inputs, now in rows:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(FLOOR_INSERT, (id_, "bench", now, 0, now, now))
            conn.execute(FLOOR_INSERT_DATA, (id_, inputs))
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    return Run(n, elapsed)


def _floor_rows(n: int) -> list[tuple[str, str, int]]:
    """(id, inputs, now) per execution, made beforehand (untimed).

    Ids come from fencepost's generator (UUIDv7, so the primary key grows at its end
    as it does for fencepost); inputs are encoded as fencepost would.
    """
    ids = IdGenerator()
    now = _now_us()
    return [
        (ids.new(now // 1_000), json.dumps({"n": i}, separators=(",", ":")), now) for i in range(n)
    ]


def submit_fencepost(path: Path, n: int, query: str = "") -> Run:
    """``submit_many`` in batches of SUBMIT_BATCH; the requests are built beforehand."""
    batches = _batches(n)
    with fencepost.connect(_url(path, query)) as store:
        started = time.perf_counter()
        for batch in batches:
            store.submit_many(batch)
        elapsed = time.perf_counter() - started
    return Run(n, elapsed)


def submit_floor(path: Path, n: int, mode: str) -> Run:
    """The same rows (id, job, due, bucket, inputs) inserted by executemany, no audit rows
    (made beforehand: see ``_floor_rows``)."""
    rows = _floor_rows(n)
    chunks = [rows[i : i + SUBMIT_BATCH] for i in range(0, n, SUBMIT_BATCH)]
    conn = _open_floor(path, mode)
    try:
        started = time.perf_counter()
        for chunk in chunks:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                FLOOR_INSERT, [(id_, "bench", now, 0, now, now) for id_, _, now in chunk]
            )
            conn.executemany(FLOOR_INSERT_DATA, [(id_, inputs) for id_, inputs, _ in chunk])
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    return Run(n, elapsed)


def drain_fencepost(path: Path, batch: int, query: str = "") -> Run:
    """Claim ``batch`` at a time and complete each batch, until nothing is due."""
    jobs = 0
    with fencepost.connect(_url(path, query)) as store:
        started = time.perf_counter()
        while True:
            leases = store.claim(OWNER, limit=batch, ttl=TTL)
            if not leases:
                break
            refused = store.complete_many([(lease, RESULT) for lease in leases])
            if any(r is not None for r in refused):
                raise SystemExit(f"fencepost refused a completion: {refused}")
            jobs += len(leases)
        elapsed = time.perf_counter() - started
    return Run(jobs, elapsed)


def _floor_claim(conn: sqlite3.Connection) -> str:
    """FLOOR_CLAIM as the file's claimable index can serve it in claim order: from
    schema version 8 that index leads with the queue, and every row the benchmark
    submits is in the default queue."""
    leading = conn.execute("SELECT name FROM pragma_index_info('executions_claimable')").fetchone()
    return FLOOR_CLAIM.format(queue="AND queue = 'default'" if leading == ("queue",) else "")


def drain_floor(path: Path, batch: int, mode: str) -> Run:
    """The same fenced claim and complete in bare sqlite3, one BEGIN IMMEDIATE each."""
    result = json.dumps(RESULT, separators=(",", ":"))
    jobs = 0
    conn = _open_floor(path, mode)
    claim = _floor_claim(conn)
    try:
        started = time.perf_counter()
        while True:
            now = _now_us()
            conn.execute("BEGIN IMMEDIATE")
            claimed = conn.execute(
                claim, (OWNER, now + int(TTL * 1_000_000), now, now, batch)
            ).fetchall()
            conn.execute("COMMIT")
            if not claimed:
                break
            now = _now_us()
            conn.execute("BEGIN IMMEDIATE")
            done = conn.executemany(
                FLOOR_COMPLETE, [(now, id_, OWNER, epoch, now) for id_, epoch in claimed]
            )
            if done.rowcount != len(claimed):
                raise SystemExit(f"the floor completed {done.rowcount} of {len(claimed)}")
            conn.executemany(FLOOR_RESULT, [(result, id_) for id_, _ in claimed])
            conn.execute("COMMIT")
            jobs += len(claimed)
        elapsed = time.perf_counter() - started
    finally:
        conn.close()
    return Run(jobs, elapsed)


def _timed_on_copy(template: Path, path: Path, measure: Callable[[Path], Run]) -> Run:
    shutil.copyfile(template, path)
    try:
        return measure(path)
    finally:
        for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            leftover.unlink(missing_ok=True)


def _median(runs: list[Run]) -> float:
    return statistics.median(r.rate for r in runs)


def _spread(runs: list[Run]) -> str:
    rates = [r.rate for r in runs]
    if len(rates) == 1:
        return f"{rates[0]:>9,.0f}"
    return f"{statistics.median(rates):>9,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"


def _print_tables(runs: dict[str, list[Run]], n: int, prefix: str = "") -> None:
    """The submit and claim tables, fencepost beside its floor (both backends).

    ``prefix`` picks one SQLite mode's runs (``"full "``); a single-submit table is
    printed when there are runs for it.
    """
    width = 28

    def head(label: str) -> str:
        return f"  {label:<14}{'count':>8}  {'fencepost':<{width}}{'floor':<{width}}{'ratio':>6}"

    if runs.get(f"{prefix}submit one"):
        print("submit(job, inputs={'n': i}), one call (one transaction) each  (executions/s)")
        print(head(""))
        ours, base = runs[f"{prefix}submit one"], runs[f"{prefix}submit one floor"]
        print(
            f"  {'':<14}{ours[0].count:>8,}  {_spread(ours):<{width}}{_spread(base):<{width}}"
            f"{100 * _median(ours) / _median(base):>5.1f}%"
        )
        print()
    print(f"submit_many, batches of {SUBMIT_BATCH:,}, inputs {{'n': i}}  (executions/s)")
    print(head(""))
    ours, base = runs[f"{prefix}submit"], runs[f"{prefix}submit floor"]
    print(
        f"  {'':<14}{n:>8,}  {_spread(ours):<{width}}{_spread(base):<{width}}"
        f"{100 * _median(ours) / _median(base):>5.1f}%"
    )
    print()
    print("claim(limit=B, ttl=30) + complete_many(result {'ok': True}) until drained  (jobs/s)")
    print(head("batch B"))
    for batch in BATCH_SIZES:
        ours, base = runs[f"{prefix}claim {batch}"], runs[f"{prefix}claim floor {batch}"]
        print(
            f"  {batch:<14}{ours[0].count:>8,}  {_spread(ours):<{width}}{_spread(base):<{width}}"
            f"{100 * _median(ours) / _median(base):>5.1f}%"
        )
    print()


def write_json(path: Path | None, runs: dict[str, list[Run]]) -> None:
    """``--json PATH``: every figure's median rate, per second, by its key."""
    if path is not None:
        path.write_text(json.dumps({key: _median(r) for key, r in runs.items() if r}, indent=1))


def main_postgres(
    url: str, n: int, repeat: int, *, analyze: bool, json_out: Path | None, catalogue: bool
) -> int:
    """The same measurements against the PostgreSQL store at ``url``, floors in bare psycopg."""
    import psycopg  # the postgres extra; SQLite runs do not need it

    import pg_common as pg

    # Smaller batches run far fewer jobs per second over the network: fewer of them.
    counts = {1: n // 25, 16: n // 5, 256: n}
    server = pg.Server(url, "st")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("fencepost store throughput (PostgreSQL)")
    print(f"  python   {platform.python_version()} ({platform.python_implementation()})")
    print(f"  psycopg  {psycopg.__version__} (libpq {psycopg.pq.version()})")
    for line in server.describe():
        print(line)
    print(f"  cpus     {os.cpu_count()} ({platform.machine()}), shared with the server")
    print(f"  load     {load} (1, 5, 15 min averages at start)")
    print(f"  pool     pool_max={server.pool_max} (fencepost); the floors use one bare connection")
    stats = "VACUUM ANALYZE after copying" if analyze else "none (--stale-stats: no ANALYZE)"
    print(f"  stats    {stats}")
    print(f"  catalogue {_catalogue_line(catalogue)}")
    print(f"  figures  median of {repeat} runs (min-max), per second")
    print()

    started = time.perf_counter()
    runs: dict[str, list[Run]] = defaultdict(list)

    def pair(key: str, template: str, ours: Callable[[str], Run], floor: Callable[[str], Run]):
        """fencepost and its floor on copies of ``template``; who goes first alternates."""
        sides = [(key, ours), (f"{key} floor", floor)]
        if len(runs[key]) % 2:
            sides.reverse()
        for label, measure in sides:
            pg.progress(f"{label} (run {len(runs[label]) + 1} of {repeat})")
            runs[label].append(pg.timed_on_copy(server, template, "run", measure, analyze=analyze))

    with server.session():
        empty = server.new_schema("empty")
        if catalogue:
            publish_bench_job(server.url(empty))
        filled = {}
        for count in sorted(set(counts.values())):
            pg.progress(f"prefilling {count:,} executions through fencepost")
            filled[count] = server.new_schema(f"filled{count}")
            pg.prefill(server.url(filled[count]), count)
        for _ in range(repeat):
            pair(
                "submit",
                empty,
                lambda s: pg.submit_fencepost(server.url(s), n),
                lambda s: pg.submit_floor(server, s, n),
            )
            for batch in BATCH_SIZES:
                expected = counts[batch]
                pair(
                    f"claim {batch}",
                    filled[expected],
                    lambda s, b=batch: pg.drain_fencepost(server.url(s), b),
                    lambda s, b=batch: pg.drain_floor(server, s, b),
                )
                got = (runs[f"claim {batch}"][-1].count, runs[f"claim {batch} floor"][-1].count)
                if got != (expected, expected):
                    raise SystemExit(f"drained {got[0]} / {got[1]} of {expected}")
    for batch in BATCH_SIZES:  # the table reads "claim floor B", as for SQLite
        runs[f"claim floor {batch}"] = runs.pop(f"claim {batch} floor")

    _print_tables(runs, n)
    claim_256 = _median(runs["claim 256"])
    share_256 = claim_256 / _median(runs["claim floor 256"])
    submit = _median(runs["submit"])
    for label, value, goal in (
        ("claim+complete, batch 256", f"{claim_256:,.0f} jobs/s", claim_256 >= TARGET_PG_CLAIM_256),
        ("  ... share of its floor", f"{100 * share_256:.1f}%", share_256 >= TARGET_PG_SHARE_256),
    ):
        print(f"target {label:<27}{value:>22}  {'met' if goal else 'MISSED'}")
    print(f"       submit_many: {submit:,.0f} executions/s (no PostgreSQL target)")
    print(
        f"       (targets: >= {TARGET_PG_CLAIM_256:,} jobs/s and >= {TARGET_PG_SHARE_256:.0%} of"
        " the floor at batch 256)"
    )
    print()
    print("The floors write no audit rows: that is the point of a floor. fencepost writes a")
    print("SUBMITTED, a CLAIMED and a COMPLETED transition per execution, validates and")
    print("encodes every payload, returns Execution and Lease objects (inputs decoded),")
    print("and goes through its connection pool (a liveness check per checkout).")
    print("  submit floor: one INSERT ... FROM unnest(ids, inputs) statement writing the")
    print("    executions + execution_data rows per 1,000 (ids and inputs made beforehand).")
    print("  claim floor: per batch, one UPDATE ... WHERE id IN (SELECT ... LIMIT B FOR")
    print("    UPDATE SKIP LOCKED) RETURNING id, epoch; then one fenced UPDATE ... FROM")
    print("    unnest(ids, owners, epochs); each autocommit, one round trip. It does not")
    print("    store the result (the SQLite floor does).")
    print("  The floors never prepare statements (psycopg prepare_threshold=None): with the")
    print("    default, PostgreSQL's generic plan for the unnest join rescans unnest per")
    print("    leased row and the floor falls to about 40%. fencepost keeps the default.")
    print(f"total {time.perf_counter() - started:.0f} s")
    write_json(json_out, runs)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="executions per run; default 100,000 (SQLite; single submits and batch 1: n/20)"
        " or 50,000 (PostgreSQL; batch 1: n/25, batch 16: n/5)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median wins)")
    parser.add_argument("--db-dir", type=Path, default=None, help="SQLite: where the temp dir goes")
    parser.add_argument(
        "--db", default=None, help="postgresql://user@host:port/db to measure PostgreSQL instead"
    )
    parser.add_argument(
        "--stale-stats",
        action="store_true",
        help="PostgreSQL: do not VACUUM ANALYZE the copies (the planner has no statistics)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="also write each figure's median here (JSON)"
    )
    parser.add_argument(
        "--catalogue",
        action="store_true",
        help="publish the bench job first: every submit is checked against its schema",
    )
    args = parser.parse_args(argv)
    postgres = args.db is not None
    if postgres and not args.db.startswith(("postgresql://", "postgres://")):
        parser.error("--db takes a postgresql:// URL (SQLite is the default, in temp files)")
    n: int = args.n if args.n is not None else (50_000 if postgres else 100_000)
    if n < 25 or args.repeat < 1:
        parser.error("--n must be at least 25 and --repeat at least 1")
    if postgres:
        return main_postgres(
            args.db,
            n,
            args.repeat,
            analyze=not args.stale_stats,
            json_out=args.json,
            catalogue=args.catalogue,
        )
    small = n // 20
    return main_sqlite(n, small, args.repeat, args.db_dir, args.json, catalogue=args.catalogue)


def _catalogue_line(catalogue: bool) -> str:
    if catalogue:
        return "the bench job published first (--catalogue): submits checked against its schema"
    return "empty (the default; --catalogue publishes the bench job first)"


def _pragmas(sql: str) -> str:
    """``PRAGMA a = b; ...`` as ``a=b ...``."""
    return " ".join(
        line.removeprefix("PRAGMA ").rstrip(";").replace(" = ", "=")
        for line in sql.splitlines()
        if line.startswith("PRAGMA ")
    )


def _file_system(path: Path) -> str:
    """The type and mount point of the file system holding ``path`` (Linux), for fsync's cost."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best = ("", "unknown")
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best[0]):
            best = (point, fields[2])
    return f"{best[1]} (mounted at {best[0]})"


def main_sqlite(
    n: int, small: int, repeat: int, db_dir: Path | None, json_out: Path | None, *, catalogue: bool
) -> int:
    """Both SQLite modes, FULL (the default) and NORMAL, interleaved in one run."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("fencepost store throughput (SQLite)")
    print(f"  command  {shlex.join(sys.orig_argv)}")
    print(f"  python   {platform.python_version()} ({platform.python_implementation()})")
    print(f"  sqlite   {sqlite3.sqlite_version}")
    print(f"  cpus     {os.cpu_count()} ({platform.machine()}, {platform.system()})")
    print(f"  load     {load} (1, 5, 15 min averages at start)")
    print(f"  pragmas  {_pragmas(QUERIES['pragmas'])} (fencepost's; the floors use the same)")
    for mode, query, block in MODES:
        default = ", the default" if not query else ""
        print(f"  {mode:<8} {_pragmas(QUERIES[block])}{default}: {_url(Path('FILE'), query)}")
    print(
        f"  sizes    submit_many {n:,} in batches of {SUBMIT_BATCH:,}; single submits "
        f"{small:,}; claim+complete {small:,} at batch 1, {n:,} at batches 16 and 256"
    )
    print(f"  catalogue {_catalogue_line(catalogue)}")

    started = time.perf_counter()
    runs: dict[str, list[Run]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="fencepost-bench-", dir=db_dir) as tmp:
        root = Path(tmp)
        print(f"  files    {root} on {_file_system(root)}")
        print(f"  figures  median of {repeat} runs (min-max), per second; modes interleaved")
        print()
        empty = root / "empty.db"
        empty_schema(empty)
        if catalogue:
            publish_bench_job(_url(empty))
        filled = {count: root / f"filled-{count}.db" for count in {n, small}}
        for count, path in filled.items():
            prefill(path, count)
        run = root / "run.db"

        def measure(key: str, template: Path, ours: Callable[..., Run], floor: Callable[..., Run]):
            """fencepost then its floor on copies of ``template``, in each mode in turn.

            The mode that goes first alternates between repeats (the default on even ones).
            """
            modes = MODES if len(runs[f"full {key}"]) % 2 == 0 else MODES[::-1]
            for mode, query, _ in modes:
                runs[f"{mode} {key}"].append(
                    _timed_on_copy(template, run, lambda p, q=query: ours(p, q))
                )
                runs[f"{mode} {key} floor"].append(
                    _timed_on_copy(template, run, lambda p, m=mode: floor(p, m))
                )

        for _ in range(repeat):
            measure(
                "submit one",
                empty,
                lambda p, q: submit_one_fencepost(p, small, q),
                lambda p, m: submit_one_floor(p, small, m),
            )
            measure(
                "submit",
                empty,
                lambda p, q: submit_fencepost(p, n, q),
                lambda p, m: submit_floor(p, n, m),
            )
            for batch in BATCH_SIZES:
                expected = small if batch == 1 else n
                measure(
                    f"claim {batch}",
                    filled[expected],
                    lambda p, q, b=batch: drain_fencepost(p, b, q),
                    lambda p, m, b=batch: drain_floor(p, b, m),
                )
                for mode, _, _ in MODES:
                    ours, floor = (
                        runs[f"{mode} claim {batch}"][-1],
                        runs[f"{mode} claim {batch} floor"][-1],
                    )
                    if ours.count != expected or floor.count != expected:
                        raise SystemExit(
                            f"{mode}: drained {ours.count} / {floor.count} of {expected}"
                        )
    for mode, _, _ in MODES:  # the tables read "claim floor B", as for PostgreSQL
        for batch in BATCH_SIZES:
            runs[f"{mode} claim floor {batch}"] = runs.pop(f"{mode} claim {batch} floor")

    print("== synchronous=full (the default: every commit is synced to disk)")
    print()
    _print_tables(runs, n, "full ")
    print("== synchronous=normal (?synchronous=normal: synced at checkpoints only)")
    print()
    _print_tables(runs, n, "normal ")
    _print_modes(runs, n, small)

    claim_256 = _median(runs["full claim 256"])
    share_256 = claim_256 / _median(runs["full claim floor 256"])
    submit = _median(runs["full submit"])
    full_of_normal = claim_256 / _median(runs["normal claim 256"])
    for label, value, goal in (
        ("claim+complete, batch 256", f"{claim_256:,.0f} jobs/s", claim_256 >= TARGET_CLAIM_256),
        ("  ... share of its floor", f"{100 * share_256:.1f}%", share_256 >= TARGET_SHARE_256),
        (
            "  ... FULL of NORMAL",
            f"{100 * full_of_normal:.1f}%",
            full_of_normal >= TARGET_FULL_OF_NORMAL_256,
        ),
        ("submit_many", f"{submit:,.0f} executions/s", submit >= TARGET_SUBMIT),
    ):
        print(f"target {label:<27}{value:>22}  {'met' if goal else 'MISSED'}")
    print(
        f"       (at the default, synchronous=full: >= {TARGET_CLAIM_256:,} jobs/s, >= "
        f"{TARGET_SHARE_256:.0%} of the floor and >= {TARGET_FULL_OF_NORMAL_256:.0%} of NORMAL"
        f" at batch 256; >= {TARGET_SUBMIT:,} executions/s)"
    )
    print()
    print("The floors write no audit rows: that is the point of a floor. fencepost writes a")
    print("SUBMITTED, a CLAIMED and a COMPLETED transition per execution, validates and")
    print("encodes every payload, returns Execution and Lease objects (inputs decoded).")
    print("  submit floor: executemany of the same executions + execution_data rows (ids and")
    print("    inputs made beforehand, untimed), one BEGIN IMMEDIATE per 1,000; the")
    print("    single-submit floor inserts the same two rows in one BEGIN IMMEDIATE each.")
    print("  claim floor: per batch, BEGIN IMMEDIATE + one UPDATE ... WHERE id IN (SELECT ...")
    print("    LIMIT B) RETURNING id, epoch; then BEGIN IMMEDIATE + the fenced UPDATE per row")
    print("    (executemany) + the result into execution_data.")
    print(f"total {time.perf_counter() - started:.0f} s")
    write_json(json_out, runs)
    return 0


def _print_modes(runs: dict[str, list[Run]], n: int, small: int) -> None:
    """fencepost's medians in both modes side by side, the default first."""
    rows = [
        ("submit, one per call", small, "submit one"),
        (f"submit_many ({SUBMIT_BATCH:,})", n, "submit"),
        *(
            (f"claim+complete, batch {b}", small if b == 1 else n, f"claim {b}")
            for b in BATCH_SIZES
        ),
    ]
    print("== fencepost, synchronous=full (default) beside synchronous=normal  (per second)")
    print(f"  {'':<28}{'count':>8}  {'full':>10}  {'normal':>10}  {'full/normal':>11}")
    for label, count, key in rows:
        full, normal = _median(runs[f"full {key}"]), _median(runs[f"normal {key}"])
        ratio = f"{100 * full / normal:.1f}%"
        print(f"  {label:<28}{count:>8,}  {full:>10,.0f}  {normal:>10,.0f}  {ratio:>11}")
    print()


if __name__ == "__main__":
    raise SystemExit(main())

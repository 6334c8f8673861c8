"""History at scale on PostgreSQL: claim+complete beside 20,000,000 finished executions,
and dropping a day of history while a worker claims.

Run by hand (the issue's scale; seeding is most of the time)::

    .venv/bin/python bench/history_scale.py [--db postgresql://USER@HOST:PORT/DB]
        [--rows 20000000] [--days 14] [--jobs 20000] [--repeat 3] [--no-row-path]
        [--no-keyed-day] [--no-days] [--statements] [--json PATH]

``--db`` defaults to ``$FENCEPOST_TEST_POSTGRES_DSN``. The requirement measured
(nothing here asserts it): with 20,000,000 finished executions, claim+complete
throughput within 10% of an empty database; dropping a day of history takes under
a second and does not raise claim p99 above 50 ms.

Schemas of the ``--db`` server (``fpbench_<pid>_hist_empty``, ``..._full`` and,
unless ``--no-days``, ``..._days``), made by fencepost's migrations and dropped at
the end whatever happens. "days" is a control: the full one's past days'
partitions, made by ``history.ensure``, with no rows in them; it tells what the
number of partitions costs apart from the rows in them.

* **Seeding** (the full one, untimed but reported): ``--rows`` SUCCEEDED executions
  spread evenly over the ``--days`` UTC days before today, in raw SQL. Each day's
  partitions are made by the store's own ``history.ensure``; then one
  ``INSERT ... SELECT FROM generate_series`` per table and per ``--insert-batch``
  executions writes exactly the rows submit, claim and complete leave: the
  execution (UUIDv7 id made in SQL from its creation millisecond, with the row
  number in its last 48 bits so that every id is unique; created in the first
  23 h 59 min of its day, claimed 10 s later, finished 30 s later), its payload row
  (inputs ``{"n": g}``, result ``{"ok": true}``) and its three audit rows
  (SUBMITTED, CLAIMED, COMPLETED). ``synchronous_commit = off`` for the seeding
  session only; VACUUM ANALYZE and a CHECKPOINT afterwards, so that the
  measurements start from a quiet server.
* **Claim+complete**: in each schema, ``--jobs`` fresh executions are submitted
  through ``submit_many`` (batches of 1,000, untimed), then drained by
  ``claim(limit=B)`` + ``complete_many`` (timed) at B = 1, 16 and 256 (B = 1 and 16
  on 1/25 and 1/5 of ``--jobs``, as in store_throughput.py). The schemas take
  turns at each batch size (which goes first rotates between repeats); each
  figure is the median of ``--repeat`` runs. The bench's own finished executions
  stay in today's partition of every schema, so after the first run "empty" holds
  a few tens of thousands of rows too, the same number as today's partition of
  "full". Before each submit, today's partitions are vacuumed and analyzed
  (untimed), as autovacuum would between bursts where it is on (see
  ``vacuum_today``).
* **The server's work** (``--statements``, on a server with ``pg_stat_statements`` in
  its ``shared_preload_libraries``; it is reset before every drain): the claim and
  complete statements' server time (planning and execution) and shared buffers per
  job drained, per schema, from the server's own account. Equal work per job in the
  full and empty schemas puts a gap between their rates outside the database.
* **Dropping a day**: a claimer process submits 500 fresh executions a second (50
  every 0.1 s, a feeder thread) and loops ``claim(limit=16)`` + ``complete_many``
  on them in the full schema, timing every claim. After 5 s of that baseline,
  ``store.prune(older_than=...)`` runs here with a cutoff 10 s past the end of the
  oldest seeded day: exactly that day is droppable (every row of the next day
  finished after the cutoff), so the prune detaches it concurrently, checks it
  again, deletes its keys and commands and drops it, and then finds no row to
  delete. Reported: the prune's wall time (and when the day was gone, from its
  ``on_batch`` callback), the rows dropped, and claim latency p50 / p99 / max for
  claims that started before the prune and for claims that overlapped it.
* **A keyed day** (unless ``--no-keyed-day``): the same on the next day, after every
  execution of it was given an idempotency key (untimed; the rows in
  ``execution_keys`` a keyed submit or a materialized occurrence leaves): the
  prune also deletes the day's keys, by row, found by the day's range of ids.
* **Row by row** (unless ``--no-row-path``): the same, on the next day left, made not
  droppable by one execution left RUNNING (a lease held for a day, of a job the
  claimer never claims): prune then deletes the rest of that day by row, in
  batches of 1,000, which is what every day cost before partitioning.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import fencepost
import pg_common as pg  # bench/ is the script's directory, so first on sys.path
from fencepost.store.postgres import history
from fencepost.store.postgres.history import DAY_MS

BATCH_SIZES = (1, 16, 256)
OWNER = "bench"
LOAD_JOB = "fresh"
#: Seeded executions are created in the first (day - SPAN_SLACK) of their day and
#: finish FINISH_AFTER later, so that a cutoff CUTOFF_PAST after a day's end takes
#: every row of that day and none of the next.
SPAN_SLACK_MS = 60_000
CLAIM_AFTER = "10 s"
FINISH_AFTER = "30 s"
CUTOFF_PAST = timedelta(seconds=10)
BASELINE_S = 5.0
#: The steps of history.drop_finished_days timed separately (wrapped for the prune).
STEPS = ("_detach", "all_prunable", "_forget_and_drop")
AFTER_S = 2.0

# The seeding SQL: rows exactly as submit + claim + complete write them. %(...)s are
# per-chunk parameters: g runs over [lo, hi) of the day's n rows.
_GENERATED = """
    SELECT g, x.id, x.created
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint - 1) AS g,
    LATERAL (SELECT %(start)s::bigint + g * %(span)s::bigint / %(n)s::bigint AS ms) AS m,
    LATERAL (SELECT lpad(to_hex(m.ms), 12, '0') AS h) AS t,
    LATERAL (SELECT
        (substr(t.h, 1, 8) || '-' || substr(t.h, 9, 4) || '-7' || lpad(to_hex(g & 4095), 3, '0')
         || '-8' || lpad(to_hex(%(day)s::bigint & 4095), 3, '0') || '-' || lpad(to_hex(g), 12, '0')
        )::uuid AS id,
        to_timestamp(m.ms / 1000.0) AS created) AS x
"""
SEED_EXECUTIONS = f"""
INSERT INTO {{part}} (
    id, job, state, due_at, priority, attempt, max_attempts, epoch, bucket,
    created_at, updated_at, queue, planned_at
)
SELECT id, 'bench', 'SUCCEEDED', created, 0, 1, 3, 1, mod(g, 64)::int,
       created, created + interval '{FINISH_AFTER}', 'default', created
FROM ({_GENERATED}) AS s
"""
SEED_DATA = f"""
INSERT INTO {{part}} (execution_id, inputs, result)
SELECT id, jsonb_build_object('n', g), '{{{{"ok": true}}}}'::jsonb FROM ({_GENERATED}) AS s
"""
SEED_TRANSITIONS = f"""
INSERT INTO {{part}} (seq, execution_id, event, from_state, to_state, epoch, actor, at)
SELECT %(seq)s::bigint + 3 * (g - %(lo)s::bigint) + e.k, id, e.event, e.from_state,
       e.to_state, e.epoch, e.actor, created + e.after
FROM ({_GENERATED}) AS s,
(VALUES (0, 'SUBMITTED', NULL, 'SCHEDULED', 0, NULL, interval '0 s'),
        (1, 'CLAIMED', 'SCHEDULED', 'RUNNING', 1, 'bench', interval '{CLAIM_AFTER}'),
        (2, 'COMPLETED', 'RUNNING', 'SUCCEEDED', 1, 'bench', interval '{FINISH_AFTER}'))
    AS e(k, event, from_state, to_state, epoch, actor, after)
"""


def today() -> int:
    return int(time.time() * 1000) // DAY_MS


def seed(server: pg.Server, schema: str, rows: int, days: int, insert_batch: int) -> float:
    """``rows`` finished executions over the ``days`` days before today; its seconds."""
    first = today() - days
    per_day = [rows // days + (1 if i < rows % days else 0) for i in range(days)]
    seq = 1
    done = 0
    started = time.perf_counter()
    with server.connect(schema) as conn:
        conn.execute("SET synchronous_commit = off")
        for i, n in enumerate(per_day):
            day = first + i
            history.ensure(conn, {day})
            for lo in range(0, n, insert_batch):
                hi = min(n, lo + insert_batch)
                params = {
                    "lo": lo,
                    "hi": hi,
                    "n": n,
                    "start": day * DAY_MS,
                    "span": DAY_MS - SPAN_SLACK_MS,
                    "day": day,
                    "seq": seq,
                }
                for table, statement in (
                    ("executions", SEED_EXECUTIONS),
                    ("execution_data", SEED_DATA),
                    ("transitions", SEED_TRANSITIONS),
                ):
                    part = history.partition_name(table, day)
                    conn.execute(statement.format(part=part), params)
                seq += 3 * (hi - lo)
                done += hi - lo
                elapsed = time.perf_counter() - started
                rate = done / elapsed
                pg.progress(
                    f"seeded {done:,} of {rows:,} ({history.day_date(day)}) in {elapsed:,.0f} s, "
                    f"{rate:,.0f} executions/s, about {(rows - done) / rate:,.0f} s to go"
                )
        conn.execute("SELECT setval('transitions_seq_seq', %s, false)", (seq,))
    return time.perf_counter() - started


def settle(server: pg.Server, schema: str) -> float:
    """VACUUM ANALYZE the history (every partition), then CHECKPOINT; its seconds."""
    started = time.perf_counter()
    server.vacuum_analyze(schema)
    with server.connect() as conn:
        try:
            conn.execute("CHECKPOINT")
        except psycopg.Error as exc:  # not a superuser: the measurements go on without
            pg.progress(f"CHECKPOINT refused ({exc}); carrying on")
    return time.perf_counter() - started


def schema_bytes(server: pg.Server, schema: str) -> int:
    """Tables, indexes and TOAST of every table in ``schema`` (partitions included)."""
    with server.connect() as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
            "WHERE c.relnamespace = %s::regnamespace AND c.relkind IN ('r', 'm')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def vacuum_today(server: pg.Server, schema: str) -> None:
    """VACUUM ANALYZE today's partitions, as autovacuum would between bursts.

    Each drain updates every row it claims twice; the old versions stay in the
    claimable index, in front of the next drain's rows, until a VACUUM. And today's
    partitions grow by every drain's rows, which the planner knows of only from an
    ANALYZE. Autovacuum does both within a minute where it is on (each executions
    partition asks it to vacuum at 1% of its rows changed and analyze at 2%); this
    server runs with autovacuum off. Without the VACUUM, every schema's drains
    slowed down run after run (claim p50 1.5 -> 3.0 ms over six drains of 4,000).
    Without the ANALYZE, today's partition had no statistics of its ids, the planner
    took the live window's bounds to select 0.5% of it, and the claim's branch for
    expired leases read the window's whole primary key range in a bitmap: a claim of
    16 cost 4.8 ms of server time against 1.0 ms analyzed, at 50,000 rows in today's
    partition, and more as it grew (``auto_explain`` of a drain of 1,600 at batch 16).
    """
    with server.connect() as conn:
        for table, _column in history.TABLES:
            conn.execute(f"VACUUM (ANALYZE) {schema}.{history.partition_name(table, today())}")


def measure_drain(
    server: pg.Server, schema: str, jobs: int, batch: int, work: list[dict[str, float]] | None
) -> pg.Run:
    """Submit ``jobs`` fresh executions (untimed), then drain them at ``batch`` (timed).

    With ``work`` (``--statements``), the server's own account of the drain is
    appended to it: see statement_work.
    """
    url = server.url(schema)
    vacuum_today(server, schema)
    pg.prefill(url, jobs)
    if work is not None:
        with server.connect() as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
    run = pg.drain_fencepost(url, batch, OWNER)
    if run.count != jobs:
        raise SystemExit(f"drained {run.count:,} of {jobs:,} at batch {batch}")
    if work is not None:
        work.append(statement_work(server, jobs))
    return run


#: The drain's statements, told apart by text pg_stat_statements keeps as it is (it
#: replaces constants such as 'CLAIMED' with parameters): every claim block leases
#: its picked rows, every completion stores the results of its done rows.
STATEMENT_KINDS = {"claim": "FROM picked AS p", "complete": "SET result = done.result"}


def statement_work(server: pg.Server, jobs: int) -> dict[str, float]:
    """Per job drained, from pg_stat_statements (reset before the drain): the server
    time (planning and execution, microseconds) and shared buffers touched (hit or
    read) of the claim and complete statements. The same work per job in the full and
    empty schemas says the gap between their rates is not the database's doing."""
    found: dict[str, float] = {}
    with server.connect() as conn:
        for kind, mark in STATEMENT_KINDS.items():
            row = conn.execute(
                "SELECT coalesce(sum(total_exec_time + total_plan_time), 0),"
                " coalesce(sum(shared_blks_hit + shared_blks_read), 0)"
                " FROM pg_stat_statements WHERE strpos(query, %s) > 0",
                (mark,),
            ).fetchone()
            assert row is not None
            found[f"{kind} us"] = float(row[0]) * 1000 / jobs
            found[f"{kind} buffers"] = float(row[1]) / jobs
    return found


def require_statements(server: pg.Server) -> None:
    """Stop with a clear message unless pg_stat_statements can be read and reset."""
    try:
        with server.connect() as conn, conn.transaction():  # no extension left on failure
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT pg_stat_statements_reset()")
    except psycopg.Error as exc:
        raise SystemExit(
            "--statements needs pg_stat_statements in the server's shared_preload_libraries "
            f"(and the right to reset it): {exc}"
        ) from exc


# -- dropping a day under load ------------------------------------------------------------


def claimer(url: str, rate: int, stop: Any, results: Any) -> None:
    """Feed ``rate`` executions/s and claim+complete them 16 at a time, timing each claim."""
    store = fencepost.connect(url)
    feeding = threading.Event()
    chunk = max(1, rate // 10)

    def feed() -> None:
        while not feeding.is_set():
            store.submit_many([{"job": LOAD_JOB}] * chunk)
            time.sleep(0.1)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    samples: list[tuple[float, float]] = []
    while not stop.is_set():
        at = time.time()
        started = time.perf_counter()
        leases = store.claim(OWNER, limit=16, jobs=[LOAD_JOB])
        samples.append((at, time.perf_counter() - started))
        if leases:
            store.complete_many([(lease, None) for lease in leases])
        else:
            time.sleep(0.005)
    feeding.set()
    feeder.join()
    while leases := store.claim(OWNER, limit=256, jobs=[LOAD_JOB]):
        store.complete_many([(lease, None) for lease in leases])
    results.put(samples)
    store.close()


def partition_rows(server: pg.Server, schema: str, day: int) -> int | None:
    """Rows in the day's executions partition; None when it does not exist."""
    name = history.partition_name("executions", day)
    with server.connect(schema) as conn:
        if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone() == (None,):
            return None
        row = conn.execute(f"SELECT count(*) FROM {name}").fetchone()
    return int(row[0]) if row else 0


def prune_under_load(
    server: pg.Server, schema: str, day: int, rate: int, label: str
) -> dict[str, Any]:
    """Prune with a cutoff just past ``day``'s end while a claimer runs; the figures."""
    url = server.url(schema)
    before_rows = partition_rows(server, schema, day)
    next_rows = partition_rows(server, schema, day + 1)
    ctx = mp.get_context("spawn")
    stop, results = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=claimer, args=(url, rate, stop, results))
    proc.start()
    marks: list[tuple[float, int]] = []
    steps: dict[str, list[float]] = defaultdict(list)
    timed = {name: getattr(history, name) for name in STEPS}

    def timing(name: str) -> Any:
        def step(*args: Any, **kwargs: Any) -> Any:
            begun = time.perf_counter()
            try:
                return timed[name](*args, **kwargs)
            finally:
                steps[name].append(time.perf_counter() - begun)

        return step

    for name in STEPS:  # drop_finished_days calls them through the module: timed here
        setattr(history, name, timing(name))
    try:
        time.sleep(BASELINE_S)
        with fencepost.connect(url) as store:
            with server.connect() as conn:
                row = conn.execute("SELECT now()").fetchone()
            assert row is not None
            cutoff = datetime.fromtimestamp((day + 1) * DAY_MS / 1000, UTC) + CUTOFF_PAST
            older_than = row[0] - cutoff
            pg.progress(f"{label}: prune(older_than={older_than}) under load")
            started_at, started = time.time(), time.perf_counter()
            removed = store.prune(
                older_than=older_than, on_batch=lambda total: marks.append((time.time(), total))
            )
            took = time.perf_counter() - started
            ended_at = time.time()
        time.sleep(AFTER_S)
    finally:
        for name, original in timed.items():
            setattr(history, name, original)
        stop.set()
        samples = results.get(timeout=300)
        proc.join(60)
    before = [lat for at, lat in samples if at < started_at]
    during = [lat for at, lat in samples if at < ended_at and at + lat > started_at]
    first_mark = marks[0][0] - started_at if marks else None
    return {
        "label": label,
        "rows_before": before_rows,
        "rows_removed": removed,
        "partition_after": partition_rows(server, schema, day),
        "next_day_before": next_rows,
        "next_day_after": partition_rows(server, schema, day + 1),
        "seconds": took,
        "first_batch_s": first_mark,
        "batches": len(marks),
        "steps": {name: sum(steps[name]) for name in STEPS if steps[name]},
        "before": before,
        "during": during,
    }


def give_keys(server: pg.Server, schema: str, day: int) -> int:
    """Give every execution of ``day`` an idempotency key, as a materialized occurrence
    or a keyed submit has (untimed); the keys given."""
    name = history.partition_name("executions", day)
    with server.connect(schema) as conn:
        conn.execute("SET synchronous_commit = off")
        given = conn.execute(
            f"WITH keyed AS (UPDATE {name} SET idempotency_key = 'bench-' || id::text"
            " RETURNING id, idempotency_key)"
            " INSERT INTO execution_keys (key, execution_id) SELECT idempotency_key, id FROM keyed"
        ).rowcount
    with server.connect(schema) as conn:
        conn.execute(f"VACUUM ANALYZE {name}, execution_keys")
        conn.execute("CHECKPOINT")
    return given


def hold_one_running(server: pg.Server, schema: str, day: int) -> None:
    """Leave one execution of ``day`` RUNNING (a lease for a day): not a droppable day."""
    name = history.partition_name("executions", day)
    with server.connect(schema) as conn:
        conn.execute(
            f"UPDATE {name} SET state = 'RUNNING', job = 'held', lease_owner = 'held', "
            "lease_until = now() + interval '1 day', epoch = epoch + 1 "
            f"WHERE id = (SELECT id FROM {name} ORDER BY id LIMIT 1)"
        )


# -- report -------------------------------------------------------------------------------


def latency(latencies: list[float]) -> str:
    if not latencies:
        return "no claims"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"{statistics.median(ordered) * 1000:,.1f} / {p99 * 1000:,.1f} / "
        f"{ordered[-1] * 1000:,.1f} ms ({len(ordered):,} claims)"
    )


def percentiles(latencies: list[float]) -> dict[str, float | int | None]:
    if not latencies:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None, "claims": 0}
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": p99 * 1000,
        "max_ms": ordered[-1] * 1000,
        "claims": len(ordered),
    }


def count(value: int | None) -> str:
    return "gone" if value is None else f"{value:,}"


def print_prune(result: dict[str, Any], rate: int) -> None:
    removed = result["rows_removed"]
    took = result["seconds"]
    print(f"### {result['label']}  (claimer: {rate}/s offered, claim(limit=16) + complete_many)")
    print()
    print("| measure | figure |")
    print("|---|---:|")
    print(f"| prune wall time | {took:,.2f} s ({removed / took:,.0f} executions/s) |")
    if result["first_batch_s"] is not None:
        print(
            f"| ... first on_batch callback (day dropped / first batch) after "
            f"| {result['first_batch_s']:,.2f} s ({result['batches']:,} callbacks) |"
        )
    labels = {
        "_detach": "DETACH PARTITION CONCURRENTLY, 3 tables",
        "all_prunable": "all_prunable checks",
        "_forget_and_drop": "count, keys, commands, DROP TABLE x3",
    }
    for name, seconds in result["steps"].items():
        print(f"| ... {labels[name]} | {seconds:,.3f} s |")
    print(f"| executions removed | {removed:,} |")
    print(
        f"| the day's partition, rows before / after | {count(result['rows_before'])} / "
        f"{count(result['partition_after'])} |"
    )
    print(
        f"| the next day's partition, rows before / after | "
        f"{count(result['next_day_before'])} / {count(result['next_day_after'])} |"
    )
    print(f"| claim latency before, p50 / p99 / max | {latency(result['before'])} |")
    print(f"| claim latency overlapping the prune, p50 / p99 / max | {latency(result['during'])} |")
    print()


def print_work(work: dict[str, list[dict[str, float]]], sides: list[str]) -> None:
    """The server's account of the drains (--statements): medians per job."""
    print("## The server's work per job drained (pg_stat_statements; median of the runs)")
    print()
    print("| batch B | statement | " + " | ".join(f"{side}: us, buffers" for side in sides) + " |")
    print("|---:|---|" + "---:|" * len(sides))
    for batch in BATCH_SIZES:
        for kind in STATEMENT_KINDS:
            cells = []
            for side in sides:
                drains = work[f"{side} claim {batch}"]
                us = statistics.median(d[f"{kind} us"] for d in drains)
                buffers = statistics.median(d[f"{kind} buffers"] for d in drains)
                cells.append(f"{us:,.1f}, {buffers:,.1f}")
            print(f"| {batch} | {kind} | " + " | ".join(cells) + " |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=os.environ.get("FENCEPOST_TEST_POSTGRES_DSN"))
    parser.add_argument("--rows", type=int, default=20_000_000, help="finished executions seeded")
    parser.add_argument("--days", type=int, default=14, help="past days they are spread over")
    parser.add_argument(
        "--insert-batch", type=int, default=1_000_000, help="executions per seeding INSERT"
    )
    parser.add_argument("--jobs", type=int, default=20_000, help="drained at batch 256")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--load", type=int, default=500, help="executions/s offered while pruning")
    parser.add_argument("--no-row-path", action="store_true", help="skip the row-by-row prune")
    parser.add_argument(
        "--no-keyed-day", action="store_true", help="skip dropping a day whose executions have keys"
    )
    parser.add_argument(
        "--no-days", action="store_true", help="skip the control schema (partitions, no rows)"
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="also report each drain's server time and buffers per job from pg_stat_statements"
        " (which must be preloaded; it is reset before every drain)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    if not args.db or not pg.is_postgres(args.db):
        parser.error("--db postgresql://... (or $FENCEPOST_TEST_POSTGRES_DSN) is required")
    days_pruned = 1 + (not args.no_keyed_day) + (not args.no_row_path)
    if args.days < days_pruned:
        parser.error(f"--days must be at least {days_pruned} for the prunes asked for")
    counts = {1: args.jobs // 25, 16: args.jobs // 5, 256: args.jobs}

    server = pg.Server(args.db, "hist")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("fencepost history at scale (PostgreSQL)")
    print(f"  python   {platform.python_version()} ({platform.python_implementation()})")
    print(f"  psycopg  {psycopg.__version__} (libpq {psycopg.pq.version()})")
    for line in server.describe():
        print(line)
    print(f"  cpus     {os.cpu_count()} ({platform.machine()}), shared with the server")
    print(f"  load     {load} (1, 5, 15 min averages at start)")
    print(f"  pool     pool_max={server.pool_max} (fencepost)")
    print(f"  history  {args.rows:,} SUCCEEDED executions over the {args.days} days before today")
    print(f"  figures  median of {args.repeat} runs (min-max), per second")
    print()

    started = time.perf_counter()
    runs: dict[str, list[pg.Run]] = defaultdict(list)
    work: dict[str, list[dict[str, float]]] | None = None
    if args.statements:
        require_statements(server)
        work = defaultdict(list)
    figures: dict[str, Any] = {"rows": args.rows, "days": args.days}
    with server.session():
        empty = server.new_schema("empty")
        full = server.new_schema("full")
        days = server.new_schema("days") if not args.no_days else None
        if days is not None:  # the control: the full one's partitions, no rows
            with server.connect(days) as conn:
                first = today() - args.days
                history.ensure(conn, set(range(first, first + args.days)))
            settle(server, days)
        pg.progress(f"seeding {args.rows:,} executions into {full}")
        seed_s = seed(server, full, args.rows, args.days, args.insert_batch)
        pg.progress(f"seeded in {seed_s:,.0f} s; VACUUM ANALYZE + CHECKPOINT")
        settle_s = settle(server, full)
        settle(server, empty)
        full_bytes = schema_bytes(server, full)
        pg.progress(f"settled in {settle_s:,.0f} s; {full_bytes / 2**30:,.2f} GiB on disk")
        figures |= {"seed_s": seed_s, "vacuum_analyze_s": settle_s, "full_bytes": full_bytes}

        for r in range(args.repeat):
            sides = [("empty", empty), ("full", full)]
            if days is not None:
                sides.insert(1, ("days", days))
            sides = sides[r % len(sides) :] + sides[: r % len(sides)]  # who goes first rotates
            for batch in BATCH_SIZES:
                for label, schema in sides:
                    pg.progress(f"claim {batch}, {label} (run {r + 1} of {args.repeat})")
                    drained = None if work is None else work[f"{label} claim {batch}"]
                    run = measure_drain(server, schema, counts[batch], batch, drained)
                    runs[f"{label} claim {batch}"].append(run)

        oldest = today() - args.days
        prunes: list[dict[str, Any]] = []

        def prune(day: int, key: str, label: str) -> None:
            """One prune under load, filed in the JSON figures under ``key``."""
            prunes.append(prune_under_load(server, full, day, args.load, label) | {"key": key})

        prune(oldest, "drop", "Dropping the oldest day")
        day = oldest + 1  # each prune after the first takes the day after the last one's
        if not args.no_keyed_day:
            pg.progress(f"giving the executions of {history.day_date(day)} keys")
            keys = give_keys(server, full, day)
            label = f"Dropping the next day, every execution keyed ({keys:,} idempotency keys)"
            prune(day, "keyed_drop", label)
            day += 1
        if not args.no_row_path:
            hold_one_running(server, full, day)
            label = "Row by row: the next day left, kept from dropping by one RUNNING execution"
            prune(day, "row_path", label)
        after_bytes = schema_bytes(server, full)
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())

    print("## Seeding")
    print()
    print("| measure | figure |")
    print("|---|---:|")
    per_s = args.rows / seed_s
    print(
        f"| seeding {args.rows:,} executions (3 audit rows each) "
        f"| {seed_s:,.0f} s ({per_s:,.0f}/s) |"
    )
    print(f"| VACUUM ANALYZE + CHECKPOINT | {settle_s:,.0f} s |")
    print(f"| the full schema on disk (tables, indexes, TOAST) | {full_bytes / 2**30:,.2f} GiB |")
    print(f"| ... after the prunes | {after_bytes / 2**30:,.2f} GiB |")
    print()
    print("## claim(limit=B, ttl=30) + complete_many(result {'ok': True}) until drained (jobs/s)")
    print()
    control = bool(runs["days claim 256"])
    if control:
        print(
            f"| batch B | jobs | empty | days: {args.days} empty past days' partitions | full "
            "| days / empty | full / empty |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("| batch B | jobs | empty | full | full / empty |")
        print("|---:|---:|---:|---:|---:|")
    for batch in BATCH_SIZES:
        ours, base = runs[f"full claim {batch}"], runs[f"empty claim {batch}"]
        ratio = pg.median_rate(ours) / pg.median_rate(base)
        figures[f"claim {batch} empty"] = pg.median_rate(base)
        figures[f"claim {batch} full"] = pg.median_rate(ours)
        figures[f"claim {batch} ratio"] = ratio
        if control:
            bare = runs[f"days claim {batch}"]
            bare_ratio = pg.median_rate(bare) / pg.median_rate(base)
            figures[f"claim {batch} days"] = pg.median_rate(bare)
            figures[f"claim {batch} days ratio"] = bare_ratio
            print(
                f"| {batch} | {counts[batch]:,} | {pg.spread(base).strip()} | "
                f"{pg.spread(bare).strip()} | {pg.spread(ours).strip()} | "
                f"{100 * bare_ratio:.1f}% | {100 * ratio:.1f}% |"
            )
        else:
            print(
                f"| {batch} | {counts[batch]:,} | {pg.spread(base).strip()} | "
                f"{pg.spread(ours).strip()} | {100 * ratio:.1f}% |"
            )
    print()
    if work is not None:
        print_work(work, ["empty", "full"] if args.no_days else ["empty", "days", "full"])
        figures["statements"] = {key: values for key, values in work.items() if values}
    print("## Prune under load")
    print()
    for result in prunes:
        print_prune(result, args.load)
        figures[result["key"]] = {
            k: v for k, v in result.items() if k not in ("before", "during", "label", "key")
        } | {"before": percentiles(result["before"]), "during": percentiles(result["during"])}
    print("Figures, not verdicts: the requirement is within 10% of empty at every batch size,")
    print("a day dropped in under a second, claim p99 at most 50 ms while it is.")
    print(f"load at the end {load_end} (1, 5, 15 min averages); the machine is shared")
    print(f"total {time.perf_counter() - started:,.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The SLO report over 1,000,000 executions, and what its rollups add to prune.

Run by hand::

    .venv/bin/python bench/slo_report.py --db sqlite:///PATH [--n 1000000] [--days 30]
        [--repeat 5] [--rounds 2] [--batch 1000] [--skip-prune]
    .venv/bin/python bench/slo_report.py \
        --db 'postgresql://postgres@127.0.0.1:5432/test?schema=fpbench_slo' [...]

Setup (untimed): ``--n`` executions planned evenly over the last ``--days`` days (30
days of the seed's hourly load compressed: a million hourly schedules' worth of
occurrences), written in SQL straight into the store's tables by the dialect's
generator (no submits through the API): each with its facts, its payload row and
its audit rows (SUBMITTED, CLAIMED, then COMPLETED or FAILED). By a hash of the
row: 96.6% on time, 1.5% claimed late, 0.5% dead letters, 0.3% timed out, 0.2%
renewal failures, 0.2% throttled, 0.1% backfills, 0.1% replays, 0.2% SKIPPED, 0.2%
CANCELLED before a claim; the last 2 minutes' still RUNNING.

Timed:

1. ``store.slo()`` at its defaults (30-day window, 10 worst), ``--repeat`` times in
   one process (the first run reads a cold page cache less than a fresh process
   would: the generator just wrote the file); and ``fencepost slo --db URL --json``
   as a fresh process, wall time (Python start and import included).
2. ``prune --older-than 14d`` (about 16/30 of the rows), ``--rounds`` times each way,
   alternating, on copies of the same database: with the rollups (as shipped) and
   without (SQLite: ``prunable`` as it was, reading no facts and rolling nothing
   up): the A/B of what the rollups add. The report taken after the pruning with
   rollups must equal the one taken before it.

Each dialect brings a generator and a way to copy a database (``DIALECTS``): SQLite
and PostgreSQL (``--db postgresql://...?schema=NAME``: that schema and its
``NAME_prune<i>`` copies are dropped and made again; the rows go into the day
partitions of their creation, so ``prune`` drops 16 whole days and deletes the edges
by batch).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fencepost
from fencepost.store.base import Store

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
DAY_US = 86_400 * 1_000_000


# -- SQLite ---------------------------------------------------------------------------

#: The facts of execution n, from r = a hash of n in [0, 1000) (see the module doc).
#: Times in microseconds; :start and :step place the planned time, :now is the
#: generator's now. One statement: a recursive CTE of the row numbers.
SQLITE_EXECUTIONS = """
WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < :count - 1),
base AS (
    SELECT n, (n * 2654435761) % 1000003 % 1000 AS r, :start + n * :step AS planned
    FROM seq
),
shaped AS (
    SELECT n, r, planned,
        CASE
            WHEN r < 2 THEN NULL                          -- SKIPPED
            WHEN r < 4 THEN NULL                          -- CANCELLED before a claim
            WHEN r < 19 THEN planned + 11000000 + (n % 60) * 1000000  -- late claim
            WHEN r < 31 AND r >= 29 THEN planned + 41000000  -- throttled 40 s
            ELSE planned + (n % 3000) * 1000              -- on time
        END AS claimed,
        CASE
            WHEN r < 19 THEN 0
            WHEN r < 24 THEN 8                            -- dead letter
            WHEN r < 27 THEN 4                            -- timed out, then succeeded
            WHEN r < 29 THEN 1                            -- renewal failed
            WHEN r < 31 THEN 0
            WHEN r < 32 THEN 16                           -- backfill
            WHEN r < 33 THEN 32                           -- replayed
            ELSE 0
        END AS marks,
        CASE WHEN r >= 29 AND r < 31 THEN 40000000 ELSE 0 END AS held
    FROM base
),
final AS (
    SELECT *,
        CASE
            WHEN r < 2 THEN 'SKIPPED'
            WHEN r < 4 THEN 'CANCELLED'
            WHEN :now - planned < 120000000 THEN 'RUNNING'
            WHEN r >= 19 AND r < 24 THEN 'FAILED'
            ELSE 'SUCCEEDED'
        END AS state,
        CASE
            WHEN r < 4 OR :now - planned < 120000000 THEN NULL
            WHEN r >= 19 AND r < 24 THEN claimed + 400000000
            WHEN r >= 24 AND r < 27 THEN claimed + 350000000
            WHEN r >= 27 AND r < 29 THEN claimed + 320000000
            ELSE claimed + 500000 + (n % 20) * 1000000
        END AS finished
    FROM shaped
)
INSERT INTO executions (
    id, job, job_version, state, due_at, priority, attempt, max_attempts, epoch,
    lease_owner, lease_until, timeout_us, idempotency_key, request_hash, schedule_id, slot,
    bucket, bucket_key, created_at, updated_at, queue, planned_at, first_claimed_at,
    first_finished_at, held_us, slo_marks
)
SELECT
    printf('%08x-%04x-7000-8000-%012x', (planned - 60000000) / 1000 / 65536,
           (planned - 60000000) / 1000 % 65536, n),
    'job-' || (n % 50), NULL, state, planned, 0,
    CASE WHEN claimed IS NULL THEN 0 ELSE 1 END, 3, CASE WHEN claimed IS NULL THEN 0 ELSE 1 END,
    CASE WHEN state = 'RUNNING' THEN 'bench' END,
    CASE WHEN state = 'RUNNING' THEN :now + 60000000 END,
    NULL, NULL, NULL, NULL, NULL, n % 64, NULL, planned - 60000000,
    coalesce(finished, claimed, planned - 60000000), 'default', planned,
    CASE WHEN state = 'SKIPPED' THEN NULL ELSE claimed END,
    finished, held, marks
FROM final
"""

SQLITE_DATA = """
INSERT INTO execution_data (execution_id, inputs, result)
SELECT id, '{"n": 1}', CASE WHEN state = 'SUCCEEDED' THEN '{"ok": true}' END FROM executions
"""

SQLITE_TRANSITIONS = """
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
SELECT id, 'SUBMITTED', NULL, 'SCHEDULED', 0, NULL, NULL, created_at FROM executions
UNION ALL
SELECT id, 'CLAIMED', 'SCHEDULED', 'RUNNING', 1, 'bench', NULL, first_claimed_at
FROM executions WHERE first_claimed_at IS NOT NULL
UNION ALL
SELECT id, CASE state WHEN 'FAILED' THEN 'FAILED' ELSE 'COMPLETED' END, 'RUNNING', state, 1,
       'bench', NULL, first_finished_at
FROM executions WHERE first_finished_at IS NOT NULL
"""


def sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def generate_sqlite(url: str, n: int, days: int) -> None:
    path = sqlite_path(url)
    drop_sqlite(url)
    fencepost.connect(url).close()  # created and migrated
    now = int(time.time() * 1_000_000)
    span = days * DAY_US
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("BEGIN")
        conn.execute(
            SQLITE_EXECUTIONS, {"count": n, "start": now - span, "step": span // n, "now": now}
        )
        conn.execute(SQLITE_DATA)
        conn.execute(SQLITE_TRANSITIONS)
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def copy_sqlite(url: str, to: str) -> None:
    shutil.copyfile(sqlite_path(url), sqlite_path(to))


#: prunable as it was before the rollups (no facts, no verdicts), with the columns
#: the store reads: no verdict, so nothing is rolled up.
SQLITE_PRUNABLE_BEFORE = """
SELECT id, NULL, NULL, NULL, NULL FROM executions
WHERE id > :after AND id < :before
  AND state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED') AND updated_at <= :cutoff
ORDER BY id
LIMIT :batch
"""


@contextmanager
def sqlite_without_rollups() -> Iterator[None]:
    """Prune as it was before the rollups: the batch's walk reads no facts and no row
    is rolled up (what is left is counting a batch of identical tuples in Python)."""
    from fencepost.store.sqlite.connection import QUERIES

    saved = QUERIES["prunable"]
    QUERIES["prunable"] = SQLITE_PRUNABLE_BEFORE
    try:
        yield
    finally:
        QUERIES["prunable"] = saved


def drop_sqlite(url: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{sqlite_path(url)}{suffix}").unlink(missing_ok=True)


def sqlite_size(url: str) -> str:
    return f"{sqlite_path(url).stat().st_size / 2**20:,.0f} MiB file"


# -- PostgreSQL -----------------------------------------------------------------------

#: The SQLite generator's executions, spelled for PostgreSQL (timestamptz and intervals),
#: into the partitioned table (each row routed to its creation day's partition, made
#: beforehand). Ids are UUIDv7 of the creation time (planned - 60 s), then n.
PG_EXECUTIONS = """
WITH base AS (
    SELECT n, (n * 2654435761) %% 1000003 %% 1000 AS r,
           %(start)s::timestamptz + n * %(step)s::interval AS planned
    FROM generate_series(0, %(count)s - 1) AS n
),
shaped AS (
    SELECT n, r, planned,
        CASE
            WHEN r < 4 THEN NULL                          -- SKIPPED, CANCELLED before a claim
            WHEN r < 19 THEN planned + interval '11 s' + (n %% 60) * interval '1 s'  -- late
            WHEN r < 31 AND r >= 29 THEN planned + interval '41 s'  -- throttled 40 s
            ELSE planned + (n %% 3000) * interval '1 ms'   -- on time
        END AS claimed,
        CASE
            WHEN r < 19 THEN 0
            WHEN r < 24 THEN 8                            -- dead letter
            WHEN r < 27 THEN 4                            -- timed out, then succeeded
            WHEN r < 29 THEN 1                            -- renewal failed
            WHEN r < 31 THEN 0
            WHEN r < 32 THEN 16                           -- backfill
            WHEN r < 33 THEN 32                           -- replayed
            ELSE 0
        END AS marks,
        CASE WHEN r >= 29 AND r < 31 THEN interval '40 s' ELSE interval '0' END AS held
    FROM base
),
final AS (
    SELECT *, planned - interval '60 s' AS created,
        CASE
            WHEN r < 2 THEN 'SKIPPED'
            WHEN r < 4 THEN 'CANCELLED'
            WHEN %(now)s::timestamptz - planned < interval '120 s' THEN 'RUNNING'
            WHEN r >= 19 AND r < 24 THEN 'FAILED'
            ELSE 'SUCCEEDED'
        END AS state,
        CASE
            WHEN r < 4 OR %(now)s::timestamptz - planned < interval '120 s' THEN NULL
            WHEN r >= 19 AND r < 24 THEN claimed + interval '400 s'
            WHEN r >= 24 AND r < 27 THEN claimed + interval '350 s'
            WHEN r >= 27 AND r < 29 THEN claimed + interval '320 s'
            ELSE claimed + interval '0.5 s' + (n %% 20) * interval '1 s'
        END AS finished
    FROM shaped
),
ided AS (
    SELECT *, lpad(to_hex((extract(epoch FROM created) * 1000)::bigint), 12, '0') AS h
    FROM final
)
INSERT INTO executions (
    id, job, state, due_at, priority, attempt, max_attempts, epoch, lease_owner,
    lease_until, bucket, created_at, updated_at, queue, planned_at, first_claimed_at,
    first_finished_at, held, slo_marks
)
SELECT
    (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8000-' || lpad(to_hex(n), 12, '0'))::uuid,
    'job-' || (n %% 50), state, planned, 0,
    CASE WHEN claimed IS NULL THEN 0 ELSE 1 END, 3, CASE WHEN claimed IS NULL THEN 0 ELSE 1 END,
    CASE WHEN state = 'RUNNING' THEN 'bench' END,
    CASE WHEN state = 'RUNNING' THEN %(now)s::timestamptz + interval '60 s' END,
    n %% 64, created, coalesce(finished, claimed, created), 'default', planned,
    CASE WHEN state = 'SKIPPED' THEN NULL ELSE claimed END, finished, held, marks
FROM ided
"""

PG_DATA = """
INSERT INTO execution_data (execution_id, inputs, result)
SELECT id, '{"n": 1}', CASE WHEN state = 'SUCCEEDED' THEN '{"ok": true}'::jsonb END
FROM executions
"""

PG_TRANSITIONS = """
INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, reason, at)
SELECT id, 'SUBMITTED', NULL, 'SCHEDULED', 0, NULL, NULL, created_at FROM executions
UNION ALL
SELECT id, 'CLAIMED', 'SCHEDULED', 'RUNNING', 1, 'bench', NULL, first_claimed_at
FROM executions WHERE first_claimed_at IS NOT NULL
UNION ALL
SELECT id, CASE state WHEN 'FAILED' THEN 'FAILED' ELSE 'COMPLETED' END, 'RUNNING', state, 1,
       'bench', NULL, first_finished_at
FROM executions WHERE first_finished_at IS NOT NULL
"""

#: Each generated schema's (n, days, now): a copy is the same rows.
_PG_GENERATED: dict[str, tuple[int, int, datetime]] = {}


def _pg_parts(url: str) -> tuple[str, str]:
    """The libpq connection string and the schema of a ``?schema=`` URL."""
    from fencepost.store.postgres.connection import split_url

    conninfo, own = split_url(url)
    if "schema" not in own:
        raise SystemExit("--db: name the schema the benchmark overwrites: ...?schema=NAME")
    return conninfo, own["schema"]


def _pg_connect(url: str) -> Any:
    import psycopg

    conninfo, schema = _pg_parts(url)
    return psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")


def _pg_fresh(url: str, first_ms: int, last_ms: int) -> None:
    """A new schema migrated by fencepost, with a partition for every day in between."""
    from fencepost.store.postgres import history

    drop_postgres(url)
    conninfo, schema = _pg_parts(url)
    with _pg_raw(conninfo) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    fencepost.connect(url).close()  # migrated
    with _pg_connect(url) as conn:
        days = range(first_ms // history.DAY_MS, last_ms // history.DAY_MS + 1)
        history.ensure(conn, set(days))


def _pg_raw(conninfo: str) -> Any:
    import psycopg

    return psycopg.connect(conninfo, autocommit=True)


def _pg_vacuum(url: str) -> None:
    """Vacuumed, analyzed and checkpointed: a database at rest, not one whose writes the
    timed prune would pay for (hint bits, dirty buffers a DROP must write or discard)."""
    with _pg_connect(url) as conn:
        for table in ("executions", "execution_data", "transitions"):
            conn.execute(f"VACUUM ANALYZE {table}")
        conn.execute("CHECKPOINT")


def generate_postgres(url: str, n: int, days: int, now: datetime | None = None) -> None:
    """``n`` executions planned evenly over the last ``days`` days, written in SQL into a
    fresh schema (INSERT ... SELECT generate_series), vacuumed and analyzed."""
    now = datetime.now(UTC) if now is None else now
    start = now - timedelta(days=days)
    _pg_fresh(url, int(start.timestamp() * 1000) - 60_000, int(now.timestamp() * 1000))
    with _pg_connect(url) as conn, conn.transaction():
        params = {"count": n, "start": start, "step": timedelta(days=days) / n, "now": now}
        conn.execute(PG_EXECUTIONS, params)
        conn.execute(PG_DATA)
        conn.execute(PG_TRANSITIONS)
    _pg_vacuum(url)
    _PG_GENERATED[url] = (n, days, now)
    with _pg_connect(url) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    print(f"PostgreSQL {version[0] if version else '?'}")


def copy_postgres(url: str, to: str) -> None:
    """The same rows in the schema of ``to``: generated again with the same now."""
    n, days, now = _PG_GENERATED[url]
    generate_postgres(to, n, days, now)


#: prune_batch as it was before the rollups (migration 14).
PG_PRUNE_BATCH_BEFORE = """
WITH doomed AS (
    SELECT e.id FROM executions AS e
    WHERE e.state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED')
      AND e.updated_at <= %(cutoff)s::timestamptz
    ORDER BY e.updated_at
    LIMIT %(batch)s
    FOR UPDATE OF e SKIP LOCKED
),
gone AS (
    DELETE FROM executions AS e WHERE e.id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING e.id, e.idempotency_key
),
keys AS (
    DELETE FROM execution_keys AS k
    WHERE k.key = ANY(ARRAY(SELECT idempotency_key FROM gone WHERE idempotency_key IS NOT NULL))
),
orders AS (
    DELETE FROM commands AS c WHERE c.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
data AS (
    DELETE FROM execution_data AS d WHERE d.execution_id = ANY(ARRAY(SELECT id FROM gone))
),
audit AS (
    DELETE FROM transitions AS t WHERE t.execution_id = ANY(ARRAY(SELECT id FROM gone))
)
SELECT count(*) FROM gone
"""


@contextmanager
def postgres_without_rollups() -> Iterator[None]:
    """Prune as it was before the rollups: batches delete without rolling up, and a day
    is counted and dropped (the count the drop made before, without the verdicts)."""
    from fencepost.store.postgres.connection import QUERIES

    saved = {name: QUERIES[name] for name in ("prune_batch", "roll_up_day")}
    QUERIES["prune_batch"] = PG_PRUNE_BATCH_BEFORE
    QUERIES["roll_up_day"] = "SELECT count(*) FROM {day}"
    try:
        yield
    finally:
        QUERIES.update(saved)


def postgres_scratch(url: str, i: int) -> str:
    _, schema = _pg_parts(url)
    return url.replace(f"schema={schema}", f"schema={schema}_prune{i}")


def drop_postgres(url: str) -> None:
    conninfo, schema = _pg_parts(url)
    with _pg_raw(conninfo) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def postgres_size(url: str) -> str:
    with _pg_connect(url) as conn:
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c"
            " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
        ).fetchone()
    return f"{int(row[0] or 0) / 2**20:,.0f} MiB in the schema"


@dataclass(frozen=True)
class Dialect:
    #: Write ``n`` executions planned over the last ``days`` days into a fresh store.
    generate: Callable[[str, int, int], None]
    #: Copy the database at the first URL to the second (a scratch copy to prune).
    copy: Callable[[str, str], None]
    #: Prune without the rollups, for the A/B.
    without_rollups: Callable[[], Any]
    #: The scratch URL beside ``url`` for copy number ``i``.
    scratch: Callable[[str, int], str]
    #: Remove a scratch copy.
    drop: Callable[[str], None]
    size: Callable[[str], str]


DIALECTS = {
    "sqlite": Dialect(
        generate=generate_sqlite,
        copy=copy_sqlite,
        without_rollups=sqlite_without_rollups,
        scratch=lambda url, i: f"{url}.prune{i}",
        drop=drop_sqlite,
        size=sqlite_size,
    ),
    "postgresql": Dialect(
        generate=generate_postgres,
        copy=copy_postgres,
        without_rollups=postgres_without_rollups,
        scratch=postgres_scratch,
        drop=drop_postgres,
        size=postgres_size,
    ),
}
DIALECTS["postgres"] = DIALECTS["postgresql"]


# -- the measurements -----------------------------------------------------------------


def summary(report: Any) -> tuple[Any, ...]:
    """What must not change when prune rolls rows up: both objectives' counts."""
    return tuple(
        (o.met, o.total, dict(o.misses), dict(o.excluded))
        for o in (report.claimed, report.finished)
    )


def time_report(store: Store, repeat: int) -> list[float]:
    took = []
    for _ in range(repeat):
        started = time.perf_counter()
        store.slo()
        took.append(time.perf_counter() - started)
    return took


def time_cli(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(
        [FENCEPOST, "slo", "--db", url, "--json"], capture_output=True, text=True, check=False
    )
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: an objective missed
        raise RuntimeError(done.stderr)
    return took, done.returncode


def prune_once(url: str, batch: int) -> tuple[float, int]:
    with fencepost.connect(url) as store:
        started = time.perf_counter()
        deleted = store.prune(older_than=14 * 86_400, batch=batch)
        return time.perf_counter() - started, deleted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db",
        required=True,
        help="sqlite:///PATH or postgresql://...?schema=NAME (overwritten)",
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="prunes each way (A/B)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--skip-prune", action="store_true")
    args = parser.parse_args()
    dialect = DIALECTS[args.db.split(":", 1)[0]]
    print(f"command: {' '.join(sys.argv)}")
    sqlite = f", SQLite {sqlite3.sqlite_version}" if dialect is DIALECTS["sqlite"] else ""
    print(f"fencepost {fencepost.__version__}{sqlite}")  # PostgreSQL's: by its generator

    started = time.perf_counter()
    dialect.generate(args.db, args.n, args.days)
    print(
        f"generated {args.n:,} executions over {args.days} days in "
        f"{time.perf_counter() - started:.1f} s ({dialect.size(args.db)})"
    )

    with fencepost.connect(args.db) as store:
        took = time_report(store, args.repeat)
        before = store.slo()
    print(
        f"store.slo() x{args.repeat}: min {min(took):.3f} s, median "
        f"{statistics.median(took):.3f} s, max {max(took):.3f} s (first {took[0]:.3f} s)"
    )
    print(
        f"  claim {before.claimed.met:,}/{before.claimed.total:,}, finish "
        f"{before.finished.met:,}/{before.finished.total:,}"
    )
    cli, code = time_cli(args.db)
    print(f"fencepost slo --db URL --json (a fresh process): {cli:.3f} s, exit {code}")
    if args.skip_prune:
        return

    timings: dict[str, list[float]] = {"with rollups": [], "without rollups": []}
    for i in range(args.rounds):
        for name in timings:
            scratch = dialect.scratch(args.db, i)
            dialect.copy(args.db, scratch)
            if name == "with rollups":
                seconds, deleted = prune_once(scratch, args.batch)
                with fencepost.connect(scratch) as store:
                    after = store.slo()
                same = summary(after) == summary(before)
                print(
                    f"  prune with rollups: {seconds:.2f} s, {deleted:,} deleted, "
                    f"rolled_up {after.rolled_up:,}, report unchanged: {same}"
                )
                if not same:
                    print(f"    before {summary(before)}\n    after  {summary(after)}")
            else:
                with dialect.without_rollups():
                    seconds, deleted = prune_once(scratch, args.batch)
                print(f"  prune without rollups: {seconds:.2f} s, {deleted:,} deleted")
            timings[name].append(seconds)
            dialect.drop(scratch)
    a, b = (statistics.median(timings[k]) for k in ("with rollups", "without rollups"))
    print(
        f"prune --older-than 14d --batch {args.batch}: median {a:.2f} s with rollups, "
        f"{b:.2f} s without: the rollups add {(a - b) / b:+.1%}"
    )


if __name__ == "__main__":
    main()

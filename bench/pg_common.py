"""What the PostgreSQL benchmarks share: private schemas, copies, fills, drains and floors.

Not a benchmark itself. Every benchmark works in schemas of its own, named
``fpbench_<pid>_<label>``, made by fencepost's migrations (so tables, indexes and
storage options are exactly the store's) and dropped when it ends.

A floor is bare psycopg over the same schema and rows, doing only the essential
writes in one round trip per statement: no audit rows, no validation, no row
mapping, no inputs read back, no pool. It is what this server does at all, so that
fencepost's figure reads as a fraction of it; it is not a competitor.

The floors' connection never prepares statements (``prepare_threshold=None``), so
every statement gets a plan made for its actual arguments. With psycopg's default
(prepare after 5 executions) PostgreSQL soon switches the fenced complete to a
generic plan that takes ``unnest(...)`` for 10 rows and, once ANALYZE has seen few
RUNNING rows, joins by nested loop, rescanning ``unnest`` for every leased row:
the floor then runs at about 40% of itself. fencepost's pool keeps the default.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.string import TextLoader

import fencepost
from fencepost.domain.ids import IdGenerator
from fencepost.store.postgres.connection import split_url

SUBMIT_BATCH = 1_000
TTL = 30.0
RESULT = {"ok": True}
DEFAULT_POOL_MAX = 4
TABLES = ("executions", "execution_data", "transitions")

# The floors' SQL. The product keeps its SQL in queries.sql; these strings are the
# baseline it is measured against, so they live here on purpose.
FLOOR_CLAIM = """
UPDATE executions
SET state = 'RUNNING', epoch = epoch + 1, attempt = attempt + 1,
    lease_owner = %s, lease_until = now() + interval '30 s', updated_at = now()
WHERE id IN (
    SELECT id FROM executions
    WHERE state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= now()
    ORDER BY priority DESC, due_at, id
    LIMIT %s
    FOR UPDATE SKIP LOCKED
)
RETURNING id, epoch
"""
FLOOR_COMPLETE = """
UPDATE executions AS e
SET state = 'SUCCEEDED', lease_owner = NULL, lease_until = NULL, updated_at = now()
FROM unnest(%s::uuid[], %s::text[], %s::bigint[]) AS l(id, owner, epoch)
WHERE e.id = l.id AND e.state = 'RUNNING' AND e.lease_owner = l.owner
  AND e.epoch = l.epoch AND e.lease_until > now()
"""
FLOOR_SUBMIT = """
WITH new AS (SELECT * FROM unnest(%s::uuid[], %s::jsonb[]) AS n(id, inputs)),
hot AS (
    INSERT INTO executions (
        id, job, state, due_at, priority, attempt, max_attempts, epoch, bucket,
        created_at, updated_at{planned_col}
    )
    SELECT id, 'bench', 'SCHEDULED', now(), 0, 0, 3, 0, 0, now(), now(){planned_val} FROM new
)
INSERT INTO execution_data (execution_id, inputs) SELECT id, inputs FROM new
"""


def floor_submit(conn: psycopg.Connection[Any]) -> str:
    """FLOOR_SUBMIT for the schema ``conn`` is on: with the planned time where its
    executions have one (a NOT NULL column since the SLO's migration), so that
    compare_revisions can run the same floor against an older revision's schema."""
    found = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = 'executions' AND column_name = 'planned_at'"
    ).fetchone()
    if found:
        return FLOOR_SUBMIT.format(planned_col=", planned_at", planned_val=", now()")
    return FLOOR_SUBMIT.format(planned_col="", planned_val="")


@dataclass(frozen=True)
class Run:
    """One timed run: ``count`` executions or jobs in ``seconds``."""

    count: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds


def median_rate(runs: list[Run]) -> float:
    return statistics.median(r.rate for r in runs)


def spread(runs: list[Run]) -> str:
    """The median rate, and the range when there is more than one run."""
    rates = [r.rate for r in runs]
    if len(rates) == 1:
        return f"{rates[0]:>9,.0f}"
    return f"{statistics.median(rates):>9,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"


def progress(message: str) -> None:
    """Progress goes to stderr, so that stdout holds only the report."""
    print(f"  .. {message}", file=sys.stderr, flush=True)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


class Server:
    """One PostgreSQL server (the ``--db`` URL) and the private schemas made on it."""

    def __init__(self, url: str, label: str) -> None:
        self.conninfo, own = split_url(url)
        if "schema" in own:
            raise SystemExit("--db: leave out ?schema=; the benchmark makes schemas of its own")
        self.pool_max = int(own.get("pool_max", DEFAULT_POOL_MAX))
        self.prefix = f"fpbench_{os.getpid()}_{label}"
        self.made: list[str] = []

    def connect(self, schema: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
        """A bare autocommit connection, in ``schema`` when given, loading uuids as text."""
        options = {} if schema is None else {"options": f"-c search_path={schema}"}
        conn = psycopg.connect(self.conninfo, autocommit=True, **options, **kwargs)
        conn.adapters.register_loader("uuid", TextLoader)
        return conn

    def url(self, schema: str, *, pool_max: int | None = None) -> str:
        """The fencepost URL of ``schema``."""
        separator = "&" if "?" in self.conninfo else "?"
        size = self.pool_max if pool_max is None else pool_max
        return f"{self.conninfo}{separator}schema={schema}&pool_max={size}"

    def new_schema(self, label: str) -> str:
        """A new schema holding fencepost's tables (its own migrations) and nothing else."""
        name = f"{self.prefix}_{label}"
        with self.connect() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
            conn.execute(f"CREATE SCHEMA {name}")
        self.made.append(name)
        fencepost.connect(self.url(name, pool_max=1)).close()
        return name

    def drop(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        if name in self.made:
            self.made.remove(name)

    def drop_all(self) -> None:
        for name in list(self.made):
            try:
                self.drop(name)
            except psycopg.Error as exc:  # the server went away: say what is left behind
                print(f"could not drop schema {name}: {exc}", file=sys.stderr)

    def copy(self, source: str, label: str, *, analyze: bool = True) -> str:
        """A new schema holding the same rows as ``source``; vacuumed and analyzed by default.

        ``analyze=False`` leaves the copy as a burst of inserts leaves a table before
        autovacuum gets to it: no statistics at all.
        """
        name = self.new_schema(label)
        with self.connect() as conn:
            for table in ("executions", "execution_data"):
                conn.execute(f"INSERT INTO {name}.{table} SELECT * FROM {source}.{table}")
            columns = "execution_id, event, from_state, to_state, epoch, actor, reason, at"
            conn.execute(
                f"INSERT INTO {name}.transitions ({columns}) "
                f"SELECT {columns} FROM {source}.transitions ORDER BY seq"
            )
        if analyze:
            self.vacuum_analyze(name)
        return name

    def vacuum_analyze(self, schema: str) -> None:
        with self.connect() as conn:
            for table in TABLES:
                conn.execute(f"VACUUM ANALYZE {schema}.{table}")

    def count_states(self, schema: str) -> dict[str, int]:
        with self.connect(schema) as conn:
            return dict(conn.execute("SELECT state, count(*) FROM executions GROUP BY state"))

    def describe(self) -> list[str]:
        """Header lines: the server's version and the settings that move these figures."""
        names = (
            "shared_buffers",
            "work_mem",
            "synchronous_commit",
            "fsync",
            "autovacuum",
            "max_wal_size",
        )
        with self.connect() as conn:
            version = conn.execute("SHOW server_version").fetchone()
            values = [conn.execute(f"SHOW {n}").fetchone() for n in names]
        settings = " ".join(f"{n}={v[0] if v else '?'}" for n, v in zip(names, values, strict=True))
        return [
            f"  postgres {version[0] if version else '?'} at {self.conninfo}",
            f"  settings {settings}",
        ]

    @contextmanager
    def session(self) -> Iterator[Server]:
        """Drop every schema made here on the way out, whatever happened."""
        try:
            yield self
        finally:
            self.drop_all()


def requests(start: int, count: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"job": "bench", "inputs": {"n": i}, **extra} for i in range(start, start + count)]


def batches(n: int, **extra: Any) -> list[list[dict[str, Any]]]:
    return [requests(i, min(SUBMIT_BATCH, n - i), **extra) for i in range(0, n, SUBMIT_BATCH)]


def prefill(url: str, n: int, **extra: Any) -> None:
    """``n`` executions (due now unless ``extra`` says otherwise), through fencepost."""
    with fencepost.connect(url) as store:
        for batch in batches(n, **extra):
            store.submit_many(batch)


def submit_fencepost(url: str, n: int) -> Run:
    """``submit_many`` in batches of SUBMIT_BATCH; the requests are built beforehand."""
    todo = batches(n)
    with fencepost.connect(url) as store:
        started = time.perf_counter()
        for batch in todo:
            store.submit_many(batch)
        elapsed = time.perf_counter() - started
    return Run(n, elapsed)


def submit_floor(server: Server, schema: str, n: int) -> Run:
    """The same rows (id, job, due, inputs) as one INSERT ... unnest per 1,000, no audit rows.

    Ids come from fencepost's generator beforehand (UUIDv7, so the primary key grows
    at its end as it does for fencepost); inputs are encoded beforehand too.
    """
    ids = IdGenerator()
    now_ms = time.time_ns() // 1_000_000
    rows = [(ids.new(now_ms), json.dumps({"n": i}, separators=(",", ":"))) for i in range(n)]
    chunks = [rows[i : i + SUBMIT_BATCH] for i in range(0, n, SUBMIT_BATCH)]
    with server.connect(schema, prepare_threshold=None) as conn:
        statement = floor_submit(conn)
        started = time.perf_counter()
        for chunk in chunks:
            conn.execute(statement, ([i for i, _ in chunk], [d for _, d in chunk]))
        elapsed = time.perf_counter() - started
    return Run(n, elapsed)


def drain_fencepost(url: str, batch: int, owner: str = "bench") -> Run:
    """Claim ``batch`` at a time and complete each batch, until nothing is due."""
    jobs = 0
    with fencepost.connect(url) as store:
        started = time.perf_counter()
        while True:
            leases = store.claim(owner, limit=batch, ttl=TTL)
            if not leases:
                break
            refused = store.complete_many([(lease, RESULT) for lease in leases])
            if any(r is not None for r in refused):
                raise SystemExit(f"fencepost refused a completion: {refused[:3]}")
            jobs += len(leases)
        elapsed = time.perf_counter() - started
    return Run(jobs, elapsed)


def drain_floor(server: Server, schema: str, batch: int, owner: str = "bench") -> Run:
    """The same fenced claim and complete in bare psycopg: one statement (round trip) each."""
    jobs = 0
    with server.connect(schema, prepare_threshold=None) as conn:
        started = time.perf_counter()
        while True:
            claimed = conn.execute(FLOOR_CLAIM, (owner, batch)).fetchall()
            if not claimed:
                break
            ids = [id_ for id_, _ in claimed]
            done = conn.execute(
                FLOOR_COMPLETE, (ids, [owner] * len(ids), [epoch for _, epoch in claimed])
            )
            if done.rowcount != len(claimed):
                raise SystemExit(f"the floor completed {done.rowcount} of {len(claimed)}")
            jobs += len(claimed)
        elapsed = time.perf_counter() - started
    return Run(jobs, elapsed)


def timed_on_copy(
    server: Server,
    template: str,
    label: str,
    measure: Callable[[str], Run],
    *,
    analyze: bool = True,
) -> Run:
    """Measure on a fresh copy of ``template``, dropped afterwards."""
    schema = server.copy(template, label, analyze=analyze)
    try:
        return measure(schema)
    finally:
        server.drop(schema)


def verdict(goal: bool) -> str:
    return "met" if goal else "MISSED"

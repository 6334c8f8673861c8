"""The online conversion to a partitioned history (migration 10), measured with claims running.

Run::

    .venv/bin/python bench/history_migration.py [--rows 5000000] \\
        [--db postgresql://postgres@127.0.0.1:5432/test]

A schema is made as a release before migration 10 made it (migrations 1-9) and seeded
by SQL with ``--rows`` finished executions, each with an idempotency key (as every
materialized occurrence has), its payload row and two audit rows. A writer of that
older release (plain SQL, as it wrote: submit 10 keyed executions, claim 10, complete
them, in a loop) runs throughout, while ``fencepost db migrate``'s two steps run: the
online preparation (``store/postgres/conversion.py``: keys copied in batches, the first
partition's bound validated) and the migration itself (renames and attaches). Printed:
each phase's wall time, and the writer's claim latency p50 / p99 / max and claims per
second in each phase. After the swap the older writer's keyed submits are refused (see
docs/deploy.md › Upgrades), so it claims and completes only from then on.

The schema is dropped at the end. Seeding 5,000,000 rows takes several minutes.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg

import fencepost
from fencepost.domain.ids import IdGenerator
from fencepost.store.postgres import conversion
from fencepost.store.postgres.connection import MIGRATIONS_PACKAGE, QUERIES, Database
from fencepost.store.sql import migration_files

DEFAULT_DB = "postgresql://postgres@127.0.0.1:5432/test"
SEED_BATCH = 500_000


def log(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def _url(db: str, schema: str) -> str:
    return f"{db}{'&' if '?' in db else '?'}schema={schema}"


@contextmanager
def version_9_schema(db: str) -> Iterator[str]:
    """A new schema at version 9 (before the partitioned history), dropped afterwards."""
    schema = f"fp_histmig_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        with psycopg.connect(db) as conn, conn.transaction():
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(QUERIES["create_migrations_table"])
            for version, name, sql in migration_files(MIGRATIONS_PACKAGE):
                if version < 10:
                    conn.execute(sql)
                    conn.execute(QUERIES["record_migration"], {"version": version, "name": name})
        yield schema
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def seed(db: str, schema: str, rows: int) -> float:
    """``rows`` finished, keyed executions over the last day, by SQL; the seconds it took."""
    started = time.perf_counter()
    base_ms = int(time.time() * 1000) - 86_400_000
    step = max(1, 86_400_000 * 8 // max(rows, 1))  # spread over the day, 8 ids per ms step
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute("SET synchronous_commit = off")
        for first in range(0, rows, SEED_BATCH):
            last = min(rows, first + SEED_BATCH)
            # UUIDv7 text: 48-bit ms, version 7 and a counter, variant and random bits.
            conn.execute(
                "INSERT INTO executions (id, job, state, due_at, attempt, max_attempts, epoch,"
                " idempotency_key, bucket, created_at, updated_at)"
                " SELECT id, 'nightly', 'SUCCEEDED', at, 1, 3, 1, 'seed-' || g, g %% 1024, at, at"
                " FROM (SELECT g, (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7'"
                "   || lpad(to_hex(g %% 4096), 3, '0') || '-8' || substr(r, 1, 3) || '-'"
                "   || substr(r, 4, 12))::uuid AS id, to_timestamp(ms / 1000.0) AS at"
                "   FROM (SELECT g, %(base)s::bigint + (g / 8) * %(step)s AS ms,"
                "     lpad(to_hex(%(base)s::bigint + (g / 8) * %(step)s), 12, '0') AS h,"
                "     md5(g::text) AS r FROM generate_series(%(first)s, %(last)s - 1) AS g) AS a"
                " ) AS b",
                {"base": base_ms, "step": step, "first": first, "last": last},
            )
            log(f"seeded {last:,} of {rows:,} executions")
        conn.execute(
            "INSERT INTO execution_data (execution_id, inputs, result)"
            ' SELECT id, \'{"day": "2026-12-01"}\', \'"done"\' FROM executions'
        )
        conn.execute(
            "INSERT INTO transitions (execution_id, event, from_state, to_state, epoch, actor, at)"
            " SELECT id, 'SUBMITTED', NULL, 'SCHEDULED', 0, NULL, created_at FROM executions"
            " UNION ALL SELECT id, 'SUCCEEDED', 'RUNNING', 'SUCCEEDED', 1, 'w', updated_at"
            " FROM executions"
        )
        for table in ("executions", "execution_data", "transitions"):
            conn.execute(f"VACUUM ANALYZE {table}")
    return time.perf_counter() - started


@dataclass
class OlderRelease:
    """A writer of the schema before version 10: submit, claim and complete in a loop."""

    db: str
    schema: str
    claims: list[tuple[float, float]] = field(default_factory=list)  # (at, seconds)
    refused: int = 0
    failures: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        ids = IdGenerator()
        try:
            with psycopg.connect(self.db, autocommit=True) as conn:
                conn.execute(f"SET search_path TO {self.schema}")
                while not self.stop.is_set():
                    self._submit(conn, ids)
                    begun = time.perf_counter()
                    claimed = conn.execute(
                        "UPDATE executions SET state = 'RUNNING', epoch = epoch + 1,"
                        " lease_owner = 'older', lease_until = now() + interval '30 s'"
                        " WHERE id IN (SELECT id FROM executions"
                        "  WHERE state IN ('RETRY_WAIT', 'SCHEDULED') AND due_at <= now()"
                        "  ORDER BY priority DESC, due_at, id LIMIT 10 FOR UPDATE SKIP LOCKED)"
                        " RETURNING id"
                    ).fetchall()
                    self.claims.append((begun, time.perf_counter() - begun))
                    conn.execute(
                        "UPDATE executions SET state = 'SUCCEEDED', updated_at = now()"
                        " WHERE id = ANY(%s)",
                        ([i for (i,) in claimed],),
                    )
                    time.sleep(0.01)  # about 50 claims of 10 a second: an offered load
        except BaseException as exc:  # reported by main
            self.failures.append(exc)

    def _submit(self, conn: psycopg.Connection, ids: IdGenerator) -> None:
        new = [ids.new(int(time.time() * 1000)) for _ in range(10)]
        keyed = self.refused == 0
        try:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO executions (id, job, state, due_at, max_attempts, bucket,"
                    " created_at, updated_at, idempotency_key)"
                    " SELECT i, 'fresh', 'SCHEDULED', now(), 3, 0, now(), now(),"
                    f" {'i::text' if keyed else 'NULL'} FROM unnest(%s::uuid[]) AS t(i)"
                    + (
                        " ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL"
                        " DO NOTHING"
                        if keyed
                        else ""
                    ),
                    (new,),
                )
                conn.execute(
                    "INSERT INTO execution_data SELECT i, '{}' FROM unnest(%s::uuid[]) AS t(i)",
                    (new,),
                )
        except psycopg.errors.InvalidColumnReference:
            self.refused += 1  # after the swap: its keyed submit is refused (unkeyed on)


def _latencies(claims: list[tuple[float, float]], start: float, end: float) -> str:
    during = sorted(s for at, s in claims if start <= at < end)
    if not during:
        return "— | — | — | 0"
    p99 = during[min(len(during) - 1, int(len(during) * 0.99))]
    rate = len(during) / max(end - start, 1e-9)
    return (
        f"{statistics.median(during) * 1000:.1f} | {p99 * 1000:.1f} | "
        f"{during[-1] * 1000:.1f} | {rate:,.0f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="executions seeded")
    parser.add_argument("--db", default=DEFAULT_DB, help="PostgreSQL URL (a schema is made)")
    args = parser.parse_args(argv)
    with version_9_schema(args.db) as schema:
        log(f"seeding {args.rows:,} executions in {schema}")
        seeded = seed(args.db, schema, args.rows)
        log(f"seeded in {seeded:.1f} s")
        writer = OlderRelease(args.db, schema)
        thread = threading.Thread(target=writer.run, daemon=True)
        thread.start()
        time.sleep(5)
        marks = {"before": time.perf_counter() - 5}
        url = _url(args.db, schema)
        db = Database(url)
        try:
            marks["copying keys"] = time.perf_counter()

            def progress(stage: str, done: int, total: int | None) -> None:
                if stage.startswith("checking") and "validating" not in marks:
                    marks["validating"] = time.perf_counter()

            copied = conversion.prepare(db, progress=progress)
        finally:
            db.close()
        marks["migration"] = time.perf_counter()
        with fencepost.connect(url) as store:
            applied = store.migrations_applied
        marks["after"] = time.perf_counter()
        time.sleep(5)
        marks["end"] = time.perf_counter()
        writer.stop.set()
        thread.join(timeout=30)
        if writer.failures:
            raise writer.failures[0]
    names = list(marks)
    print(f"# online conversion of {args.rows:,} executions (seeded in {seeded:.0f} s);")
    print(f"# keys copied: {copied:,}; migrations applied: {applied}")
    print("# the older release's claims of 10 (ms), and claims per second, in each phase\n")
    print("| phase | wall time | claim p50 | p99 | max | claims/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, following in itertools.pairwise(names):
        if name == "end":
            continue
        start, end = marks[name], marks[following]
        lat = _latencies(writer.claims, start, end)
        print(f"| {name} | {end - start:.2f} s | {lat} |")
    print(f"\nthe older release's keyed submits refused after the swap: {writer.refused}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

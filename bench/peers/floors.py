"""The raw floors of the peer benchmark: a fenced claim + complete loop, no framework.

Not a competitor: what each backend does at all for W1's shape of work on this
machine, in a small table of its own (id, payload, state, owner, epoch, lease expiry,
due time; one partial index over the claimable rows). Claim 256 at a time, leasing them
(owner, epoch + 1, expiry), then complete the batch only where owner and epoch still
match and the lease is live. No handler, no audit rows, no validation.

* PostgreSQL: psycopg, autocommit, one statement per step (``UPDATE ... WHERE id IN
  (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 256) RETURNING``, then one ``UPDATE ... FROM
  unnest(...)``); statements never prepared, so each gets a plan for its arguments
  (see bench/pg_common.py on generic plans).
* SQLite: WAL and ``synchronous=FULL`` (fencepost's and SQLite's default), the claim
  and the completion each one ``BEGIN IMMEDIATE`` transaction.

Each returns ``(jobs completed, seconds, lost, duplicated)``: lost = rows never
completed, duplicated = rows claimed more than once (epoch > 1).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import psycopg

BATCH = 256
OWNER = "floor"

PG_SCHEMA = """
CREATE TABLE floor_jobs (
    id bigint PRIMARY KEY,
    payload bigint NOT NULL,
    state text NOT NULL DEFAULT 'queued',
    owner text,
    epoch integer NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    due_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX floor_jobs_claimable ON floor_jobs (due_at, id) WHERE state = 'queued';
"""
PG_CLAIM = """
UPDATE floor_jobs
SET state = 'running', owner = %s, epoch = epoch + 1,
    lease_expires_at = now() + interval '30 seconds'
WHERE id IN (
    SELECT id FROM floor_jobs
    WHERE state = 'queued' AND due_at <= now()
    ORDER BY due_at, id
    LIMIT %s
    FOR UPDATE SKIP LOCKED
)
RETURNING id, epoch
"""
PG_COMPLETE = """
UPDATE floor_jobs AS j
SET state = 'done', owner = NULL, lease_expires_at = NULL
FROM unnest(%s::bigint[], %s::integer[]) AS l(id, epoch)
WHERE j.id = l.id AND j.state = 'running' AND j.owner = %s AND j.epoch = l.epoch
  AND j.lease_expires_at > now()
"""

SQLITE_SCHEMA = """
CREATE TABLE floor_jobs (
    id INTEGER PRIMARY KEY,
    payload INTEGER NOT NULL,
    state TEXT NOT NULL DEFAULT 'queued',
    owner TEXT,
    epoch INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL,
    due_at REAL NOT NULL
);
CREATE INDEX floor_jobs_claimable ON floor_jobs (due_at, id) WHERE state = 'queued';
"""
SQLITE_CLAIM = """
UPDATE floor_jobs
SET state = 'running', owner = ?, epoch = epoch + 1, lease_expires_at = ?
WHERE id IN (
    SELECT id FROM floor_jobs
    WHERE state = 'queued' AND due_at <= ?
    ORDER BY due_at, id
    LIMIT ?
)
RETURNING id, epoch
"""
SQLITE_COMPLETE = """
UPDATE floor_jobs
SET state = 'done', owner = NULL, lease_expires_at = NULL
WHERE id = ? AND state = 'running' AND owner = ? AND epoch = ? AND lease_expires_at > ?
"""


def postgres(conninfo: str, n: int) -> tuple[int, float, int, int]:
    """Fill ``n`` rows (untimed), then claim + complete them all."""
    with psycopg.connect(conninfo, autocommit=True, prepare_threshold=None) as conn:
        conn.execute(PG_SCHEMA)
        conn.execute(
            "INSERT INTO floor_jobs (id, payload) SELECT g, g FROM generate_series(0, %s) g",
            (n - 1,),
        )
        conn.execute("VACUUM ANALYZE floor_jobs")
        done = 0
        started = time.perf_counter()
        while claimed := conn.execute(PG_CLAIM, (OWNER, BATCH)).fetchall():
            ids = [row[0] for row in claimed]
            epochs = [row[1] for row in claimed]
            done += conn.execute(PG_COMPLETE, (ids, epochs, OWNER)).rowcount
        elapsed = time.perf_counter() - started
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE epoch > 1)"
            " FROM floor_jobs"
        ).fetchone()
    assert row is not None
    return done, elapsed, n - row[0], row[1]


def sqlite(path: Path, n: int) -> tuple[int, float, int, int]:
    """Fill ``n`` rows (untimed), then claim + complete them all."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.executescript(SQLITE_SCHEMA)
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO floor_jobs (id, payload, due_at) VALUES (?, ?, ?)",
            ((i, i, now) for i in range(n)),
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        done = 0
        started = time.perf_counter()
        while True:
            now = time.time()
            conn.execute("BEGIN IMMEDIATE")
            claimed = conn.execute(SQLITE_CLAIM, (OWNER, now + 30.0, now, BATCH)).fetchall()
            conn.execute("COMMIT")
            if not claimed:
                break
            now = time.time()
            before = conn.total_changes
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(SQLITE_COMPLETE, ((i, OWNER, epoch, now) for i, epoch in claimed))
            conn.execute("COMMIT")
            done += conn.total_changes - before
        elapsed = time.perf_counter() - started
        finished, again = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'done'), count(*) FILTER (WHERE epoch > 1)"
            " FROM floor_jobs"
        ).fetchone()
    finally:
        conn.close()
    return done, elapsed, n - finished, again

"""A ``fencepost worker`` process told the truth about a database that went away.

While the database is unreachable the worker says so once, and says "reachable
again" once, only after a real round trip succeeded, whatever else it did
meanwhile (an idle worker polls commands of nothing, writes empty batches);
psycopg_pool's own warnings about the lost server are folded into those two lines;
and the executions that fell due during the outage are each claimed once and run,
none handed straight back (an ABANDONED attempt) by a clock that counted the wait
for the store as time spent in the buffer.

PostgreSQL: a private server this test stops and starts (``_pg_instance``), never
the shared one. SQLite: the outage is a write lock the test holds (``BEGIN
EXCLUSIVE``); the worker's writes wait ``busy_timeout`` and fail as an outage.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import fencepost
from fencepost import AttemptOutcome, State
from tests.integration import _pg, _pg_instance
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._observed_app:app"
DUE = 20  # executions of "brief" that fall due during the outage
OUTAGE = 3.0  # seconds the database stays away once the worker noticed


@contextmanager
def worker(url: str, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [FENCEPOST, "worker", APP, "--db", url, "--owner", "observed"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        wait_until(lambda: "worker observed started" in log_path.read_text(), 30, "the start")
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ride_out(
    store: fencepost.Store,
    log_path: Path,
    go_away: Callable[[], None],
    come_back: Callable[[], None],
) -> str:
    """Take the database away from an idle worker and back; the log up to its return.

    Executions of ``brief`` submitted just before fall due during the outage.
    """
    ids = [e.id for e in store.submit_many([{"job": "brief", "delay": 1.5}] * DUE)]
    go_away()
    wait_until(lambda: "database unreachable" in log_path.read_text(), 30, "the outage noticed")
    deadline = time.monotonic() + OUTAGE
    while time.monotonic() < deadline:  # the outage itself, watched from outside
        assert "reachable again" not in log_path.read_text(), "told while still down"
        time.sleep(0.1)
    before = log_path.read_text()
    come_back()
    for eid in ids:
        wait_until(lambda eid=eid: store.get(eid).state is State.SUCCEEDED, 60, eid)
    for eid in ids:
        attempts = store.attempts(eid)
        assert [a.outcome for a in attempts] == [AttemptOutcome.SUCCEEDED], (eid, attempts)
    return before


def check_log(text: str, before: str) -> None:
    assert "reachable again" not in before
    assert len(re.findall(r"database unreachable", text)) == 1, text
    assert len(re.findall(r"database reachable again", text)) == 1, text
    assert "psycopg.pool" not in text, text
    assert "Traceback" not in text, text
    assert "handed back" not in text, text


@pytest.mark.timeout(180)
def test_a_postgresql_outage_is_told_once_each_way_and_loses_no_claim(tmp_path: Path) -> None:
    log_path = tmp_path / "worker.log"
    with (
        _pg_instance.private_postgres(tmp_path) as server,
        _pg.fresh_schema(dsn := server.dsn) as schema,
        fencepost.connect(_pg.url(schema, dsn=dsn)) as store,
    ):
        # Outages reach the worker at once: no waiting pool, no retries in the store.
        url = _pg.url(schema, dsn=dsn, pool_timeout=1, retry_timeout=0)
        with worker(url, log_path):
            before = ride_out(store, log_path, server.stop, server.start)
        check_log(log_path.read_text(), before)


@pytest.mark.timeout(180)
def test_a_sqlite_outage_is_told_once_each_way_and_loses_no_claim(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    log_path = tmp_path / "worker.log"
    lock = sqlite3.connect(path, isolation_level=None)
    with (
        fencepost.connect(f"sqlite:///{path}") as store,
        worker(f"sqlite:///{path}?busy_timeout=0.2", log_path),
    ):
        before = ride_out(
            store,
            log_path,
            lambda: lock.execute("BEGIN EXCLUSIVE"),
            lambda: lock.execute("COMMIT"),
        )
    lock.close()
    check_log(log_path.read_text(), before)

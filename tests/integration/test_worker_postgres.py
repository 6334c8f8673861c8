"""A ``fencepost worker`` process on PostgreSQL, through a server restart.

The worker drains 6,000 executions of a few-millisecond job while the server is
stopped (fast shutdown: sessions cut, transactions rolled back), kept down for
three seconds and started again. The worker must say so in its log, stop
claiming, keep the outcomes it holds, resume by itself, and finish every
execution with exactly one accepted completion (judged from the audit trail).
The pool waits at most a second for a connection (``pool_timeout=1``) and the store
does not retry (``retry_timeout=0``), so the outage reaches the worker instead of
being absorbed by a waiting pool or the store's own retries.

The server is a private one started for this test (``_pg_instance``: its own data
directory and loopback port, stopped at the end whatever happens), never the shared
test server, which other tests use meanwhile. Without PostgreSQL's ``initdb`` and
``pg_ctl`` the test is skipped, or failed in CI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fencepost
from fencepost import State
from tests.integration import _audit, _pg, _pg_instance

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
EXECUTIONS = 6_000
TTL = 5.0  # the lease-echo job's lease_ttl


@pytest.mark.timeout(240)
def test_a_worker_rides_out_a_postgresql_restart_and_loses_nothing(tmp_path: Path) -> None:
    log_path = tmp_path / "worker.log"
    with (
        _pg_instance.private_postgres(tmp_path) as server,
        _pg.fresh_schema(dsn := server.dsn) as schema,
        fencepost.connect(_pg.url(schema, dsn=dsn)) as store,
    ):
        store.submit_many([{"job": "lease-echo", "max_attempts": 50}] * EXECUTIONS)
        url = _pg.url(schema, dsn=dsn, pool_timeout=1, retry_timeout=0)
        with log_path.open("wb") as log:
            worker = subprocess.Popen(
                [
                    *(FENCEPOST, "worker", "tests.integration._worker_app:app"),
                    *("--jobs", "lease-echo", "--db", url),
                    *("--owner", "survivor", "--concurrency", "16"),
                ],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        try:
            deadline = time.monotonic() + 60
            while _pg.count_succeeded(schema, dsn=dsn) < EXECUTIONS // 5:
                assert time.monotonic() < deadline, "the worker made no progress"
                time.sleep(0.05)
            try:
                server.stop()
                time.sleep(3.0)
            finally:
                server.start()
            deadline = time.monotonic() + 120
            while _pg.count_succeeded(schema, dsn=dsn) < EXECUTIONS:
                assert worker.poll() is None, "the worker died"
                assert time.monotonic() < deadline, (
                    f"stuck at {_pg.count_succeeded(schema, dsn=dsn)}"
                )
                time.sleep(0.2)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(30) == 0
        text = log_path.read_text()
        assert "database unreachable" in text
        assert "database reachable again" in text
        executions = _pg.load_executions(schema, dsn=dsn)
        assert {e.state for e in executions.values()} == {State.SUCCEEDED}
        _audit.check_exactly_once(
            executions, _pg.load_audit(schema, dsn=dsn), {"survivor": TTL}, where="(worker restart)"
        )

"""Workers ride out a PostgreSQL restart: they pause, resume by themselves, lose nothing.

Four worker processes (``_pg_resilient_worker.py``) drain 20,000 executions. A fifth
of the way through, the server is stopped (fast shutdown: sessions are cut, in-flight
transactions rolled back), left down for three seconds and started again. The
workers catch ``StoreUnavailable``, keep the outcome of the batch they hold and write
it again until the store answers, and must resume within ten seconds of the server
accepting connections again (``pg_isready``), through the same store, which replaces
its broken connections by itself. The audit must show every execution SUCCEEDED
through exactly one accepted completion (``_audit.check_exactly_once``); completions
cut off by the outage come back refused (their lease ended, or their commit had
landed before the answer was lost), never accepted twice.

The server is a private one started for this test (``_pg_instance``: its own data
directory and loopback port, stopped at the end whatever happens), never the shared
test server, which other tests use meanwhile. Without PostgreSQL's ``initdb`` and
``pg_ctl`` the test is skipped, or failed in CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fencepost
from tests.integration import _audit, _pg, _pg_instance

EXECUTIONS = 20_000
WORKERS = 4
TTL = 5.0
MAX_BATCH = 50
MAX_ATTEMPTS = 50
SUBMIT_BATCH = 5_000
DOWN_FOR = 3.0  # seconds between the end of the stop and the start
RESUME_WITHIN = 10.0  # seconds from pg_isready to each worker's first successful call
DEADLINE = 150.0  # seconds the workers get, outage included
WORKER = Path(__file__).with_name("_pg_resilient_worker.py")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_workers_pause_while_postgresql_restarts_and_finish_every_execution_once(
    tmp_path: Path,
) -> None:
    with (
        _pg_instance.private_postgres(tmp_path) as server,
        _pg.fresh_schema(dsn := server.dsn) as schema,
    ):
        with fencepost.connect(_pg.url(schema, dsn=dsn)) as store:
            for start in range(0, EXECUTIONS, SUBMIT_BATCH):
                store.submit_many(
                    {"job": "work", "inputs": {"n": n}, "max_attempts": MAX_ATTEMPTS}
                    for n in range(start, min(EXECUTIONS, start + SUBMIT_BATCH))
                )
        _pg.analyze(schema, dsn=dsn)

        where = f"(schema {schema}, logs in {tmp_path})"
        logs = [tmp_path / f"worker-{n}.jsonl" for n in range(WORKERS)]
        # A short pool timeout: calls fail (and are retried) while the server is down.
        # retry_timeout=0: the store itself does not retry, so that what is tested here
        # is how the workers ride out the outage (test_postgres_outcome_unknown tests
        # the store's own retries).
        url = _pg.url(schema, dsn=dsn, pool_min=1, pool_max=2, pool_timeout=2, retry_timeout=0)
        limits = [str(TTL), str(MAX_BATCH)]
        procs = []
        try:
            for n, log in enumerate(logs):
                with (tmp_path / f"worker-{n}.out").open("w") as out:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, str(WORKER), url, str(log), f"worker-{n}", *limits],
                            stdout=out,
                            stderr=subprocess.STDOUT,
                        )
                    )
            end = time.monotonic() + DEADLINE
            while _pg.count_succeeded(schema, dsn=dsn) < EXECUTIONS // 5:
                assert all(p.poll() is None for p in procs), f"a worker exited early {where}"
                assert time.monotonic() < end, f"workers made too little progress {where}"
                time.sleep(0.05)

            down_at = time.time()
            try:
                server.stop()
                assert not server.ready(), "the server still accepts connections after its stop"
                time.sleep(DOWN_FOR)
            finally:
                ready_at = server.start()
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.0, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pytest.fail(f"workers did not finish within {DEADLINE} s {where}")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        for n, proc in enumerate(procs):
            output = (tmp_path / f"worker-{n}.out").read_text()
            assert proc.returncode == 0, f"worker-{n} exited {proc.returncode}:\n{output}"
            assert not output, f"worker-{n} wrote output:\n{output}"

        executions = _pg.load_executions(schema, dsn=dsn)
        audit = _pg.load_audit(schema, dsn=dsn)

    assert len(executions) == EXECUTIONS, where
    kinds = _audit.check_exactly_once(
        executions, audit, {f"worker-{n}": TTL for n in range(WORKERS)}, where=where
    )

    # Every worker saw the outage, and resumed soon after the server came back.
    latencies = {}
    for n, log in enumerate(logs):
        records = [json.loads(line) for line in log.read_text().splitlines()]
        failed = [r for r in records if r["kind"] == "unavailable" and r["t"] >= down_at]
        assert failed, f"worker-{n} never found the store unavailable {where}"
        resumed = [r for r in records if r["kind"] == "resumed" and r["t"] > down_at]
        assert resumed, f"worker-{n} never resumed {where}"
        latencies[f"worker-{n}"] = round(resumed[0]["t"] - ready_at, 3)
        # The completions it was told were accepted are the audit's.
        for r in records:
            if r["kind"] == "complete" and r["accepted"]:
                done = [t for t in audit[r["id"]] if t.event == fencepost.Event.COMPLETED]
                assert [(t.epoch, t.actor) for t in done] == [(r["epoch"], r["owner"])], where
    # Kept next to the logs, for whoever looks into a run.
    (tmp_path / "resume_latency.json").write_text(json.dumps({"latencies": latencies, **kinds}))
    slow = {k: v for k, v in latencies.items() if v > RESUME_WITHIN}
    assert not slow, f"resumed later than {RESUME_WITHIN} s after pg_isready: {latencies} {where}"

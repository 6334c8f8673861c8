"""Faults from other sessions on a real PostgreSQL server, and how the store takes them.

* A worker process whose connections are killed (``pg_terminate_backend``) while it
  holds leases: its store heals by itself (same store object, new connections); the
  leases it no longer renews expire and are taken over by another worker, and its
  late completions are refused.
* A transaction another client leaves ``idle in transaction`` for the whole run
  (holding a snapshot and a lock on ``executions``) stops neither claims nor
  completions.
* A process of the store's that stalls inside a transaction (stopped mid-claim,
  holding the flow limits) holds the other workers' limited claims up only until the
  server ends its session (``idle_in_transaction_timeout``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

import fencepost
from tests import postgres
from tests.integration import _audit, _pg

VICTIM = Path(__file__).with_name("_pg_victim_worker.py")
STALLED = Path(__file__).with_name("_pg_stalled_claimer.py")
LEASES = 10
VICTIM_TTL = 2.0
TAKER_TTL = 30.0


def _tell(proc: subprocess.Popen[str], step: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"step": step}) + "\n")
    proc.stdin.flush()


def _hear(proc: subprocess.Popen[str]) -> Any:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=10)
        assert proc.stderr is not None
        pytest.fail(f"the victim exited {proc.returncode}:\n{proc.stderr.read()}")
    return json.loads(line)


@pytest.mark.timeout(60)
def test_a_worker_whose_connections_are_killed_heals_and_its_leases_are_taken_over() -> None:
    postgres.require_postgres()
    app = f"fencepost-victim-{uuid.uuid4().hex[:12]}"
    with _pg.fresh_schema() as schema:
        with fencepost.connect(_pg.url(schema, pool_max=2)) as store:
            ids = {
                e.id
                for e in store.submit_many(
                    {"job": "work", "inputs": {"n": n}, "max_attempts": 5} for n in range(LEASES)
                )
            }
            # Two pooled connections, both open from the start: both get killed.
            victim_url = _pg.url(schema, pool_min=2, pool_max=2, application_name=app)
            victim = subprocess.Popen(
                [sys.executable, str(VICTIM), victim_url, str(LEASES), str(VICTIM_TTL)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                leases = _hear(victim)["leases"]
                assert {x["id"] for x in leases} == ids
                assert {x["epoch"] for x in leases} == {1}

                killed = _pg.backend_pids(app)
                assert len(killed) == 2, killed
                with _pg.connect() as conn:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE application_name = %s",
                        [app],
                    )
                end = time.monotonic() + 10
                while _pg.backend_pids(app) & killed:
                    assert time.monotonic() < end, "the killed backends did not go away"
                    time.sleep(0.02)

                # Its next call fails or succeeds on a fresh connection; the calls after
                # it succeed, through the same store, on new server sessions.
                _tell(victim, "killed")
                calls = _hear(victim)["calls"]
                assert calls[0] == "ok" or calls[0].startswith("StoreUnavailable"), calls
                assert calls[1:] == ["ok"] * (len(calls) - 1), calls
                healed = _pg.backend_pids(app)
                assert healed, "the victim's store holds no connection"
                assert not healed & killed

                # Unrenewed, its leases expire and another worker takes them over.
                taken: list[fencepost.Lease] = []
                end = time.monotonic() + VICTIM_TTL + 10
                while len(taken) < LEASES:
                    assert time.monotonic() < end, f"took over only {len(taken)} of {LEASES}"
                    taken += store.claim("taker", limit=LEASES, ttl=TAKER_TTL)
                    time.sleep(0.05)
                assert {x.execution_id for x in taken} == ids
                assert {x.epoch for x in taken} == {2}

                # Its late completions are refused; the taker's are accepted.
                _tell(victim, "complete")
                assert _hear(victim)["completed"] == ["StaleLease"] * LEASES
                victim.wait(timeout=10)
                assert victim.returncode == 0
                assert victim.stderr is not None
                # Nothing went wrong in the victim: no traceback, no error. A connection
                # killed while idle for less than a second is found broken by the call
                # that uses it (idle connections are checked only after a second: the
                # check is a round trip), and the pool says so when it discards it.
                noise = [
                    line
                    for line in victim.stderr.read().splitlines()
                    if not line.startswith("discarding closed connection: ")
                ]
                assert noise == []
                results = [(x, {"owner": x.owner, "epoch": x.epoch}) for x in taken]
                assert store.complete_many(results) == [None] * LEASES
            finally:
                if victim.poll() is None:
                    victim.kill()
                victim.communicate()
        executions = _pg.load_executions(schema)
        audit = _pg.load_audit(schema)

    ttl = {"victim": VICTIM_TTL, "taker": TAKER_TTL}
    kinds = _audit.check_exactly_once(executions, audit, ttl, where=f"(schema {schema})")
    assert kinds == {_audit.TAKEN_OVER: LEASES}
    for trail in audit.values():
        assert [(t.event, t.actor) for t in trail[1:]] == [
            (fencepost.Event.CLAIMED, "victim"),
            (fencepost.Event.CLAIMED, "taker"),
            (fencepost.Event.STALE_REFUSED, "victim"),
            (fencepost.Event.COMPLETED, "taker"),
        ], _audit.show(trail)
        assert trail[2].reason == "took over from victim (epoch 1): lease expired"


IDLE_EXECUTIONS = 3_000
IDLE_BATCH = 50


@pytest.mark.timeout(90)
def test_a_transaction_left_idle_does_not_stop_claims_or_completions() -> None:
    postgres.require_postgres()
    app = f"fencepost-idle-{uuid.uuid4().hex[:12]}"
    with _pg.fresh_schema() as schema:
        # The schema's tables exist before the other client reads them.
        fencepost.connect(_pg.url(schema, pool_max=1)).close()
        idle = psycopg.connect(postgres.dsn(), autocommit=True, application_name=app)
        try:
            idle.execute("SET idle_in_transaction_session_timeout = 0")
            idle.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            idle.execute(f"SELECT count(*) FROM {schema}.executions")
            began = _pg.server_now()

            # Opened, filled and drained while that transaction sits.
            with fencepost.connect(_pg.url(schema, pool_max=2)) as store:
                submitted = store.submit_many(
                    {"job": "work", "inputs": {"n": n}} for n in range(IDLE_EXECUTIONS)
                )
                drained = 0
                while leases := store.claim("worker", limit=IDLE_BATCH, ttl=TAKER_TTL):
                    results = [(x, {"owner": x.owner, "epoch": x.epoch}) for x in leases]
                    assert store.complete_many(results) == [None] * len(leases)
                    drained += len(leases)
            assert drained == IDLE_EXECUTIONS

            with _pg.connect() as conn:
                row = conn.execute(
                    "SELECT state, xact_start, backend_xmin IS NOT NULL FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    [app],
                ).fetchone()
            assert row is not None
            state, xact_start, holds_snapshot = row
            # It sat idle in its transaction, holding its snapshot, the whole time.
            assert (state, holds_snapshot) == ("idle in transaction", True)
            assert xact_start < began
            still = idle.execute(f"SELECT count(*) FROM {schema}.executions").fetchone()
            assert still == (0,), "the idle transaction's snapshot moved"
        finally:
            idle.close()
        executions = _pg.load_executions(schema)
        audit = _pg.load_audit(schema)

    assert executions.keys() == {e.id for e in submitted}
    kinds = _audit.check_exactly_once(
        executions, audit, {"worker": TAKER_TTL}, where=f"(schema {schema})"
    )
    assert not kinds


@pytest.mark.timeout(60)
def test_a_process_stalled_mid_claim_holds_the_limits_only_until_its_idle_timeout() -> None:
    postgres.require_postgres()
    with _pg.fresh_schema() as schema:
        url = _pg.url(schema, idle_in_transaction_timeout=2)
        with fencepost.connect(url) as store:
            store.set_limit("job:narrow", concurrency=1)
            waiting = store.submit("narrow")
            stalled = subprocess.Popen(
                [sys.executable, str(STALLED), url],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                assert stalled.stdout is not None
                assert stalled.stdout.readline().strip() == "held", stalled.stderr
                began = time.monotonic()
                # Another worker's limited claim waits for the limits the stalled one
                # holds, until the server ends that session: without the timeout, until
                # the stalled process resumed (here: never, the test would time out).
                [lease] = store.claim("other", jobs=["narrow"], ttl=TAKER_TTL)
                blocked = time.monotonic() - began
                assert lease.execution_id == waiting.id
                assert blocked >= 1.0, f"the claim did not wait for the limits ({blocked:.2f} s)"
                # An operator's change to the same limit goes through too.
                assert store.set_limit("job:narrow", concurrency=2).concurrency == 2
            finally:
                stalled.send_signal(signal.SIGCONT)
                out, err = stalled.communicate(timeout=30)
            assert out.strip() == "ended by the server: IdleInTransactionSessionTimeout", err


def test_the_store_s_sessions_carry_an_idle_in_transaction_timeout() -> None:
    postgres.require_postgres()
    with _pg.fresh_schema() as schema:
        for options, expected in (({}, "10s"), ({"idle_in_transaction_timeout": 3}, "3s")):
            with fencepost.connect(_pg.url(schema, **options)) as store:
                with store._db.pool.connection() as conn:
                    row = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
                assert row == (expected,), options
        # 0 leaves the server's own setting (the test server's: off).
        with fencepost.connect(_pg.url(schema, idle_in_transaction_timeout=0)) as store:
            with store._db.pool.connection() as conn:
                row = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
            with _pg.connect() as plain:
                server = plain.execute("SHOW idle_in_transaction_session_timeout").fetchone()
            assert row == server

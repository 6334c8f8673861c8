"""A connection lost during COMMIT: the PostgreSQL store retries, and never does twice.

When the connection is lost at COMMIT (or during a statement that runs in autocommit)
the write may or may not have committed. The store retries submits, completions,
fenced writes, heartbeats and reads (``retry_timeout`` seconds, 30 by default): a
retry finds what its earlier attempt stored (a submit, by the ids this process made)
or ended (a fenced write, by the audit record its own lease wrote) and answers as
that attempt would have. Claims are retried only when nothing was sent.

Each fault is injected at one exact point (``_lost_connection``): after the server
did the work, or before. The last test kills the store's backends in a loop
(``pg_terminate_backend``) while 2,000 executions are submitted and drained.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg_pool
import pytest

import fencepost
from fencepost import StaleLease, State, StoreUnavailable
from fencepost.domain.models import Fence
from fencepost.store.postgres.connection import QUERIES
from tests import postgres
from tests.integration import _pg
from tests.integration._lost_connection import LostConnection

TTL = timedelta(seconds=30)


@pytest.fixture
def schema() -> Iterator[str]:
    postgres.require_postgres()
    with _pg.fresh_schema() as name:
        yield name


@pytest.fixture
def store(schema: str) -> Iterator[fencepost.Store]:
    with fencepost.connect(_pg.url(schema, pool_max=2)) as opened:
        yield opened


@pytest.fixture
def lost(monkeypatch: pytest.MonkeyPatch) -> LostConnection:
    return LostConnection(monkeypatch)


def _rows(schema: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with _pg.connect() as conn:
        return conn.execute(sql.format(schema=schema), params).fetchall()


def _events(schema: str, execution_id: str) -> list[tuple[str, str | None]]:
    """An execution's audit trail as (event, actor), oldest first."""
    return [
        (str(event), actor)
        for event, actor in _rows(
            schema,
            "SELECT event, actor FROM {schema}.transitions WHERE execution_id = %s ORDER BY seq",
            execution_id,
        )
    ]


# -- submits -------------------------------------------------------------------------


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_a_submit_many_cut_off_at_commit_stores_each_execution_once(
    store: fencepost.Store, schema: str, lost: LostConnection, keyed: bool, committed: bool
) -> None:
    # Unkeyed, the batch is one autocommit statement (its run is its commit); keyed,
    # it is a transaction whose COMMIT is cut.
    if keyed:
        fault = lost.at_commit(committed=committed)
    else:
        fault = lost.at_statement(QUERIES["insert_executions"], committed=committed)
    requests = [
        {"job": "work", "inputs": {"n": n}, "idempotency_key": f"k-{n}" if keyed else None}
        for n in range(50)
    ]

    submitted = store.submit_many(requests)

    assert fault.hits == 1
    ids = [e.id for e in submitted]
    assert len(set(ids)) == 50
    stored = _rows(schema, "SELECT id::text, idempotency_key FROM {schema}.executions")
    assert sorted(stored) == sorted(
        (e.id, f"k-{n}" if keyed else None) for n, e in enumerate(submitted)
    )
    submits = _rows(
        schema,
        "SELECT count(*), count(DISTINCT execution_id) FROM {schema}.transitions"
        " WHERE event = 'SUBMITTED'",
    )
    assert submits == [(50, 50)]
    # What the caller got is what is stored (created_at included: the instant of the
    # attempt that committed), as a call that lost nothing would have returned.
    assert submitted == [store.get(i) for i in ids]
    assert {e.state for e in submitted} == {State.SCHEDULED}


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
def test_submit_or_find_cut_off_at_commit_says_it_created_the_execution(
    store: fencepost.Store, schema: str, lost: LostConnection, committed: bool
) -> None:
    fault = lost.at_commit(committed=committed)
    execution, created = store.submit_or_find("work", inputs={"a": 1}, idempotency_key="once")
    assert fault.hits == 1
    assert created is True
    assert execution.idempotency_key == "once"
    assert execution == store.get(execution.id)
    # Its twin, cut off the same way, finds it and says so.
    lost.at_commit(committed=committed)
    twin, created = store.submit_or_find("work", inputs={"a": 1}, idempotency_key="once")
    assert (twin.id, created) == (execution.id, False)
    assert _rows(schema, "SELECT count(*) FROM {schema}.executions") == [(1,)]


def test_a_single_submit_cut_off_after_its_commit_returns_the_stored_execution(
    store: fencepost.Store, schema: str, lost: LostConnection
) -> None:
    lost.at_statement(QUERIES["insert_executions"], committed=True)
    execution = store.submit("work", inputs={"a": 1}, delay=60)
    assert execution.idempotency_key is None
    assert execution == store.get(execution.id)
    assert execution.due_at - execution.created_at == timedelta(seconds=60)
    assert _rows(schema, "SELECT count(*) FROM {schema}.executions") == [(1,)]


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_an_async_submit_many_cut_off_after_its_commit_stores_each_execution_once(
    schema: str, lost: LostConnection, keyed: bool
) -> None:
    async def scenario() -> list[fencepost.Execution]:
        async with fencepost.connect_async(_pg.url(schema, pool_max=2)) as store:
            if keyed:
                fault = lost.at_commit(committed=True)
            else:
                fault = lost.at_statement(QUERIES["insert_executions"], committed=True)
            submitted = await store.submit_many(
                {"job": "work", "idempotency_key": f"k-{n}" if keyed else None} for n in range(20)
            )
            assert fault.hits == 1
            assert submitted == [await store.get(e.id) for e in submitted]
            return submitted

    submitted = asyncio.run(scenario())
    stored = _rows(schema, "SELECT id::text FROM {schema}.executions")
    assert sorted(i for (i,) in stored) == sorted(e.id for e in submitted)


# -- completions and other fenced writes ---------------------------------------------


def _leases(store: fencepost.Store, n: int) -> list[fencepost.Lease]:
    store.submit_many({"job": "work", "inputs": {"n": i}} for i in range(n))
    leases = store.claim("w1", limit=n, ttl=TTL)
    assert len(leases) == n
    return leases


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
def test_a_complete_cut_off_at_commit_is_applied_once_and_returns_the_execution(
    store: fencepost.Store, schema: str, lost: LostConnection, committed: bool
) -> None:
    (lease,) = _leases(store, 1)
    fault = lost.at_statement(QUERIES["complete_returning"], committed=committed)

    done = store.complete(lease, {"ok": True})

    assert fault.hits == 1
    assert done.state is State.SUCCEEDED
    assert done.result == {"ok": True}
    assert done == store.get(lease.execution_id)
    assert _events(schema, lease.execution_id) == [
        ("SUBMITTED", None),
        ("CLAIMED", "w1"),
        ("COMPLETED", "w1"),
    ]


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-committed"])
def test_a_complete_many_cut_off_at_commit_accepts_each_once(
    store: fencepost.Store, schema: str, lost: LostConnection, committed: bool
) -> None:
    leases = _leases(store, 5)
    # One lease of the batch is stale from the start: a retry must still refuse it.
    stale = Fence(execution_id=leases[0].execution_id, owner="w1", epoch=leases[0].epoch + 1)
    batch = [(lease, {"n": i}) for i, lease in enumerate(leases)] + [(stale, None)]
    # Two rounds (the same id twice), so the batch runs in a transaction with a COMMIT.
    fault = lost.at_commit(committed=committed)

    results = store.complete_many(batch)

    assert fault.hits == 1
    assert results[:5] == [None] * 5
    assert isinstance(results[5], StaleLease)
    for lease in leases:
        assert store.get(lease.execution_id).state is State.SUCCEEDED
    events = Counter(
        e for lease in leases for e in _events(schema, lease.execution_id) if e[0] != "SUBMITTED"
    )
    assert events == {("CLAIMED", "w1"): 5, ("COMPLETED", "w1"): 5, ("STALE_REFUSED", "w1"): 1}


@pytest.mark.parametrize("verb", ["fail", "release", "abort", "snooze", "snooze-past-bound"])
def test_a_fenced_write_cut_off_after_its_commit_returns_what_it_wrote(
    store: fencepost.Store, schema: str, lost: LostConnection, verb: str
) -> None:
    (lease,) = _leases(store, 1)
    fault = lost.at_commit(committed=True)
    if verb == "fail":
        done = store.fail(lease, "boom")
        expected = (State.RETRY_WAIT, "FAILED")
    elif verb == "release":
        done = store.release(lease)
        expected = (State.SCHEDULED, "RELEASED")
    elif verb == "snooze":
        done = store.snooze(lease, 60)
        expected = (State.SCHEDULED, "SNOOZED")
    elif verb == "snooze-past-bound":
        done = store.snooze(lease, 60, max_snoozes=0)
        expected = (State.RETRY_WAIT, "FAILED")
    else:
        done = store.abort(lease)
        expected = (State.CANCELLED, "CANCELLED")
    assert fault.hits == 1
    assert done == store.get(lease.execution_id)
    assert done.state is expected[0]
    assert _events(schema, lease.execution_id)[2:] == [(expected[1], "w1")]


def test_a_stale_complete_cut_off_is_still_refused(
    store: fencepost.Store, schema: str, lost: LostConnection
) -> None:
    (lease,) = _leases(store, 1)
    stale = Fence(execution_id=lease.execution_id, owner="w2", epoch=lease.epoch)  # not its holder
    fault = lost.at_statement(QUERIES["complete_returning"], committed=True)
    with pytest.raises(StaleLease):
        store.complete(stale, {"ok": True})
    assert fault.hits == 1
    assert store.get(lease.execution_id).state is State.RUNNING
    assert _events(schema, lease.execution_id)[2:] == [("STALE_REFUSED", "w2")]


def test_a_completion_after_the_lease_ended_by_another_event_is_refused(
    store: fencepost.Store, schema: str, lost: LostConnection
) -> None:
    """The holder's fail committed and its answer was lost; a complete under the same
    lease is refused, retried or not: only the verb's own event counts as its own."""
    (lease,) = _leases(store, 1)
    lost.at_commit(committed=True)
    store.fail(lease, "boom", retryable=False)
    lost.at_statement(QUERIES["complete_returning"], committed=False)
    with pytest.raises(StaleLease):
        store.complete(lease, {"ok": True})
    assert store.get(lease.execution_id).state is State.FAILED


def test_a_heartbeat_cut_off_at_commit_renews_the_lease(
    store: fencepost.Store, lost: LostConnection
) -> None:
    (lease,) = _leases(store, 1)
    fault = lost.at_commit(committed=True)
    renewed = store.heartbeat(lease, ttl=timedelta(seconds=60))
    assert fault.hits == 1
    assert renewed.lease_until == store.get(lease.execution_id).lease_until
    assert renewed.lease_until > lease.lease_until


# -- reads and claims ----------------------------------------------------------------


def test_a_read_cut_off_is_read_again(store: fencepost.Store, lost: LostConnection) -> None:
    execution = store.submit("work")
    fault = lost.at_statement(QUERIES["get_execution"], committed=False)
    assert store.get(execution.id) == execution
    assert fault.hits == 1


def test_a_claim_cut_off_after_it_was_sent_is_not_retried(
    store: fencepost.Store, schema: str, lost: LostConnection
) -> None:
    execution = store.submit("work")
    fault = lost.at_statement(QUERIES["claim"], committed=True)
    with pytest.raises(StoreUnavailable):
        store.claim("w1", limit=5, ttl=TTL)
    assert fault.hits == 1
    # The claim took the row and its answer was lost: the lease expires like any
    # abandoned one; nothing else claimed it.
    held = store.get(execution.id)
    assert (held.state, held.lease_owner, held.epoch) == (State.RUNNING, "w1", 1)
    assert store.claim("w2", limit=5, ttl=TTL) == []


def test_a_claim_that_got_no_connection_is_retried(
    store: fencepost.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    execution = store.submit("work")
    pool = store._db.pool  # type: ignore[attr-defined]
    real_getconn = pool.getconn
    failures = iter([psycopg_pool.PoolTimeout("couldn't get a connection after 0.01 sec")])

    def getconn(*args: Any, **kwargs: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_getconn(*args, **kwargs)

    monkeypatch.setattr(pool, "getconn", getconn)
    (lease,) = store.claim("w1", limit=5, ttl=TTL)
    assert lease.execution_id == execution.id
    assert next(failures, None) is None


# -- the budget ----------------------------------------------------------------------


def test_retry_timeout_zero_retries_nothing(schema: str, lost: LostConnection) -> None:
    with fencepost.connect(_pg.url(schema, pool_max=2, retry_timeout=0)) as store:
        fault = lost.at_commit(committed=False)
        with pytest.raises(StoreUnavailable):
            store.submit("work", idempotency_key="k")
        assert fault.hits == 1
        assert store.find("k") is None


def test_a_call_gives_up_when_its_retry_timeout_runs_out(schema: str, lost: LostConnection) -> None:
    with fencepost.connect(_pg.url(schema, pool_max=2, retry_timeout=1)) as store:
        fault = lost.at_commit(committed=False, times=10_000)
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.submit("work", idempotency_key="k")
        took = time.monotonic() - started
        assert 0.5 < took < 3, took
        assert fault.hits > 2
        fault.times = 0
        assert store.find("k") is None


# -- backends killed in a loop -------------------------------------------------------

KILLED_EXECUTIONS = 2_000
KILL_GAP = (0.02, 0.3)  # seconds from one kill to looking for the next call to cut, uniform
CLAIM_TTL = timedelta(seconds=5)
DRAIN_BATCH = 20
MIN_KILLS = 5  # calls cut before the test ends (more rounds until then)


@pytest.mark.timeout(120)
def test_submit_and_drain_while_backends_are_killed_in_a_loop(
    schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A killer cuts the store's calls in flight (``pg_terminate_backend`` of its backends
    that are running a statement or sit in a transaction), the first one the insert of
    the submit_many, then one 20-300 ms after the caller has finished a call since the
    last kill (so a statement slower than the gap under load is not cut forever, as
    no real fault does; giving up is test_a_call_gives_up_when_its_retry_timeout_runs_out's
    subject). The caller submits 2,000 and drains them, again, until at least five calls
    were cut. It never sees StoreUnavailable from a submit, a heartbeat or a
    completion; every execution exists once and is completed once. (Idle pooled
    connections are left alone: killing those only makes the pool's check find them
    broken, which test_postgres_faults covers.)"""
    app = f"fencepost-kill-{uuid.uuid4().hex[:12]}"
    stop, ready = threading.Event(), threading.Event()
    kills = 0
    calls_done = 0  # store calls the caller has finished; the killer waits for one

    def killer() -> None:
        nonlocal kills
        rng = random.Random()
        # First the submit_many's insert (pg_stat_activity shows its text's start).
        target: str | None = QUERIES["insert_executions"][:100]
        with _pg.connect() as conn:
            ready.set()
            while not stop.is_set():
                found = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = %s AND (left(query, 100) = %s OR %s::text IS NULL)"
                    " AND state IN ('active', 'idle in transaction') LIMIT 1",
                    [app, target, target],
                ).fetchall()
                if not found:
                    stop.wait(0.001)
                    continue
                kills += 1
                target = None
                at_kill = calls_done
                while calls_done == at_kill and not stop.is_set():
                    stop.wait(0.001)
                # Then a random gap: a kill right after a call finished would always
                # cut the call that follows it (the heartbeat, the claim), never a complete.
                stop.wait(rng.uniform(*KILL_GAP))

    caplog.set_level("INFO", logger="fencepost.store")
    url = _pg.url(schema, pool_min=2, pool_max=4, application_name=app)
    with fencepost.connect(url) as store:
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        assert ready.wait(10), "the killer did not connect"
        ids: set[str] = set()
        done: set[str] = set()
        claims_lost = 0
        end = time.monotonic() + 90
        try:
            # Rounds of KILLED_EXECUTIONS until the killer has cut MIN_KILLS calls: how
            # many it cuts in one round depends on how fast the database drains it.
            while kills < MIN_KILLS or len(done) < len(ids):
                if len(done) == len(ids):
                    submitted = store.submit_many(
                        {"job": "work", "inputs": {"n": n}} for n in range(KILLED_EXECUTIONS)
                    )
                    calls_done += 1
                    assert len({e.id for e in submitted} - ids) == KILLED_EXECUTIONS
                    ids.update(e.id for e in submitted)
                assert time.monotonic() < end, f"drained {len(done)} of {len(ids)}, {kills} kills"
                try:
                    leases = store.claim("drainer", limit=DRAIN_BATCH, ttl=CLAIM_TTL)
                    calls_done += 1
                except StoreUnavailable:
                    # Not retried once sent (its leases, if any, expire): as a worker
                    # does, the caller claims again.
                    claims_lost += 1
                    continue
                if not leases:
                    time.sleep(0.05)  # the leases of lost claims expire within CLAIM_TTL
                    continue
                renewed = store.heartbeat_many([(x, None) for x in leases], ttl=CLAIM_TTL)
                assert all(not isinstance(x, StaleLease) for x in renewed), renewed
                if len(done) // DRAIN_BATCH % 2:
                    results = store.complete_many([(x, {"n": i}) for i, x in enumerate(leases)])
                    assert results == [None] * len(leases)
                else:
                    for lease in leases:
                        assert store.complete(lease, {"ok": 1}).state is State.SUCCEEDED
                calls_done += 1
                done.update(x.execution_id for x in leases)
        finally:
            stop.set()
            thread.join()

    retries = Counter(
        r.getMessage().partition(":")[0] for r in caplog.records if ": retry " in r.getMessage()
    )
    print(f"kills {kills}, retries {dict(retries)}, claims lost {claims_lost}")
    assert kills >= MIN_KILLS, kills
    assert retries["submit"] >= 1, retries
    assert retries["complete"] >= 1, retries
    stored = _rows(schema, "SELECT id::text, state FROM {schema}.executions")
    assert sorted(i for i, _ in stored) == sorted(ids)
    assert {state for _, state in stored} == {"SUCCEEDED"}
    counts = Counter(
        _rows(
            schema,
            "SELECT event FROM {schema}.transitions WHERE event IN ('SUBMITTED', 'COMPLETED')",
        )
    )
    assert counts == {("SUBMITTED",): len(ids), ("COMPLETED",): len(ids)}
    refused = _rows(
        schema, "SELECT count(*) FROM {schema}.transitions WHERE event = 'STALE_REFUSED'"
    )
    assert refused == [(0,)]

"""A prune stopped midway on PostgreSQL: the next prune settles the day it left detached.

Prune drops a whole day of history in steps (``store/postgres/history.py``): it
detaches the day's three tables, checks the day again, marks it as being dropped,
deletes its idempotency keys and commands, then drops the tables. A prune killed
between the detach and the last drop used to leave the day's tables detached for
ever: its executions out of sight, their keys taken, so that a keyed submit with one
of those keys (and a get or replay of one of them) was answered "being pruned", a
retryable 503, however often it was retried.

Each test leaves a day so, the way a killed prune does: by hand (the tables detached
as the prune detaches them), by a prune that dies in this process right after its
detach, or by a real prune process killed with SIGKILL while a lock of this test's
own holds it at a known statement. Then it runs prune again and checks the day is
gone with its keys (a keyed submit makes a new execution) or back and readable.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import Execution, State, Store
from fencepost.api import create_app
from fencepost.domain.errors import NotFound, StoreUnavailable
from fencepost.store.postgres import history
from fencepost.testing import ManualClock
from tests.api.support import TestClient, assert_problem
from tests.integration import _pg
from tests.integration.test_worker_processes import wait_until
from tests.postgres import require_postgres

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TABLES = [table for table, _column in history.TABLES]
#: The store's answer while a day is detached, and the service's detail.
PRUNING = "being pruned"
#: The keys of the old day: three made at noon, one a quarter of an hour later (in the
#: next slice of the prune's key deletion: history.KEYS_SLICE_MS is ten minutes).
NOON_KEYS = ["report-a", "report-b", "report-c"]
LATE_KEY = "report-late"
#: The prune of these tests: whole days that ended five days ago go.
RETENTION = timedelta(days=5)


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


@pytest.fixture
def store(schema: str) -> Iterator[Store]:
    with fencepost.connect(_pg.url(schema)) as opened:
        yield opened


def old_clock() -> ManualClock:
    """Noon (UTC) ten days ago by the server's clock: a day a five-day prune drops."""
    ten_days_ago = (_pg.server_now() - timedelta(days=10)).astimezone(UTC)
    return ManualClock(datetime.combine(ten_days_ago.date(), time(12), tzinfo=UTC))


def old_day(schema: str, *, waiting: bool = False, dead: bool = False) -> dict[str, Execution]:
    """A day of history ten days old, every execution in it finished then: the keyed
    ones of NOON_KEYS and LATE_KEY SUCCEEDED, ``cancelled`` CANCELLED with a command row;
    ``dead`` adds a FAILED one (a dead letter to replay), ``waiting`` a SCHEDULED one."""
    clock = old_clock()
    made: dict[str, Execution] = {}
    with fencepost.connect(_pg.url(schema), clock=clock) as old:
        for key in NOON_KEYS:
            made[key] = old.submit("report", {"key": key}, idempotency_key=key)
        if dead:
            made["dead"] = old.submit("flaky", max_attempts=1)
        clock.advance(timedelta(minutes=15))
        made[LATE_KEY] = old.submit("report", {"key": LATE_KEY}, idempotency_key=LATE_KEY)
        made["cancelled"] = old.submit("report", {"key": None})
        old.request(made["cancelled"].id, "cancel", actor="ops")  # and a command row
        while leases := old.claim("setup", limit=10, jobs=["report", "flaky"]):
            for lease in leases:
                if dead and lease.execution_id == made["dead"].id:
                    old.fail(lease, "boom", retryable=False)
                else:
                    old.complete(lease, "sent")
        if waiting:
            made["waiting"] = old.submit("later", {"key": "waiting"})
    return made


def day_of(made: dict[str, Execution]) -> str:
    """The name of the executions partition of the old day."""
    return history.partition_name("executions", history.day_of(made[LATE_KEY].id))


def tables_of(schema: str, day: str) -> dict[str, str]:
    """Each of the day's tables that exists: 'attached' to its parent, or 'detached'."""
    with _pg.connect() as conn:
        found = conn.execute(
            "SELECT c.relname, EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = c.oid)"
            " FROM pg_class AS c WHERE c.relnamespace = %s::regnamespace AND c.relname = ANY(%s)",
            [schema, [history.sibling(day, table) for table in TABLES]],
        ).fetchall()
    return {str(name): "attached" if attached else "detached" for name, attached in found}


def detach(schema: str, day: str, tables: list[str]) -> None:
    """Detach the day's partitions of ``tables`` as a prune does, and stop there."""
    with _pg.connect() as conn:
        for table in tables:
            conn.execute(
                f"ALTER TABLE {schema}.{table} DETACH PARTITION"
                f" {schema}.{history.sibling(day, table)} CONCURRENTLY"
            )


def keys_left(schema: str, made: dict[str, Execution]) -> set[str]:
    """Which of the old day's idempotency keys execution_keys still holds for its executions."""
    with _pg.connect() as conn:
        found = conn.execute(
            f"SELECT key FROM {schema}.execution_keys WHERE execution_id = ANY(%s::uuid[])",
            [[e.id for e in made.values()]],
        ).fetchall()
    return {str(key) for (key,) in found}


def commands_left(schema: str) -> int:
    with _pg.connect() as conn:
        row = conn.execute(f"SELECT count(*) FROM {schema}.commands").fetchone()
    assert row is not None
    return int(row[0])


def assert_told_to_retry(store: Store, key: str, execution_id: str) -> None:
    """A keyed submit with ``key`` and a get of ``execution_id``: "being pruned", nothing stored."""
    with pytest.raises(StoreUnavailable, match=PRUNING):
        store.submit("report", {"key": key}, idempotency_key=key)
    with pytest.raises(StoreUnavailable, match=PRUNING):
        store.get(execution_id)


def assert_gone(schema: str, store: Store, made: dict[str, Execution]) -> None:
    """The old day is dropped whole: its tables, keys and commands; its keys are free."""
    assert tables_of(schema, day_of(made)) == {}
    assert keys_left(schema, made) == set()
    assert commands_left(schema) == 0
    with pytest.raises(NotFound):
        store.get(made[LATE_KEY].id)
    again = store.submit("report", {"key": LATE_KEY}, idempotency_key=LATE_KEY)
    assert again.id != made[LATE_KEY].id
    assert again.state is State.SCHEDULED
    assert store.submit("report", {"key": LATE_KEY}, idempotency_key=LATE_KEY).id == again.id


def test_a_day_a_prune_left_detached_is_dropped_by_the_next(schema: str, store: Store) -> None:
    made = old_day(schema)
    day = day_of(made)
    detach(schema, day, TABLES)  # the prune was killed here, before its check

    assert_told_to_retry(store, LATE_KEY, made[LATE_KEY].id)
    with TestClient(create_app(store)) as http:
        answer = http.post("/executions", json={"job": "report", "inputs": {"key": LATE_KEY}},
                           headers={"Idempotency-Key": LATE_KEY})  # fmt: skip
    assert_problem(answer, 503, "store-unavailable")
    assert PRUNING in answer.json()["detail"]
    # Nothing but a prune changes that: it is the same answer a while later.
    assert_told_to_retry(store, LATE_KEY, made[LATE_KEY].id)

    seen: list[int] = []
    assert store.prune(older_than=RETENTION, on_batch=seen.append) == len(made)
    assert seen == [len(made)]
    assert_gone(schema, store, made)


def test_a_day_with_a_revived_execution_is_attached_back(
    schema: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = old_day(schema, dead=True)
    dead = made["dead"]
    real_detach = history._detach

    class Killed(BaseException):
        """The prune's process dies."""

    def replay_detach_and_die(conn: Any, p: history.Partition, concurrently: bool) -> None:
        store.replay(dead.id, actor="ops")  # after prune judged the day, before its detach
        real_detach(conn, p, concurrently)
        raise Killed  # before the check that would have attached the day back

    monkeypatch.setattr(history, "_detach", replay_detach_and_die)
    with pytest.raises(Killed):
        store.prune(older_than=RETENTION)
    monkeypatch.undo()
    day = day_of(made)
    assert set(tables_of(schema, day).values()) == {"detached"}
    assert_told_to_retry(store, NOON_KEYS[0], dead.id)

    # The revived execution keeps its day: attached back, then pruned by row at the edges.
    assert store.prune(older_than=RETENTION) == len(made) - 1
    assert set(tables_of(schema, day).values()) == {"attached"}
    assert store.get(dead.id).state is State.SCHEDULED
    assert [t.event.value for t in store.transitions(dead.id)][-1] == "REPLAYED"
    with pytest.raises(NotFound):  # the finished ones went by row: gone, not "being pruned"
        store.get(made[LATE_KEY].id)
    again = store.submit("report", {"key": LATE_KEY}, idempotency_key=LATE_KEY)
    assert again.id != made[LATE_KEY].id
    with fencepost.connect(_pg.url(schema)) as worker:  # its window reads the day back
        [lease] = worker.claim("worker", jobs=["flaky"])
        assert lease.execution_id == dead.id


def test_a_day_left_detached_is_kept_by_a_prune_that_keeps_it(schema: str, store: Store) -> None:
    made = old_day(schema)
    day = day_of(made)
    detach(schema, day, TABLES)
    # A longer retention this time: the day ended after this prune's cutoff, so it is
    # attached back as it was, keys and all, not finished off by the earlier decision.
    assert store.prune(older_than=timedelta(days=30)) == 0
    assert set(tables_of(schema, day).values()) == {"attached"}
    assert keys_left(schema, made) == {*NOON_KEYS, LATE_KEY}
    same = store.submit("report", {"key": LATE_KEY}, idempotency_key=LATE_KEY)
    assert same.id == made[LATE_KEY].id
    assert store.get(made["cancelled"].id).state is State.CANCELLED
    # And the next prune with the usual retention drops it whole.
    assert store.prune(older_than=RETENTION) == len(made)
    assert_gone(schema, store, made)


@contextmanager
def locked(schema: str, statement: str) -> Iterator[int]:
    """A transaction of this test's own runs ``statement`` (a lock) and holds it; its pid."""
    with _pg.connect() as holder, holder.transaction():
        holder.execute(f"SET search_path TO {schema}")
        holder.execute(statement)
        yield holder.info.backend_pid


def prune_killed_waiting_for(schema: str, holder: int, statement: str) -> None:
    """Run ``fencepost prune`` in a process of its own, wait until it waits for the lock
    ``holder`` holds, in a statement containing ``statement``, and SIGKILL it there.

    Its server session is ended too (a killed client's session waiting for a lock
    would carry on when the lock goes): what it was running is rolled back, what it
    had committed stays, as when a machine dies.
    """
    pruner = subprocess.Popen(
        [FENCEPOST, "prune", "--older-than", "5d", "--db", _pg.url(schema)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
    )  # fmt: skip
    try:
        waiting = wait_until(
            lambda: blocked_by(holder) or pruner.poll() is not None, 30, "the prune to wait"
        )
        assert pruner.poll() is None, pruner.communicate()[1]
        pid, query = waiting
        assert statement in query, query
    finally:
        os.killpg(pruner.pid, signal.SIGKILL)
        pruner.communicate(timeout=10)  # reaped, its pipe closed
    with _pg.connect() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [pid])
    wait_until(lambda: not blocked_by(holder), 10, "the killed prune's session to end")


def blocked_by(holder: int) -> tuple[int, str] | None:
    """The session waiting for a lock ``holder`` holds, and its statement."""
    with _pg.connect() as conn:
        row = conn.execute(
            "SELECT pid, query FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            [holder],
        ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def test_a_prune_killed_while_deleting_keys_is_finished_by_the_next(
    schema: str, store: Store
) -> None:
    made = old_day(schema)
    day = day_of(made)
    # The prune deletes the noon slice of keys, then waits for the late key's row lock.
    with locked(schema, f"SELECT 1 FROM execution_keys WHERE key = '{LATE_KEY}' FOR UPDATE") as h:
        prune_killed_waiting_for(schema, h, "DELETE FROM execution_keys")
    assert set(tables_of(schema, day).values()) == {"detached"}
    assert keys_left(schema, made) == {LATE_KEY}  # the noon slice went before the kill
    assert_told_to_retry(store, LATE_KEY, made[LATE_KEY].id)
    # A noon key is free already: a submit makes a new execution with it. Attached back,
    # the old day would hold a second execution of that key, without its key.
    fresh = store.submit("report", {"key": NOON_KEYS[0]}, idempotency_key=NOON_KEYS[0])
    assert fresh.id != made[NOON_KEYS[0]].id

    # The killed prune had decided: its day goes even under a longer retention now.
    assert store.prune(older_than=timedelta(days=30)) == len(made)
    assert_gone(schema, store, made)
    assert store.find(NOON_KEYS[0]) == store.get(fresh.id)  # one execution per key


def test_a_prune_killed_between_two_detaches_is_finished_by_the_next(
    schema: str, store: Store
) -> None:
    made = old_day(schema)
    day = day_of(made)
    payloads = history.sibling(day, "execution_data")
    # DETACH ... CONCURRENTLY of the payloads' partition waits for this lock: the
    # executions' partition is detached by then, the other two are not.
    with locked(schema, f"LOCK TABLE {payloads} IN SHARE UPDATE EXCLUSIVE MODE") as h:
        prune_killed_waiting_for(schema, h, f'DETACH PARTITION "{payloads}"')
    assert tables_of(schema, day) == {
        day: "detached",
        payloads: "attached",
        history.sibling(day, "transitions"): "attached",
    }
    assert_told_to_retry(store, LATE_KEY, made[LATE_KEY].id)

    assert store.prune(older_than=RETENTION) == len(made)
    assert_gone(schema, store, made)


def test_a_day_whose_attach_back_was_stopped_is_attached_whole(schema: str, store: Store) -> None:
    made = old_day(schema, waiting=True)
    day = day_of(made)
    # Stopped while attaching a revived day back: its executions' partition is back,
    # the payloads' and the audit's are not (no payload: the execution cannot be read).
    detach(schema, day, ["execution_data", "transitions"])
    with pytest.raises(NotFound):
        store.get(made["waiting"].id)

    assert store.prune(older_than=RETENTION) == len(made) - 1  # the finished ones, by row
    assert set(tables_of(schema, day).values()) == {"attached"}
    waiting = store.get(made["waiting"].id)
    assert waiting.state is State.SCHEDULED
    assert waiting.inputs == {"key": "waiting"}
    assert [t.event.value for t in store.transitions(waiting.id)] == ["SUBMITTED"]


def test_a_day_whose_drop_was_stopped_is_dropped_whole(schema: str, store: Store) -> None:
    made = old_day(schema)
    day = day_of(made)
    # Stopped between its DROP TABLEs: keys and commands deleted, executions dropped.
    detach(schema, day, TABLES)
    with _pg.connect() as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute("DELETE FROM execution_keys WHERE execution_id = ANY(%s::uuid[])",
                     [[e.id for e in made.values()]])  # fmt: skip
        conn.execute("DELETE FROM commands")
        conn.execute(f"DROP TABLE {day}")
    assert set(tables_of(schema, day).values()) == {"detached"}

    assert store.prune(older_than=RETENTION) == 0  # no execution left to count
    assert_gone(schema, store, made)


def test_only_fencepost_s_own_tables_are_taken_for_leftovers(schema: str, store: Store) -> None:
    made = old_day(schema)
    with _pg.connect() as conn:
        conn.execute(f"CREATE TABLE {schema}.executions_p20261399 (id uuid)")  # no such date
        conn.execute(f"CREATE TABLE {schema}.executions_archive (id uuid)")
    assert store.prune(older_than=RETENTION) == len(made)
    assert_gone(schema, store, made)
    with _pg.connect() as conn:
        for table in ("executions_p20261399", "executions_archive"):
            conn.execute(f"SELECT 1 FROM {schema}.{table}")  # left alone

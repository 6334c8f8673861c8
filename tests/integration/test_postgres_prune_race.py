"""Prune racing a keyed submit and a replay on PostgreSQL: a clear, retryable answer, nothing lost.

Prune drops a whole day of history in steps (``store/postgres/history.py``): it
detaches the day's tables, deletes the day's idempotency keys, then drops the
tables. Between the first two steps the day's executions are out of sight while
their keys are still taken, so a submit with one of those keys finds the key but
not its execution (it used to fail with a bare ``KeyError``: an HTTP 500), and a
replay of one of them finds nothing.

Each test freezes a prune exactly there: its own transaction holds the row lock of
the day's key, which the prune's delete of the day's keys waits for. Inside that
window the store, the HTTP API and the HTTP client are asked; then the lock goes,
the prune finishes, and the same requests are answered as after any prune.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost import Execution, State, Store
from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain.errors import NotFound, StoreUnavailable
from fencepost.testing import ManualClock
from tests.api.support import TestClient, assert_problem
from tests.integration import _pg
from tests.integration.test_worker_processes import wait_until
from tests.postgres import require_postgres

KEY = "nightly-report-2026-12-04"
INPUTS = {"day": "2026-12-04"}
#: The store's answer inside the window, and the service's detail: it names the key.
PRUNING = "being pruned"


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    with _pg.fresh_schema() as name:
        yield name


@pytest.fixture
def store(schema: str) -> Iterator[Store]:
    # retry_timeout=0: the store's own retries after a lost connection play no part.
    with fencepost.connect(_pg.url(schema, retry_timeout=0)) as opened:
        yield opened


def old_day(schema: str) -> tuple[Execution, Execution]:
    """Two executions made and finished two days ago (by the server's clock), in one day
    of history: the keyed one SUCCEEDED, the other FAILED (a dead letter to replay)."""
    clock = ManualClock(_pg.server_now() - timedelta(days=2))
    with fencepost.connect(_pg.url(schema), clock=clock) as old:
        keyed = old.submit("report", INPUTS, idempotency_key=KEY)
        broken = old.submit("report", {"day": "broken"}, max_attempts=1)
        leases = {lease.execution_id: lease for lease in old.claim("setup", limit=2)}
        old.complete(leases[keyed.id], "sent")
        old.fail(leases[broken.id], "no data", retryable=False)
    assert old_state(schema, keyed.id) == "SUCCEEDED"
    assert old_state(schema, broken.id) == "FAILED"
    return keyed, broken


def old_state(schema: str, execution_id: str) -> str | None:
    with _pg.connect() as conn:
        row = conn.execute(
            f"SELECT state FROM {schema}.executions WHERE id = %s", [execution_id]
        ).fetchone()
    return None if row is None else str(row[0])


@contextmanager
def prune_frozen_in_window(schema: str, store: Store) -> Iterator[threading.Thread]:
    """A prune of everything finished a day ago, frozen after it detached the old day
    and before it deleted the day's keys; it goes on when the block ends.

    The freeze is the row lock of ``KEY`` in execution_keys, held by a transaction of
    this test's own: the prune's delete of the day's keys waits for it, and the test
    waits until the server says so (``pg_blocking_pids``), not for a while.
    """
    results: list[Any] = []
    with _pg.connect() as holder:
        with holder.transaction():
            holder.execute(
                f"SELECT 1 FROM {schema}.execution_keys WHERE key = %s FOR UPDATE", [KEY]
            )
            holder_pid = holder.info.backend_pid
            pruner = threading.Thread(
                target=lambda: results.append(_prune(store)), name="prune", daemon=True
            )
            pruner.start()
            wait_until(
                lambda: waits_for(holder_pid) or not pruner.is_alive(),
                20,
                "the prune to wait for the key's lock",
            )
            assert pruner.is_alive(), f"the prune ended before the window: {results}"
            yield pruner
        pruner.join(20)
    assert not pruner.is_alive(), "the prune did not finish once the lock was released"
    [pruned] = results
    assert not isinstance(pruned, BaseException), pruned


def _prune(store: Store) -> int | BaseException:
    try:
        return store.prune(older_than=timedelta(days=1))
    except BaseException as exc:  # reported by the test's thread
        return exc


def waits_for(pid: int) -> bool:
    """Whether a session waits for a lock ``pid`` holds (the frozen prune)."""
    with _pg.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            [pid],
        ).fetchone()
    return bool(row and row[0])


def keyed(store: Store) -> list[Execution]:
    """Every execution of job ``report`` still stored with ``KEY``."""
    page = store.query(job="report", limit=100)
    return [e for e in page.items if e.idempotency_key == KEY]


def test_a_keyed_submit_inside_the_prune_window_is_told_to_retry(schema: str, store: Store) -> None:
    old, _ = old_day(schema)
    with prune_frozen_in_window(schema, store):
        assert old_state(schema, old.id) is None  # its day is detached: out of sight
        with pytest.raises(StoreUnavailable, match=PRUNING) as refused:
            store.submit("report", INPUTS, idempotency_key=KEY)
        assert KEY in str(refused.value)
        with TestClient(create_app(store)) as http:
            answer = http.post("/executions", json={"job": "report", "inputs": INPUTS},
                               headers={"Idempotency-Key": KEY})  # fmt: skip
        assert_problem(answer, 503, "store-unavailable")
        assert PRUNING in answer.json()["detail"]
        assert int(answer.headers["Retry-After"]) >= 1
        assert keyed(store) == []  # neither stored anything

    # The prune forgot the day's keys with the day: the key makes one new execution.
    again = store.submit("report", INPUTS, idempotency_key=KEY)
    assert again.id != old.id
    assert again.state is State.SCHEDULED
    assert store.submit("report", INPUTS, idempotency_key=KEY).id == again.id
    assert [e.id for e in keyed(store)] == [again.id]


def test_the_client_retries_a_keyed_submit_through_the_prune_window(
    schema: str, store: Store
) -> None:
    old, _ = old_day(schema)
    answers: list[int] = []
    submitted: list[Execution | BaseException] = []
    with TestClient(create_app(store)) as http:
        http.event_hooks = {"response": [lambda response: answers.append(response.status_code)]}
        client = Client("http://testserver", http=http, retry_timeout=20)

        def submit() -> None:
            try:
                submitted.append(client.submit("report", INPUTS, idempotency_key=KEY))
            except BaseException as exc:  # reported by the test's thread
                submitted.append(exc)

        with prune_frozen_in_window(schema, store):
            submitter = threading.Thread(target=submit, name="client-submit", daemon=True)
            submitter.start()
            wait_until(lambda: 503 in answers, 20, "the service's 503")
            assert not submitted  # still retrying, nothing stored
            assert keyed(store) == []
        submitter.join(20)
    [execution] = submitted
    assert isinstance(execution, Execution), execution
    assert execution.id != old.id
    assert answers[-1] == 201
    assert set(answers[:-1]) == {503}
    assert [e.id for e in keyed(store)] == [execution.id]  # one, and only one


def test_a_replay_inside_the_prune_window_is_told_to_retry(schema: str, store: Store) -> None:
    _, broken = old_day(schema)
    with prune_frozen_in_window(schema, store):
        with pytest.raises(StoreUnavailable, match=PRUNING) as refused:
            store.replay(broken.id)
        assert broken.id in str(refused.value)
        with TestClient(create_app(store)) as http:
            answer = http.post(f"/executions/{broken.id}/replay")
        assert_problem(answer, 503, "store-unavailable")
        assert "Retry-After" in answer.headers
    # Once the day is dropped, it is gone like any pruned execution.
    with pytest.raises(NotFound):
        store.replay(broken.id)
    with pytest.raises(psycopg.errors.UndefinedTable), _pg.connect() as conn:
        conn.execute(f"SELECT 1 FROM {schema}.executions_p{_day_name(broken.id)}")


def _day_name(execution_id: str) -> str:
    from fencepost.store.postgres.history import day_date, day_of

    return f"{day_date(day_of(execution_id)):%Y%m%d}"

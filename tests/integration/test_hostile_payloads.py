"""Hostile payloads and error texts against real worker processes, on SQLite and PostgreSQL.

* A poisoned execution (inputs nested deeper than any layer can encode, as the
  store accepted before its nesting limit) is set aside by the claim that finds
  it; the valid work claimed alongside it runs once, on its first attempt.
* Handler exceptions and command stderr holding U+0000 and lone surrogates are
  stored sanitized and retried normally, while other work drains.
"""

from __future__ import annotations

import collections
import signal
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import fencepost
from fencepost import AttemptOutcome, State, Store
from fencepost.domain.states import Event
from tests import postgres
from tests.integration.test_service_processes import (
    APP,
    TOKEN,
    Processes,
    free_port,
    processes,
    wait_ready,
)
from tests.integration.test_worker_processes import write_definition

pytestmark = pytest.mark.slow

__all__ = ["processes"]  # the fixture, imported for the tests below

#: The depth the store stored before its limit (the old code refused only 1,000 and up).
POISON_DEPTH = 300


@dataclass
class Database:
    """A database shared by the test and its processes, and a way to write raw rows."""

    url: str
    backend: str
    schema: str | None
    path: Path | None

    def poison(self, execution_id: str) -> None:
        """Overwrite an execution's stored inputs with ones nested POISON_DEPTH deep."""
        text = '{"a":' + "[" * POISON_DEPTH + "1" + "]" * POISON_DEPTH + "}"
        if self.path is not None:
            with sqlite3.connect(self.path) as conn:
                conn.execute(
                    "UPDATE execution_data SET inputs = ? WHERE execution_id = ?",
                    (text, execution_id),
                )
            return
        import psycopg

        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(
                f"UPDATE {self.schema}.execution_data SET inputs = %s::jsonb "
                "WHERE execution_id = %s",
                (text, execution_id),
            )


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "hostile.db"
        yield Database(f"sqlite:///{path}", "sqlite", None, path)
        return
    postgres.require_postgres()
    schema = postgres.new_schema()
    try:
        yield Database(postgres.store_url(schema), "postgres", schema, None)
    finally:
        postgres.drop_schema(schema)


def wait_finished(store: Store, ids: list[str], procs: Processes, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(store.get(i).state.is_terminal for i in ids):
            return
        for proc in procs.procs:
            assert proc.poll() is None, "a fencepost process exited"
        time.sleep(0.1)
    states = collections.Counter(store.get(i).state for i in ids)
    pytest.fail(f"not finished after {timeout}s: {dict(states)}")


def stop(procs: Processes, *names: str) -> None:
    for proc in procs.procs:
        proc.send_signal(signal.SIGTERM)
    for name, proc in zip(names, procs.procs, strict=True):
        assert proc.wait(30) == 0, procs.log(name)


@pytest.mark.parametrize("via", ["db", "server"])
def test_a_poisoned_execution_does_not_take_valid_work_with_it(
    processes: Processes, database: Database, via: str
) -> None:
    store = fencepost.connect(database.url)
    try:
        # Highest priority: the poisoned one is in the very first claim's batch.
        poisoned = store.submit("quick", priority=10, max_attempts=3).id
        database.poison(poisoned)
        valid = [store.submit("quick", inputs={"n": n}, max_attempts=3).id for n in range(30)]

        names = ["worker"]
        if via == "db":
            processes.start("worker", "worker", APP, "--db", database.url, "--jobs", "quick")
        else:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            service = processes.start(
                "serve", "serve", APP, "--db", database.url, "--port", str(port),
                "--workers", "0", env={"FENCEPOST_TOKENS": f"{TOKEN}=work,read"},
            )  # fmt: skip
            wait_ready(url, service)
            names.insert(0, "serve")
            processes.start(
                "worker", "worker", APP, "--server", url, "--jobs", "quick",
                env={"FENCEPOST_TOKEN": TOKEN},
            )  # fmt: skip
        wait_finished(store, [poisoned, *valid], processes, timeout=60)

        for execution in (store.get(i) for i in valid):
            assert execution.state is State.SUCCEEDED
            assert (execution.attempt, execution.epoch) == (1, 1)
            assert execution.result == execution.inputs["n"]  # type: ignore[index]
        dead = store.get(poisoned)
        assert dead.state is State.FAILED
        assert dead.error is not None
        assert dead.error.startswith("payload_unreadable: inputs is nested more than 64")
        trail = store.transitions(poisoned)
        assert [t.event for t in trail] == [Event.SUBMITTED, Event.CLAIMED, Event.FAILED]
        assert trail[-1].reason is not None
        assert "payload_unreadable" in trail[-1].reason
        if via == "server":
            # Every read that holds it still answers: the execution, and every page.
            auth = {"Authorization": f"Bearer {TOKEN}"}
            one = httpx.get(f"{url}/executions/{poisoned}", headers=auth)
            assert one.status_code == 200, one.text
            assert one.json()["state"] == "FAILED"
            page = httpx.get(f"{url}/executions?limit=100", headers=auth)
            assert page.status_code == 200, page.text
            assert len(page.json()["items"]) == 31
        stop(processes, *names)
        assert "database unreachable" not in processes.log("worker")
    finally:
        store.close()


def test_nul_in_handler_errors_and_command_stderr_is_stored_sanitized(
    processes: Processes, database: Database, tmp_path: Path
) -> None:
    definitions = write_definition(
        tmp_path / "defs",
        "nul-stderr",
        """
name: nul-stderr
version: 1
lease_ttl: 5
retry: {max_attempts: 3, base_delay: 0.05, max_delay: 0.1}
run:
  command:
    - python
    - -c
    - "import sys; sys.stderr.buffer.write(b'bad\\\\x00err \\\\xed\\\\xa0\\\\x80'); sys.exit(1)"
""",
    )
    store = fencepost.connect(database.url)
    try:
        handler = store.submit("nul-error", max_attempts=3).id
        command = store.submit("nul-stderr", max_attempts=3).id
        others = [e.id for e in store.submit_many([{"job": "quick"}] * 300)]
        processes.start(
            "worker", "worker", APP, "--definitions", str(definitions), "--db", database.url,
            "--jobs", "nul-error,nul-stderr,quick",
        )  # fmt: skip
        wait_finished(store, [handler, command, *others], processes, timeout=90)

        for eid, expected in (
            (handler, "bad\ufffderr \ufffd on attempt"),
            (command, "bad\ufffderr"),
        ):
            execution = store.get(eid)
            assert execution.state is State.FAILED, execution
            assert execution.attempt == 3
            assert execution.error is not None
            assert expected in execution.error
            attempts = store.attempts(eid)
            # Every attempt's failure was written as it happened: none timed out.
            assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED] * 3
            assert all(a.error is not None and "\ufffd" in a.error for a in attempts)
        finished = [store.get(i) for i in others]
        assert collections.Counter(e.state for e in finished) == {State.SUCCEEDED: 300}
        assert {e.epoch for e in finished} == {1}
        stop(processes, "worker")
        log = processes.log("worker")
        assert "database unreachable" not in log
        assert "the store refused" not in log
        assert "0 refused" in log  # the stopped line: no outcome was refused
    finally:
        store.close()


@pytest.mark.parametrize("limited", [False, True], ids=["plain", "limited"])
def test_a_claim_sets_a_poisoned_execution_aside_and_delivers_the_rest(
    database: Database, limited: bool
) -> None:
    """In the store itself: a plain claim sets it aside in a transaction of its own after
    the claim; a claim a limit may hold, inside its own transaction."""
    with fencepost.connect(database.url) as store:
        if limited:
            store.set_limit("job:quick", concurrency=10)
        poisoned = store.submit("quick", priority=10, max_attempts=3).id
        database.poison(poisoned)
        valid = [store.submit("quick", inputs={"n": n}).id for n in range(3)]
        leases = store.claim("w", limit=10)
        assert sorted(lease.execution_id for lease in leases) == sorted(valid)
        dead = store.get(poisoned)
        assert dead.state is State.FAILED
        assert dead.error is not None
        assert dead.error.startswith("payload_unreadable")
        events = [t.event for t in store.transitions(poisoned)]
        assert events == [Event.SUBMITTED, Event.CLAIMED, Event.FAILED]
        assert store.claim("w", limit=10) == []

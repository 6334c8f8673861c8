"""OpenTelemetry traces (fencepost/tracing.py) on real stores, workers and processes.

Each traced scenario runs in a process of its own (tests/integration/_traced_scenario.py:
a real SDK tracer provider with an ``InMemorySpanExporter``, a real worker on the
store), which writes its finished spans to a file; the tests here judge them, and
read the stored trace context from the SQLite file or PostgreSQL schema itself.
Untraced processes — OpenTelemetry unimportable, or installed but never set up —
must store NULL and import nothing of it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import fencepost
from fencepost import tracing
from tests import postgres
from tests.integration._traced_scenario import (
    DIRECT_SPAN,
    DIRECT_TRACE,
    REMOTE_SPAN,
    REMOTE_TRACE,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "integration" / "_traced_scenario.py"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A real store's URL: a SQLite file, or a PostgreSQL schema of this test's own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'traced.db'}"
        return
    postgres.require_postgres()
    schema = postgres.new_schema()
    try:
        yield postgres.store_url(schema)
    finally:
        postgres.drop_schema(schema)


def run_scenario(url: str, scenario: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{scenario}.json"
    done = subprocess.run(
        [sys.executable, str(SCENARIO), url, scenario, str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def stored_contexts(url: str, ids: list[str]) -> list[str | None]:
    """The trace_context column of these executions, read from the database itself."""
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            rows = dict(conn.execute("SELECT id, trace_context FROM executions").fetchall())
        return [rows[i] for i in ids]
    schema = url.rpartition("schema=")[2]
    with psycopg.connect(postgres.dsn()) as conn:
        found = conn.execute(
            f"SELECT id::text, trace_context FROM {schema}.executions"  # the test's own schema
        ).fetchall()
    rows = dict(found)
    return [rows[i] for i in ids]


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def attempts_of(spans: list[dict[str, Any]], execution_id: str) -> list[dict[str, Any]]:
    found = [
        s
        for s in spans
        if s["name"].startswith("fencepost.run ")
        and s["attributes"]["fencepost.execution.id"] == execution_id
    ]
    return sorted(found, key=lambda s: s["attributes"]["fencepost.epoch"])


def test_an_attempt_continues_the_submitters_trace(url: str, tmp_path: Path) -> None:
    out = run_scenario(url, "succeed", tmp_path)
    spans, ids = out["spans"], out["ids"]
    assert out["states"] == ["SUCCEEDED"] * 3
    [caller] = named(spans, "caller")
    single, batch = named(spans, "fencepost.submit")
    assert single["parent_id"] == batch["parent_id"] == caller["span_id"]
    assert single["trace_id"] == caller["trace_id"]
    assert single["kind"] == "PRODUCER"
    assert single["attributes"] == {
        "messaging.system": "fencepost",
        "messaging.operation.type": "send",
        "messaging.destination.name": "default",
        "messaging.message.id": ids[0],
        "fencepost.store": single["attributes"]["fencepost.store"],
        "fencepost.job": "greet",
        "fencepost.queue": "default",
        "fencepost.execution.id": ids[0],
        "fencepost.submit.created": 1,
    }
    assert batch["attributes"]["messaging.batch.message_count"] == 2
    assert batch["attributes"]["fencepost.submit.created"] == 2
    assert "fencepost.execution.id" not in batch["attributes"]

    # The stored context is the submit span's, in W3C form.
    contexts = [json.loads(c) for c in stored_contexts(url, ids)]
    submit_of = [single, batch, batch]
    for context, submit in zip(contexts, submit_of, strict=True):
        version, trace_id, span_id, flags = context["traceparent"].split("-")
        assert (version, trace_id, span_id) == ("00", submit["trace_id"], submit["span_id"])
        assert int(flags, 16) & 1  # sampled

    for execution_id, submit in zip(ids, submit_of, strict=True):
        [attempt] = attempts_of(spans, execution_id)
        assert attempt["name"] == "fencepost.run greet"
        assert attempt["kind"] == "CONSUMER"
        assert attempt["trace_id"] == caller["trace_id"]
        assert attempt["parent_id"] == submit["span_id"]
        attributes = attempt["attributes"]
        assert attributes["fencepost.job"] == "greet"
        assert attributes["fencepost.queue"] == "default"
        assert attributes["messaging.message.id"] == execution_id
        assert attributes["fencepost.attempt"] == 1
        assert attributes["fencepost.max_attempts"] == 3
        assert attributes["fencepost.epoch"] == 1
        assert attributes["fencepost.outcome"] == "succeeded"
        assert attributes["fencepost.execution.state"] == "SUCCEEDED"
        assert attempt["status"] == "UNSET"
        # The handler's own span nests in its attempt's.
        [greeting] = [s for s in named(spans, "greeting") if s["parent_id"] == attempt["span_id"]]
        assert greeting["trace_id"] == caller["trace_id"]

    # Claims that leased something are spans, linked to the submits they served.
    claims = named(spans, "fencepost.claim")
    assert claims
    linked = {link for claim in claims for link in claim["links"]}
    assert linked == {single["span_id"], batch["span_id"]}
    assert sum(c["attributes"]["messaging.batch.message_count"] for c in claims) == 3


def test_the_memory_store_carries_the_context_too(tmp_path: Path) -> None:
    out = run_scenario("memory://", "succeed", tmp_path)
    spans = out["spans"]
    [caller] = named(spans, "caller")
    single = named(spans, "fencepost.submit")[0]
    [attempt] = attempts_of(spans, out["ids"][0])
    assert attempt["trace_id"] == caller["trace_id"]
    assert attempt["parent_id"] == single["span_id"]


def test_a_retried_then_dead_lettered_job_shows_two_attempts(url: str, tmp_path: Path) -> None:
    out = run_scenario(url, "dead_letter", tmp_path)
    spans, [execution_id] = out["spans"], out["ids"]
    assert out["states"] == ["FAILED"]
    [submit] = named(spans, "fencepost.submit")
    first, second = attempts_of(spans, execution_id)
    for number, attempt in enumerate((first, second), start=1):
        assert attempt["trace_id"] == submit["trace_id"]
        assert attempt["parent_id"] == submit["span_id"]
        assert attempt["attributes"]["fencepost.attempt"] == number
        assert attempt["attributes"]["fencepost.epoch"] == number
        assert attempt["attributes"]["fencepost.max_attempts"] == 2
        assert attempt["status"] == "ERROR"
        assert attempt["status_description"] == "RuntimeError: boom"
        [exception] = [e for e in attempt["events"] if e["name"] == "exception"]
        assert exception["attributes"]["exception.type"] == "RuntimeError"
    assert first["attributes"]["fencepost.outcome"] == "retried"
    assert first["attributes"]["fencepost.execution.state"] == "RETRY_WAIT"
    assert second["attributes"]["fencepost.outcome"] == "dead_lettered"
    assert second["attributes"]["fencepost.execution.state"] == "FAILED"


def test_a_stale_completion_is_an_event_on_its_attempt(url: str, tmp_path: Path) -> None:
    out = run_scenario(url, "stale", tmp_path)
    spans, [execution_id] = out["spans"], out["ids"]
    assert out["states"] == ["SUCCEEDED"]
    [submit] = named(spans, "fencepost.submit")
    refused, succeeded = attempts_of(spans, execution_id)
    assert refused["parent_id"] == succeeded["parent_id"] == submit["span_id"]
    assert refused["attributes"]["fencepost.outcome"] == "refused_stale"
    assert refused["status"] == "ERROR"
    assert refused["status_description"].startswith("stale lease refused:")
    [event] = [e for e in refused["events"] if e["name"] == "fencepost.stale_refused"]
    assert event["attributes"]["fencepost.epoch"] == 1
    # Read after the refusal: the next claim may already have taken it (epoch 2).
    assert event["attributes"]["fencepost.current_epoch"] in (1, 2)
    assert event["attributes"]["fencepost.owner"] == refused["attributes"]["fencepost.owner"]
    assert succeeded["attributes"]["fencepost.outcome"] == "succeeded"
    assert succeeded["attributes"]["fencepost.epoch"] == 2
    assert succeeded["events"] == []


def test_an_http_submit_continues_the_callers_traceparent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'http.db'}"
    out = run_scenario(url, "http", tmp_path)
    spans, (remote, malformed, direct) = out["spans"], out["ids"]
    assert out["states"] == ["SUCCEEDED"] * 3
    contexts = [json.loads(c) for c in stored_contexts(url, [remote, malformed, direct])]
    by_id = {s["span_id"]: s for s in spans}

    # The remote caller's trace goes on: through the submit, to the attempt.
    assert contexts[0]["traceparent"].startswith(f"00-{REMOTE_TRACE}-")
    assert contexts[0]["tracestate"] == "vendor=1"
    [attempt] = attempts_of(spans, remote)
    assert attempt["trace_id"] == REMOTE_TRACE
    submit = by_id[attempt["parent_id"]]
    assert submit["name"] == "fencepost.submit"
    ancestors = []
    parent = submit["parent_id"]
    while parent in by_id:  # the service's own spans, if it traces requests itself
        ancestors.append(by_id[parent]["name"])
        parent = by_id[parent]["parent_id"]
    assert parent == REMOTE_SPAN, ancestors

    # A malformed traceparent is ignored, not refused: a trace of its own.
    assert REMOTE_TRACE not in contexts[1]["traceparent"]
    [attempt] = attempts_of(spans, malformed)
    assert attempt["trace_id"] == contexts[1]["traceparent"].split("-")[1]

    # remote_parent itself, with no server span current: the submit's parent is remote.
    [attempt] = attempts_of(spans, direct)
    assert attempt["trace_id"] == DIRECT_TRACE
    assert by_id[attempt["parent_id"]]["parent_id"] == DIRECT_SPAN


def test_one_trace_runs_from_the_client_s_request_through_a_failed_and_a_retried_attempt(
    tmp_path: Path,
) -> None:
    """``Client.submit`` in a traced request: the client sends the context, the service's
    submit continues it, and both attempts (the first fails) are in that one trace."""
    url = f"sqlite:///{tmp_path / 'retry.db'}"
    out = run_scenario(url, "request_retry", tmp_path)
    spans, ids = out["spans"], out["ids"]
    assert out["states"] == ["SUCCEEDED"] * 2
    assert out["epochs"] == [2, 2]
    [caller] = named(spans, "caller")
    by_id = {s["span_id"]: s for s in spans}
    for execution_id in ids:  # Client.submit, then AsyncClient.submit_many
        first, second = attempts_of(spans, execution_id)
        submit = by_id[first["parent_id"]]
        assert submit["name"] == "fencepost.submit"
        assert second["parent_id"] == submit["span_id"]
        ancestors, parent = [], submit["parent_id"]
        while parent in by_id and parent != caller["span_id"]:  # the service's own spans
            ancestors.append(by_id[parent]["name"])
            parent = by_id[parent]["parent_id"]
        assert parent == caller["span_id"], f"the client did not send its context: {ancestors}"
        for attempt in (submit, first, second):
            assert attempt["trace_id"] == caller["trace_id"]
        assert [a["attributes"]["fencepost.attempt"] for a in (first, second)] == [1, 2]
        assert [a["attributes"]["fencepost.epoch"] for a in (first, second)] == [1, 2]
        assert first["attributes"]["fencepost.outcome"] == "retried"
        assert first["attributes"]["fencepost.execution.state"] == "RETRY_WAIT"
        assert first["status"] == "ERROR"
        assert first["status_description"] == "RuntimeError: first attempt fails"
        assert second["attributes"]["fencepost.outcome"] == "succeeded"
        assert second["attributes"]["fencepost.execution.state"] == "SUCCEEDED"
        assert second["status"] == "UNSET"
        for attempt in (first, second):
            assert attempt["attributes"]["fencepost.job"] == "flaky"
            assert attempt["attributes"]["fencepost.execution.id"] == execution_id
            assert attempt["attributes"]["fencepost.queue"] == "default"
    [single, batch] = [by_id[attempts_of(spans, i)[0]["parent_id"]] for i in ids]
    assert single["attributes"]["fencepost.job"] == "flaky"
    assert batch["attributes"]["fencepost.submit.created"] == 1


def test_async_store_submits_are_traced(url: str, tmp_path: Path) -> None:
    out = run_scenario(url, "async_store", tmp_path)
    spans, ids = out["spans"], out["ids"]
    assert out["states"] == ["SUCCEEDED"] * 2
    [caller] = named(spans, "caller")
    single, batch = named(spans, "fencepost.submit")
    assert single["parent_id"] == batch["parent_id"] == caller["span_id"]
    assert single["attributes"]["fencepost.execution.id"] == ids[0]
    assert batch["attributes"]["fencepost.submit.created"] == 1
    contexts = [json.loads(c) for c in stored_contexts(url, ids)]
    for context, submit, execution_id in zip(contexts, (single, batch), ids, strict=True):
        assert context["traceparent"].split("-")[1:3] == [submit["trace_id"], submit["span_id"]]
        [attempt] = attempts_of(spans, execution_id)
        assert attempt["parent_id"] == submit["span_id"]


def test_untraced_submits_store_null(url: str) -> None:
    """In this process no tracer provider is set: nothing is stored or delivered."""
    assert tracing._tracer() is None, "a test left a tracer provider set in this process"
    with fencepost.connect(url) as store:
        single = store.submit("plain").id
        batch = [e.id for e in store.submit_many([{"job": "plain"}, {"job": "plain"}])]
        leases = store.claim("w", limit=3)
    assert {lease.execution_id for lease in leases} == {single, *batch}
    assert [lease.trace_context for lease in leases] == [None] * 3
    assert stored_contexts(url, [single, *batch]) == [None] * 3


#: A process that submits, claims and runs a job on a SQLite file with a real worker,
#: then prints the OpenTelemetry modules loaded and the stored trace contexts.
UNTRACED = """
import json, sqlite3, sys, time
BLOCK
import fencepost
from fencepost import State
app = fencepost.App(sys.argv[1])
@app.job("plain")
def plain() -> str:
    return "ok"
ids = [app.store.submit("plain").id, *(e.id for e in app.store.submit_many([{"job": "plain"}]))]
worker = app.worker(poll_interval=0.02)
worker.start()
deadline = time.monotonic() + 30
while not all(app.store.get(i).state is State.SUCCEEDED for i in ids):
    assert time.monotonic() < deadline, "not run in 30 s"
    time.sleep(0.02)
worker.stop(); worker.join(30)
[extra] = [e.id for e in app.store.submit_many([{"job": "plain"}])]
[lease] = app.store.claim("probe")
assert lease.execution_id == extra and lease.trace_context is None
app.close()
db = sqlite3.connect(sys.argv[1].removeprefix("sqlite:///"))
print(json.dumps({
    "otel": sorted(m for m, v in sys.modules.items() if m.startswith("opentelemetry") and v),
    "contexts": [c for (c,) in db.execute("SELECT trace_context FROM executions")],
}))
"""


@pytest.mark.parametrize(
    ("block", "name"),
    [
        # The extra not installed: every opentelemetry import fails.
        ("sys.modules['opentelemetry'] = None", "unimportable"),
        # Installed, never set up by the application.
        ("", "installed"),
        # Imported, but no provider set: the API's default no-op.
        ("import opentelemetry.trace", "no-provider"),
    ],
)
def test_without_tracing_a_process_stores_and_imports_nothing(
    tmp_path: Path, block: str, name: str
) -> None:
    url = f"sqlite:///{tmp_path / (name + '.db')}"
    done = subprocess.run(
        [sys.executable, "-c", UNTRACED.replace("BLOCK", block), url],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["contexts"] == [None, None, None]
    if name == "no-provider":
        assert "opentelemetry.trace" in report["otel"]  # the application's own import
        assert "opentelemetry.propagate" not in report["otel"], report["otel"]
    else:
        assert report["otel"] == []


def test_stored_contexts_that_are_not_ours_give_root_spans() -> None:
    """A row's trace_context is the database's text: junk must not break an attempt."""
    from opentelemetry.context import Context  # the otel extra is a dev dependency

    for junk in ("not json", "[1, 2]", '{"traceparent": 7}', '{"traceparent": "00-zz"}', ""):
        context = tracing._extract(junk)
        assert isinstance(context, Context)
        assert not tracing._otel("trace").get_current_span(context).get_span_context().is_valid
    assert tracing._extract(None) == Context()

"""One traced scenario in a process of its own: ``python _traced_scenario.py URL SCENARIO OUT``.

Sets a real OpenTelemetry SDK tracer provider recording to an ``InMemorySpanExporter``
(a process may set its tracer provider once, so each scenario gets a fresh process),
submits inside a ``caller`` span, runs a real worker on the store in this process
until the executions finish, and writes the finished spans and the executions' ids
as JSON to OUT for the test (tests/integration/test_tracing.py) to judge.

Scenarios:

* ``succeed``: one submit of ``greet`` (its handler opens a span of its own) and a
  ``submit_many`` of two, all run to success;
* ``dead_letter``: ``always_fails`` with two attempts: retried, then dead-lettered;
* ``http``: two ``POST /executions`` of ``greet`` through the service (in this
  process), one carrying a remote caller's ``traceparent`` (:data:`REMOTE_PARENT`),
  one a malformed one; then a submit under :func:`fencepost.tracing.remote_parent`
  directly (what the route does where no instrumented server continued the trace
  first), with :data:`DIRECT_PARENT`;
* ``stale``: ``loses_lease`` releases its own lease the first time it runs, so the
  store refuses that attempt's completion as stale; the next attempt succeeds;
* ``request_retry``: inside the ``caller`` span, ``fencepost.client.Client.submit`` of
  ``flaky`` through the service (in this process): the client sends the caller's
  context, the service's submit continues it, and ``flaky`` fails its first attempt
  and succeeds on its second; then ``AsyncClient.submit_many`` of one ``flaky``;
* ``async_store``: ``AsyncStore.submit`` and ``submit_many`` of ``greet`` inside the
  ``caller`` span.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import fencepost
from fencepost import State, tracing
from fencepost.jobs.context import Context

TERMINAL = {State.SUCCEEDED, State.FAILED, State.CANCELLED}
#: The remote caller of the http scenario: its trace id and span id.
REMOTE_TRACE, REMOTE_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
REMOTE_PARENT = f"00-{REMOTE_TRACE}-{REMOTE_SPAN}-01"
DIRECT_TRACE, DIRECT_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
DIRECT_PARENT = f"00-{DIRECT_TRACE}-{DIRECT_SPAN}-01"


def span_json(span: Any) -> dict[str, Any]:
    """What the test reads of a finished span."""
    ctx = span.get_span_context()
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{ctx.trace_id:032x}",
        "span_id": f"{ctx.span_id:016x}",
        "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
        "attributes": dict(span.attributes),
        "events": [{"name": e.name, "attributes": dict(e.attributes)} for e in span.events],
        "status": span.status.status_code.name,
        "status_description": span.status.description,
        "links": [f"{link.context.span_id:016x}" for link in span.links],
    }


def main(url: str, scenario: str, out: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("scenario")

    app = fencepost.App(url)
    store = app.store

    @app.job("greet")
    def greet(name: str) -> str:
        with tracer.start_as_current_span("greeting"):
            return f"hello {name}"

    @app.job("always_fails", retry={"base_delay": 0.05, "max_delay": 0.05})
    def always_fails() -> None:
        raise RuntimeError("boom")

    released: list[str] = []

    @app.job("loses_lease")
    def loses_lease(ctx: Context) -> str:
        if not released:  # a release does not count an attempt: once is enough
            released.append(ctx.execution_id)
            store.release(ctx.lease, reason="the test takes the lease away")
        return "done"

    failed_once: set[str] = set()

    @app.job("flaky", retry={"base_delay": 0.05, "max_delay": 0.05})
    def flaky(ctx: Context) -> str:
        if ctx.execution_id not in failed_once:
            failed_once.add(ctx.execution_id)
            raise RuntimeError("first attempt fails")
        return "second attempt"

    ids: list[str] = []
    with tracer.start_as_current_span("caller"):
        if scenario in ("request_retry", "async_store"):
            ids += asyncio.run(_submit_remotely(store, url, scenario))
        elif scenario == "succeed":
            ids.append(store.submit("greet", {"name": "ada"}).id)
            ids += [
                e.id
                for e in store.submit_many(
                    [{"job": "greet", "inputs": {"name": n}} for n in ("bo", "cy")]
                )
            ]
        elif scenario == "dead_letter":
            ids.append(store.submit("always_fails", max_attempts=2).id)
        elif scenario == "stale":
            ids.append(store.submit("loses_lease").id)
        elif scenario != "http":
            raise SystemExit(f"unknown scenario {scenario!r}")
    if scenario == "http":
        from fencepost.api import create_app
        from tests.api.support import TestClient

        with TestClient(create_app(store)) as client:
            for parent in (REMOTE_PARENT, "00-not-a-trace-01"):
                response = client.post(
                    "/executions",
                    json={"job": "greet", "inputs": {"name": "remote"}},
                    headers={"traceparent": parent, "tracestate": "vendor=1"},
                )
                assert response.status_code == 201, response.text
                ids.append(response.json()["id"])
        with tracing.remote_parent({"traceparent": DIRECT_PARENT}):
            ids.append(store.submit("greet", {"name": "direct"}).id)

    worker = app.worker(concurrency=2, poll_interval=0.02)
    worker.start()
    deadline = time.monotonic() + 30
    while not all(store.get(i).state in TERMINAL for i in ids):
        if time.monotonic() > deadline:
            raise SystemExit("the executions did not finish in 30 s")
        time.sleep(0.02)
    worker.stop()
    worker.join(30)
    executions = [store.get(i) for i in ids]
    with open(out, "w") as f:
        json.dump(
            {
                "ids": ids,
                "states": [e.state.value for e in executions],
                "epochs": [e.epoch for e in executions],
                "spans": [span_json(s) for s in exporter.get_finished_spans()],
            },
            f,
        )
    app.close()


async def _submit_remotely(store: Any, url: str, scenario: str) -> list[str]:
    """The ``request_retry`` and ``async_store`` submits, from the current span."""
    if scenario == "async_store":
        async with fencepost.connect_async(url) as astore:
            single = await astore.submit("greet", {"name": "async"})
            batch = await astore.submit_many([{"job": "greet", "inputs": {"name": "b"}}])
        return [single.id, batch[0].id]
    import httpx

    from fencepost.api import create_app
    from fencepost.client import AsyncClient, Client
    from tests.api.support import TestClient

    app = create_app(store)
    with TestClient(app) as http, Client("http://testserver", http=http) as client:
        first = client.submit("flaky", max_attempts=3)
    transport = httpx.ASGITransport(app=app)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as http_async,
        AsyncClient("http://testserver", http=http_async) as aclient,
    ):
        [second] = await aclient.submit_many([{"job": "flaky", "max_attempts": 3}])
    return [first.id, second.id]


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The application factory and its request-size guard."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fencepost.api import dashboard, executions, problems, reports, schedules, work
from fencepost.api.auth import Auth
from fencepost.api.metrics import Metrics, create_metrics
from fencepost.api.metrics import router as metrics_router
from fencepost.store.base import Store
from fencepost.worker.registry import JobRegistry

#: Default cap on a request body: 1 MiB, the store's default payload cap.
DEFAULT_MAX_BODY_BYTES = 1_048_576


def create_app(
    store: Store,
    *,
    auth: Auth | None = None,
    registry: JobRegistry | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    metrics: Metrics | None = None,
) -> FastAPI:
    """A FastAPI application serving ``store``. The caller owns and closes the store.

    ``auth`` holds the tokens; None (or an :class:`Auth` without tokens) turns
    authentication off, which only a loopback bind should do. With a job
    ``registry``, submits and schedules must name a registered job, their inputs
    are checked against its schema (naming the field, ``inputs.day``), the
    version is pinned to the latest when not given, and the job's
    ``max_attempts`` and ``timeout`` are the defaults. Without one, any job name
    is accepted (the workers decide what they run).

    ``metrics`` (from :func:`~fencepost.api.metrics.create_metrics`) is what
    ``GET /metrics`` serves; give this app its ``metrics.store`` so that the
    requests are counted too. None: metrics over ``store``, counting nothing of
    this process's work.
    """
    app = FastAPI(title="fencepost", version="0.1.0")
    app.state.store = store
    app.state.auth = auth if auth is not None else Auth()
    app.state.registry = registry
    app.state.metrics = metrics if metrics is not None else create_metrics(store)
    problems.install(app)
    app.include_router(executions.router)
    app.include_router(metrics_router)
    app.include_router(schedules.router)
    app.include_router(reports.router)
    app.include_router(dashboard.router)
    app.include_router(work.router)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(NoSniff)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # cached by FastAPI after the first call; the fix is idempotent
        _problem_media_type(schema)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _problem_media_type(schema: dict[str, Any]) -> None:
    """Declare problem responses as ``application/problem+json`` only.

    FastAPI files a response ``model`` under the route's media type
    (``application/json``); move the schema to the media type actually sent.
    """
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                content = response.get("content", {})
                if problems.MEDIA_TYPE in content and "application/json" in content:
                    content[problems.MEDIA_TYPE] = content.pop("application/json")


class NoSniff:
    """``X-Content-Type-Options: nosniff`` on every response.

    A browser then never reads an API answer (JSON, a problem, metrics) as HTML or
    script, whatever it contains. The dashboard's own responses add a CSP on top.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k != b"x-content-type-options"
                ]
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_header)


class BodyLimit:
    """Refuse request bodies larger than ``max_bytes`` with a 413 problem.

    ``Content-Length`` is checked first; a chunked or lying body is counted as it
    streams in. The body is buffered (it is at most ``max_bytes``) so the refusal
    happens before any route runs: nothing half-read reaches the store.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problems.problem(
            problems.BODY_TOO_LARGE,
            f"request body exceeds {self.max_bytes} bytes",
            field="body",
        )
        await response(scope, receive, send)

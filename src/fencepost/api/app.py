"""The application factory: the routers, the problem handlers and the guard in front of them."""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fencepost.api import (
    actions,
    dashboard,
    executions,
    flow,
    history,
    jobs,
    problems,
    reports,
    schedules,
    timeline,
    work,
)
from fencepost.api.auth import Auth
from fencepost.api.defaults import DEFAULT_BODY_BUDGET, DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_WAIT
from fencepost.api.guard import DEFAULT_MAX_BODY_BYTES, Guard, LoopbackOnly
from fencepost.api.limits import ByteBudget, FailureLimiter
from fencepost.api.metrics import Metrics, create_metrics
from fencepost.api.metrics import router as metrics_router
from fencepost.domain.errors import ValidationError
from fencepost.jobs.catalogue import publish
from fencepost.jobs.registry import JobRegistry
from fencepost.store.base import Store

#: Where the API docs' own assets (Swagger UI) are served.
DOCS_ASSETS = "/docs-assets"


def _closing(metrics: Metrics) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """A lifespan that closes ``metrics`` when the server stops."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            metrics.close()

    return lifespan


def create_app(
    store: Store,
    *,
    auth: Auth | None = None,
    registry: JobRegistry | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    metrics: Metrics | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    body_budget: int = DEFAULT_BODY_BUDGET,
    failures: FailureLimiter | None = None,
    loopback_only: bool = False,
    max_wait: float = DEFAULT_MAX_WAIT,
) -> FastAPI:
    """A FastAPI application serving ``store``. The caller owns and closes the store.

    ``auth`` holds the tokens; None (or an :class:`Auth` without tokens) turns
    authentication off, which only a loopback bind should do. A job ``registry``
    is published to the store's job catalogue; submits and schedules then follow
    the catalogue's one rule, as every other submitter does (see
    :class:`~fencepost.store.catalogue.CatalogueVerbs`): a published job is pinned
    to its latest version, its inputs checked and its defaults filled in, whoever
    published it; an unknown job follows the store's ``unknown_jobs``.

    ``metrics`` (from :func:`~fencepost.api.metrics.create_metrics`) is what
    ``GET /metrics`` serves; give this app its ``metrics.store`` so that the
    requests are counted too. None: metrics over ``store``, counting nothing of
    this process's work.

    In front of the routes, :class:`~fencepost.api.guard.Guard` checks a guarded
    route's credentials before reading its body, caps each body at
    ``max_body_bytes`` (413), wants it whole within ``body_timeout`` seconds (408),
    holds at most ``body_budget`` bytes of bodies at once across all requests (503),
    and refuses an address after repeated failed authentications (429; ``failures``,
    default :class:`~fencepost.api.limits.FailureLimiter`'s 20 then one per 3 s).
    ``loopback_only`` answers only requests whose ``Host`` is a loopback name: for a
    service without tokens. ``max_wait`` bounds a long-poll's ``wait`` (seconds;
    ``GET /executions/{id}?wait=``): larger values are refused (422 naming ``wait``).
    """
    if isinstance(max_wait, bool) or not isinstance(max_wait, int | float):
        raise ValidationError("max_wait", f"must be seconds, got {max_wait!r}")
    if not (math.isfinite(max_wait) and max_wait >= 0):
        raise ValidationError("max_wait", f"must be finite seconds >= 0, got {max_wait!r}")
    # /docs loads its scripts and styles from this service (fastapi-offline ships them),
    # not from a CDN: the docs work where the service has no internet. No /redoc: its
    # page fetches a logo from cdn.redoc.ly whatever serves its script.
    if registry is not None:
        # The jobs this service knows go to the catalogue first, so that every other
        # submitter (the CLI, workers' stores, schedules) checks them the same way.
        publish(store, registry)  # and the limits they declare
    own_metrics = metrics is None
    if metrics is None:
        metrics = create_metrics(store)
    app = FastAPIOffline(
        title="fencepost",
        version="0.1.0",
        static_url=DOCS_ASSETS,
        redoc_url=None,
        lifespan=_closing(metrics) if own_metrics else None,
    )
    app.state.store = store
    app.state.auth = auth if auth is not None else Auth()
    app.state.max_wait = float(max_wait)
    if own_metrics:
        # No one else can close them: they close when this app's server stops, or
        # when an app never served is collected (its store would otherwise feed the
        # counters of every app ever made over it).
        weakref.finalize(app, metrics.close)
    app.state.metrics = metrics
    # Shared by every request of this app (and readable, for tests and operators' probes).
    app.state.body_budget = ByteBudget(body_budget)
    app.state.failures = failures if failures is not None else FailureLimiter()
    problems.install(app)
    # Before the executions' routes: the spec then lists /executions/actions before
    # /executions/{execution_id}, which is how a 405 tells the methods of each.
    for router in (
        actions.router,
        executions.router,
        metrics_router,
        schedules.router,
        reports.router,
        history.router,
        jobs.router,
        flow.router,
        dashboard.router,
        work.router,
        timeline.router,
    ):
        # The routers' own routes, as declared (each router is included whole, with no
        # prefix or dependencies added): FastAPI resolved each route's parameters and
        # models once, when its module was imported. include_router would have each new
        # app build every route again on its first request, 50-100 ms that a service
        # pays once but a test suite that makes thousands of apps pays each time.
        app.router.routes.extend(router.routes)
    # add_middleware puts each outside the previous: NoSniff, LoopbackOnly, Guard, routes.
    app.add_middleware(
        Guard,
        max_bytes=max_body_bytes,
        body_timeout=body_timeout,
        budget=app.state.body_budget,
        failures=app.state.failures,
    )
    if loopback_only:
        app.add_middleware(LoopbackOnly)
    app.add_middleware(NoSniff)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        schema = generate()  # cached by FastAPI after the first call; the fix is idempotent
        _problem_media_type(schema)
        _long_poll_bound(schema, app.state.max_wait)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _long_poll_bound(schema: dict[str, Any], max_wait: float) -> None:
    """Declare this service's ``max_wait`` as the maximum of ``wait`` (a long-poll's seconds)."""
    operation = schema.get("paths", {}).get("/executions/{execution_id}", {}).get("get", {})
    for parameter in operation.get("parameters", []):
        if parameter.get("name") == "wait" and parameter.get("in") == "query":
            for option in parameter["schema"].get("anyOf", [parameter["schema"]]):
                if option.get("type") == "number":
                    option["maximum"] = max_wait


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

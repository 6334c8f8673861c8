"""``fencepost serve``: the HTTP API, dashboard and metrics, a materializer, a reaper, workers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fencepost.api.defaults import (
    DEFAULT_BODY_BUDGET,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_WAIT,
    TOKENS_ENV,
)
from fencepost.cli import common, logs
from fencepost.cli.worker import import_app, load_registry
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import CatalogueConflict, FencepostError, ValidationError
from fencepost.worker.prefetch import DEFAULT_CONCURRENCY

if TYPE_CHECKING:
    import argparse

    from fencepost.api.auth import Auth
    from fencepost.app import App
    from fencepost.jobs.registry import JobRegistry
    from fencepost.store import Store


def add_parser(commands: Any) -> None:
    """Register the ``serve`` subcommand on ``commands`` (an argparse subparsers object)."""
    p = commands.add_parser(
        "serve",
        help="run the HTTP service: API, dashboard, metrics, scheduler and workers",
        description="Serve the HTTP API, the dashboard at / and Prometheus metrics at "
        "/metrics; materialize schedules, time out expired leases, and run the registered "
        "jobs on embedded workers. Several services may share one PostgreSQL database. "
        "Stops gracefully on SIGTERM/SIGINT.",
    )
    p.add_argument("app", nargs="?", help="MODULE:ATTRIBUTE naming a fencepost.App")
    p.add_argument(
        "--db",
        default=os.environ.get(common.DB_ENV),
        metavar="URL",
        help=f"store URL (default: ${common.DB_ENV}, else the App's own store, else "
        f"{common.DEFAULT_DB})",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to bind (default 8080)")
    p.add_argument("--definitions", type=Path, help="directory of job definition files")
    p.add_argument(
        "--workers",
        type=int,
        help="embedded workers for the registered jobs (default 1 when jobs are "
        "registered; 0 leaves the work to remote workers)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"handlers per embedded worker (default {DEFAULT_CONCURRENCY}, as a worker's)",
    )
    p.add_argument(
        "--tokens",
        type=Path,
        help=f"bearer tokens file (JSON or YAML); also ${TOKENS_ENV}. Without tokens "
        "the service only binds to a loopback address",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        help="seconds a client has to send a request's headers, from connecting or "
        f"from the previous response; 408 after (default {DEFAULT_HEADER_TIMEOUT:g})",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT,
        help="seconds a client has to send a whole request body once its headers are "
        f"in; 408 after (default {DEFAULT_BODY_TIMEOUT:g})",
    )
    p.add_argument(
        "--body-budget",
        type=int,
        default=DEFAULT_BODY_BUDGET,
        help="bytes of request bodies buffered at once across all requests; 503 "
        f"beyond (default {DEFAULT_BODY_BUDGET}, 64 MiB)",
    )
    p.add_argument(
        "--max-wait",
        type=float,
        default=DEFAULT_MAX_WAIT,
        help="longest long-poll of GET /executions/{id}?wait=, seconds; more is refused "
        f"(422) (default {DEFAULT_MAX_WAIT:g})",
    )
    p.add_argument("--no-scheduler", action="store_true", help="do not materialize schedules")
    p.add_argument("--grace", type=float, default=30.0, help="shutdown grace, seconds")
    common.add_logging(p, default="INFO", note="")


def run(args: argparse.Namespace) -> int:
    """Build the service from ``args`` and serve until a signal; the exit code."""
    logs.configure(args.log_level, args.log_format)
    try:
        auth, app, registry = _check(args)
    except (FencepostError, ValueError, ImportError, AttributeError) as exc:
        return common.fail("serve", str(exc), common.Exit.USAGE)
    from fencepost.worker.runtime import WorkerOptions, describe

    try:
        store = _store(args, app)
    except FencepostError as exc:
        return common.fail("serve", str(exc), common.exit_code(exc))
    from fencepost.api.service import Service, ServiceOptions

    workers = args.workers if args.workers is not None else (1 if len(registry) else 0)
    options = ServiceOptions(
        workers=workers,
        concurrency=args.concurrency,
        materializer=not args.no_scheduler,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        body_budget=args.body_budget,
        max_wait=args.max_wait,
        worker=WorkerOptions(grace=args.grace),
    )
    try:  # publishes the service's jobs to the catalogue
        service = Service(store, registry=registry, auth=auth, options=options)
    except CatalogueConflict as exc:
        store.close()
        return common.fail("serve", str(exc), common.exit_code(exc))
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"fencepost: serving {describe(store)} at http://{host}:{args.port}/ "
        f"(dashboard /, API /docs, metrics /metrics); {len(service.workers)} embedded "
        f"worker(s) for {len(registry)} job(s); auth {'on' if auth.enabled else 'off'}",
        flush=True,
    )
    try:
        service.serve(args.host, args.port, log_level=args.log_level.lower())
    except KeyboardInterrupt:  # a signal after the service had already stopped
        return 130
    finally:
        store.close()
    return 0


def _store(args: argparse.Namespace, app: App | None) -> Store:
    """The store to serve, by the rule every command follows (``common.DB_RULE``): --db
    (whose default is $FENCEPOST_DB), else the store the App names, else the default file.

    The App's own store, not a fresh default: ``serve tasks:app`` serves the executions
    ``tasks.app`` submits and ``worker tasks:app`` runs, as the worker does.
    """
    from fencepost.store import connect

    if args.db:
        with common.option("--db"):
            return connect(args.db)
    if app is not None:
        return app.store
    return connect(common.DEFAULT_DB)


def _check(args: argparse.Namespace) -> tuple[Auth, App | None, JobRegistry]:
    """Everything that can be refused before the store is opened."""
    from fencepost.api.auth import Auth, load_tokens  # the service's modules load with it
    from fencepost.api.guard import is_loopback

    if not 0 < args.port < 65536:
        raise ValidationError("port", f"must be 1-65535, got {args.port}")
    if args.workers is not None and args.workers < 0:
        raise ValidationError("workers", f"must be >= 0, got {args.workers}")
    if args.concurrency < 1:
        raise ValidationError("concurrency", f"must be >= 1, got {args.concurrency}")
    for name in ("header_timeout", "body_timeout"):
        # The one duration check: finite (1e400 would switch the limit off), > 0, <= 100 years.
        as_duration(getattr(args, name), field=name)
    as_duration(args.max_wait, field="max_wait", allow_zero=True)
    if args.body_budget < 1:
        raise ValidationError("body_budget", f"must be >= 1 byte, got {args.body_budget}")
    auth = Auth(load_tokens(args.tokens))
    if not auth.enabled and not is_loopback(args.host):
        raise ValidationError(
            "host",
            f"refusing to listen on {args.host} without tokens: configure --tokens FILE "
            f"or ${TOKENS_ENV}, or bind to 127.0.0.1",
        )
    app = import_app(args.app) if args.app else None
    return auth, app, load_registry(app, args.definitions)

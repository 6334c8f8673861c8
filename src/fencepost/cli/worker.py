"""``fencepost worker``: run a worker process for an app's jobs or definition files."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fencepost.cli import common, logs
from fencepost.client import TOKEN_ENV
from fencepost.domain.buckets import parse_buckets
from fencepost.domain.errors import CatalogueConflict, FencepostError, ValidationError
from fencepost.worker.prefetch import DEFAULT_CONCURRENCY, DEFAULT_PREFETCH

if TYPE_CHECKING:
    from fencepost.app import App
    from fencepost.jobs.registry import JobRegistry
    from fencepost.worker.runtime import Worker
    from fencepost.worker.source import WorkSource

# The worker's machinery (the App, store, runtime, scheduler) is imported by the
# functions that run it, not here: `fencepost --help` and the other commands never need it.


def add_parser(commands: Any) -> None:
    """Register the ``worker`` subcommand on ``commands`` (an argparse subparsers object)."""
    p = commands.add_parser(
        "worker",
        help="claim and run executions until SIGTERM/SIGINT",
        description="Claim due executions and run them. The first SIGTERM/SIGINT stops "
        "claiming and waits --grace seconds for running handlers, then releases the rest; "
        "a second one stops at once.",
    )
    add_arguments(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The worker's arguments and flags, on ``p`` (``manage.py fencepost_worker`` reuses them)."""
    p.add_argument("app", nargs="?", help="MODULE:ATTRIBUTE naming a fencepost.App")
    p.add_argument("--definitions", type=Path, help="directory of job definition files")
    p.add_argument(
        "--db",
        default=os.environ.get(common.DB_ENV),
        metavar="URL",
        help=f"store URL (default: ${common.DB_ENV}, else the App's own store, else "
        f"{common.DEFAULT_DB})",
    )
    p.add_argument(
        "--server",
        help="a fencepost service URL: work through its worker protocol instead of --db",
    )
    p.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"bearer token (scope 'work') for --server (default ${TOKEN_ENV})",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"handlers at once (default {DEFAULT_CONCURRENCY})",
    )
    p.add_argument(
        "--prefetch",
        type=int,
        default=DEFAULT_PREFETCH,
        help="most leases claimed ahead of free handlers; how many are is sized by "
        f"throughput and lease length (default {DEFAULT_PREFETCH}; 0: none)",
    )
    p.add_argument("--jobs", help="run only these jobs (comma-separated names)")
    p.add_argument("--owner", help="lease owner / node id (default host:pid)")
    p.add_argument("--grace", type=float, default=30.0, help="shutdown grace, seconds")
    p.add_argument("--buckets", help="claim only from these buckets, e.g. 0-15,20")
    p.add_argument("--num-buckets", type=int, help=argparse.SUPPRESS)  # default: the store's
    p.add_argument("--max-per-bucket", type=int, help="cap RUNNING executions per bucket")
    p.add_argument(
        "--queues", help="claim only from these queues (comma-separated; default: every queue)"
    )
    p.add_argument(
        "--queue-concurrency",
        action="append",
        metavar="QUEUE=N",
        help="hold at most N leases of QUEUE at once, buffered ones included (repeatable or "
        "comma-separated; each QUEUE one of --queues)",
    )
    p.add_argument(
        "--poll-interval",
        type=float,
        help="idle wait between claims, seconds (default 0.05 with --db, 0.5 with --server)",
    )
    p.add_argument(
        "--with-scheduler",
        action="store_true",
        help="also materialize schedules in this process (safe in several processes at once)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: none; 0: any "
        "free port, logged)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="the address --metrics-port listens on (default 127.0.0.1; 0.0.0.0: every one)",
    )
    common.add_logging(p, default="INFO", note="")


def run(args: argparse.Namespace) -> int:
    """Build the worker from ``args`` and run it; the process exit code."""
    logs.configure(args.log_level, args.log_format)
    try:
        worker = _build(args)
    except FencepostError as exc:
        return common.fail("worker", str(exc), common.exit_code(exc))
    except (ImportError, AttributeError) as exc:  # APP names no module or attribute
        return common.fail("worker", str(exc), common.Exit.USAGE)
    if args.metrics_port is not None:
        try:  # before the scheduler: it counts its occurrences through the worker's store
            from fencepost.api.counters import meter_store

            worker.serve_metrics(args.metrics_port, args.metrics_host, meter=meter_store)
        except ValidationError as exc:
            worker.store.close()
            return common.fail("worker", str(exc), common.Exit.USAGE)
    materializer = None
    if args.with_scheduler:
        from fencepost.scheduler.materializer import Materializer, MaterializerOptions
        from fencepost.store.base import Store

        assert isinstance(worker.store, Store)  # _build refuses --with-scheduler with --server
        materializer = Materializer(
            worker.store, MaterializerOptions(owner=f"{worker.owner}:scheduler")
        )
        materializer.start()
    from fencepost.domain.errors import Forbidden, Unauthorized

    try:
        worker.run()
    except CatalogueConflict as exc:
        # Another definition of one of its job versions is published: running this one
        # under the same name and version would run different code for the same request.
        return common.fail("worker", str(exc), common.Exit.CONFLICT)
    except (Unauthorized, Forbidden) as exc:
        # The service refused the token before anything started: the caller's error.
        return common.fail(
            "worker",
            f"{args.server} refused the token: {exc} "
            f"(a worker needs one with the 'work' scope: --token or ${TOKEN_ENV})",
            common.Exit.USAGE,
        )
    finally:
        if materializer is not None:
            materializer.stop()
        worker.store.close()
    return 0


def _build(args: argparse.Namespace) -> Worker:
    from fencepost.store import connect
    from fencepost.worker.runtime import Worker, WorkerOptions

    if args.app is None and args.definitions is None:
        raise ValidationError("app", "give MODULE:ATTRIBUTE, --definitions DIR, or both")
    if args.concurrency < 1:
        raise ValidationError("concurrency", f"must be >= 1, got {args.concurrency}")
    if args.prefetch < 0:
        raise ValidationError("prefetch", f"must be >= 0, got {args.prefetch}")
    app = import_app(args.app) if args.app else None
    registry = load_registry(app, args.definitions)
    if args.jobs:
        registry = registry.restricted(j.strip() for j in args.jobs.split(",") if j.strip())
    from fencepost.domain.buckets import MAX_NUM_BUCKETS
    from fencepost.store.base import Store

    # --buckets is checked as written before anything is opened, then against the count
    # the store records (without --num-buckets, a worker runs with that count).
    bound = args.num_buckets or MAX_NUM_BUCKETS
    buckets = None if args.buckets is None else parse_buckets(args.buckets, num_buckets=bound)
    store: WorkSource
    if args.server:
        if args.db:
            raise ValidationError("server", "give --server or --db, not both")
        if args.with_scheduler:
            raise ValidationError(
                "with-scheduler", "needs --db: the service materializes its schedules itself"
            )
        from fencepost.client.http import Client  # httpx: only for a remote worker

        store = Client(args.server, token=args.token)
    elif args.db:
        store = connect(args.db, num_buckets=args.num_buckets)
    elif app is not None:
        store = app.store
    else:  # definition files only: the default store of every command
        store = connect(common.DEFAULT_DB, num_buckets=args.num_buckets)
    if buckets is not None and isinstance(store, Store):
        buckets = parse_buckets(args.buckets, num_buckets=store.config.num_buckets)
    options = WorkerOptions(
        owner=args.owner,
        concurrency=args.concurrency,
        prefetch=args.prefetch,
        buckets=buckets,
        max_per_bucket=args.max_per_bucket,
        queues=None if args.queues is None else args.queues.split(","),
        queue_concurrency=_queue_concurrency(args.queue_concurrency),
        grace=args.grace,
        poll_interval=_poll_interval(args),
    )
    try:
        return Worker(store, registry, options)
    except ValidationError as exc:  # named as the option is spelled here
        raise ValidationError(exc.field.replace("_", "-"), exc.message) from None


def _queue_concurrency(values: list[str] | None) -> dict[str, int] | None:
    """``--queue-concurrency`` (``QUEUE=N``, repeated or comma-separated) as a mapping."""
    if values is None:
        return None
    limits: dict[str, int] = {}
    for item in (part for value in values for part in value.split(",")):
        name, equals, number = item.rpartition("=")
        if not equals or not number.strip().lstrip("-").isdigit():
            raise ValidationError("queue-concurrency", f"must look like QUEUE=N, got {item!r}")
        if name in limits:
            raise ValidationError("queue-concurrency", f"gives {name!r} twice")
        limits[name] = int(number)
    return limits


def _poll_interval(args: argparse.Namespace) -> float:
    """An idle worker's wait between claims.

    Over HTTP every empty claim is a request the service must answer, so a remote
    worker polls ten times less often than one on the database (a busy worker does
    not wait: it claims again as soon as a claim returned work).
    """
    if args.poll_interval is not None:
        if args.poll_interval <= 0:
            raise ValidationError("poll-interval", f"must be > 0, got {args.poll_interval}")
        return float(args.poll_interval)
    return 0.5 if args.server else 0.05


def load_registry(app: App | None, definitions: Path | None) -> JobRegistry:
    """The jobs of ``app`` and of the definition files in ``definitions``, together."""
    from fencepost.jobs.registry import JobRegistry

    specs = [] if app is None else list(app.registry)
    if definitions is not None:
        # Definition files need YAML, JSON Schema and the runners: loaded only for them.
        from fencepost.jobs.definitions import load_definitions

        specs += load_definitions(definitions)
    return JobRegistry(specs)


def import_app(target: str) -> App:
    """The fencepost.App that ``module:attribute`` names (the current directory is importable)."""
    from fencepost.app import App

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValidationError("app", f"must look like module:attribute, got {target!r}")
    # Like `python -m`: the current directory is importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name == module_name:  # the app's own module is not there
            why = f"no module {module_name!r} in {os.getcwd()} or on sys.path"
        else:  # something the app's module imports (exc.name) is missing or broken
            why = f"importing {module_name!r} failed: {exc}"
        raise ValidationError("app", why) from exc
    try:
        app = getattr(module, attribute)
    except AttributeError:
        raise ValidationError("app", f"module {module_name!r} has no {attribute!r}") from None
    if not isinstance(app, App):
        raise ValidationError("app", f"{target} is a {type(app).__name__}, not a fencepost.App")
    return app

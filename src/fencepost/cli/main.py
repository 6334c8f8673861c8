"""``fencepost``: the operator command.

``fencepost serve`` runs the HTTP service; ``fencepost worker`` runs a worker;
``fencepost db migrate`` prepares a database; the operator commands (``submit``,
``ps``, ``stats``, ``jobs``, ``buckets``, ``schedule``, ``reconcile``, ``dead-letters``,
``replay``, ``cancel``, ``retry-now``, ``delete``, ``prune``, ``slo``, ``history``,
``limits``, ``queues``)
each live in a small module of their own and print tables or, with ``--json``,
one JSON document (:mod:`fencepost.cli.output`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import fencepost
from fencepost.cli import (
    buckets,
    bulk,
    common,
    executions,
    flow,
    history,
    jobs,
    maintenance,
    report,
    schedules,
    serve,
    show,
    submit,
    worker,
)
from fencepost.domain.errors import FencepostError

if TYPE_CHECKING:
    from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """The ``fencepost`` command's parser: every command, subcommand and option.

    :func:`main` parses with it, and the CLI reference of the documentation is
    generated from it, so the two cannot disagree.
    """
    parser = common.Parser(
        prog="fencepost",
        description="The operator command of fencepost, a durable job scheduler with fenced "
        f"leases. Every command takes --db URL; its store is {common.DB_RULE}. The operator "
        "commands print tables, or one JSON document with --json. Run without a command, "
        "it prints this help.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"fencepost {fencepost.__version__}",
        help="print fencepost's version and exit",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, metavar="COMMAND")
    migrate = db_commands.add_parser(
        "migrate", help="apply pending migrations (safe to run from several processes at once)"
    )
    migrate.add_argument(
        "--db",
        default=os.environ.get(common.DB_ENV) or common.DEFAULT_DB,
        metavar="URL",
        help=f"store URL (default: ${common.DB_ENV}, else {common.DEFAULT_DB})",
    )
    migrate.add_argument(
        "--move-to-schema",
        metavar="SCHEMA",
        help="PostgreSQL: then move the store's tables from the URL's schema to SCHEMA "
        "(stop every worker and service first)",
    )
    buckets.add_db_parsers(db_commands)
    serve.add_parser(commands)
    worker.add_parser(commands)
    submit.add_parsers(commands)
    show.add_parsers(commands)
    executions.add_parsers(commands)
    bulk.add_parsers(commands)
    report.add_parsers(commands)
    history.add_parsers(commands)
    jobs.add_parsers(commands)
    buckets.add_parsers(commands)
    schedules.add_parsers(commands)
    flow.add_parsers(commands)
    maintenance.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `fencepost`: what it can do, not an error
        parser.print_help()
        return common.Exit.OK
    if getattr(args, "handler", None) is not None:
        return common.dispatch(args)
    if args.command == "worker":
        return worker.run(args)
    if args.command == "serve":
        return serve.run(args)
    if args.command == "db" and args.db_command == "migrate":
        return _migrate(args.db, parser, args.move_to_schema)
    parser.error("unknown command")  # pragma: no cover - argparse rejects it first
    return 2  # pragma: no cover


def _migrate(url: str | None, parser: argparse.ArgumentParser, move_to: str | None = None) -> int:
    if not url:  # only an explicit --db ""
        parser.error("--db must not be empty")
    if move_to is not None and urlsplit(url).scheme not in ("postgresql", "postgres"):
        return common.fail(
            "db migrate", "--move-to-schema: only PostgreSQL has schemas", common.Exit.USAGE
        )
    from fencepost.store import connect

    try:
        _prepare(url)
        with common.option("--db"), connect(url) as store:
            applied = store.migrations_applied
            version = store.schema_version
    except FencepostError as exc:
        return common.fail("db migrate", str(exc), common.exit_code(exc))
    if applied:
        print(f"migrated to version {version} (applied {', '.join(map(str, applied))})")
    else:
        print(f"already at version {version}; nothing to apply")
    return 0 if move_to is None else _move(url, move_to)


def _move(url: str, target: str) -> int:
    """``db migrate --move-to-schema``: see store/maintenance.py."""
    from fencepost.store.maintenance import move_schema

    try:
        source, moved = move_schema(url, target)
    except FencepostError as exc:
        return common.fail("db migrate", str(exc), common.exit_code(exc))
    print(f"moved {moved} tables and views from schema {source} to {target}")
    return 0


def _prepare(url: str) -> None:
    """On PostgreSQL, do the pending migrations' slow reading online first, with a
    progress bar on a terminal (store/postgres/conversion.py)."""
    from fencepost.cli.output import Output
    from fencepost.store.maintenance import is_postgres, prepare_migrations

    if not is_postgres(url):
        return
    out = Output(as_json=False)
    with ExitStack() as bars:
        current: dict[str, Callable[[int], None]] = {}

        def progress(stage: str, done: int, total: int | None) -> None:
            if stage not in current:
                bars.close()
                current.clear()
                print(f"fencepost: {stage}", file=sys.stderr)
                current[stage] = bars.enter_context(out.progress(stage, total))
            current[stage](done)

        prepare_migrations(url, progress)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

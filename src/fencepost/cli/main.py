"""``fencepost``: the operator command.

``fencepost worker`` runs a worker; ``fencepost db migrate`` prepares a
database. The other operator commands (``serve``, ``ps``, ...) join them as
they are built.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from fencepost.cli import worker
from fencepost.domain.errors import FencepostError
from fencepost.store import connect


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="fencepost", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    migrate = db_commands.add_parser(
        "migrate", help="apply pending migrations (safe to run from several processes at once)"
    )
    migrate.add_argument(
        "--db",
        default=os.environ.get("FENCEPOST_DB"),
        help="store URL (default: $FENCEPOST_DB)",
    )
    worker.add_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "worker":
        return worker.run(args)
    if args.command == "db" and args.db_command == "migrate":
        return _migrate(args.db, parser)
    parser.error("unknown command")  # pragma: no cover - argparse rejects it first
    return 2  # pragma: no cover


def _migrate(url: str | None, parser: argparse.ArgumentParser) -> int:
    if not url:
        parser.error("--db is required (or set FENCEPOST_DB)")
    try:
        with connect(url) as store:
            applied = store.migrations_applied
            version = store.schema_version
    except FencepostError as exc:
        print(f"fencepost: {exc}", file=sys.stderr)
        return 1
    if applied:
        print(f"migrated to version {version} (applied {', '.join(map(str, applied))})")
    else:
        print(f"already at version {version}; nothing to apply")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``manage.py fencepost_worker MODULE:APP [fencepost worker's flags]``.

The same worker as ``fencepost worker`` — its arguments and its body are the CLI's
own (:mod:`fencepost.cli.worker`) — on the store of ``settings.FENCEPOST`` unless
``--db`` or ``--server`` is given, and inside the Django project: the job module may
use the ORM and the settings.
"""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fencepost.cli import worker as cli_worker
from fencepost.contrib.django.runtime import current_settings

#: Django's own options, which the CLI's handler does not take.
DJANGO_OPTIONS = frozenset(
    {"verbosity", "settings", "pythonpath", "traceback", "no_color", "force_color", "skip_checks"}
)


class Command(BaseCommand):
    help = (
        "Claim due executions and run them, on the store of settings.FENCEPOST (default "
        "--db). The first SIGTERM/SIGINT stops claiming and waits --grace seconds for running "
        "handlers, then releases the rest; a second one stops at once."
    )
    # The worker runs for hours; Django's system checks ran when it started.
    requires_system_checks: ClassVar[list[str]] = []

    def add_arguments(self, parser: CommandParser) -> None:
        cli_worker.add_arguments(parser)
        for action in parser._actions:  # argparse has no public way to change one's help
            if action.dest == "db":
                action.help = "store URL (default: settings.FENCEPOST's store)"
        options = current_settings().connect_options
        # Without NUM_BUCKETS the worker runs with the count the store records.
        parser.set_defaults(db=None, num_buckets=options.get("num_buckets"))

    def handle(self, *args: Any, **options: Any) -> None:
        worker_options = {k: v for k, v in options.items() if k not in DJANGO_OPTIONS}
        if not worker_options.get("db") and not worker_options.get("server"):
            worker_options["db"] = current_settings().url
        code = cli_worker.run(argparse.Namespace(**worker_options))
        if code:
            raise CommandError(f"the worker stopped with exit code {code}", returncode=code)

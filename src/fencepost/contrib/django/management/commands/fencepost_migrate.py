"""``manage.py fencepost_migrate``: ``fencepost db migrate`` on the store of the settings."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fencepost.cli.main import main as fencepost_main
from fencepost.contrib.django.runtime import current_settings


class Command(BaseCommand):
    help = (
        "Create or upgrade fencepost's tables in the store of settings.FENCEPOST (safe to run "
        "from several processes at once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--db", metavar="URL", help="store URL (default: the settings')")

    def handle(self, *args: Any, **options: Any) -> None:
        url = options["db"] or current_settings().url
        code = fencepost_main(["db", "migrate", "--db", url])
        if code:
            raise CommandError(f"fencepost db migrate failed (exit code {code})", returncode=code)

"""Logging for the ``fencepost`` commands: readable lines, or one JSON object per line.

With ``--log-format json`` every record is a JSON object: ``ts`` (ISO 8601 UTC),
``level``, ``logger``, ``message``, and — on every line about an execution —
``execution_id``, ``epoch``, ``owner``, ``job`` and ``attempt`` (passed by the worker as
``extra=``), plus ``error`` with the traceback when there is one.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

#: The structured fields a record may carry, in output order.
FIELDS = ("execution_id", "epoch", "owner", "job", "attempt", "schedule_id")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

#: Libraries that log every request or connection at INFO (a remote worker polls the
#: service twice a second): WARNING and above only, unless the level asked for is DEBUG.
QUIET_LOGGERS = ("httpx", "httpcore")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with the structured fields when present."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_unless_configured(level: str = "INFO", fmt: str = "text") -> bool:
    """:func:`configure`, unless the process has configured logging; True if it did.

    Configured means the root logger has a handler (``logging.basicConfig`` or
    ``dictConfig`` gave it one): the application's choices are then left as they are.
    ``App.run_worker`` calls this, so it logs as ``fencepost worker`` does.
    """
    if logging.getLogger().handlers:
        return False
    configure(level, fmt)
    return True


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Send fencepost's logs to stderr at ``level``, as ``text`` or ``json`` lines."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    # On the handler too: libraries that set their own logger's level (psycopg sets
    # WARNING) would otherwise print below the level asked for.
    handler.setLevel(level.upper())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    quiet = logging.NOTSET if level.upper() == "DEBUG" else logging.WARNING
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(quiet)

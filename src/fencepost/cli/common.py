"""What every operator command shares: its parser, argument checks, and the store it opens.

Arguments are checked before a store is opened — a bad one must not create a
database file or touch a server — and every refusal is a
:class:`~fencepost.domain.errors.ValidationError` whose field is the option as
the operator typed it (``--state``, ``--owned-buckets``), so the one line on
stderr reads ``fencepost ps: --state: unknown state 'NOPE' (one of ...)``.
"""

from __future__ import annotations

import argparse
import getpass
import inspect
import json
import math
import os
import socket
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import unquote, urlsplit

from fencepost.cli import logs
from fencepost.cli.output import Output
from fencepost.domain import payloads
from fencepost.domain.buckets import DEFAULT_NUM_BUCKETS, parse_buckets
from fencepost.domain.durations import as_aware_utc, parse_duration
from fencepost.domain.errors import (
    FencepostError,
    Forbidden,
    IdempotencyConflict,
    InvalidTransition,
    NotDue,
    NotFound,
    NotMigrated,
    NotRunning,
    StaleLease,
    StoreUnavailable,
    Unauthorized,
    ValidationError,
)
from fencepost.domain.states import State

if TYPE_CHECKING:
    from fencepost.store import Store

#: The store every command uses without --db: $FENCEPOST_DB, else this file in the
#: current directory (a first `fencepost submit`, `worker` and `ps` then share it).
DB_ENV = "FENCEPOST_DB"
DEFAULT_DB = "sqlite:///fencepost.db"
#: The one rule every command follows to choose its store, as the help and docs say it.
DB_RULE = (
    f"--db URL, else ${DB_ENV}, else the store the App names (serve and worker), else {DEFAULT_DB}"
)


class Exit(IntEnum):
    """The exit status of every ``fencepost`` command: one code per cause, the same everywhere.

    :func:`exit_code` maps each error to its code; :data:`EXIT_CAUSES` says what each
    means, and the CLI reference renders that table (docs/gen/cli_reference.py).
    """

    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_FOUND = 3
    CONFLICT = 4
    UNAVAILABLE = 5
    INTERRUPTED = 130


#: What each exit code means, for a user: the CLI reference's "Exit codes" table.
EXIT_CAUSES: dict[Exit, str] = {
    Exit.OK: "done",
    Exit.FAILED: "the command ran and what it checked failed (an objective missed), "
    "or a failure none of the codes below names",
    Exit.USAGE: "a bad argument or input: an unknown option, a malformed value or execution "
    "id, inputs a job's schema refuses, a --db that names no database, a token the "
    "service refuses; nothing was changed",
    Exit.NOT_FOUND: "no execution, schedule or job by that id or name, or no limit on that scope",
    Exit.CONFLICT: "the stored state refuses the request: an idempotency key or schedule id "
    "already used for a different request, a job version published with another "
    "definition, a stale lease, a transition the state machine forbids (cancel a finished "
    "execution, replay one that is not FAILED)",
    Exit.UNAVAILABLE: "the store cannot be used: unreachable, or without fencepost's schema "
    "at this version (fencepost db migrate creates or upgrades it); retry once it is back",
    Exit.INTERRUPTED: "interrupted (SIGINT)",
}

#: Exit code of a refused argument (argparse uses it too).
EXIT_USAGE = Exit.USAGE
#: Exit code of a failure no other code names (see :class:`Exit`).
EXIT_FAILED = Exit.FAILED


#: Refusals by the stored state (the API's 409s): :attr:`Exit.CONFLICT`.
_CONFLICTS = (IdempotencyConflict, StaleLease, InvalidTransition, NotRunning, NotDue)


def exit_code(error: BaseException) -> Exit:
    """The exit code of a command that stopped with ``error`` (see :data:`EXIT_CAUSES`)."""
    if isinstance(error, KeyboardInterrupt):
        return Exit.INTERRUPTED
    if isinstance(error, ValidationError | Unauthorized | Forbidden):
        return Exit.USAGE
    if isinstance(error, NotFound):
        return Exit.NOT_FOUND
    if isinstance(error, _CONFLICTS):
        return Exit.CONFLICT
    if isinstance(error, StoreUnavailable | NotMigrated):
        return Exit.UNAVAILABLE
    return Exit.FAILED


#: The most rows one listing asks the store for.
MAX_LIMIT = 10_000

#: A command's body: parsed arguments and where to print -> exit code.
Handler = Callable[[argparse.Namespace, Output], int]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose refusals are one line: ``fencepost ps: argument ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {one_line(message)}\n")


def one_line(text: str) -> str:
    """``text`` with its line breaks folded into spaces."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def command(commands: Any, name: str, handler: Handler) -> argparse.ArgumentParser:
    """Add subcommand ``name`` running ``handler``, with ``--db`` and ``--json``.

    The handler's docstring is the command's help: its first paragraph is the line
    ``fencepost --help`` lists, the rest (if any) what ``fencepost NAME --help`` says
    first. What the code says a command does and what the operator reads are one text.
    """
    summary, description = help_texts(handler)
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=summary, description=description
    )
    parser.set_defaults(handler=handler, command_name=parser.prog.removeprefix("fencepost "))
    parser.add_argument(
        "--db",
        default=os.environ.get(DB_ENV) or DEFAULT_DB,
        metavar="URL",
        help=f"store URL: sqlite:///path.db or postgresql://... (default: ${DB_ENV}, "
        f"else {DEFAULT_DB})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    return parser


def help_texts(handler: Handler) -> tuple[str, str]:
    """A handler's help line and description, from its docstring.

    Without a paragraph after the first, the description is the help line. argparse
    %-formats a subcommand's help line but prints its description as it is, so only
    the help line has its ``%`` doubled.
    """
    doc = inspect.cleandoc(handler.__doc__ or "")
    summary, _, rest = doc.partition("\n\n")
    if not summary:
        raise TypeError(f"command handler {handler.__name__} has no docstring to show as help")
    summary = one_line(summary)
    description = " ".join(one_line(part) for part in rest.split("\n\n") if part.strip())
    return summary.replace("%", "%%"), description or summary


def add_num_buckets(parser: argparse.ArgumentParser) -> None:
    """``--num-buckets``: how many buckets the deployment spreads executions over."""
    parser.add_argument(
        "--num-buckets",
        type=_whole_number,
        metavar="N",
        help="buckets the deployment uses: must equal the count the store records "
        f"(default: that count; {DEFAULT_NUM_BUCKETS} for a new store)",
    )


def _whole_number(text: str) -> int:
    """An argparse ``type``: digits only, and few enough that the refusal of a count out of
    range (:func:`num_buckets`) can show them; else a one-line refusal that shows only
    their beginning."""
    digits = text.strip()
    if digits.isascii() and digits.isdigit() and len(digits) <= 18:
        return int(digits)
    shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
    raise argparse.ArgumentTypeError(f"must be a whole number, got {shown}")


def add_logging(
    parser: argparse.ArgumentParser,
    *,
    default: str = "WARNING",
    note: str = "; INFO logs every batch",
) -> None:
    """``--log-level`` and ``--log-format`` for the commands that work for a while."""
    parser.add_argument(
        "--log-level",
        default=default,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        type=str.upper,
        help=f"log to stderr at this level (default {default}{note})",
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object per line with execution_id, epoch and owner",
    )


def configure_logging(args: argparse.Namespace) -> None:
    """Set up logging from ``--log-level``/``--log-format``."""
    logs.configure(args.log_level, args.log_format)


def dispatch(args: argparse.Namespace) -> int:
    """Run the chosen command; turn its errors into one line on stderr and an exit code."""
    name = args.command_name
    out = Output(as_json=args.json)
    # Quiet unless the command has --log-level: a failure is the one line below, not
    # also the driver's retries logged on the way there.
    logs.configure("ERROR")
    try:
        return int(args.handler(args, out))
    except FencepostError as exc:
        return fail(name, str(exc), exit_code(exc))
    except KeyboardInterrupt as exc:
        return fail(name, "interrupted", exit_code(exc))


def fail(name: str, message: str, code: int) -> int:
    """Print ``fencepost <name>: <message>`` on stderr (one line); return ``code``."""
    print(f"fencepost {name}: {one_line(message)}", file=sys.stderr)
    return code


# -- argument checks --------------------------------------------------------------------


@contextmanager
def option(name: str) -> Iterator[None]:
    """Re-raise a ValidationError from the block as one about option ``name``."""
    try:
        yield
    except ValidationError as exc:
        raise ValidationError(name, exc.message) from None


def require_db(args: argparse.Namespace) -> str:
    """The store URL, or a refusal naming ``--db``; checks the scheme without connecting."""
    url = args.db or os.environ.get(DB_ENV) or DEFAULT_DB
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        raise ValidationError("--db", "memory:// lives and dies with one process; use a database")
    if scheme not in ("sqlite", "postgresql", "postgres"):
        raise ValidationError(
            "--db", f"expected sqlite:///path.db or postgresql://..., got {url!r}"
        )
    return str(url)


def open_store(args: argparse.Namespace, *, create: bool = False, read_only: bool = False) -> Store:
    """Open the store of ``--db`` (with ``--num-buckets`` when the command has it).

    A SQLite file that does not exist is refused unless ``create``: a typo in a
    path must not answer "no executions" from a fresh, empty database. A
    ``read_only`` command never migrates: a database without fencepost's schema
    (SQLite or PostgreSQL) is refused with a line that says how to create it.
    """
    url = require_db(args)
    parts = urlsplit(url)
    if parts.scheme == "sqlite" and not create:
        path = unquote(parts.path)[1:]
        if path and not Path(path).exists():
            raise ValidationError(
                "--db", f"no SQLite database at {path} (fencepost db migrate creates one)"
            )
    from fencepost.store import connect  # the store loads only for a command that opens one

    given = getattr(args, "num_buckets", None)
    try:
        return connect(url, num_buckets=given, migrate=not read_only)
    except ValidationError as exc:
        if exc.field == "num_buckets" and given is not None:  # not the count the store records
            raise ValidationError("--num-buckets", exc.message) from None
        # An option in the URL (?num_buckets=0) is named within --db.
        named = f"{exc.field}: {exc.message}" if exc.field.startswith("url.") else exc.message
        raise ValidationError("--db", named) from None


def execution_id(text: str, name: str = "ID") -> str:
    """An execution id as typed, checked: execution ids are UUIDs (lower-case text).

    Anything else names no execution anywhere: a typo refused as a bad argument
    (:attr:`Exit.USAGE`), before a store is opened, not looked up and "not found".
    """
    try:
        return str(uuid.UUID(text.strip()))
    except ValueError:
        shown = text if len(text) <= 60 else text[:59] + "…"
        raise ValidationError(
            name, f"{shown!r} is not an execution id (a UUID like 01a249ec-09e1-736f-8880-...)"
        ) from None


def num_buckets(args: argparse.Namespace) -> int:
    """``--num-buckets``, checked, for the checks made before the store is opened; left
    out, the default count (an opened store then runs with the count it records)."""
    if args.num_buckets is None:
        return DEFAULT_NUM_BUCKETS
    value = int(args.num_buckets)
    if not 1 <= value <= 65_536:
        raise ValidationError("--num-buckets", f"must be between 1 and 65536, got {value}")
    return value


def bucket_spec(spec: str | None, name: str, buckets: int) -> tuple[int, ...] | None:
    """A bucket spec (``0-15,20``) as sorted buckets; out of range is an error, never empty."""
    if spec is None:
        return None
    with option(name):
        return parse_buckets(spec, num_buckets=buckets)


def limit(value: int, name: str = "--limit") -> int:
    """A row limit between 1 and :data:`MAX_LIMIT`."""
    if not 1 <= value <= MAX_LIMIT:
        raise ValidationError(name, f"must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def positive(value: int, name: str) -> int:
    """An integer >= 1."""
    if value < 1:
        raise ValidationError(name, f"must be >= 1, got {value}")
    return value


def states(values: Sequence[str] | None) -> tuple[State, ...] | None:
    """``--state`` values (repeated or comma-separated, any case) as states."""
    if not values:
        return None
    chosen: list[State] = []
    for value in values:
        for part in value.split(","):
            name = part.strip().upper()
            try:
                state = State(name)
            except ValueError:
                known = ", ".join(s.value for s in State)
                raise ValidationError(
                    "--state", f"unknown state {part.strip()!r} (one of {known})"
                ) from None
            if state not in chosen:
                chosen.append(state)
    return tuple(chosen)


def duration(text: str, name: str, *, allow_zero: bool = False) -> timedelta:
    """A duration with a unit (``30s``, ``10m``, ``14d``, ``1h30m``, ``500ms``).

    A bare number is refused: ``--older-than 14`` is more likely 14 days than
    14 seconds, and a prune that guesses wrong deletes the wrong rows.
    """
    stripped = text.strip()
    try:
        float(stripped)
    except ValueError:
        pass
    else:
        raise ValidationError(
            name,
            f"{text!r} has no unit; write e.g. {stripped}s, {stripped}m, {stripped}h or "
            f"{stripped}d",
        )
    return parse_duration(stripped, field=name, allow_zero=allow_zero, numbers=False)


def maybe_duration(text: str | None, name: str) -> timedelta | None:
    """:func:`duration` of an option that may be left out."""
    return None if text is None else duration(text, name)


def instant(text: str | None, name: str) -> datetime | None:
    """An ISO 8601 time with a UTC offset (``2026-05-01T10:00:00Z``, ``...+02:00``).

    A time without an offset is refused, never guessed to be local or UTC.
    """
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(
            name, f"{text!r} is not an ISO 8601 time like 2026-05-01T10:00:00Z"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            name, f"{text!r} has no UTC offset; add Z or +HH:MM (a time is never guessed)"
        )
    return as_aware_utc(value, field=name)


def inputs(pairs: Sequence[str] | None, document: str | None) -> dict[str, Any]:
    """The inputs of ``--input-json DOC`` and ``--input KEY=VALUE`` (later pairs add keys).

    ``DOC`` must be a JSON object (or ``null``, which is ``{}``), as inputs are.

    A value is read as JSON when it parses (``n=5`` is 5, ``flag=true`` is True,
    ``tags=["a"]`` a list), else it is the string as typed (``day=monday``).

    The inputs must obey the payload rule (:mod:`fencepost.domain.payloads`); a
    refusal names the option and where in the inputs: ``--input: inputs.n is an
    integer of more than 4300 digits (the most allowed)``.
    """
    value: dict[str, Any] = {}
    if document is not None:
        try:
            with _within("--input-json"):
                parsed = payloads.loads(document, field="inputs")
        except json.JSONDecodeError as exc:
            raise ValidationError("--input-json", f"is not JSON: {exc}") from None
        with option("--input-json"):  # null is {}, as everywhere
            value = payloads.as_inputs(parsed)
    for pair in pairs or ():
        key, equals, text = pair.partition("=")
        if not equals or not key.strip():
            raise ValidationError("--input", f"{pair!r} is not KEY=VALUE")
        key = key.strip()
        if key in value:
            raise ValidationError("--input", f"{key!r} is given twice")
        with _within("--input"):
            value[key] = _json_or_text(text, payloads.member("inputs", [key]))
    with _within("--input" if pairs else "--input-json"):
        payloads.encode(value, field="inputs", limit=payloads.DEFAULT_MAX_PAYLOAD_BYTES)
    return value


@contextmanager
def _within(name: str) -> Iterator[None]:
    """Re-raise a ValidationError about the inputs as one about option ``name``, saying where."""
    try:
        yield
    except ValidationError as exc:
        raise ValidationError(name, f"{exc.field} {exc.message}") from None


def _json_or_text(text: str, field: str) -> Any:
    try:
        value = payloads.loads(text, field=field)
    except json.JSONDecodeError:
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text  # NaN and Infinity are not JSON: keep what was typed
    return value


def actor() -> str:
    """Who the audit trail names for an operator's change: ``cli:user@host``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        user = f"uid{os.getuid()}"
    return f"cli:{user}@{socket.gethostname()}"

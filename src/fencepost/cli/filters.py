"""The execution filters every command that picks executions shares: ``ps`` and the
bulk verbs (``replay``, ``cancel``, ``retry-now``, ``delete``).

:func:`add_filter_arguments` adds the flags; :func:`filters_from` checks them and
turns them into :meth:`Store.query <fencepost.store.Store.query>` keyword
arguments (the filters only: no ``limit``, ``after`` or order), which
:meth:`Store.count_by_state <fencepost.store.Store.count_by_state>` takes too.
Every refusal is a :class:`~fencepost.domain.errors.ValidationError` naming the
flag as typed, raised before a store is opened.

A time flag takes an ISO 8601 time with a UTC offset (``2026-05-01T10:00:00Z``)
or a duration ago (``30s``, ``15m``, ``1h``, ``7d``: that long before now).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.domain.buckets import MAX_NUM_BUCKETS
from fencepost.domain.checks import MAX_ERROR_FILTER, attempt_outcome, error_filter, require_int
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import ValidationError
from fencepost.domain.slo import DEFAULT_CLAIM_WITHIN
from fencepost.domain.states import WAITING_STATES, AttemptOutcome

if TYPE_CHECKING:
    import argparse

#: ``--overdue``'s SECONDS when left out: the claim objective (claimed within 10 s).
OVERDUE_DEFAULT = f"{DEFAULT_CLAIM_WITHIN.total_seconds():g}"

#: How a time flag may be written, for help texts and refusals.
_WHEN = "an ISO 8601 time with offset or a duration ago (30s, 15m, 1h, 7d)"

#: The time flags and the query argument each sets.
_TIMES = (
    ("due_after", "--due-after"),
    ("due_before", "--due-before"),
    ("created_after", "--created-after"),
    ("created_before", "--created-before"),
    ("finished_after", "--finished-after"),
    ("finished_before", "--finished-before"),
)


def add_filter_arguments(parser: argparse.ArgumentParser, *, all_states: bool = False) -> None:
    """Add every execution filter flag to ``parser``.

    ``--state`` (repeat or ``a,b``) and ``--overdue [SECONDS]`` exclude each other;
    with ``all_states``, so does ``--all`` (every state), which this adds too. The
    rest narrow whatever those choose: ``--job``, ``--queue``, ``--schedule``,
    ``--bucket``, ``--key``, ``--owner``, ``--outcome``, ``--error``, ``--since`` and
    the ``--due-*``, ``--created-*`` and ``--finished-*`` times. :func:`filters_from`
    reads them back.
    """
    which = parser.add_mutually_exclusive_group()
    if all_states:
        which.add_argument("--all", action="store_true", help="every state, finished ones too")
    which.add_argument(
        "--state", action="append", metavar="STATE", help="only these states (repeat or a,b)"
    )
    which.add_argument(
        "--overdue",
        nargs="?",
        const=OVERDUE_DEFAULT,
        metavar="SECONDS",
        help="only waiting executions (SCHEDULED, RETRY_WAIT) due more than SECONDS ago "
        f"(default {OVERDUE_DEFAULT}: the claim objective)",
    )
    parser.add_argument(
        "--outcome",
        metavar="OUTCOME",
        help="only executions with an attempt that ended so, in every state unless --state "
        "narrows it (any case): " + ", ".join(o.value.lower() for o in AttemptOutcome),
    )
    parser.add_argument("--job", metavar="JOB", help="only this job")
    parser.add_argument("--queue", metavar="QUEUE", help="only this queue's")
    parser.add_argument("--schedule", metavar="ID", help="only this schedule's occurrences")
    parser.add_argument("--bucket", metavar="N", help="only executions in bucket N")
    parser.add_argument("--key", metavar="KEY", help="only executions under this limit key")
    parser.add_argument(
        "--owner", metavar="OWNER", help="only RUNNING executions leased to this worker"
    )
    parser.add_argument(
        "--error",
        metavar="TEXT",
        help=f"only executions whose latest error contains TEXT (any case, 1 to "
        f"{MAX_ERROR_FILTER} characters, %% and _ literal)",
    )
    parser.add_argument(
        "--since", metavar="D", help="only executions created in the last D (30s, 15m, 1h, 7d)"
    )
    for _, flag in _TIMES:
        noun, _, side = flag.removeprefix("--").partition("-")
        parser.add_argument(
            flag,
            metavar="WHEN",
            help=f"only executions {noun} {'at or after' if side == 'after' else 'before'} "
            f"WHEN: {_WHEN}" + (" (finished ones only)" if noun == "finished" else ""),
        )


def filters_from(args: argparse.Namespace, *, now: datetime | None = None) -> dict[str, Any]:
    """The filters of :func:`add_filter_arguments`'s flags as :meth:`Store.query` keyword
    arguments: only those given (``{}`` when none is).

    ``state`` is a tuple of states, there only with ``--state`` or ``--overdue``
    (waiting states): a command chooses its own default. ``--all`` adds nothing.
    ``--overdue`` sets ``due_before`` to ``now`` minus SECONDS and ``--since D``
    sets ``created_after`` to ``now`` minus D; a duration ago in a time flag counts
    back from ``now`` too (default: the current time). Raises ValidationError
    naming the flag.
    """
    moment = datetime.now(UTC) if now is None else now
    filters: dict[str, Any] = {}
    chosen = common.states(args.state)
    if chosen is not None:
        filters["state"] = chosen
    if args.overdue is not None:
        filters["state"] = WAITING_STATES
        filters["due_before"] = moment - overdue(args.overdue)
    if args.outcome is not None:
        filters["outcome"] = attempt_outcome(args.outcome, "--outcome")
    for name, flag in (
        ("job", "--job"),
        ("queue", "--queue"),
        ("schedule", "--schedule"),
        ("limit_key", "--key"),
        ("owner", "--owner"),
    ):
        value = getattr(args, flag.removeprefix("--"))
        if value is not None:
            filters[name] = _text(value, flag)
    if args.bucket is not None:
        filters["bucket"] = _bucket(args.bucket)
    if args.error is not None:
        # Checked here to name the flag; text no store holds stays, to match nothing.
        error_filter(args.error, "--error")
        filters["error"] = args.error
    for name, flag in _TIMES:
        text = getattr(args, name)
        if text is None:
            continue
        if name in filters:  # due_before from --overdue
            raise ValidationError(flag, "give --overdue or --due-before, not both")
        filters[name] = _when(text, flag, moment)
    if args.since is not None:
        if "created_after" in filters:
            raise ValidationError("--since", "give --since or --created-after, not both")
        filters["created_after"] = moment - common.duration(args.since, "--since")
    return filters


def given(args: argparse.Namespace) -> list[tuple[str, bool]]:
    """Each filter flag of :func:`add_filter_arguments` (``--all`` aside) and whether it
    was given: for a command that refuses them in some use (``ps ID``)."""
    return [(flag, getattr(args, dest) is not None) for flag, dest in _FLAGS]


#: Every filter flag and the attribute argparse stores it under.
_FLAGS = (
    ("--state", "state"),
    ("--overdue", "overdue"),
    ("--outcome", "outcome"),
    ("--job", "job"),
    ("--queue", "queue"),
    ("--schedule", "schedule"),
    ("--bucket", "bucket"),
    ("--key", "key"),
    ("--owner", "owner"),
    ("--error", "error"),
    ("--since", "since"),
    *((flag, name) for name, flag in _TIMES),
)


def overdue(text: str) -> timedelta:
    """``--overdue SECONDS``: a finite number of seconds >= 0 (at most 100 years)."""
    try:
        seconds = float(text)
    except ValueError:
        raise ValidationError(
            "--overdue", f"must be a number of seconds >= 0, got {text[:40]!r}"
        ) from None
    return as_duration(seconds, field="--overdue", allow_zero=True)


def _text(value: str, flag: str) -> str:
    """A name filter as typed: empty is refused (it would match nothing, silently)."""
    if not value.strip():
        raise ValidationError(flag, "must not be empty")
    return value


def _bucket(text: str) -> int:
    """``--bucket N``: a whole number below the most buckets any store has (the store
    then checks it against its own count)."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
        shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
        raise ValidationError("--bucket", f"must be a whole number, got {shown}")
    return require_int(int(digits), "--bucket", low=0, high=MAX_NUM_BUCKETS - 1)


def _when(text: str, flag: str, now: datetime) -> datetime:
    """A time flag: an ISO 8601 time with offset, or a duration ago counted from ``now``."""
    stripped = text.strip()
    if stripped[:1].isdigit() and stripped[-1:].isalpha() and "-" not in stripped:
        try:
            ago = common.duration(stripped, flag)
        except ValidationError as exc:
            if not exc.message.startswith("must be a duration"):
                raise  # a duration, but too long
        else:
            try:
                return now - ago
            except OverflowError:
                raise ValidationError(flag, f"{text!r} ago is before the year 1") from None
    if not stripped or stripped[:1] in "+-" or stripped[:1].isalpha():
        raise ValidationError(flag, f"must be {_WHEN}, got {_shown(text)}")
    try:
        value = common.instant(stripped, flag)
    except ValidationError as exc:
        if "is not an ISO 8601 time" not in exc.message:
            raise  # a time, but without an offset or out of range
        raise ValidationError(flag, f"must be {_WHEN}, got {_shown(text)}") from None
    assert value is not None
    return value


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:37]!r}..."

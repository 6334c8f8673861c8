"""``fencepost limits ls|set|rm`` and ``fencepost queues ls|pause|resume``: flow control.

A limit holds for every execution of a job (``job:NAME``) or of a queue
(``queue:NAME``): a rate of starts (``--rate 100/s``), a concurrency
(``--concurrency 20``) or both; a paused queue starts nothing until it is resumed.
Every change is audited with the operator's name (``cli:user@host``) and takes
effect on every worker within a second. The arguments are checked before the store
is opened: a refusal names the option (``--rate``, ``--burst``, ``--concurrency``,
``SCOPE``, ``NAME``), exits 2 and stores nothing.
"""

from __future__ import annotations

import argparse
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.cli.output import Output, when
from fencepost.domain.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from fencepost.domain.limits import Limit
    from fencepost.domain.queueviews import QueueView

#: The option (or argument) that sets each field of a limit, to name it in a refusal.
OPTIONS = {
    "scope": "SCOPE",
    "name": "NAME",
    "rate": "--rate",
    "burst": "--burst",
    "concurrency": "--concurrency",
    "per_key": "--per-key",
}

_WHOLE = re.compile(r"^[+-]?[0-9]{1,30}$")


def add_parsers(commands: Any) -> None:
    """Register ``limits`` and ``queues`` with their subcommands."""
    group = commands.add_parser("limits", help="rate and concurrency limits: ls, set, rm")
    verbs = group.add_subparsers(dest="limits_command", required=True, metavar="VERB")
    common.command(verbs, "ls", list_limits)

    p = common.command(verbs, "set", set_limit)
    p.add_argument("scope", metavar="SCOPE", help="job:NAME or queue:NAME")
    p.add_argument(
        "--rate",
        metavar="RATE",
        help="starts (claims, retries, takeovers) per period: 50/s, 3000/min, 100/h, 100/5min",
    )
    p.add_argument(
        "--burst",
        type=_whole,
        metavar="N",
        help="with --rate: how many may start at once after a quiet spell "
        "(default: a tenth of a second's worth, at least 1)",
    )
    p.add_argument(
        "--concurrency", type=_whole, metavar="N", help="the most executions leased at once"
    )
    p.add_argument(
        "--per-key",
        action="store_true",
        help="each distinct limit key (submit --limit-key) gets its own allowance",
    )

    p = common.command(verbs, "rm", remove_limit)
    p.add_argument("scope", metavar="SCOPE", help="job:NAME or queue:NAME")

    group = commands.add_parser("queues", help="queues: ls, pause, resume")
    verbs = group.add_subparsers(dest="queues_command", required=True, metavar="VERB")
    common.command(verbs, "ls", list_queues)
    for verb, handler in (("pause", pause_queue), ("resume", resume_queue)):
        p = common.command(verbs, verb, handler)
        p.add_argument("name", metavar="NAME", help="the queue's name")


def _whole(text: str) -> int:
    """An argparse ``type``: a whole number, refused in one short line otherwise (its
    range is the store's to check, naming the option)."""
    stripped = text.strip()
    if _WHOLE.match(stripped):
        return int(stripped)
    shown = repr(text) if len(text) <= 40 else f"{text[:37]!r}..."
    raise argparse.ArgumentTypeError(f"must be a whole number, got {shown}")


@contextmanager
def _relabelled() -> Iterator[None]:
    """Re-raise a ValidationError from the block naming the option of its field."""
    try:
        yield
    except ValidationError as exc:
        raise ValidationError(OPTIONS.get(exc.field, exc.field), exc.message) from None


# -- limits --------------------------------------------------------------------------------


def list_limits(args: argparse.Namespace, out: Output) -> int:
    """list every limit and paused queue, by scope"""
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        found = store.limits()
    if out.as_json:
        out.document([limit_record(lim) for lim in found])
        return 0
    rows = [
        (
            lim.scope,
            _text(lim.rate),
            lim.burst,
            lim.concurrency,
            "yes" if lim.per_key else "no",
            "paused" if lim.paused else "",
            lim.source,
            lim.updated_by,
            when(lim.updated_at),
        )
        for lim in found
    ]
    shown = f"{len(rows)} limit{'' if len(rows) == 1 else 's'}"
    out.table(
        ("scope", "rate", "burst", "concurrency", "per key", "queue", "source", "by", "at"),
        rows,
        caption=shown,
        right=("burst", "concurrency"),
    )
    return 0


def set_limit(args: argparse.Namespace, out: Output) -> int:
    """set (or replace) the limit of SCOPE: a rate of starts, a concurrency or both

    SCOPE is job:NAME (every execution of the job) or queue:NAME (every execution in
    the queue). A paused queue stays paused. The limit replaces one declared with the
    job, and holds for every worker within a second.
    """
    from fencepost.domain.limits import new_limit

    arguments: dict[str, Any] = {
        "rate": args.rate,
        "burst": args.burst,
        "concurrency": args.concurrency,
        "per_key": args.per_key,
    }
    with _relabelled():
        new_limit(args.scope, **arguments)  # the store's own checks, before it is opened
    common.require_db(args)
    with common.open_store(args, create=True) as store, _relabelled():
        stored = store.set_limit(args.scope, **arguments, actor=common.actor())
    _print_limit(out, stored, title="limit set")
    return 0


def remove_limit(args: argparse.Namespace, out: Output) -> int:
    """remove the limit of SCOPE (a paused queue stays paused)

    Exits 3 when SCOPE has no limit. A limit declared with a job comes back when a
    worker next publishes the job.
    """
    from fencepost.domain.limits import require_scope

    with _relabelled():
        scope = require_scope(args.scope)
    common.require_db(args)
    with common.open_store(args) as store, _relabelled():
        store.remove_limit(scope, actor=common.actor())
    if out.as_json:
        out.document({"scope": scope, "removed": True})
    else:
        out.line(f"limit of {scope} removed")
    return 0


def limit_record(lim: Limit) -> dict[str, Any]:
    """A limit as JSON-ready values: the keys of the HTTP API's ``Limit``."""
    return {
        "scope": lim.scope,
        "rate": _text(lim.rate),
        "burst": lim.burst,
        "concurrency": lim.concurrency,
        "per_key": lim.per_key,
        "paused": lim.paused,
        "source": lim.source,
        "updated_by": lim.updated_by,
        "updated_at": lim.updated_at,
    }


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _print_limit(out: Output, lim: Limit, *, title: str) -> None:
    if out.as_json:
        out.document(limit_record(lim))
        return
    out.fields(
        [
            ("scope", lim.scope),
            ("rate", _text(lim.rate)),
            ("burst", lim.burst),
            ("concurrency", lim.concurrency),
            ("per key", "yes" if lim.per_key else "no"),
            ("paused", "yes" if lim.paused else "no"),
            ("source", lim.source),
            ("updated by", lim.updated_by),
            ("updated at", when(lim.updated_at)),
        ],
        title=title,
    )


# -- queues --------------------------------------------------------------------------------


def list_queues(args: argparse.Namespace, out: Output) -> int:
    """list the queues: paused or not, their limit, their executions waiting and running

    A queue is listed when it holds executions or has a limit or a pause.
    """
    from fencepost.domain.queueviews import queue_views

    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        views = queue_views(store.limits(), store.stats(window=1.0).by_queue)
    if out.as_json:
        out.document([queue_record(view) for view in views])
        return 0
    from fencepost.domain.states import State

    rows = []
    for view in views:
        counts = view.counts or {}
        lim = view.limit
        rows.append(
            (
                view.name,
                "paused" if view.paused else "active",
                view.paused_by if view.paused else None,
                when(view.paused_at) if view.paused else None,
                None if lim is None else _text(lim.rate),
                None if lim is None else lim.concurrency,
                counts.get(State.SCHEDULED, 0) + counts.get(State.RETRY_WAIT, 0),
                counts.get(State.RUNNING, 0),
            )
        )
    shown = f"{len(rows)} queue{'' if len(rows) == 1 else 's'}"
    out.table(
        ("queue", "state", "paused by", "paused at", "rate", "concurrency", "waiting", "running"),
        rows,
        caption=shown,
        right=("concurrency", "waiting", "running"),
    )
    return 0


def pause_queue(args: argparse.Namespace, out: Output) -> int:
    """pause queue NAME: nothing in it is claimed until it is resumed

    Running executions finish; waiting ones stay due. Any name may be paused, a queue
    that holds nothing yet too.
    """
    return _pause(args, out, paused=True)


def resume_queue(args: argparse.Namespace, out: Output) -> int:
    """resume queue NAME: its waiting executions start again under its limits"""
    return _pause(args, out, paused=False)


def _pause(args: argparse.Namespace, out: Output, *, paused: bool) -> int:
    from fencepost.domain.checks import MAX_QUEUE, require_name
    from fencepost.domain.queueviews import queue_view

    with _relabelled():
        name = require_name(args.name, "name", max_len=MAX_QUEUE)
    common.require_db(args)
    with common.open_store(args, create=paused) as store, _relabelled():
        verb = store.pause_queue if paused else store.resume_queue
        view = queue_view(name, verb(name, actor=common.actor()))
    if out.as_json:
        out.document(queue_record(view))
        return 0
    pairs: list[tuple[str, Any]] = [
        ("queue", view.name),
        ("state", "paused" if view.paused else "active"),
    ]
    if view.paused:
        pairs += [("paused by", view.paused_by), ("paused at", when(view.paused_at))]
    if view.limit is not None:
        pairs += [("rate", _text(view.limit.rate)), ("concurrency", view.limit.concurrency)]
    out.fields(pairs, title="paused" if paused else "resumed")
    return 0


def queue_record(view: QueueView) -> dict[str, Any]:
    """A queue as JSON-ready values: the keys of the HTTP API's ``QueueState``."""
    return {
        "name": view.name,
        "paused": view.paused,
        "paused_by": view.paused_by,
        "paused_at": view.paused_at,
        "limit": None if view.limit is None else limit_record(view.limit),
        "counts": view.counts,
    }

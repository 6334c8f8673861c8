"""``fencepost history``: the console's charts as a table, from the store's stored history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.cli.output import Output, span, when
from fencepost.domain.checks import storable
from fencepost.domain.errors import ValidationError
from fencepost.domain.history import ROLL_UP_ROWS, Window

if TYPE_CHECKING:
    import argparse

    from fencepost.domain.history import History

#: Roll-up batches a ``fencepost history`` runs first at most (each ``ROLL_UP_ROWS``):
#: where no service rolls up, the command catches up on what finished since.
ROLL_UP_BATCHES = 10

_COLUMNS = (
    "at",
    "succeeded",
    "dead",
    "retried",
    "timed out",
    "cancelled",
    "skipped",
    "claims",
    "late p50",
    "late p99",
    "throttled",
    "claim burn",
    "finish burn",
)


def add_parsers(commands: Any) -> None:
    """Register ``history``."""
    p = common.command(commands, "history", history)
    p.add_argument(
        "--window",
        choices=[w.value for w in Window],
        default=Window.HOUR.value,
        help="hour: 60 rows of a minute; day: 96 of 15 minutes; week: 168 of an hour "
        "(default hour)",
    )
    p.add_argument("--job", metavar="JOB", help="only this job's executions (exact name)")
    p.add_argument("--queue", metavar="QUEUE", help="only this queue's executions (exact name)")


def history(args: argparse.Namespace, out: Output) -> int:
    """a chart of the last hour, day or week from stored history: outcomes, claim lateness,
    throttled time, SLO burn

    One row per step, oldest first. Each counts the executions that finished in it
    (succeeded, dead letters, retried, timed out, cancelled, skipped), the first
    claims made in it and their lateness (late p50/p99: the bound of the histogram
    bucket holding the percentile, so at most that late), the time limits and paused
    queues held work back, and the SLO's burn rates (1.0 spends the error budget
    exactly). What finished since the last roll-up is rolled up first (a running
    fencepost serve does it every 30 s); "rolled up to" says how far the counts go.
    """
    job = _name(args.job, "--job")
    queue = _name(args.queue, "--queue")
    common.require_db(args)
    from fencepost.store.history import roll_up_all

    with common.open_store(args, read_only=True) as store:
        roll_up_all(store, max_rows=ROLL_UP_ROWS, max_batches=ROLL_UP_BATCHES)
        chart = store.history(window=args.window, job=job, queue=queue)
    if out.as_json:
        from fencepost.wire.history import History as Body

        out.document(Body.from_domain(chart).model_dump(mode="json"))
        return 0
    _table(chart, out)
    return 0


def _name(value: str | None, option: str) -> str | None:
    """A ``--job`` or ``--queue`` filter: text no store can hold (a lone surrogate from
    bytes that are not UTF-8) is refused naming the option."""
    if value is not None and not storable(value):
        raise ValidationError(option, "must be text without U+0000 or lone surrogates")
    return value


def _table(chart: History, out: Output) -> None:
    out.fields(
        [
            ("window", f"{chart.window.value} ({len(chart.points)} x {span(chart.step)})"),
            ("from", when(chart.start)),
            ("to", when(chart.end)),
            ("job", chart.job or "(all)"),
            ("queue", chart.queue or "(all)"),
            ("rolled up to", when(chart.rolled_up_to)),
        ],
        title="history",
    )
    rows = [
        (
            when(p.at),
            p.succeeded,
            p.dead,
            p.retried,
            p.timed_out,
            p.cancelled,
            p.skipped,
            p.claims,
            span(p.lateness_p50),
            span(p.lateness_p99),
            span(p.throttled) if p.throttled else 0,
            _rate(p.claim_burn),
            _rate(p.finish_burn),
        )
        for p in chart.points
    ]
    out.table(_COLUMNS, rows, right=_COLUMNS[1:])


def _rate(value: float | None) -> str:
    """A burn rate for a cell: ``0.50``, or ``-`` with nothing decided."""
    return "-" if value is None else f"{value:.2f}"

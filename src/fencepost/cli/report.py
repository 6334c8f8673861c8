"""``fencepost stats`` and ``fencepost slo``: how the scheduler is doing, from stored timestamps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.cli.output import Output, share, span, when
from fencepost.domain.errors import ValidationError
from fencepost.domain.states import State

if TYPE_CHECKING:
    import argparse

    from fencepost.domain.reports import (
        DueCount,
        Lateness,
        SloReport,
        SloShare,
        Stats,
        Unserved,
    )

#: The service-level objective (docs/explanation/promise.md): 99% of due executions
#: claimed within 10 s of ``due_at``, 99.9% reaching SUCCEEDED or FAILED within 5 minutes.
CLAIM_TARGET = 0.99
FINISH_TARGET = 0.999


def add_parsers(commands: Any) -> None:
    """Register ``stats`` and ``slo``."""
    p = common.command(commands, "stats", stats)
    p.add_argument(
        "--window",
        default="1h",
        metavar="DURATION",
        help="the span of the claim, refusal and expiry figures (default 1h)",
    )

    p = common.command(commands, "slo", slo)
    p.add_argument("--window", default="30d", metavar="DURATION", help="default 30d")
    p.add_argument("--claim-within", default="10s", metavar="DURATION", help="default 10s")
    p.add_argument("--finish-within", default="5m", metavar="DURATION", help="default 5m")
    p.add_argument("--worst", type=int, default=10, metavar="N", help="offenders shown (10)")


# -- stats ---------------------------------------------------------------------------------


def stats(args: argparse.Namespace, out: Output) -> int:
    """counts by state and job, due backlog, claim lateness, refusals, lease expiries, throttling"""
    window = common.duration(args.window, "--window")
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        figures = store.stats(window=window)
    if out.as_json:
        out.document(stats_document(figures))
        return 0
    out.fields(
        [
            ("at", when(figures.at)),
            ("window", span(figures.window)),
            ("due backlog", figures.due_backlog),
            ("stale completions refused", figures.stale_refused),
            ("lease expiries", figures.lease_expiries),
            *throttled_fields(figures),
            *([] if figures.unserved is None else unserved_fields(figures.unserved)),
        ],
        title="stats",
    )
    late = figures.claim_lateness
    out.table(
        ("claims", "p50", "p90", "p99", "max"),
        [(late.count, span(late.p50), span(late.p90), span(late.p99), span(late.max))],
        title=f"claim lateness, last {span(figures.window)} (throttled claims left out)",
        right=("claims", "p50", "p90", "p99", "max"),
    )
    states = [s.value for s in State]
    rows: list[list[Any]] = [
        [job, *(counts[s] for s in State), sum(counts.values())]
        for job, counts in figures.by_job.items()
    ]
    rows.append(["(all)", *(figures.by_state[s] for s in State), sum(figures.by_state.values())])
    out.table(
        ("job", *states, "total"), rows, title="executions by state", right=(*states, "total")
    )
    by_queue = [
        [queue, *(counts[s] for s in State), sum(counts.values())]
        for queue, counts in figures.by_queue.items()
    ]
    out.table(
        ("queue", *states, "total"),
        by_queue,
        title="executions by queue",
        right=(*states, "total"),
    )
    return 0


def stats_document(figures: Stats) -> dict[str, Any]:
    """:class:`Stats` as JSON-ready values (states by name, durations in seconds)."""
    return {
        "at": figures.at,
        "window": figures.window,
        "by_state": {s.value: n for s, n in figures.by_state.items()},
        "by_job": {
            job: {s.value: n for s, n in counts.items()} for job, counts in figures.by_job.items()
        },
        "by_queue": {
            queue: {s.value: n for s, n in counts.items()}
            for queue, counts in figures.by_queue.items()
        },
        "due_backlog": figures.due_backlog,
        "claim_lateness": _lateness(figures.claim_lateness),
        "stale_refused": figures.stale_refused,
        "lease_expiries": figures.lease_expiries,
        "throttled": [
            {"scope": t.scope, "count": t.count, "held": t.held.total_seconds()}
            for t in figures.throttled
        ],
        "unserved": None if figures.unserved is None else unserved_document(figures.unserved),
    }


def throttled_fields(figures: Stats) -> list[tuple[str, str]]:
    """The ``throttled`` lines of ``stats``, one a scope (``none`` when no limit or
    paused queue held anything in the window): ``job:mail: 12 claims held 3m05s``.

    Those claims are left out of the claim lateness: a limit held them on purpose.
    """
    if not figures.throttled:
        return [("throttled", "none")]
    lines = []
    for t in figures.throttled:
        noun = "claim" if t.count == 1 else "claims"
        held = span(t.held.total_seconds())
        lines.append(("throttled", f"{t.scope}: {t.count} {noun} held {held}"))
    return lines


# -- work nobody serves --------------------------------------------------------------------


def unserved_fields(report: Unserved) -> list[tuple[str, str]]:
    """The ``unserved`` and ``schedules`` lines of ``stats``: what would wait forever.

    ``unserved: 3 due executions of jobs no live worker serves: report (2), ship v5 (1)``
    and ``schedules: 2 active, no scheduler running: none of them fires``.
    """
    return [("unserved", unserved_text(report)), ("schedules", schedules_text(report))]


def unserved_text(report: Unserved) -> str:
    """The due executions no live worker serves, by job (and pinned version), or "none"."""
    count = report.due_unserved
    if not count:
        return "none (every due execution's job has a live worker)"
    groups = ", ".join(f"{g.label} ({g.count})" for g in report.executions)
    noun = "execution" if count == 1 else "executions"
    return f"{count} due {noun} of jobs no live worker serves: {groups}"


def schedules_text(report: Unserved) -> str:
    """The active schedules and whether a scheduler (materializer) runs them."""
    active = report.active_schedules
    if report.schedulers:
        running = ", ".join(report.schedulers)
        return f"{active} active, scheduler running: {running}"
    if not active:
        return "none active, no scheduler running"
    return (
        f"{active} active, no scheduler running: none of them fires "
        "(run fencepost serve or fencepost worker --with-scheduler)"
    )


def unserved_document(report: Unserved) -> dict[str, Any]:
    """:class:`Unserved` as JSON-ready values (the same keys as ``GET /stats`` gives)."""

    def groups(found: list[DueCount]) -> list[dict[str, Any]]:
        return [{"job": g.job, "version": g.job_version, "count": g.count} for g in found]

    return {
        "at": report.at,
        "due": groups(report.due),
        "executions": groups(report.executions),
        "due_unserved": report.due_unserved,
        "active_schedules": report.active_schedules,
        "schedulers": list(report.schedulers),
        "schedules": report.schedules,
    }


def _lateness(late: Lateness) -> dict[str, Any]:
    return {"count": late.count, "p50": late.p50, "p90": late.p90, "p99": late.p99, "max": late.max}


# -- slo -----------------------------------------------------------------------------------


def slo(args: argparse.Namespace, out: Output) -> int:
    """the service-level report: claimed within 10 s, finished within 5 min

    The scheduler's own service-level report over the executions due in the window:
    the share claimed within --claim-within of due_at (target 99%), the share reaching
    SUCCEEDED or FAILED within --finish-within (target 99.9%), and the executions
    claimed latest.
    """
    window = common.duration(args.window, "--window")
    claim_within = common.duration(args.claim_within, "--claim-within", allow_zero=True)
    finish_within = common.duration(args.finish_within, "--finish-within", allow_zero=True)
    worst = args.worst
    if not 0 <= worst <= common.MAX_LIMIT:
        raise ValidationError("--worst", f"must be between 0 and {common.MAX_LIMIT}, got {worst}")
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        report = store.slo(
            window=window, claim_within=claim_within, finish_within=finish_within, worst=worst
        )
    if out.as_json:
        out.document(slo_document(report))
        return 0
    claim_text = f"claimed within {span(report.claim_within)} of due"
    finish_text = f"SUCCEEDED or FAILED within {span(report.finish_within)} of due"
    out.table(
        ("objective", "met", "total", "share", "target", "verdict"),
        [
            _objective_row(claim_text, report.claimed, CLAIM_TARGET),
            _objective_row(finish_text, report.finished, FINISH_TARGET),
        ],
        title=f"service level, executions due in the last {span(report.window)} "
        f"(at {when(report.at)})",
        right=("met", "total", "share", "target"),
    )
    rows = [
        (o.execution_id, o.job, o.state.value, when(o.due_at), when(o.claimed_at), span(o.lateness))
        for o in report.worst
    ]
    out.table(
        ("id", "job", "state", "due", "claimed", "claim lateness"),
        rows,
        title="worst offenders (latest claims first)",
        right=("claim lateness",),
        caption=None if rows else "no due executions in the window",
    )
    return 0


def _verdict(measured: SloShare, target: float) -> bool | None:
    return None if measured.share is None else measured.share >= target


def _objective_row(text: str, measured: SloShare, target: float) -> tuple[Any, ...]:
    verdict = _verdict(measured, target)
    label = "no data" if verdict is None else ("met" if verdict else "MISSED")
    return (text, measured.met, measured.total, share(measured.share), share(target), label)


def slo_document(report: SloReport) -> dict[str, Any]:
    """:class:`SloReport` as JSON-ready values, with each objective's target and verdict."""

    def objective(measured: SloShare, target: float) -> dict[str, Any]:
        return {
            "met": measured.met,
            "total": measured.total,
            "share": measured.share,
            "target": target,
            "ok": _verdict(measured, target),
        }

    return {
        "at": report.at,
        "window": report.window,
        "claim_within": report.claim_within,
        "finish_within": report.finish_within,
        "claimed": objective(report.claimed, CLAIM_TARGET),
        "finished": objective(report.finished, FINISH_TARGET),
        "worst": [
            {
                "execution_id": o.execution_id,
                "job": o.job,
                "state": o.state,
                "due_at": o.due_at,
                "claimed_at": o.claimed_at,
                "lateness": o.lateness,
            }
            for o in report.worst
        ],
    }

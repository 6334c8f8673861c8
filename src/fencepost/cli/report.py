"""``fencepost stats`` and ``fencepost slo``: how the scheduler is doing, from stored timestamps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fencepost.cli import common
from fencepost.cli.output import Output, share, span, when
from fencepost.domain.errors import ValidationError
from fencepost.domain.slo import (
    DEFAULT_CLAIM_TARGET,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_TARGET,
    ErrorClass,
    Objective,
    require_target,
)
from fencepost.domain.states import State

if TYPE_CHECKING:
    import argparse

    from fencepost.domain.reports import (
        DueCount,
        Lateness,
        SloReport,
        Stats,
        Unserved,
    )


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
    p.add_argument(
        "--claim-target",
        default=str(DEFAULT_CLAIM_TARGET),
        metavar="SHARE",
        help=f"the claim objective's target, between 0 and 1 (default {DEFAULT_CLAIM_TARGET})",
    )
    p.add_argument(
        "--finish-target",
        default=str(DEFAULT_FINISH_TARGET),
        metavar="SHARE",
        help=f"the finish objective's target, between 0 and 1 (default {DEFAULT_FINISH_TARGET})",
    )
    p.add_argument("--worst", type=int, default=10, metavar="N", help="offenders shown (10)")


# -- stats ---------------------------------------------------------------------------------


def stats(args: argparse.Namespace, out: Output) -> int:
    """counts by state and job, due backlog, claim lateness, error classes, throttling

    The error classes of the window are the SLO report's (fencepost slo): late_claim,
    renewal_failed (a heartbeat refused, a lease expired or taken over), timed_out,
    handler_failed, stale_completion_refused (a refused complete, fail, release...)
    and throttled, each counted by its own events.
    """
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
    out.table(
        ("class", "count", "what it counts"),
        [(c.value, n, ERROR_CLASS_TEXTS[c]) for c, n in figures.errors.items()],
        title=f"errors by class, last {span(figures.window)}",
        right=("count",),
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
        "errors": {c.value: n for c, n in figures.errors.items()},
        "throttled": [
            {"scope": t.scope, "count": t.count, "held": t.held.total_seconds()}
            for t in figures.throttled
        ],
        "unserved": None if figures.unserved is None else unserved_document(figures.unserved),
    }


#: What each error class of ``stats`` counts, as its table says it.
ERROR_CLASS_TEXTS = {
    ErrorClass.LATE_CLAIM: f"first claims more than {span(DEFAULT_CLAIM_WITHIN)} after the "
    "planned time (net of held)",
    ErrorClass.RENEWAL_FAILED: "heartbeats refused, leases expired or taken over",
    ErrorClass.TIMED_OUT: "attempts stopped for running past the job's timeout",
    ErrorClass.HANDLER_FAILED: "failures reported by handlers (retried or dead-lettered)",
    ErrorClass.STALE_COMPLETION_REFUSED: "completions, failures, releases refused as stale",
    ErrorClass.THROTTLED: "claims a limit or a paused queue held back",
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
    """the service-level report: claimed within 10 s, finished within 5 min, error budgets

    Both objectives over the executions planned in the window, measured from each
    execution's planned time (retries, takeovers and replays never move it): the share
    claimed within --claim-within of it (target 99%), the share reaching SUCCEEDED or
    FAILED within --finish-within (target 99.9%); each miss in its error class, the
    executions left out and why (backfill, replay, throttled), each objective's error
    budget with its burn rates over the last 1 h and 6 h, and the executions claimed
    latest. Exits 1 when an objective is below its target (--json too).
    """
    window = common.duration(args.window, "--window")
    claim_within = common.duration(args.claim_within, "--claim-within", allow_zero=True)
    finish_within = common.duration(args.finish_within, "--finish-within", allow_zero=True)
    claim_target = target(args.claim_target, "--claim-target")
    finish_target = target(args.finish_target, "--finish-target")
    worst = args.worst
    if not 0 <= worst <= common.MAX_LIMIT:
        raise ValidationError("--worst", f"must be between 0 and {common.MAX_LIMIT}, got {worst}")
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        report = store.slo(
            window=window,
            claim_within=claim_within,
            finish_within=finish_within,
            claim_target=claim_target,
            finish_target=finish_target,
            worst=worst,
        )
    if out.as_json:
        out.document(slo_document(report))
    else:
        _slo_tables(report, out)
    return common.Exit.FAILED if report.missed else common.Exit.OK


def target(text: str, name: str) -> float:
    """A target share from the command line: a number strictly between 0 and 1 (``0.99``)."""
    try:
        value = float(text)
    except ValueError:
        raise ValidationError(
            name, f"must be a number between 0 and 1 (exclusive) like 0.99, got {text!r}"
        ) from None
    return require_target(value, name)


def _slo_tables(report: SloReport, out: Output) -> None:
    """The human report: the objectives, their budgets, misses by class, exclusions,
    and the worst offenders."""
    rolled = report.rolled_up
    out.fields(
        [
            ("at", when(report.at)),
            ("window", f"{span(report.window)}: executions planned since {when(report.start)}"),
            ("rolled up", f"{rolled} pruned {_noun(rolled)}, counted from prune's daily rollups"),
        ],
        title="service level",
    )
    objectives = (report.claimed, report.finished)
    out.table(
        ("objective", "met", "total", "share", "target", "verdict"),
        [_objective_row(o) for o in objectives],
        title="objectives, measured from each execution's planned time",
        right=("met", "total", "share", "target"),
    )
    out.table(
        ("objective", "allowed misses", "consumed", "remaining", "burn 1h", "burn 6h"),
        [
            (
                o.name,
                _misses(o.budget),
                o.consumed,
                _misses(o.remaining),
                *(_burn(b.rate) for b in o.burn),
            )
            for o in objectives
        ],
        title="error budget (burn rate 1.00: the budget spent exactly over the window)",
        right=("allowed misses", "consumed", "remaining", "burn 1h", "burn 6h"),
    )
    classes = [c for c in ErrorClass if any(c in o.misses for o in objectives)]
    out.table(
        ("class", "claim", "finish"),
        [(c.value, *(o.misses.get(c, "-") for o in objectives)) for c in classes],
        title="misses by class",
        right=("claim", "finish"),
    )
    reasons = list(dict.fromkeys(r for o in objectives for r in o.excluded))
    out.table(
        ("reason", "claim", "finish"),
        [(r, *(o.excluded.get(r, 0) for o in objectives)) for r in reasons],
        title="excluded (counted here, not in the totals)",
        right=("claim", "finish"),
    )
    rows = [
        (
            o.execution_id,
            o.job,
            o.state.value,
            when(o.planned_at),
            when(o.claimed_at),
            span(o.lateness),
            "undecided" if o.verdict is None else o.verdict.value,
        )
        for o in report.worst
    ]
    out.table(
        ("id", "job", "state", "planned", "claimed", "claim lateness", "verdict"),
        rows,
        title="worst offenders (latest claims first)",
        right=("claim lateness",),
        caption=None if rows else "no executions planned in the window",
    )


def _noun(count: int) -> str:
    return "execution" if count == 1 else "executions"


def _objective_text(objective: Objective) -> str:
    within = span(objective.within)
    if objective.name == "claim":
        return f"claimed within {within} of planned"
    return f"SUCCEEDED or FAILED within {within} of planned"


def _verdict(objective: Objective) -> bool | None:
    return None if objective.share is None else not objective.missed


def _objective_row(objective: Objective) -> tuple[Any, ...]:
    verdict = _verdict(objective)
    label = "no data" if verdict is None else ("MET" if verdict else "MISSED")
    return (
        _objective_text(objective),
        objective.met,
        objective.total,
        share(objective.share),
        share(objective.target),
        label,
    )


def _misses(count: float) -> str:
    """A number of misses the budget allows, often a fraction of one: ``0.004``,
    ``-1.96``, ``1,234.5``."""
    return f"{count:,.1f}" if abs(count) >= 10 else f"{count:.3g}"


def _burn(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:,.2f}"


def slo_document(report: SloReport) -> dict[str, Any]:
    """:class:`SloReport` as JSON-ready values: each objective with its target, verdict
    (``ok``: null without data), misses by class, exclusions, budget and burn rates."""

    def objective(o: Objective) -> dict[str, Any]:
        return {
            "met": o.met,
            "total": o.total,
            "share": o.share,
            "target": o.target,
            "ok": _verdict(o),
            "within": o.within,
            "missed": o.missed,
            "misses": {c.value: n for c, n in o.misses.items()},
            "excluded": dict(o.excluded),
            "budget": o.budget,
            "consumed": o.consumed,
            "remaining": o.remaining,
            "burn": [
                {"window": b.window, "met": b.met, "total": b.total, "rate": b.rate} for b in o.burn
            ],
        }

    return {
        "at": report.at,
        "window": report.window,
        "claim_within": report.claim_within,
        "finish_within": report.finish_within,
        "claimed": objective(report.claimed),
        "finished": objective(report.finished),
        "worst": [
            {
                "execution_id": o.execution_id,
                "job": o.job,
                "state": o.state,
                "planned_at": o.planned_at,
                "claimed_at": o.claimed_at,
                "lateness": o.lateness,
                "verdict": o.verdict,
            }
            for o in report.worst
        ],
        "start": report.start,
        "rolled_up": report.rolled_up,
        "missed": report.missed,
    }

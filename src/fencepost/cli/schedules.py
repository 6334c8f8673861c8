"""``fencepost schedule add|ls|show|pause|resume|rm|run|preview``: recurring jobs.

``add``, ``ls`` and ``resume`` print a warning on stderr when no scheduler (a
materializer: ``fencepost serve``, ``fencepost worker --with-scheduler``) is alive
to fire the schedules; a paused schedule has no next fire.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from fencepost.cli import common, records
from fencepost.cli.output import Output, when
from fencepost.cli.submit import JOB_OPTIONS, add_input_options, relabel, with_store_defaults
from fencepost.domain import schedules as plans
from fencepost.domain.errors import ValidationError
from fencepost.domain.payloads import DEFAULT_MAX_PAYLOAD_BYTES
from fencepost.domain.policies import DstFold, DstGap, Misfire, Overlap
from fencepost.timing import specs

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from fencepost.domain.models import Schedule
    from fencepost.store import Store

#: The option that sets each field of a schedule, to name it in a refusal.
OPTIONS = JOB_OPTIONS | {
    "cron": "--cron",
    "every": "--every",
    "timezone": "--timezone",
    "dst_gap": "--dst-gap",
    "dst_fold": "--dst-fold",
    "misfire": "--misfire",
    "misfire_grace": "--misfire-grace",
    "max_catch_up": "--max-catch-up",
    "overlap": "--overlap",
    "start_at": "--start-at",
    "end_at": "--end-at",
    "paused": "--paused",
    "id": "--id",
    "rule": "--cron",
    "count": "--count",
}

#: How many fire times ``add`` and ``show`` print.
NEXT_FIRES = 5


def _names(kind: Any) -> list[str]:
    return [member.value for member in kind]


def add_parsers(commands: Any) -> None:
    """Register ``schedule`` and its subcommands."""
    group = commands.add_parser(
        "schedule", help="recurring jobs: add, ls, show, pause, resume, rm, run, preview"
    )
    verbs = group.add_subparsers(dest="schedule_command", required=True, metavar="VERB")

    p = common.command(verbs, "add", add)
    p.add_argument("job", metavar="JOB", help="the job's name")
    rule = p.add_mutually_exclusive_group(required=True)
    rule.add_argument("--cron", metavar="EXPR", help="cron (5 fields, or 6 with seconds)")
    rule.add_argument("--every", metavar="DURATION", help="a fixed interval, e.g. 10m")
    p.add_argument("--timezone", default="UTC", metavar="ZONE", help="IANA zone of --cron")
    add_input_options(p)
    p.add_argument("--misfire", choices=_names(Misfire), default=Misfire.COALESCE.value)
    p.add_argument(
        "--misfire-grace",
        default=f"{plans.DEFAULT_MISFIRE_GRACE}s",
        metavar="DURATION",
        help=f"lateness before --misfire applies (default {plans.DEFAULT_MISFIRE_GRACE}s)",
    )
    p.add_argument("--max-catch-up", type=int, default=plans.DEFAULT_MAX_CATCH_UP, metavar="N")
    p.add_argument("--overlap", choices=_names(Overlap), default=Overlap.ALLOW.value)
    p.add_argument("--dst-gap", choices=_names(DstGap), default=DstGap.SHIFT.value)
    p.add_argument("--dst-fold", choices=_names(DstFold), default=DstFold.ONCE.value)
    p.add_argument("--start-at", metavar="TIME", help="no slot before this (ISO 8601)")
    p.add_argument("--end-at", metavar="TIME", help="no slot after this (ISO 8601)")
    p.add_argument("--max-attempts", type=int, metavar="N", help="default: the job's, else 3")
    p.add_argument("--priority", type=int, metavar="N", help="default: the job's, else 0")
    p.add_argument(
        "--queue", metavar="QUEUE", help="its executions' queue (default: the job's, else default)"
    )
    p.add_argument("--job-version", type=int, metavar="N", help="pin the job version")
    p.add_argument(
        "--limit-key",
        metavar="KEY",
        help="the key a per-key limit counts each of its executions under (e.g. a tenant)",
    )
    p.add_argument(
        "--id",
        metavar="ID",
        help="the schedule's id (default: derived from JOB, the rule, --timezone and the "
        "inputs, so that the same command twice stores one schedule)",
    )
    p.add_argument("--paused", action="store_true", help="store it paused")

    p = common.command(verbs, "ls", ls)
    p.add_argument("--job", metavar="JOB", help="only this job's")
    paused = p.add_mutually_exclusive_group()
    paused.add_argument("--paused", dest="paused", action="store_const", const=True)
    paused.add_argument("--active", dest="paused", action="store_const", const=False)
    p.add_argument("--limit", type=int, default=100, metavar="N", help="at most N (default 100)")

    p = common.command(verbs, "show", show)
    p.add_argument("id", metavar="ID")
    p.add_argument("--count", type=int, default=NEXT_FIRES, metavar="N", help="fire times shown")

    for verb, handler in (("pause", pause), ("resume", resume), ("rm", remove), ("run", run_now)):
        p = common.command(verbs, verb, handler)
        p.add_argument("id", metavar="ID")

    p = common.command(verbs, "preview", preview)
    p.add_argument("id", nargs="?", metavar="ID", help="a stored schedule")
    rule = p.add_mutually_exclusive_group()
    rule.add_argument("--cron", metavar="EXPR")
    rule.add_argument("--every", metavar="DURATION")
    p.add_argument("--timezone", default=None, metavar="ZONE", help="IANA zone of --cron")
    p.add_argument("--dst-gap", choices=_names(DstGap), default=DstGap.SHIFT.value)
    p.add_argument("--dst-fold", choices=_names(DstFold), default=DstFold.ONCE.value)
    p.add_argument("--count", type=int, default=10, metavar="N", help="how many (default 10)")
    p.add_argument("--after", metavar="TIME", help="start after this instant (default now)")


# -- add and list --------------------------------------------------------------------------


def add(args: argparse.Namespace, out: Output) -> int:
    """store a schedule of JOB (idempotent with --id)"""
    arguments: dict[str, Any] = {
        "cron": args.cron,
        "every": common.maybe_duration(args.every, "--every"),
        "timezone": args.timezone,
        "inputs": common.inputs(args.input, args.input_json),
        "version": args.job_version,
        "misfire": args.misfire,
        "misfire_grace": common.duration(args.misfire_grace, "--misfire-grace", allow_zero=True),
        "max_catch_up": args.max_catch_up,
        "overlap": args.overlap,
        "dst_gap": args.dst_gap,
        "dst_fold": args.dst_fold,
        "start_at": common.instant(args.start_at, "--start-at"),
        "end_at": common.instant(args.end_at, "--end-at"),
        "max_attempts": args.max_attempts,
        "priority": args.priority,
        "queue": args.queue,
        "paused": args.paused,
        "limit_key": args.limit_key,
    }
    common.require_db(args)
    # The definition names the version by the schedule's field, job_version.
    fields = {
        "job_version" if k == "version" else k: v for k, v in with_store_defaults(arguments).items()
    }
    try:  # the store's own checks, before it is opened
        spec = specs.define(args.job, max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES, **fields)
        if args.id is not None:
            plans.check_schedule_id(args.id)
    except ValidationError as exc:
        raise relabel(exc, OPTIONS) from None
    # Without --id, the same command twice names the same schedule (not a twin).
    schedule_id = args.id if args.id is not None else spec.derived_id()
    with common.open_store(args, create=True) as store:
        try:
            schedule = store.add_schedule(args.job, id=schedule_id, **arguments)
        except ValidationError as exc:
            raise relabel(exc, OPTIONS) from None
        fires = [] if schedule.paused else _fires(store, schedule, NEXT_FIRES)
        warning = _scheduler_warning(store, schedules=not schedule.paused)
    _print_schedule(out, schedule, fires, title="schedule stored")
    _warn("add", warning)
    return 0


def ls(args: argparse.Namespace, out: Output) -> int:
    """list schedules with their next fire time"""
    count = common.limit(args.limit)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        page = store.schedules(job=args.job, paused=args.paused, limit=count)
        now = store.clock.now()
        warning = _scheduler_warning(store)
    listed = [(s, _next_fire(s, now)) for s in page.items]
    if out.as_json:
        out.document([records.schedule(s, [] if n is None else [n]) for s, n in listed])
        _warn("ls", warning)
        return 0
    rows = [
        (
            s.id,
            s.job,
            records.rule_text(s),
            "paused" if s.paused else "active",
            s.misfire.value,
            s.overlap.value,
            "paused" if s.paused else when(n),
        )
        for s, n in listed
    ]
    shown = f"{len(rows)} schedule{'' if len(rows) == 1 else 's'}"
    caption = f"first {shown}; more exist (raise --limit)" if page.next_cursor else shown
    out.table(
        ("id", "job", "rule", "state", "misfire", "overlap", "next fire"), rows, caption=caption
    )
    _warn("ls", warning)
    return 0


def _next_fire(schedule: Schedule, now: datetime) -> datetime | None:
    """The schedule's next slot after ``now``; None when paused (nothing fires) or over."""
    if schedule.paused:
        return None
    from fencepost.timing.rules import rule_of

    return next(iter(rule_of(schedule).slots(now)), None)


def _scheduler_warning(store: Store, *, schedules: bool | None = None) -> str | None:
    """What to warn of when no scheduler is alive (see ``scheduler_warning``)."""
    from fencepost.scheduler.materializer import scheduler_warning

    return scheduler_warning(store, schedules=schedules)


def _warn(verb: str, warning: str | None) -> None:
    """``fencepost schedule VERB: warning: ...`` on stderr, after the command's output."""
    if warning is not None:
        print(f"fencepost schedule {verb}: warning: {warning}", file=sys.stderr)


def _fires(
    store: Store, schedule: Schedule, count: int, *, after: datetime | None = None
) -> list[datetime]:
    """The schedule's next ``count`` fire times (its handle's preview)."""
    # The scheduler (cron rules, zones, the planner) loads only for a command that plans.
    from fencepost.scheduler.handle import ScheduleHandle

    return ScheduleHandle(store, schedule).preview(count, after=after)


# -- one schedule --------------------------------------------------------------------------


def show(args: argparse.Namespace, out: Output) -> int:
    """one schedule in full, with its next fires"""
    count = _count(args.count)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        schedule = store.get_schedule(args.id)
        fires = [] if schedule.paused else _fires(store, schedule, count)
    _print_schedule(out, schedule, fires)
    return 0


def pause(args: argparse.Namespace, out: Output) -> int:
    """pause a schedule: its occurrences not yet started, and its slots until resumed,
    are recorded SKIPPED"""
    common.require_db(args)
    with common.open_store(args) as store:
        schedule = store.pause_schedule(args.id, actor=common.actor())
    _print_schedule(out, schedule, None, title="paused")
    return 0


def resume(args: argparse.Namespace, out: Output) -> int:
    """resume a paused schedule from its next slot"""
    common.require_db(args)
    with common.open_store(args) as store:
        schedule = store.resume_schedule(args.id)
        fires = _fires(store, schedule, NEXT_FIRES)
        warning = _scheduler_warning(store, schedules=True)
    _print_schedule(out, schedule, fires, title="resumed")
    _warn("resume", warning)
    return 0


def remove(args: argparse.Namespace, out: Output) -> int:
    """delete a schedule; its executions not yet started are cancelled"""
    common.require_db(args)
    with common.open_store(args) as store:
        store.delete_schedule(args.id)
    if out.as_json:
        out.document({"id": args.id, "deleted": True})
    else:
        out.line(f"schedule {args.id} deleted; its executions not yet started are cancelled")
    return 0


def run_now(args: argparse.Namespace, out: Output) -> int:
    """run a schedule once now, besides its slots (a paused one too); prints the run's id

    Store one execution of the schedule due now: its job, version, inputs and queue,
    no slot of its rule (its key is ID:run:EXECUTION_ID, so the slot of the same
    instant runs as well). Each call runs it once more. The audit trail names who ran
    it. Prints the new execution's id (--json: the execution).
    """
    common.require_db(args)
    with common.open_store(args) as store:
        execution = store.run_schedule(args.id, actor=common.actor())
        now = store.clock.now()
    if out.as_json:
        out.document(records.execution(execution, now))
    else:
        out.line(execution.id)
    return 0


def _print_schedule(
    out: Output, s: Schedule, fires: Sequence[datetime] | None, *, title: str | None = None
) -> None:
    if out.as_json:
        out.document(records.schedule(s, None if fires is None else list(fires)))
        return
    pairs: list[tuple[str, Any]] = [
        ("id", s.id),
        ("job", s.job if s.job_version is None else f"{s.job} (version {s.job_version})"),
        ("rule", records.rule_text(s)),
        ("state", "paused" if s.paused else "active"),
        ("misfire", f"{s.misfire.value} (grace {s.misfire_grace.total_seconds():g}s)"),
        ("overlap", s.overlap.value),
        ("dst", f"gap {s.dst_gap.value}, fold {s.dst_fold.value}"),
        ("start at", when(s.start_at)),
        ("end at", when(s.end_at)),
        ("inputs", records.compact(s.inputs)),
        ("max attempts", s.max_attempts),
        ("priority", s.priority),
        ("queue", s.queue),
        ("limit key", s.limit_key),
        ("watermark", when(s.watermark)),
        ("next due", when(s.next_due)),
    ]
    if s.paused and fires is not None:
        pairs.append(("next fires", "none while paused"))
    for index, fire in enumerate(fires or ()):
        pairs.append(("next fires" if index == 0 else "", _local(fire, s.timezone)))
    out.fields(pairs, title=title)


# -- preview -------------------------------------------------------------------------------


def preview(args: argparse.Namespace, out: Output) -> int:
    """the next fire times of a stored schedule, or of --cron/--every without one"""
    count = _count(args.count)
    after = common.instant(args.after, "--after")
    ruled = args.cron is not None or args.every is not None
    if args.id is not None and ruled:
        raise ValidationError("ID", "give a schedule id or --cron/--every, not both")
    if args.id is None and not ruled:
        raise ValidationError("ID", "give a schedule id, or --cron EXPR / --every DURATION")
    if args.id is not None:
        if args.timezone is not None:
            raise ValidationError("--timezone", "applies to --cron; a stored schedule has its own")
        common.require_db(args)
        with common.open_store(args, read_only=True) as store:
            schedule = store.get_schedule(args.id)
            fires = _fires(store, schedule, count, after=after)
        timezone = schedule.timezone
    else:
        timezone = args.timezone or "UTC"
        rule: str | timedelta | None = args.cron
        if args.every is not None:
            rule = common.duration(args.every, "--every")
        assert rule is not None
        from fencepost.timing.rules import fire_times

        try:
            fires = fire_times(
                rule,
                timezone=timezone,
                after=after or datetime.now(UTC),
                count=count,
                dst_gap=args.dst_gap,
                dst_fold=args.dst_fold,
            )
        except ValidationError as exc:
            field = "--every" if exc.field == "rule" and args.every is not None else exc.field
            raise relabel(ValidationError(field, exc.message), OPTIONS) from None
    zone = ZoneInfo(timezone)
    if out.as_json:
        out.document([{"slot": f, "local": f.astimezone(zone).isoformat()} for f in fires])
        return 0
    rows = [(i + 1, when(f), f.astimezone(zone).isoformat()) for i, f in enumerate(fires)]
    out.table(("#", "slot (UTC)", f"local ({timezone})"), rows, right=("#",))
    return 0


def _count(value: int) -> int:
    if not 1 <= value <= 10_000:
        raise ValidationError("--count", f"must be between 1 and 10000, got {value}")
    return value


def _local(instant: datetime, timezone: str) -> str:
    local = instant.astimezone(ZoneInfo(timezone))
    if timezone == "UTC":
        return when(instant)
    return f"{when(instant)}  ({local.isoformat()} {timezone})"

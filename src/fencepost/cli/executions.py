"""``fencepost ps`` and ``dead-letters``: listing executions (acting on them: cli/bulk.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fencepost.cli import common, filters, records, show
from fencepost.cli.output import Output, span, when
from fencepost.domain.errors import ValidationError
from fencepost.domain.states import State

if TYPE_CHECKING:
    import argparse

#: What ``ps`` lists unless told otherwise: everything that has not finished.
UNFINISHED = (State.SCHEDULED, State.RETRY_WAIT, State.RUNNING)


def add_parsers(commands: Any) -> None:
    """Register ``ps`` and ``dead-letters``."""
    p = common.command(commands, "ps", ps)
    p.add_argument(
        "id", nargs="?", metavar="ID", help="show this execution in full (as show ID does)"
    )
    filters.add_filter_arguments(p, all_states=True)
    p.add_argument(
        "--owned-buckets", metavar="SPEC", help="this node's buckets (e.g. 0-15,20): marked *"
    )
    p.add_argument("--mine", action="store_true", help="only executions in --owned-buckets")
    p.add_argument(
        "--recent", action="store_true", help="newest first (by creation), not oldest first"
    )
    p.add_argument("--limit", type=int, metavar="N", help="at most N (default 100)")
    p.add_argument(
        "--counts",
        action="store_true",
        help="how many match in each state instead of a list (every state unless --state "
        "or --overdue narrows it)",
    )
    common.add_num_buckets(p)

    p = common.command(commands, "dead-letters", dead_letters)
    p.add_argument("--job", metavar="JOB", help="only this job")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="at most N (default 100)")


# -- ps ------------------------------------------------------------------------------------


def ps(args: argparse.Namespace, out: Output) -> int:
    """list executions: state, attempt, epoch, owner, lease left, due, lateness

    List executions (by default the unfinished ones: SCHEDULED, RETRY_WAIT, RUNNING),
    oldest first, or newest first with --recent (by creation). --overdue lists the
    waiting ones due more than SECONDS ago (10 unless given): work no worker took in
    time. --outcome lists those with an attempt that ended so (timed_out: ran past
    its timeout or lost its lease). --outcome, --error, --since and the --created-*
    and --finished-* times look back: with one of them, every state unless --state
    narrows it. --owner lists what one worker runs now; --key what one limit key
    holds; --error what failed with a piece of text (in any case). Time flags take
    an ISO 8601 time with offset or a duration ago (30s, 15m, 1h, 7d). --counts
    prints how many match in each state instead. With an ID, that one execution in
    full, exactly as show ID prints it (filters do not apply to it).
    """
    if args.id is not None:
        return _ps_one(args, out)
    chosen = filters.filters_from(args)
    buckets = common.num_buckets(args)
    owned = common.bucket_spec(args.owned_buckets, "--owned-buckets", buckets)
    if args.mine and owned is None:
        raise ValidationError("--mine", "needs --owned-buckets SPEC (which buckets are mine?)")
    if args.mine and "bucket" in chosen:
        raise ValidationError("--mine", "give --mine or --bucket, not both")
    if args.mine and owned is not None:
        chosen["buckets"] = list(owned)
    if args.counts:
        return _ps_counts(args, out, chosen)
    if "state" not in chosen and not args.all and not _LOOKING_BACK & chosen.keys():
        chosen["state"] = UNFINISHED
    count = common.limit(_DEFAULT_LIMIT if args.limit is None else args.limit)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        now = store.clock.now()
        page = store.query(limit=count, newest_first=args.recent, **chosen)
    mine = None if owned is None else set(owned)
    if out.as_json:
        docs = []
        for e in page.items:
            doc = records.execution(e, now)
            if mine is not None:
                doc["mine"] = e.bucket in mine
            docs.append(doc)
        out.document(docs)
        return 0
    columns = ["id", "job", "queue", "state", "attempt", "epoch", "owner", "lease left", "due"]
    columns += ["late"]
    columns += ["bucket"] if mine is None else ["bucket", "mine"]
    rows = []
    for e in page.items:
        row = [
            e.id,
            e.job,
            e.queue,
            e.state.value,
            f"{e.attempt}/{e.max_attempts}",
            e.epoch,
            e.lease_owner,
            span(records.lease_remaining(e, now)),
            "held" if records.is_held(e) else when(e.due_at),
            span(records.lateness(e, now)),
            e.bucket,
        ]
        if mine is not None:
            row.append("*" if e.bucket in mine else "")
        rows.append(row)
    shown = f"{len(rows)} execution{'' if len(rows) == 1 else 's'}"
    if args.overdue is not None:
        shown += f" waiting, due more than {span(filters.overdue(args.overdue))} ago"
    if args.recent:
        shown += ", newest first"
    caption = f"first {shown}; more match (raise --limit)" if page.next_cursor else shown
    out.table(columns, rows, caption=caption, right=("attempt", "epoch", "lease left", "late"))
    return 0


#: The filters that look back at history: with one, ``ps`` lists every state (not only
#: the unfinished ones) unless --state narrows it.
_LOOKING_BACK = frozenset(
    {"outcome", "error", "created_after", "created_before", "finished_after", "finished_before"}
)


def _ps_counts(args: argparse.Namespace, out: Output, chosen: dict[str, Any]) -> int:
    """``ps --counts``: how many executions the filters match, in each state."""
    for name, given in (("--limit", args.limit is not None), ("--recent", args.recent)):
        if given:
            raise ValidationError(name, "lists executions; --counts counts them")
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        counts = store.count_by_state(**chosen)
    total = sum(counts.values())
    if out.as_json:
        out.document({"counts": {s.value: n for s, n in counts.items()}, "total": total})
        return 0
    rows = [(state.value, n) for state, n in counts.items()]
    caption = f"{total} execution{'' if total == 1 else 's'} match"
    out.table(("state", "count"), rows, caption=caption, right=("count",))
    return 0


#: Rows ``ps`` lists without --limit.
_DEFAULT_LIMIT = 100


def _ps_one(args: argparse.Namespace, out: Output) -> int:
    """``ps ID``: what ``show ID`` prints; a listing's options with an ID are refused."""
    given = [
        name
        for name, value in (
            ("--all", args.all),
            *filters.given(args),
            ("--owned-buckets", args.owned_buckets),
            ("--mine", args.mine),
            ("--recent", args.recent),
            ("--limit", args.limit is not None),
            ("--counts", args.counts),
        )
        if value
    ]
    if given:
        raise ValidationError(
            given[0], "lists executions; with an ID, ps shows that one in full (as show ID does)"
        )
    return show.show(args, out)


# -- dead letters --------------------------------------------------------------------------


def dead_letters(args: argparse.Namespace, out: Output) -> int:
    """list FAILED executions with their errors"""
    # Oldest first, each with its last error.
    count = common.limit(args.limit)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        page = store.query(state=State.FAILED, job=args.job, limit=count)
        now = store.clock.now()
    if out.as_json:
        out.document([records.execution(e, now) for e in page.items])
        return 0
    rows = [
        (e.id, e.job, f"{e.attempt}/{e.max_attempts}", when(e.updated_at), _first_line(e.error))
        for e in page.items
    ]
    shown = f"{len(rows)} dead letter{'' if len(rows) == 1 else 's'}"
    caption = f"first {shown}; more exist (raise --limit)" if page.next_cursor else shown
    out.table(("id", "job", "attempts", "failed at", "error"), rows, caption=caption)
    return 0


def _first_line(error: str | None, width: int = 100) -> str:
    if not error:
        return "-"
    line = error.strip().splitlines()[0] if error.strip() else "-"
    return line if len(line) <= width else line[: width - 1] + "…"

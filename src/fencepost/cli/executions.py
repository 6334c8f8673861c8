"""``fencepost ps``, ``cancel``, ``replay`` and ``dead-letters``: executions, one by one."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from fencepost.cli import common, records, show
from fencepost.cli.output import Output, span, when
from fencepost.domain.checks import attempt_outcome
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import FencepostError, InvalidTransition, ValidationError
from fencepost.domain.slo import DEFAULT_CLAIM_WITHIN
from fencepost.domain.states import WAITING_STATES, AttemptOutcome, CommandKind, State

if TYPE_CHECKING:
    import argparse

    from fencepost.domain.models import Execution
    from fencepost.store import Store

log = logging.getLogger("fencepost.cli")

#: What ``ps`` lists unless told otherwise: everything that has not finished.
UNFINISHED = (State.SCHEDULED, State.RETRY_WAIT, State.RUNNING)

#: Dead letters replayed per page by ``replay --all-dead``.
_REPLAY_PAGE = 500

#: ``ps --overdue``'s SECONDS when left out: the claim objective (claimed within 10 s).
_OVERDUE_DEFAULT = f"{DEFAULT_CLAIM_WITHIN.total_seconds():g}"


def add_parsers(commands: Any) -> None:
    """Register ``ps``, ``cancel``, ``replay`` and ``dead-letters``."""
    p = common.command(commands, "ps", ps)
    p.add_argument(
        "id", nargs="?", metavar="ID", help="show this execution in full (as show ID does)"
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="every state, finished ones too")
    which.add_argument(
        "--state", action="append", metavar="STATE", help="only these states (repeat or a,b)"
    )
    which.add_argument(
        "--overdue",
        nargs="?",
        const=_OVERDUE_DEFAULT,
        metavar="SECONDS",
        help="only waiting executions (SCHEDULED, RETRY_WAIT) due more than SECONDS ago "
        f"(default {_OVERDUE_DEFAULT}: the claim objective)",
    )
    p.add_argument(
        "--outcome",
        metavar="OUTCOME",
        help="only executions with an attempt that ended so, in every state unless --state "
        "narrows it (any case): " + ", ".join(o.value.lower() for o in AttemptOutcome),
    )
    p.add_argument("--job", metavar="JOB", help="only this job")
    p.add_argument("--queue", metavar="QUEUE", help="only this queue's")
    p.add_argument(
        "--owned-buckets", metavar="SPEC", help="this node's buckets (e.g. 0-15,20): marked *"
    )
    p.add_argument("--mine", action="store_true", help="only executions in --owned-buckets")
    p.add_argument(
        "--recent", action="store_true", help="newest first (by creation), not oldest first"
    )
    p.add_argument("--limit", type=int, metavar="N", help="at most N (default 100)")
    common.add_num_buckets(p)

    p = common.command(commands, "cancel", cancel)
    p.add_argument("ids", nargs="+", metavar="ID", help="execution id")

    p = common.command(commands, "replay", replay)
    p.add_argument("ids", nargs="*", metavar="ID", help="execution id")
    p.add_argument("--all-dead", action="store_true", help="every FAILED execution")
    p.add_argument("--job", metavar="JOB", help="with --all-dead: only this job's")
    common.add_logging(p)

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
    its timeout or lost its lease), in every state unless --state narrows it. With
    an ID, that one execution in full, exactly as show ID prints it (filters do not
    apply to it).
    """
    if args.id is not None:
        return _ps_one(args, out)
    overdue = None if args.overdue is None else _overdue(args.overdue)
    outcome = None if args.outcome is None else attempt_outcome(args.outcome, "--outcome")
    if overdue is not None:
        chosen: tuple[State, ...] | None = WAITING_STATES
    elif args.all or (outcome is not None and not args.state):
        chosen = None  # an attempt's outcome is mostly asked of finished executions too
    else:
        chosen = common.states(args.state) or UNFINISHED
    buckets = common.num_buckets(args)
    owned = common.bucket_spec(args.owned_buckets, "--owned-buckets", buckets)
    if args.mine and owned is None:
        raise ValidationError("--mine", "needs --owned-buckets SPEC (which buckets are mine?)")
    count = common.limit(_DEFAULT_LIMIT if args.limit is None else args.limit)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        now = store.clock.now()
        page = store.query(
            state=chosen,
            job=args.job,
            queue=args.queue,
            buckets=list(owned) if args.mine and owned is not None else None,
            limit=count,
            newest_first=args.recent,
            due_before=None if overdue is None else now - overdue,
            outcome=outcome,
        )
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
    if overdue is not None:
        shown += f" waiting, due more than {span(overdue)} ago"
    if args.recent:
        shown += ", newest first"
    caption = f"first {shown}; more match (raise --limit)" if page.next_cursor else shown
    out.table(columns, rows, caption=caption, right=("attempt", "epoch", "lease left", "late"))
    return 0


#: Rows ``ps`` lists without --limit.
_DEFAULT_LIMIT = 100


def _overdue(text: str) -> timedelta:
    """``--overdue SECONDS``: a finite number of seconds >= 0 (at most 100 years)."""
    try:
        seconds = float(text)
    except ValueError:
        raise ValidationError(
            "--overdue", f"must be a number of seconds >= 0, got {text[:40]!r}"
        ) from None
    return as_duration(seconds, field="--overdue", allow_zero=True)


def _ps_one(args: argparse.Namespace, out: Output) -> int:
    """``ps ID``: what ``show ID`` prints; a listing's options with an ID are refused."""
    given = [
        name
        for name, value in (
            ("--all", args.all),
            ("--state", args.state),
            ("--overdue", args.overdue is not None),
            ("--outcome", args.outcome is not None),
            ("--job", args.job),
            ("--queue", args.queue),
            ("--owned-buckets", args.owned_buckets),
            ("--mine", args.mine),
            ("--recent", args.recent),
            ("--limit", args.limit is not None),
        )
        if value
    ]
    if given:
        raise ValidationError(
            given[0], "lists executions; with an ID, ps shows that one in full (as show ID does)"
        )
    return show.show(args, out)


# -- cancel and replay ---------------------------------------------------------------------


def cancel(args: argparse.Namespace, out: Output) -> int:
    """cancel executions: at once if not started, by command to the worker if running"""
    # One request per id; the others still run if one fails, and the exit code is the
    # first failure's. A malformed id refuses the whole command before anything runs.
    ids = [common.execution_id(text) for text in args.ids]
    common.require_db(args)
    who = common.actor()
    done: list[tuple[Execution, str]] = []
    failed: int = 0
    with common.open_store(args) as store:
        for execution_id in ids:
            try:
                store.request(execution_id, CommandKind.CANCEL, actor=who)
                execution = store.get(execution_id)
            except FencepostError as exc:
                failed = failed or common.fail("cancel", str(exc), common.exit_code(exc))
                continue
            outcome = (
                "cancelled"
                if execution.state is State.CANCELLED
                else "cancel requested: the worker holding it stops it"
            )
            done.append((execution, outcome))
        now = store.clock.now()
    if out.as_json:
        out.document([records.execution(e, now) | {"outcome": o} for e, o in done])
    elif done:
        out.table(("id", "job", "state", "outcome"), [(e.id, e.job, e.state, o) for e, o in done])
    return failed


def replay(args: argparse.Namespace, out: Output) -> int:
    """revive dead letters (FAILED -> SCHEDULED, due now, a fresh attempt budget)

    Revive dead letters: each FAILED execution named (or, with --all-dead, every one,
    optionally of one --job) becomes SCHEDULED, due now, with a fresh attempt budget.
    The audit trail names who replayed it.
    """
    if args.all_dead and args.ids:
        raise ValidationError("--all-dead", "give execution ids or --all-dead, not both")
    if not args.all_dead and not args.ids:
        raise ValidationError("ID", "give execution ids, or --all-dead (with --job J)")
    if args.job is not None and not args.all_dead:
        raise ValidationError("--job", "applies to --all-dead only")
    ids = [common.execution_id(text) for text in args.ids]
    common.require_db(args)
    common.configure_logging(args)
    who = common.actor()
    replayed: list[Execution] = []
    failed: int = 0
    with common.open_store(args) as store:
        if args.all_dead:
            replayed = _replay_all(store, args.job, who, out)
        else:
            for execution_id in ids:
                try:
                    replayed.append(store.replay(execution_id, actor=who))
                except FencepostError as exc:
                    failed = failed or common.fail("replay", str(exc), common.exit_code(exc))
        now = store.clock.now()
    if out.as_json:
        out.document([records.execution(e, now) for e in replayed])
    elif replayed or args.all_dead:
        rows = [(e.id, e.job, e.state.value, when(e.due_at)) for e in replayed]
        caption = f"{len(rows)} replayed"
        out.table(("id", "job", "state", "due"), rows, caption=caption)
    return failed


def _replay_all(store: Store, job: str | None, who: str, out: Output) -> list[Execution]:
    replayed: list[Execution] = []
    cursor: str | None = None
    with out.progress("replaying dead letters") as update:
        while True:
            page = store.query(state=State.FAILED, job=job, limit=_REPLAY_PAGE, after=cursor)
            for execution in page.items:
                try:
                    revived = store.replay(execution.id, actor=who)
                except InvalidTransition:
                    continue  # replayed by someone else meanwhile
                log.info(
                    "replayed by %s",
                    who,
                    extra={"execution_id": revived.id, "epoch": revived.epoch, "job": revived.job},
                )
                replayed.append(revived)
                update(len(replayed))
            if page.next_cursor is None:
                return replayed
            cursor = page.next_cursor


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

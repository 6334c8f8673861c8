"""``fencepost replay``, ``cancel``, ``retry-now`` and ``delete``: by id, or all a filter matches.

Named by id, each execution is acted on by its own verb, and a refusal is its own
line and exit code (3: not found, 4: its state refuses it), as ever. Chosen by
filter flags (those of ``ps``: ``--job``, ``--queue``, ``--state``, ``--since``, ...;
``--all`` for every execution the action applies to), the command first counts what
matches (``--dry-run`` stops there and shows the first 20), asks for confirmation on a
terminal (``--yes`` skips it; piped, it refuses more than one execution without
``--yes``), then works through the matches in batches of ``--batch`` with
``Store.act``: each batch many short transactions, so workers keep claiming. What the
action does not apply to, or what changed meanwhile, is skipped, not an error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fencepost.cli import common, filters, records
from fencepost.cli.output import Output, when
from fencepost.domain.bulk import DEFAULT_BATCH, MAX_BATCH, Action, BulkResult
from fencepost.domain.errors import FencepostError, InvalidTransition, ValidationError
from fencepost.domain.states import CommandKind, State

if TYPE_CHECKING:
    from fencepost.domain.models import Execution
    from fencepost.store import Store

log = logging.getLogger("fencepost.cli")


@dataclass(frozen=True)
class _Verb:
    """How one command speaks of its action."""

    action: Action
    name: str  #: the command, as typed
    done: str  #: what became of an execution: "replayed"
    doing: str  #: the progress bar's label
    #: Whether ``--since D`` means finished (not created) in the last D: what a replay
    #: or a delete of finished executions is asked about.
    since_finished: bool = False


_REPLAY = _Verb(Action.REPLAY, "replay", "replayed", "replaying", since_finished=True)
_CANCEL = _Verb(Action.CANCEL, "cancel", "cancelled", "cancelling")
_RETRY_NOW = _Verb(Action.RETRY_NOW, "retry-now", "due now", "retrying now")
_DELETE = _Verb(Action.DELETE, "delete", "deleted", "deleting", since_finished=True)


def add_parsers(commands: Any) -> None:
    """Register ``replay``, ``cancel``, ``retry-now`` and ``delete``."""
    for verb, handler in (
        (_REPLAY, replay),
        (_CANCEL, cancel),
        (_RETRY_NOW, retry_now),
        (_DELETE, delete),
    ):
        p = common.command(commands, verb.name, handler)
        p.add_argument(
            "ids", nargs="*", metavar="ID", help="execution id (or choose by the filter flags)"
        )
        filters.add_filter_arguments(p, all_states=True)
        _reword(p, "--all", f"every execution {verb.name} applies to (no other filter needed)")
        if verb.since_finished:
            _reword(p, "--since", "only executions finished in the last D (30s, 15m, 1h, 7d)")
        if verb is _REPLAY:
            p.add_argument(
                "--all-dead", action="store_true", help="every FAILED execution (as --all)"
            )
        p.add_argument(
            "--dry-run",
            action="store_true",
            help=f"count what would be {verb.done} and show the first 20; change nothing",
        )
        p.add_argument(
            "--yes",
            action="store_true",
            help="do not ask for confirmation (needed, when not on a terminal, to act on "
            "more than one execution the filter flags match)",
        )
        p.add_argument(
            "--batch",
            type=int,
            default=DEFAULT_BATCH,
            metavar="N",
            help=f"executions per batch (1 to {MAX_BATCH}, default {DEFAULT_BATCH})",
        )
        common.add_logging(p)


def _reword(parser: argparse.ArgumentParser, flag: str, text: str) -> None:
    """Give a shared filter flag the meaning it has in this command."""
    for action in parser._actions:
        if flag in action.option_strings:
            action.help = text
            return
    raise AssertionError(f"no {flag} on {parser.prog}")  # pragma: no cover


# -- the commands --------------------------------------------------------------------------


def replay(args: argparse.Namespace, out: Output) -> int:
    """revive dead letters (FAILED -> SCHEDULED, due now, a fresh attempt budget)

    Revive dead letters: each FAILED execution named by id, or every one the filter
    flags match (e.g. --job J --since 1h: failed in the last hour; --all or --all-dead:
    every one), becomes SCHEDULED, due now, with a fresh attempt budget. The audit trail
    names who replayed it. Chosen by filter, the matches are counted first (--dry-run
    stops there), confirmed on a terminal (--yes skips it; piped, more than one needs
    --yes) and replayed in batches; others are skipped.
    """
    return _run(args, out, _REPLAY)


def cancel(args: argparse.Namespace, out: Output) -> int:
    """cancel executions: at once if not started, by command to the worker if running

    Cancel executions named by id, or every one the filter flags match (e.g. --queue Q
    --state SCHEDULED; --all: every unfinished one): a waiting one (SCHEDULED,
    RETRY_WAIT) at once, a RUNNING one by a cancel command its worker honours. Chosen by
    filter, the matches are counted first (--dry-run stops there), confirmed on a
    terminal (--yes skips it; piped, more than one needs --yes) and cancelled in
    batches; finished ones are skipped.
    """
    return _run(args, out, _CANCEL)


def retry_now(args: argparse.Namespace, out: Output) -> int:
    """make waiting executions due now (SCHEDULED or RETRY_WAIT, due later)

    Make executions that wait for a later due time (SCHEDULED, or RETRY_WAIT in their
    backoff) due now, named by id or matched by the filter flags (--all: every one);
    audited as RESCHEDULED, reason "retry now". An occurrence an overlap policy holds
    back is left to its policy. Chosen by filter, the matches are counted first
    (--dry-run stops there), confirmed on a terminal (--yes skips it; piped, more than
    one needs --yes) and moved in batches; others are skipped.
    """
    return _run(args, out, _RETRY_NOW)


def delete(args: argparse.Namespace, out: Output) -> int:
    """delete finished executions with every row of them, leaving a record of each

    Delete finished executions (SUCCEEDED, FAILED, CANCELLED, SKIPPED) named by id, or
    every one the filter flags match (e.g. --job J --since 1d: finished in the last
    day; --all: every finished one), with their audit trail, payloads and commands.
    Each leaves a record of who deleted it and when (GET /deletions), kept until prune
    passes it. Chosen by filter, the matches are counted first (--dry-run stops there),
    confirmed on a terminal (--yes skips it; piped, more than one needs --yes) and
    deleted in batches; unfinished ones are skipped.
    """
    return _run(args, out, _DELETE)


def _run(args: argparse.Namespace, out: Output, verb: _Verb) -> int:
    # Every argument is checked before a store is opened.
    ids = [common.execution_id(text) for text in args.ids]
    chosen = _filters(args, verb)
    every = args.all or getattr(args, "all_dead", False)
    flagged = bool(chosen) or any(given for _, given in filters.given(args))
    if ids and (flagged or every):
        raise ValidationError("ID", "give execution ids or filter flags, not both")
    if not ids and not flagged and not every:
        raise ValidationError(
            "ID",
            "give execution ids, or filter flags (--job J, --since 1h, ...), or --all for "
            f"every execution {verb.name} applies to",
        )
    size = common.limit(args.batch, "--batch")
    common.require_db(args)
    common.configure_logging(args)
    who = common.actor()
    with common.open_store(args) as store:
        if ids and not args.dry_run:
            return _by_id(store, ids, verb, who, out)
        selection: dict[str, Any] = {"ids": ids} if ids else {"filter": chosen}
        return _by_filter(store, selection, verb, who, size, args, out)


def _filters(args: argparse.Namespace, verb: _Verb) -> dict[str, Any]:
    """The filter flags as ``Store.query`` filters; ``--since`` as this command means it."""
    chosen = filters.filters_from(args)
    if verb.since_finished and args.since is not None:
        if "finished_after" in chosen:
            raise ValidationError("--since", "give --since or --finished-after, not both")
        chosen["finished_after"] = chosen.pop("created_after")
    return chosen


# -- by id ---------------------------------------------------------------------------------


def _by_id(store: Store, ids: list[str], verb: _Verb, who: str, out: Output) -> int:
    """Each execution by its own verb: a refusal is one line and the first one's exit code;
    the others still run."""
    done: list[dict[str, Any]] = []
    failed = 0
    for execution_id in ids:
        try:
            done.append(_one(store, execution_id, verb, who))
        except FencepostError as exc:
            failed = failed or common.fail(verb.name, str(exc), common.exit_code(exc))
    if out.as_json:
        out.document(done)
    elif done:
        rows = [(d["id"], d["job"], d["state"], d["outcome"]) for d in done]
        caption = f"{len(rows)} {verb.done}" if verb is not _CANCEL else None
        out.table(("id", "job", "state", "outcome"), rows, caption=caption)
    return failed


def _one(store: Store, execution_id: str, verb: _Verb, who: str) -> dict[str, Any]:
    """Act on one execution; what became of it, as a JSON-ready record with an outcome."""
    if verb is _DELETE:
        gone = store.delete(execution_id, actor=who)
        return {
            "id": gone.execution_id,
            "job": gone.job,
            "queue": gone.queue,
            "state": gone.state,
            "deleted_by": gone.actor,
            "deleted_at": gone.at,
            "outcome": verb.done,
        }
    if verb is _REPLAY:
        execution = store.replay(execution_id, actor=who)
        outcome = verb.done
    elif verb is _CANCEL:
        store.request(execution_id, CommandKind.CANCEL, actor=who)
        execution = store.get(execution_id)
        outcome = (
            "cancelled"
            if execution.state is State.CANCELLED
            else "cancel requested: the worker holding it stops it"
        )
    else:
        if not store.act(verb.action, ids=[execution_id], actor=who).done:
            raise _NotDueLater(store.get(execution_id))  # NotFound if there is none
        execution = store.get(execution_id)
        outcome = verb.done
    return records.execution(execution, store.clock.now()) | {"outcome": outcome}


class _NotDueLater(InvalidTransition):
    """A retry-now of an execution that does not wait for a later due time: a conflict
    with its stored state, as a refused transition is (exit code 4)."""

    def __init__(self, execution: Execution) -> None:
        FencepostError.__init__(
            self,
            f"execution {execution.id} is {execution.state}, due {when(execution.due_at)}: "
            "retry-now applies to SCHEDULED and RETRY_WAIT executions due later (one an "
            "overlap policy holds back waits for its policy)",
        )
        self.execution_id, self.state, self.event = execution.id, execution.state, "RESCHEDULED"


# -- by filter -----------------------------------------------------------------------------


def _by_filter(
    store: Store,
    selection: dict[str, Any],
    verb: _Verb,
    who: str,
    size: int,
    args: argparse.Namespace,
    out: Output,
) -> int:
    """Count, show or confirm, then act in batches until the selection is worked through."""
    counted = store.act(verb.action, **selection, actor=who, dry_run=True)
    if args.dry_run or counted.matched == 0:
        return _show(counted, verb, store.clock.now(), out)
    refused = _unconfirmed(counted.matched, verb, args.yes)
    if refused is not None:
        return refused
    done = skipped = batches = 0
    cursor: str | None = None
    with out.progress(verb.doing, counted.matched) as update:
        while True:
            result = store.act(verb.action, **selection, actor=who, limit=size, after=cursor)
            done, skipped, batches = done + result.done, skipped + result.skipped, batches + 1
            update(done + skipped)
            log.info(
                "batch %d: %d %s, %d skipped (%d so far)",
                batches,
                result.done,
                verb.done,
                result.skipped,
                done,
            )
            cursor = result.next_cursor
            if cursor is None:
                break
    if out.as_json:
        out.document({"action": verb.action, "dry_run": False, "done": done, "skipped": skipped})
    else:
        out.line(
            f"{done} {verb.done}"
            + (f", {skipped} skipped (not applicable, or changed meanwhile)" if skipped else "")
        )
    return common.Exit.OK


def _show(counted: BulkResult, verb: _Verb, now: datetime, out: Output) -> int:
    """A dry run's answer (or a selection that matched nothing): the count and the first few."""
    if out.as_json:
        out.document(
            {
                "action": counted.action,
                "dry_run": True,
                "matched": counted.matched,
                "preview": [records.execution(e, now) for e in counted.preview],
            }
        )
        return common.Exit.OK
    caption = f"{counted.matched} would be {verb.done}"
    if counted.matched > len(counted.preview):
        caption += f"; the first {len(counted.preview)} shown"
    rows = [
        (e.id, e.job, e.queue, e.state.value, when(e.due_at), when(e.updated_at))
        for e in counted.preview
    ]
    out.table(("id", "job", "queue", "state", "due", "changed"), rows, caption=caption)
    return common.Exit.OK


def _unconfirmed(matched: int, verb: _Verb, yes: bool) -> int | None:
    """None to go ahead; else the exit code of a refusal or of a "no"."""
    if yes:
        return None
    many = f"{matched} execution{'' if matched == 1 else 's'}"
    if not sys.stdin.isatty():
        if matched == 1:
            return None
        return common.fail(
            verb.name,
            f"{many} match; add --yes to {verb.name} them all (--dry-run lists them first)",
            common.Exit.USAGE,
        )
    print(f"{verb.name} {many}? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer in ("y", "yes"):
        return None
    return common.fail(verb.name, "not confirmed; nothing was changed", common.Exit.FAILED)

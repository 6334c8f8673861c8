"""``fencepost show ID``: one execution, whole — its record, attempts, audit trail, commands.

Everything is read from the store's public verbs (``get``, ``transitions``,
``commands``); the attempts are derived from the same trail that is printed
(:func:`fencepost.domain.machine.attempts_from_transitions`), so the two agree.

Which error an execution "has" depends on its state: a FAILED execution's is the
one that dead-lettered it, a RETRY_WAIT one's the failure being retried. Any other
execution has none of its own — a SUCCEEDED one that failed once before keeps
that failure only on the attempt that met it, never as its error.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from fencepost.cli import common, records
from fencepost.cli.output import Output, span, when
from fencepost.domain.machine import attempts_from_transitions
from fencepost.domain.states import State

if TYPE_CHECKING:
    import argparse
    from datetime import datetime

    from fencepost.domain.models import Attempt, Command, Execution, Transition
    from fencepost.store import Store

#: The states whose stored error explains the state (the last attempt's failure).
ERROR_STATES = (State.FAILED, State.RETRY_WAIT)


def add_parsers(commands: Any) -> None:
    """Register ``show``."""
    p = common.command(commands, "show", show)
    p.add_argument("id", metavar="ID", help="the execution's id (as ps lists it)")


def show(args: argparse.Namespace, out: Output) -> int:
    """one execution in full: inputs, outcome, attempts, audit trail, commands

    One execution, whole: its job and version, state, due time and lease; every
    attempt (owner, epoch, start, end, outcome, the first line of its error); its
    inputs; its result or, once finished, its outcome; its progress; the audit trail
    (time, event, from -> to state, epoch, actor, reason) and the commands sent to it.
    A SUCCEEDED execution shows no error, even if an earlier attempt failed: that
    error is the attempt's. ps ID shows the same.
    """
    execution_id = common.execution_id(args.id)
    common.require_db(args)
    with common.open_store(args, read_only=True) as store:
        doc = read(store, execution_id)
    if out.as_json:
        out.document(doc["document"])
    else:
        render(doc, out)
    return 0


def read(store: Store, execution_id: str) -> dict[str, Any]:
    """Everything ``show`` prints about one execution (NotFound if there is none)."""
    execution = store.get(execution_id)
    trail = store.transitions(execution_id)
    commands = store.commands(execution_id)
    now = store.clock.now()
    attempts = attempts_from_transitions(trail)
    return {
        "execution": execution,
        "trail": trail,
        "attempts": attempts,
        "commands": commands,
        "now": now,
        "document": document(execution, trail, attempts, commands, now),
    }


def own_error(e: Execution) -> str | None:
    """The error that explains ``e``'s state (see :data:`ERROR_STATES`), else None."""
    return e.error if e.state in ERROR_STATES else None


def finish(e: Execution, trail: list[Transition]) -> Transition | None:
    """The transition that finished ``e`` (None while it has not finished)."""
    if not e.state.is_terminal:
        return None
    for t in reversed(trail):
        if t.to_state is e.state:
            return t
    return None  # pragma: no cover - a finished execution has a trail into its state


def outcome(e: Execution, trail: list[Transition]) -> dict[str, Any] | None:
    """How a finished execution ended: its state, when, by whom, why, and its result or error."""
    last = finish(e, trail)
    if last is None:
        return None
    return {
        "state": e.state,
        "at": last.at,
        "event": last.event,
        "actor": last.actor,
        "reason": None if e.state is State.FAILED else last.reason,
        "result": e.result if e.state is State.SUCCEEDED else None,
        "error": own_error(e),
    }


def document(
    e: Execution,
    trail: list[Transition],
    attempts: list[Attempt],
    commands: list[Command],
    now: datetime,
) -> dict[str, Any]:
    """``show --json``: the execution as ``ps --json`` shapes it (with ``error`` its own
    only, see :func:`own_error`), plus ``outcome``, ``attempts``, ``transitions`` and
    ``commands``, oldest first."""
    doc = records.execution(e, now)
    doc["error"] = own_error(e)
    doc["outcome"] = outcome(e, trail)
    doc["attempts"] = [
        {
            "attempt": a.attempt,
            "epoch": a.epoch,
            "owner": a.owner,
            "started_at": a.started_at,
            "ended_at": a.ended_at,
            "outcome": a.outcome,
            "error": a.error,
        }
        for a in attempts
    ]
    doc["transitions"] = [
        {
            "seq": t.seq,
            "at": t.at,
            "event": t.event,
            "from_state": t.from_state,
            "to_state": t.to_state,
            "epoch": t.epoch,
            "actor": t.actor,
            "reason": t.reason,
        }
        for t in trail
    ]
    doc["commands"] = [
        {
            "id": c.id,
            "kind": c.kind,
            "state": c.state,
            "requested_by": c.requested_by,
            "requested_at": c.requested_at,
            "owner": c.owner,
            "epoch": c.epoch,
            "done_at": c.done_at,
        }
        for c in commands
    ]
    return doc


def _schedule_of(e: Execution) -> str | None:
    """The schedule and slot of an occurrence; a run asked for now has no slot."""
    if e.schedule_id is None:
        return None
    return f"{e.schedule_id} (run now)" if e.slot is None else f"{e.schedule_id} slot {e.slot}"


def first_line(text: str | None, width: int = 100) -> str:
    """The first non-blank line of ``text``, cut to ``width`` (``-`` when there is none)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return "-"
    line = lines[0] + (" …" if len(lines) > 1 else "")
    return line if len(line) <= width else line[: width - 1] + "…"


def _json_lines(out: Output, label: str, value: Any) -> None:
    """``label:`` and ``value`` as indented JSON under it."""
    out.line(f"{label}:")
    for line in json.dumps(value, indent=2, ensure_ascii=False).splitlines():
        out.line(f"  {line}")


def _text_lines(out: Output, label: str, text: str) -> None:
    out.line(f"{label}:")
    for line in text.splitlines() or [""]:
        out.line(f"  {line}")


def render(read_: dict[str, Any], out: Output) -> None:
    """What ``show ID`` prints on a terminal or a pipe (the tables of :func:`read`)."""
    e: Execution = read_["execution"]
    trail: list[Transition] = read_["trail"]
    attempts: list[Attempt] = read_["attempts"]
    commands: list[Command] = read_["commands"]
    now: datetime = read_["now"]
    version = "any version" if e.job_version is None else f"version {e.job_version}"
    last = finish(e, trail)
    fields: list[tuple[str, Any]] = [
        ("id", e.id),
        ("job", f"{e.job} ({version})"),
        ("state", e.state.value),
        ("outcome", "-" if last is None else f"{e.state.value} at {when(last.at)}"),
        ("planned", when(e.planned_at)),
        ("due", "held (waits for the previous run)" if records.is_held(e) else when(e.due_at)),
        ("late", span(records.lateness(e, now))),
        ("attempt", f"{e.attempt}/{e.max_attempts}"),
        ("epoch", e.epoch),
        ("owner", e.lease_owner),
        ("lease left", span(records.lease_remaining(e, now))),
        ("timeout", span(e.timeout)),
        ("queue", e.queue),
        ("limit key", e.limit_key),
        ("priority", e.priority),
        ("bucket", e.bucket if e.bucket_key is None else f"{e.bucket} (key {e.bucket_key})"),
        ("idempotency key", e.idempotency_key),
        ("schedule", _schedule_of(e)),
        ("created", when(e.created_at)),
        ("updated", when(e.updated_at)),
        ("progress", "-" if e.progress is None else records.compact(e.progress)),
    ]
    if last is not None and e.state in (State.CANCELLED, State.SKIPPED):
        fields.append(("reason", last.reason))
        fields.append(("by", last.actor))
    out.fields(fields, title=f"execution {e.id}")
    _json_lines(out, "inputs", e.inputs)
    if e.state is State.SUCCEEDED:
        _json_lines(out, "result", e.result)
    error = own_error(e)
    if error is not None:
        label = "error" if e.state is State.FAILED else "error (being retried)"
        _text_lines(out, label, error)
    out.line()
    out.table(
        ("attempt", "epoch", "owner", "started", "ended", "outcome", "error"),
        [
            (
                a.attempt,
                a.epoch,
                a.owner,
                when(a.started_at),
                when(a.ended_at),
                "running" if a.outcome is None else a.outcome.value,
                first_line(a.error),
            )
            for a in attempts
        ],
        title="attempts",
        caption=None if attempts else "none yet",
        right=("attempt", "epoch"),
    )
    out.table(
        ("time", "event", "from→to", "epoch", "actor", "reason"),
        [
            (
                when(t.at),
                t.event.value,
                f"{'-' if t.from_state is None else t.from_state.value}→{t.to_state.value}",
                t.epoch,
                t.actor,
                first_line(t.reason),
            )
            for t in trail
        ],
        title="audit trail",
        right=("epoch",),
    )
    out.table(
        ("id", "kind", "state", "requested by", "requested", "owner", "epoch", "done"),
        [
            (
                c.id,
                c.kind.value,
                c.state.value,
                c.requested_by,
                when(c.requested_at),
                c.owner,
                c.epoch,
                when(c.done_at),
            )
            for c in commands
        ],
        title="commands",
        caption=None if commands else "none",
    )

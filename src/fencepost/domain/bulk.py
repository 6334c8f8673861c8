"""Acting on many executions at once: the actions, whom each applies to, a request's rules.

An operator replays, cancels, retries now or deletes executions named by id or
matching a filter (``Store.act``, ``POST /executions/actions``, ``fencepost replay
--job X``). This module is the pure part of it:

* :class:`Action` and :data:`APPLIES_TO`, the states each action applies to, and
  :func:`applies`, the whole rule for one execution at one instant;
* :func:`bulk_request`, which checks a request (exactly one of ids and filter, ids
  well-formed and at most :data:`MAX_IDS`, filter keys among the store's filter
  names, a limit of 1 to :data:`MAX_BATCH`) into a :class:`BulkRequest`;
* :class:`BulkResult`, what one batch did;
* :class:`Deletion` and :class:`DeletionPage`: the record a deleted execution leaves,
  since its own audit trail goes with it.

A request is worked through in batches of at most ``limit`` executions in id order
after a cursor; each batch is many short transactions, so claims are never held up
behind one long write.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypedDict, TypeGuard

from fencepost.domain.checks import require_int, require_name, storable
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Execution
from fencepost.domain.states import TERMINAL_STATES, State


class Action(StrEnum):
    """What a bulk request does to each execution it applies to."""

    #: Revive a dead letter: FAILED -> SCHEDULED, due now, a fresh attempt budget.
    REPLAY = "replay"
    #: Cancel: a waiting execution (SCHEDULED, RETRY_WAIT) at once; a RUNNING one by a
    #: cancel command its lease holder honours.
    CANCEL = "cancel"
    #: Make a waiting execution due in the future due now (audited RESCHEDULED).
    RETRY_NOW = "retry_now"
    #: Delete a finished execution and every row of it, leaving a :class:`Deletion`.
    DELETE = "delete"


#: The states each action applies to; an execution in another state is skipped.
APPLIES_TO: Mapping[Action, frozenset[State]] = {
    Action.REPLAY: frozenset({State.FAILED}),
    Action.CANCEL: frozenset({State.SCHEDULED, State.RETRY_WAIT, State.RUNNING}),
    Action.RETRY_NOW: frozenset({State.SCHEDULED, State.RETRY_WAIT}),
    Action.DELETE: TERMINAL_STATES,
}

#: The most ids one request may name, and the largest batch (``limit``).
MAX_IDS = 10_000
MAX_BATCH = 10_000
#: A batch's size unless the caller says otherwise.
DEFAULT_BATCH = 1000
#: How many executions a dry run shows (``BulkResult.preview``).
PREVIEW = 20


class ActOptions(TypedDict, total=False):
    """What one batch of a bulk action selects and how, declared once: ``act`` of
    ``Store``, ``AsyncStore``, ``App``, ``Client`` and ``AsyncClient`` takes these as
    keywords typed by this. Exactly one of ``ids`` and ``filter``; ``dry_run`` (default
    False), ``limit`` (default :data:`DEFAULT_BATCH`) and ``after`` (the previous
    batch's ``next_cursor``) as :meth:`Store.act
    <fencepost.store.operating.OperatingVerbs.act>` says.
    """

    ids: Iterable[str] | None
    filter: Mapping[str, Any] | None
    dry_run: bool
    limit: int
    after: str | None


#: The reason a retry-now's RESCHEDULED audit record gives.
RETRY_NOW_REASON = "retry now"
#: What a refused delete names as its event (:class:`~fencepost.domain.errors.InvalidTransition`):
#: a deletion is no transition of the state machine, the execution is gone after it.
DELETED = "DELETED"


def applies(action: Action, execution: Execution, now: datetime) -> bool:
    """Whether ``action`` applies to ``execution`` at ``now``: its state is one of
    :data:`APPLIES_TO`'s, and for a retry-now it is due after ``now`` (one already
    due has nothing to gain).

    The store adds one rule of its own: a retry-now leaves alone an occurrence an
    overlap policy holds back (its ``due_at`` is the far-future marker of
    ``fencepost.timing.planning.HELD``), which its policy releases.
    """
    if execution.state not in APPLIES_TO[action]:
        return False
    return action is not Action.RETRY_NOW or execution.due_at > now


def action_of(value: object) -> Action:
    """An :class:`Action` from itself or its value; else a ValidationError on ``action``."""
    if isinstance(value, Action):
        return value
    if isinstance(value, str) and value in Action._value2member_map_:
        return Action(value)
    known = ", ".join(a.value for a in Action)
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    raise ValidationError("action", f"unknown action {shown} (one of {known})")


@dataclass(frozen=True, kw_only=True, slots=True)
class BulkRequest:
    """A checked bulk request (see :func:`bulk_request`).

    Exactly one of ``ids`` (sorted, without repeats) and ``filter`` (``Store.query``'s
    keyword arguments, not yet checked by it) is set.
    """

    action: Action
    ids: tuple[str, ...] | None
    filter: Mapping[str, Any] | None
    actor: str
    dry_run: bool
    limit: int
    after: str | None


def bulk_request(
    action: object,
    *,
    ids: object,
    filter: object,
    actor: object,
    dry_run: object,
    limit: object,
    after: object,
    filter_names: Collection[str],
) -> BulkRequest:
    """Check a bulk request; every refusal is a :class:`ValidationError` naming the field.

    * ``action``: an :class:`Action` or its value (``"retry_now"``);
    * exactly one of ``ids`` and ``filter`` (both or neither: refused on ``ids`` and
      ``filter`` respectively);
    * ``ids``: a list (or other collection, not text) of 1 to :data:`MAX_IDS`
      execution ids, each a UUID as the store writes it (lower-case, hyphenated);
      a bad one is named by its position, ``ids[3]``; repeats count once;
    * ``filter``: a mapping whose keys are among ``filter_names`` (the filters of
      ``Store.query``), an unknown one refused on ``filter.<key>``; its values are
      the query's to check;
    * ``actor``: a name, recorded in each execution's audit;
    * ``dry_run``: a bool; ``limit``: an int from 1 to :data:`MAX_BATCH`;
    * ``after``: None, or the ``next_cursor`` of the previous batch (an execution id).
    """
    chosen = action_of(action)
    if ids is not None and filter is not None:
        raise ValidationError("ids", "give ids or a filter, not both")
    if ids is None and filter is None:
        raise ValidationError("filter", "give ids or a filter (an empty filter: every execution)")
    if not isinstance(dry_run, bool):
        raise ValidationError("dry_run", f"must be true or false, got {dry_run!r}")
    return BulkRequest(
        action=chosen,
        ids=None if ids is None else _ids(ids),
        filter=None if filter is None else _filter(filter, filter_names),
        actor=require_name(actor, "actor"),
        dry_run=dry_run,
        limit=require_int(limit, "limit", low=1, high=MAX_BATCH),
        after=None if after is None else _cursor(after),
    )


def _ids(value: object) -> tuple[str, ...]:
    """Execution ids, each well-formed; sorted and without repeats."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError("ids", f"must be a list of execution ids, got {_shown(value)}")
    found: set[str] = set()
    for index, item in enumerate(value):
        if index >= MAX_IDS:
            raise ValidationError("ids", f"must name at most {MAX_IDS} executions")
        if not is_execution_id(item):
            raise ValidationError(
                f"ids[{index}]", f"must be an execution id (a UUID), got {_shown(item)}"
            )
        found.add(item)
    if not found:
        raise ValidationError("ids", "must name at least one execution")
    return tuple(sorted(found))


def _filter(value: object, names: Collection[str]) -> dict[str, Any]:
    """A filter's mapping, its keys among ``names`` (the values are the query's to check)."""
    if not isinstance(value, Mapping):
        raise ValidationError("filter", f"must be a mapping of filter names, got {_shown(value)}")
    for key in value:
        if not isinstance(key, str) or key not in names:
            shown = key if isinstance(key, str) and storable(key) else _shown(key)
            known = ", ".join(sorted(names))
            raise ValidationError(f"filter.{shown}", f"is not a filter (the filters: {known})")
    return dict(value)


def _cursor(value: object) -> str:
    """A batch's cursor: an execution id (the last one the previous batch looked at)."""
    if not is_execution_id(value):
        raise ValidationError("after", "must be the next_cursor of the previous batch")
    return value


def is_execution_id(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an execution id as stores write it: a lower-case UUID's text."""
    if not isinstance(value, str) or len(value) != 36 or not value.isascii():
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


@dataclass(frozen=True, kw_only=True, slots=True)
class BulkResult:
    """What one batch of a bulk request did (see ``Store.act``).

    ``matched``: with ``dry_run``, how many executions of the whole selection the
    action applies to (``done`` and ``skipped`` are 0); else how many executions this
    batch looked at, of which ``done`` were acted on and ``skipped`` were not (the
    action did not apply to them, they changed meanwhile, or, by id, they do not
    exist). ``next_cursor``:
    pass it as ``after`` for the next batch; None when this was the last (always
    None for a dry run). ``preview``: with ``dry_run``, the first :data:`PREVIEW`
    executions the action applies to, in id order; else empty.
    """

    action: Action
    dry_run: bool
    matched: int
    done: int
    skipped: int
    next_cursor: str | None
    preview: list[Execution] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class Deletion:
    """The record of one deleted execution: what it was and who deleted it, when.

    Its own rows (audit trail, payloads, commands) went with it; this record stays
    until ``prune`` removes records older than its cutoff, as it does the audit.
    """

    execution_id: str
    job: str
    queue: str
    #: The (finished) state it was deleted in.
    state: State
    actor: str
    at: datetime


@dataclass(frozen=True, kw_only=True, slots=True)
class DeletionPage:
    """One page of deletion records, oldest first; pass ``next_cursor`` as ``after``."""

    items: list[Deletion]
    next_cursor: str | None


def deletion_cursor(value: object) -> int:
    """The ``after`` of :class:`DeletionPage`: the number of the last record seen, as text."""
    if not (isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18):
        raise ValidationError("after", "must be the next_cursor of the previous page")
    return int(value)

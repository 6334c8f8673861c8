"""``Store.act``: one batch of a bulk action, written once above the backends.

The batch is chosen with the store's own reads (``query`` for a filter, the ids
themselves otherwise), narrowed to what the action may apply to; then it is changed
a group of ``store.bulk_group`` executions at a time through ``Store._act_group``,
each group one short transaction on the SQL stores (each execution checked again under
its lock there), each followed by a pause as long as it took (at least
``store.bulk_pause``, at most :data:`~fencepost.store.values.PRUNE_YIELD_CAP`), as
``prune`` pauses between its batches: claims waiting for SQLite's write lock get it
between groups, and claims on PostgreSQL the server's time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain.bulk import (
    APPLIES_TO,
    DEFAULT_BATCH,
    PREVIEW,
    RETRY_NOW_REASON,
    Action,
    ActOptions,
    BulkRequest,
    BulkResult,
    applies,
    bulk_request,
)
from fencepost.domain.durations import as_aware_utc
from fencepost.domain.errors import InvalidTransition, NotFound, NotRunning, ValidationError
from fencepost.domain.filters import StoreFilters, checked
from fencepost.domain.models import Execution
from fencepost.domain.states import CommandKind, State
from fencepost.store.values import MAX_LIMIT, PRUNE_YIELD_CAP, states_of
from fencepost.timing.planning import HELD

if TYPE_CHECKING:
    from fencepost.store.base import Store


#: The filters a bulk request may use: a store's (so a filter added to
#: :class:`~fencepost.domain.filters.StoreFilters` is a filter here at once).
FILTER_NAMES = frozenset(StoreFilters.__annotations__)

_US = timedelta(microseconds=1)


def applicable(action: Action, execution: Execution, now: datetime) -> bool:
    """:func:`~fencepost.domain.bulk.applies`, and a retry now leaves alone an occurrence
    an overlap policy holds (``due_at`` at HELD): its policy releases it, so that it
    never runs beside the run it waits for."""
    if action is Action.RETRY_NOW and execution.due_at >= HELD:
        return False
    return applies(action, execution, now)


def act(store: Store, action: object, *, actor: object, options: Mapping[str, Any]) -> BulkResult:
    """One batch of ``store.act`` (see its docstring); ``options`` its ActOptions."""
    checked(options, ActOptions, "act")
    request = bulk_request(
        action,
        ids=options.get("ids"),
        filter=options.get("filter"),
        actor=actor,
        dry_run=options.get("dry_run", False),
        limit=options.get("limit", DEFAULT_BATCH),
        after=options.get("after"),
        filter_names=FILTER_NAMES,
    )
    now = store._store_now()
    if request.dry_run:
        return _dry_run(store, request, now)
    if request.ids is not None:
        pending = [i for i in request.ids if request.after is None or i > request.after]
        chosen = pending[: request.limit]
        next_cursor = chosen[-1] if len(pending) > request.limit else None
        matched = len(chosen)
    else:
        assert request.filter is not None
        narrowed = _narrowed(store, request.action, request.filter, now)
        if narrowed is None:
            return _result(request, matched=0, done=0, next_cursor=None)
        with _in_filter(request.filter):
            page = store.query(**narrowed, limit=request.limit, after=request.after)
        chosen = [e.id for e in page.items if applicable(request.action, e, now)]
        next_cursor, matched = page.next_cursor, len(page.items)
    done = 0
    size, least = store.bulk_group, store.bulk_pause
    for start in range(0, len(chosen), size):
        began = time.monotonic()
        group = chosen[start : start + size]
        done += len(store._act_group(request.action, group, request.actor, now))
        if start + size < len(chosen):
            # Step aside as long as the group took, as prune does between batches: on
            # SQLite a claim waits for the one writer; on PostgreSQL it skips the rows a
            # group holds, but shares the machine with it.
            time.sleep(min(PRUNE_YIELD_CAP, max(least, time.monotonic() - began)))
    return _result(request, matched=matched, done=done, next_cursor=next_cursor)


def _result(
    request: BulkRequest,
    *,
    matched: int,
    done: int,
    next_cursor: str | None,
    preview: Sequence[Execution] = (),
) -> BulkResult:
    return BulkResult(
        action=request.action,
        dry_run=request.dry_run,
        matched=matched,
        done=done,
        skipped=0 if request.dry_run else matched - done,
        next_cursor=next_cursor,
        preview=list(preview),
    )


def _dry_run(store: Store, request: BulkRequest, now: datetime) -> BulkResult:
    """How many of the whole selection the action applies to, and the first of them."""
    if request.ids is not None:
        found = [e for e in _each(store, request.ids) if applicable(request.action, e, now)]
        shown = [e for e in found if request.after is None or e.id > request.after]
        return _result(
            request, matched=len(found), done=0, next_cursor=None, preview=shown[:PREVIEW]
        )
    assert request.filter is not None
    narrowed = _narrowed(store, request.action, request.filter, now)
    if narrowed is None:
        return _result(request, matched=0, done=0, next_cursor=None)
    with _in_filter(request.filter):
        count = _count(store, narrowed)
        page = store.query(**narrowed, limit=PREVIEW, after=request.after)
    shown = [e for e in page.items if applicable(request.action, e, now)]
    return _result(request, matched=count, done=0, next_cursor=None, preview=shown)


def _each(store: Store, ids: Sequence[str]) -> Iterator[Execution]:
    """The executions of ``ids`` that exist."""
    for execution_id in ids:
        try:
            yield store.get(execution_id)
        except NotFound:
            continue


def _count(store: Store, filters: Mapping[str, Any]) -> int:
    """How many executions match ``filters``: one grouped count where the store has one
    (``count_by_state``), else by reading every page."""
    counter: Callable[..., Mapping[State, int]] | None = getattr(store, "count_by_state", None)
    if counter is not None:
        return sum(counter(**filters).values())
    total, cursor = 0, None
    while True:
        page = store.query(**filters, limit=MAX_LIMIT, after=cursor)
        total += len(page.items)
        if page.next_cursor is None:
            return total
        cursor = page.next_cursor


def _narrowed(
    store: Store, action: Action, filters: Mapping[str, Any], now: datetime
) -> dict[str, Any] | None:
    """``filters`` narrowed to the executions ``action`` may apply to: its states (of
    those the filter names, if it names some), and for a retry now a due time after
    ``now`` and before HELD. None when nothing can match (the filter is still checked:
    a bad value is refused as it would be otherwise)."""
    narrowed = dict(filters)
    with _in_filter(filters):
        given = states_of(filters.get("state"))
        states = sorted(APPLIES_TO[action] if given is None else APPLIES_TO[action] & set(given))
        if action is Action.RETRY_NOW:
            after = _instant(filters, "due_after")
            before = _instant(filters, "due_before")
            narrowed["due_after"] = now + _US if after is None else max(after, now + _US)
            narrowed["due_before"] = HELD if before is None else min(before, HELD)
        if not states:
            store.query(**filters, limit=1)  # only to check the rest of the filter
            return None
    narrowed["state"] = states
    return narrowed


def _instant(filters: Mapping[str, Any], name: str) -> datetime | None:
    value = filters.get(name)
    return None if value is None else as_aware_utc(value, field=name)


@contextmanager
def _in_filter(filters: Mapping[str, Any]) -> Iterator[None]:
    """A refusal of one of the filter's values names it within the filter: ``filter.job``."""
    try:
        yield
    except ValidationError as exc:
        name = exc.field.partition("[")[0].partition(".")[0]
        if name in filters:
            raise ValidationError(f"filter.{exc.field}", exc.message) from None
        raise


# -- one execution at a time ---------------------------------------------------------------


def one_by_one(
    store: Store, action: Action, execution_ids: Sequence[str], actor: str, now: datetime
) -> list[str]:
    """``_act_group`` through the store's verbs, one call (one transaction) each."""
    done = []
    for execution_id in execution_ids:
        try:
            if _act_one(store, action, execution_id, actor, now):
                done.append(execution_id)
        except (InvalidTransition, NotFound, NotRunning):
            continue  # changed meanwhile (or gone): skipped
    return done


def _act_one(store: Store, action: Action, execution_id: str, actor: str, now: datetime) -> bool:
    if action is Action.REPLAY:
        store.replay(execution_id, actor=actor)
    elif action is Action.CANCEL:
        store.request(execution_id, CommandKind.CANCEL, actor=actor)
    elif action is Action.DELETE:
        store.delete(execution_id, actor=actor)
    else:
        if not applicable(action, store.get(execution_id), now):
            return False
        store.reschedule(execution_id, now, actor=actor, reason=RETRY_NOW_REASON)
    return True

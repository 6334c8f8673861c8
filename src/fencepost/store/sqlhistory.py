"""The history charts for the SQL stores: the roll-up and the reads, as plans.

Written once for both dialects over their named blocks (``history_*`` in each
``queries.sql``; the counters' column list and sums in ``shared.sql``); what differs
is how a dialect binds times and how its rows hand them back, and how it holds the
watermark: PostgreSQL locks its row (``FOR UPDATE``, or ``SKIP LOCKED`` for a
roll-up that would rather not wait), SQLite's write transaction holds the file.
The decisions are :mod:`fencepost.store.history`'s and
:mod:`fencepost.domain.history`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from fencepost.domain.history import (
    COLUMNS,
    SPANS,
    WINDOWS,
    Finished,
    History,
    HistorySummary,
    RollUp,
    SummaryBy,
    ThrottledMinute,
    Totals,
    Window,
    history,
    increments,
    minute_number,
    require_by,
    require_window,
    span,
    spread,
    summary,
)
from fencepost.domain.slo import SloFacts, SloMark
from fencepost.domain.states import State
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.history import (
    MIN_ID,
    Watermark,
    advanced,
    history_arguments,
    roll_up_range,
)

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore

#: The blocks that sum a window's minute rows per step, by which filters are given:
#: each reads the index that its filter leads (the primary key's minute without one).
_POINTS_BLOCKS = {
    (False, False): "history_points",
    (True, False): "history_points_job",
    (False, True): "history_points_queue",
    (True, True): "history_points_job_queue",
}
_SUMMARY_BLOCKS = {SummaryBy.JOB: "history_by_job", SummaryBy.QUEUE: "history_by_queue"}


#: States by their stored text, and marks by their stored bits: looked up, not made
#: (an enum's constructor is most of a row's cost when a roll-up reads 10,000).
_STATES = {state.value: state for state in State}


@cache
def _mark(bits: int) -> SloMark:
    return SloMark(bits)


def watermark(store: SqlStore, row: Sequence[Any] | None) -> Watermark:
    """The watermark from a row of ``history_watermark`` (``finished_at``,
    ``finished_id``, ``throttled_at``; None: no row, nothing rolled up)."""
    if row is None:
        return Watermark()
    finished_at, finished_id, throttled_at = row
    instant = store.rows.instant
    return Watermark(
        finished_at=None if finished_at is None else instant(finished_at),
        finished_id=MIN_ID if finished_id is None else str(finished_id),
        throttled_at=None if throttled_at is None else instant(throttled_at),
    )


def finished_row(store: SqlStore, row: Sequence[Any]) -> tuple[tuple[datetime, str], Finished]:
    """A row of ``history_finished`` as its keyset position and what the roll-up reads."""
    (
        id_,
        updated_at,
        job,
        queue,
        state,
        attempt,
        planned_at,
        first_claimed_at,
        first_finished_at,
        held,
        marks,
    ) = row
    instant = store.rows.instant
    finished_at = instant(updated_at)
    facts = SloFacts(
        state=_STATES[state],
        planned_at=instant(planned_at),
        first_claimed_at=None if first_claimed_at is None else instant(first_claimed_at),
        first_finished_at=None if first_finished_at is None else instant(first_finished_at),
        held=store.rows.duration(held),
        marks=_mark(int(marks)),
    )
    return (finished_at, str(id_)), Finished(
        job=job, queue=queue, attempt=int(attempt), finished_at=finished_at, facts=facts
    )


def roll_up_plan(store: SqlStore, max_rows: int, *, wait: bool) -> Plan[RollUp]:
    """:meth:`~fencepost.store.history.HistoryVerbs.roll_up_history` as one transaction."""

    def steps() -> Steps[RollUp]:
        block = "history_watermark" if wait else "history_watermark_nowait"
        held = yield Statement(store._q(block), None, "one")
        if held is None:
            there = yield Statement(store._q("history_read_watermark"), None, "one")
            if there is not None:  # another transaction holds it (nowait): read nothing
                mark = watermark(store, there)
                return RollUp(executions=0, rolled_up_to=mark.rolled_up_to, caught_up=False)
            # Gone (its table emptied by hand): made again as the migration made it,
            # then held (a roll-up making it at the same time waits, then finds it).
            yield Statement(store._q("history_make_watermark"))
            held = yield Statement(store._q("history_watermark"), None, "one")
        now = yield from store._now_steps()
        reading = roll_up_range(watermark(store, held), now)
        found = yield Statement(
            store._q("history_finished"),
            {
                "after_at": store._t(reading.after_at),
                "after_id": reading.after_id,
                "until": store._t(reading.until),
                "limit": max_rows,
            },
            "all",
        )
        rows = [finished_row(store, r) for r in found]
        mark, caught_up = advanced(reading, rows[-1][0] if rows else None, len(rows) == max_rows)
        assert mark.finished_at is not None  # advanced() sets both
        assert mark.throttled_at is not None
        throttled = []
        if mark.throttled_at > reading.throttles_from:
            throttled = yield Statement(
                store._q("history_throttled"),
                {"since": store._t(reading.throttles_from), "until": store._t(mark.throttled_at)},
                "all",
            )
        added = increments(
            (row for _, row in rows),
            (
                ThrottledMinute(
                    minute=int(minute), job=job, queue=queue, held=store.rows.duration(held)
                )
                for minute, job, queue, held in throttled
            ),
        )
        if added:
            yield Statement(
                store._q("history_add"),
                [
                    dict(zip(COLUMNS, counters, strict=True))
                    | {"span_minutes": length, "minute": minute, "job": job, "queue": queue}
                    for (length, minute, job, queue), counters in spread(added).items()
                ],
                "many",
            )
        yield Statement(
            store._q("history_advance"),
            {
                "finished_at": store._t(mark.finished_at),
                "finished_id": mark.finished_id,
                "throttled_at": store._t(mark.throttled_at),
            },
        )
        return RollUp(executions=len(rows), rolled_up_to=mark.rolled_up_to, caught_up=caught_up)

    return Plan(steps())


def read_watermark(store: SqlStore) -> Steps[Watermark]:
    """The watermark as committed (a plain read: no lock, no wait)."""
    row = yield Statement(store._q("history_read_watermark"), None, "one")
    return watermark(store, row)


def _range(window: Window, now: datetime) -> dict[str, Any]:
    """The minute numbers ``[first, last)`` of ``window`` at ``now``, and per step."""
    start, end = span(window, now)
    return {
        "first": minute_number(start),
        "last": minute_number(end),
        "per_point": WINDOWS[window].minutes,
    }


def sums_plan(
    store: SqlStore, window: Window, job: str | None, queue: str | None
) -> Plan[tuple[datetime, datetime | None, dict[int, Totals]]]:
    """:meth:`~fencepost.store.history.HistoryVerbs._history_sums` as reads."""

    def steps() -> Steps[tuple[datetime, datetime | None, dict[int, Totals]]]:
        now = yield from store._now_steps()
        mark = yield from read_watermark(store)
        block = _POINTS_BLOCKS[job is not None, queue is not None]
        params = _range(window, now) | {"job": job, "queue": queue}
        found = yield Statement(store._q(block), params, "all")
        return now, mark.rolled_up_to, {int(row[0]): Totals.of(row[1:]) for row in found}

    return Plan(steps(), atomic=False)


def summary_plan(
    store: SqlStore, window: Window, by: SummaryBy
) -> Plan[tuple[datetime, datetime | None, dict[str, Totals]]]:
    """:meth:`~fencepost.store.history.HistoryVerbs._summary_sums` as reads."""

    def steps() -> Steps[tuple[datetime, datetime | None, dict[str, Totals]]]:
        now = yield from store._now_steps()
        mark = yield from read_watermark(store)
        found = yield Statement(store._q(_SUMMARY_BLOCKS[by]), _range(window, now), "all")
        return now, mark.rolled_up_to, {str(row[0]): Totals.of(row[1:]) for row in found}

    return Plan(steps(), atomic=False)


def prune_plan(store: SqlStore, before: int) -> Plan[None]:
    """Delete the minute rows of minutes ``< before`` (one statement)."""

    def steps() -> Steps[None]:
        yield Statement(store._q("history_prune"), {"spans": store._array(SPANS), "before": before})

    return Plan(steps(), atomic=False)


# -- whole verbs as plans, for AsyncStore on PostgreSQL ------------------------------------


def history_plan(store: SqlStore, options: Mapping[str, Any]) -> Plan[History]:
    """:meth:`~fencepost.store.history.HistoryVerbs.history` as reads (its options checked
    here, as the verb checks them)."""
    chosen, job_name, queue_name = history_arguments(options)
    job, queue = options.get("job"), options.get("queue")
    sums = sums_plan(store, chosen, job_name, queue_name)

    def steps() -> Steps[History]:
        now, rolled_up_to, found = yield from sums.steps
        return history(chosen, now, job, queue, rolled_up_to, found)

    return Plan(steps(), atomic=False)


def history_summary_plan(store: SqlStore, window: object, by: object) -> Plan[HistorySummary]:
    """:meth:`~fencepost.store.history.HistoryVerbs.history_summary` as reads."""
    chosen, grouped = require_window(window), require_by(by)
    sums = summary_plan(store, chosen, grouped)

    def steps() -> Steps[HistorySummary]:
        now, rolled_up_to, found = yield from sums.steps
        return summary(chosen, grouped, now, rolled_up_to, found)

    return Plan(steps(), atomic=False)

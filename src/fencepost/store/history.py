"""The store contract, history for charts: rolling finished executions up into minute
rows, and reading a window of them (see :mod:`fencepost.domain.history`).

The roll-up is written once here as pure steps every backend follows:
:func:`roll_up_range` says what one roll-up transaction reads from the watermark it
holds, :func:`advanced` where the watermark goes afterwards. A backend reads the
rows, adds :func:`fencepost.domain.history.increments` to its minute rows and moves
its watermark in one transaction (SQL: :mod:`fencepost.store.sqlhistory`).
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, Unpack

from fencepost.domain.checks import require_int, storable
from fencepost.domain.errors import ValidationError
from fencepost.domain.filters import checked
from fencepost.domain.history import (
    COLUMNS,
    GRACE,
    MAX_ROLL_UP_ROWS,
    RETENTION,
    ROLL_UP_ROWS,
    WINDOWS,
    Finished,
    History,
    HistoryOptions,
    HistorySummary,
    Key,
    RollUp,
    RowKey,
    SummaryBy,
    ThrottledMinute,
    Totals,
    Window,
    history,
    increments,
    minute_number,
    require_by,
    require_filter,
    require_window,
    span,
    spread,
    summary,
)
from fencepost.store.core import StoreCore

#: The keyset id below every execution id (UUIDv7 ids never have all bits zero): a
#: watermark at ``(t, MIN_ID)`` has read nothing that finished at ``t``.
MIN_ID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True, kw_only=True, slots=True)
class Watermark:
    """How far the roll-up has read (one per store).

    Finished executions are read in ``(updated_at, id)`` order: every one up to
    ``(finished_at, finished_id)`` included is rolled up. Throttle records are read
    by ``at``: those before ``throttled_at`` are. None: nothing read yet.
    """

    finished_at: datetime | None = None
    finished_id: str = MIN_ID
    throttled_at: datetime | None = None

    @property
    def rolled_up_to(self) -> datetime | None:
        """What every finish and throttle record before is counted: the lower of both."""
        if self.finished_at is None or self.throttled_at is None:
            return None
        return min(self.finished_at, self.throttled_at)


@dataclass(frozen=True, kw_only=True, slots=True)
class RollUpRange:
    """What one roll-up reads at ``now`` from a watermark.

    Finished executions (SUCCEEDED, FAILED, CANCELLED, SKIPPED) with ``(updated_at,
    id) > (after_at, after_id)`` and ``updated_at < until``, in that order, at most
    the roll-up's ``max_rows``; then throttle records with ``throttles_from <= at``
    up to where the finished rows it read took the watermark (:func:`advanced`).
    """

    after_at: datetime
    after_id: str
    until: datetime
    throttles_from: datetime


def roll_up_range(mark: Watermark, now: datetime) -> RollUpRange:
    """The range of one roll-up at the store's ``now``.

    It ends :data:`~fencepost.domain.history.GRACE` before ``now`` (a row stamped
    earlier and committed within the grace is still read) and starts at the
    watermark, or :data:`~fencepost.domain.history.RETENTION` before ``now`` if that
    is later (older minute rows would be pruned at once). A clock that went back
    gives an empty range, never one behind the watermark.
    """
    oldest = now - RETENTION
    after_at, after_id = (
        (oldest, MIN_ID)
        if mark.finished_at is None or mark.finished_at < oldest
        else (mark.finished_at, mark.finished_id)
    )
    return RollUpRange(
        after_at=after_at,
        after_id=after_id,
        until=max(now - GRACE, after_at),
        throttles_from=max(mark.throttled_at or oldest, oldest),
    )


def advanced(
    reading: RollUpRange, last: tuple[datetime, str] | None, full: bool
) -> tuple[Watermark, bool]:
    """The watermark after a roll-up of ``reading`` whose finished rows ended at ``last``
    (the last one's ``(updated_at, id)``, None if it read none), and whether it caught
    up.

    A ``full`` read (``max_rows`` rows) stops at its last row; a short one read
    everything before ``until``, so the watermark moves to ``(until, MIN_ID)``.
    Throttle records are read up to the same instant (so a roll-up reads about as
    many of them as of finished rows): ``throttled_at`` moves there, and the caller
    reads the records in ``[throttles_from, throttled_at)``.
    """
    if full:
        assert last is not None
        finished_at, finished_id = last
    else:
        # Never behind where it started (a clock that went back reads an empty range).
        finished_at, finished_id = max(
            (reading.until, MIN_ID), (reading.after_at, reading.after_id)
        )
    mark = Watermark(
        finished_at=finished_at,
        finished_id=finished_id,
        throttled_at=max(reading.throttles_from, finished_at),
    )
    return mark, not full


def name_filter(value: object, field: str) -> str | None:
    """A ``job`` or ``queue`` filter: None (all), or a string. Text no backend can store
    (U+0000, a lone surrogate) names nothing: ``""`` stands for it, which no job or
    queue is (both are non-blank names)."""
    name = require_filter(value, field)
    return name if name is None or storable(name) else ""


def roll_up_arguments(max_rows: object, wait: object) -> tuple[int, bool]:
    """:meth:`HistoryVerbs.roll_up_history`'s arguments, checked."""
    rows = require_int(max_rows, "max_rows", low=1, high=MAX_ROLL_UP_ROWS)
    if not isinstance(wait, bool):
        raise ValidationError("wait", f"must be True or False, got {wait!r}")
    return rows, wait


def history_arguments(options: Mapping[str, Any]) -> tuple[Window, str | None, str | None]:
    """:meth:`HistoryVerbs.history`'s options (:class:`HistoryOptions`), checked: the
    window (default the last hour), and the job and queue filters to read by (see
    :func:`name_filter`)."""
    checked(options, HistoryOptions, "history")
    return (
        require_window(options.get("window", Window.HOUR)),
        name_filter(options.get("job"), "job"),
        name_filter(options.get("queue"), "queue"),
    )


class RollsUp(Protocol):
    """What rolling up needs of a store: :meth:`HistoryVerbs.roll_up_history`."""

    def roll_up_history(self, *, max_rows: int = ..., wait: bool = ...) -> RollUp: ...


#: The longest pause between two roll-up batches of one pass (seconds): as long as
#: the batch took, so that SQLite's writers waiting for the lock get it in between.
BATCH_PAUSE_CAP = 0.1


def roll_up_all(
    store: RollsUp,
    *,
    max_rows: int = ROLL_UP_ROWS,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
) -> RollUp | None:
    """Roll up batch after batch until caught up; the last batch's :class:`RollUp`
    (None if none ran).

    Each batch is its own transaction of at most ``max_rows``, and it does not wait
    for a roll-up another process has under way: finding one ends the pass (that
    one reads what is left). ``max_batches`` bounds the pass; ``stop`` ends it
    between batches.
    """
    done: RollUp | None = None
    batches = 0
    while (stop is None or not stop.is_set()) and (max_batches is None or batches < max_batches):
        started = time.monotonic()
        done = store.roll_up_history(max_rows=max_rows, wait=False)
        batches += 1
        if done.caught_up or not done.executions:
            break
        time.sleep(min(BATCH_PAUSE_CAP, time.monotonic() - started))
    return done


class HistoryVerbs(StoreCore):
    """Verbs of :class:`~fencepost.store.base.Store` for the history charts."""

    def roll_up_history(self, *, max_rows: int = ROLL_UP_ROWS, wait: bool = True) -> RollUp:
        """Add what finished since the last roll-up to the minute rows, in one transaction.

        Reads the executions in a terminal state (SUCCEEDED, FAILED, CANCELLED,
        SKIPPED) whose ``updated_at`` lies in ``[watermark, now - GRACE)``, in
        ``(updated_at, id)`` order, at most ``max_rows`` of them, and the throttle
        records whose ``at`` lies in the range those rows cover; adds what
        each adds (:func:`fencepost.domain.history.increments`) to the minute rows (and
        to their quarter hour's and hour's rows: :func:`~fencepost.domain.history.spread`)
        and moves the watermark past them, in the same transaction. Two roll-ups at
        once (threads, processes) never read the same row twice: one waits for the
        other's transaction, or with ``wait=False`` returns at once having read
        nothing (``executions`` 0, ``caught_up`` False; SQLite still waits for its
        write lock, as every write does).

        ``now`` is the store's; ``GRACE`` (60 s) lets a transaction that stamped a
        row before it committed still be counted if it commits within the grace.
        Executions that finished more than ``RETENTION`` (8 days) before ``now``
        are not read. What is not counted: a finish committed more than the grace
        after its ``updated_at``; an execution deleted (or pruned within the grace)
        before a roll-up read it; a dead letter replayed before a roll-up read its
        first finish (its first claim is then never counted).

        ``1 <= max_rows <= 100000``, ``wait`` a bool; else :class:`ValidationError`.
        """
        rows, waits = roll_up_arguments(max_rows, wait)
        return self._roll_up_history(rows, wait=waits)

    @abstractmethod
    def _roll_up_history(self, max_rows: int, *, wait: bool) -> RollUp:
        """One roll-up with checked arguments, in one transaction holding the watermark:
        :func:`roll_up_range` from it at the store's now, the rows read and added,
        :func:`advanced` stored."""

    def history(self, **options: Unpack[HistoryOptions]) -> History:
        """A chart of the minute rows over ``window`` at the store's now: one point per step
        (hour: 60 of 60 s; day: 96 of 900 s; week: 168 of 3600 s), oldest first, the last
        one holding now, every step present (zeros where nothing happened).

        Each point sums the minute rows of its step (one ``GROUP BY`` over the window's
        minutes), only ``job``'s and/or ``queue``'s when given (exact names; a name no
        execution has gives zeros), and derives the lateness percentiles and burn rates
        from the sums (:func:`fencepost.domain.history.point`). Reads what the roll-up
        has added (``rolled_up_to``); it rolls nothing up itself.

        ``window`` is ``"hour"``, ``"day"`` or ``"week"`` (or a
        :class:`~fencepost.domain.history.Window`), ``job`` and ``queue`` strings or
        None; else :class:`ValidationError` naming the argument.
        """
        chosen, job_name, queue_name = history_arguments(options)
        now, rolled_up_to, sums = self._history_sums(chosen, job_name, queue_name)
        return history(chosen, now, options.get("job"), options.get("queue"), rolled_up_to, sums)

    @abstractmethod
    def _history_sums(
        self, window: Window, job: str | None, queue: str | None
    ) -> tuple[datetime, datetime | None, dict[int, Totals]]:
        """At one store now: that now, the watermark's ``rolled_up_to``, and the minute
        rows of :func:`~fencepost.domain.history.span` summed per step (by index from
        its start; steps with no row left out)."""

    def history_summary(
        self, *, window: Window | str = Window.HOUR, by: SummaryBy | str = SummaryBy.JOB
    ) -> HistorySummary:
        """The minute rows over ``window`` (the same span as :meth:`history`'s) summed per
        job or per queue (``by``), by name; names with no row in the window left out.

        ``window`` as for :meth:`history`; ``by`` is ``"job"`` or ``"queue"``; else
        :class:`ValidationError` naming the argument.
        """
        chosen, grouped = require_window(window), require_by(by)
        now, rolled_up_to, sums = self._summary_sums(chosen, grouped)
        return summary(chosen, grouped, now, rolled_up_to, sums)

    @abstractmethod
    def _summary_sums(
        self, window: Window, by: SummaryBy
    ) -> tuple[datetime, datetime | None, dict[str, Totals]]:
        """As :meth:`_history_sums`, summed per job or queue name."""

    # -- with prune -------------------------------------------------------------------

    def _roll_up_before_prune(self, cutoff: datetime) -> None:
        """Roll up until everything that finished at or before ``cutoff`` is counted (or
        the roll-up caught up), so that prune deletes no execution it has not read."""
        while True:
            done = self.roll_up_history(max_rows=ROLL_UP_ROWS)
            if done.caught_up or (done.rolled_up_to is not None and done.rolled_up_to > cutoff):
                return

    def _prune_history_rows(self, now: datetime) -> None:
        """Delete the minute rows older than :data:`~fencepost.domain.history.RETENTION`."""
        self._prune_history(minute_number(now - RETENTION))

    @abstractmethod
    def _prune_history(self, before: int) -> None:
        """Delete the minute rows of minutes ``< before``."""


def summed(rows: Iterable[Sequence[int]]) -> list[int]:
    """Minute rows' counters added up column by column."""
    out = [0] * len(COLUMNS)
    for row in rows:
        for i, n in enumerate(row):
            out[i] += n
    return out


class MinuteRows:
    """The memory store's rows and watermark: the reference model of the SQL stores'
    ``history_minutes`` (a row per span, minute, job and queue: see
    :data:`~fencepost.domain.history.SPANS`) and ``history_watermark`` (its caller
    holds a lock)."""

    def __init__(self) -> None:
        self.rows: dict[RowKey, list[int]] = {}
        self.mark = Watermark()

    def range(self, now: datetime) -> RollUpRange:
        """What a roll-up at ``now`` reads (:func:`roll_up_range`)."""
        return roll_up_range(self.mark, now)

    def roll_up(
        self,
        reading: RollUpRange,
        finished: Iterable[tuple[str, Finished]],
        throttles: Iterable[tuple[datetime, timedelta, str, str]],
        max_rows: int,
    ) -> RollUp:
        """Roll up ``reading`` from every terminal execution (``finished``: by id) and every
        throttle record (``(at, held, job, queue)``; those of executions gone left out
        by the caller), as the SQL stores do."""
        after = (reading.after_at, reading.after_id)
        chosen = sorted(
            ((row.finished_at, id_), row)
            for id_, row in finished
            if (row.finished_at, id_) > after and row.finished_at < reading.until
        )[:max_rows]
        last = chosen[-1][0] if chosen else None
        self.mark, caught_up = advanced(reading, last, len(chosen) == max_rows)
        through = self.mark.throttled_at
        assert through is not None  # advanced() always sets it
        held: dict[Key, timedelta] = {}
        for at, amount, job, queue in throttles:
            if reading.throttles_from <= at < through:
                minute = (minute_number(at), job, queue)
                held[minute] = held.get(minute, timedelta(0)) + amount
        added = increments(
            [row for _, row in chosen],
            [ThrottledMinute(minute=m, job=j, queue=q, held=h) for (m, j, q), h in held.items()],
        )
        for key, counters in spread(added).items():
            into = self.rows.setdefault(key, [0] * len(COLUMNS))
            for i, n in enumerate(counters):
                into[i] += n
        return RollUp(
            executions=len(chosen), rolled_up_to=self.mark.rolled_up_to, caught_up=caught_up
        )

    def sums(
        self, window: Window, now: datetime, job: str | None, queue: str | None
    ) -> dict[int, Totals]:
        """The rows of ``window`` at ``now`` summed per step (see HistoryVerbs.history)."""
        start, end = span(window, now)
        first, last = minute_number(start), minute_number(end)
        per = WINDOWS[window].minutes
        steps: dict[int, list[Sequence[int]]] = {}
        for (length, minute, j, q), counters in self.rows.items():
            if length != per or not first <= minute < last:
                continue
            if job in (None, j) and queue in (None, q):
                steps.setdefault((minute - first) // per, []).append(counters)
        return {i: Totals.of(summed(rows)) for i, rows in steps.items()}

    def by_name(self, window: Window, now: datetime, by: SummaryBy) -> dict[str, Totals]:
        """The rows of ``window`` at ``now`` summed per job or queue name."""
        start, end = span(window, now)
        first, last = minute_number(start), minute_number(end)
        per = WINDOWS[window].minutes
        names: dict[str, list[Sequence[int]]] = {}
        for (length, minute, job, queue), counters in self.rows.items():
            if length == per and first <= minute < last:
                names.setdefault(job if by is SummaryBy.JOB else queue, []).append(counters)
        return {name: Totals.of(summed(rows)) for name, rows in names.items()}

    def prune(self, before: int) -> None:
        """Forget the rows of minutes ``< before``."""
        self.rows = {key: row for key, row in self.rows.items() if key[1] >= before}

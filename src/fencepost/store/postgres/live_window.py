"""The live days of history, written into the hot statements' SQL on PostgreSQL.

A claim, completion or heartbeat touches only the days that hold a live execution;
:class:`LiveWindow` reads those days and writes them into each hot statement as literal
bounds, so that its plan locks and plans only those partitions (see the class).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import psycopg
from psycopg import sql

from fencepost.domain.ids import id_floor
from fencepost.store.postgres.history import DAY_MS, LIVE_ROWS, day_of, partitions

#: Where the hot statements of queries.sql name the live days: ``<column> >= LIVE_MARK``,
#: a lower bound on the execution id written as the smallest id (true of every row
#: until the store writes the window in, see LiveWindow.text).
LIVE_MARK = "/*live*/'00000000-0000-0000-0000-000000000000'"
_LIVE_BOUND = re.compile(r"([\w.]+) >= " + re.escape(LIVE_MARK))

#: The bounds as LiveWindow.text writes them in (see unbounded).
_WRITTEN_BOUNDS = re.compile(r"([\w.]+) >= '[0-9a-f-]{36}' AND \1 < '[0-9a-f-]{36}'")


def unbounded(text: str) -> str:
    """The block ``text`` was made from by :meth:`LiveWindow.text` (itself, if unbounded):
    what a statement is, whichever window it ran with."""
    return _WRITTEN_BOUNDS.sub(lambda m: f"{m.group(1)} >= {LIVE_MARK}", text)


#: How far ahead of the store's clock the window's upper end reaches at least: an id
#: made by another process whose clock is ahead by less than this is in the window at
#: once (a later one, at the next read).
AHEAD_MARGIN_MS = 60_000


class LiveWindow:
    """The days of history a claim, completion or heartbeat can touch, written into SQL.

    A prepared statement's generic plan over a partitioned table locks every
    partition before it prunes any (PostgreSQL 15), and plans each: with 14 days of
    finished history, a claim took 583 relation locks instead of 107 and ran at a
    third of an empty store's rate. So the hot statements carry their bounds as
    literals (``e.id >= '<id>' AND e.id < '<id>'``), and their plan holds only the
    days from the oldest to the newest with a live (SCHEDULED, RETRY_WAIT, RUNNING)
    execution, and today's: not the finished days, nor the empty days made ahead.

    The bounds are read again every :attr:`REFRESH` seconds, on the connection the
    statement runs on, or, for a plan (the heartbeat), on one of the store's own as the
    plan is made (one catalogue read and one index probe per day of history, in
    one round trip). One read can be late: an execution made live in a day outside
    the window (a replay of an old dead letter; an insert by a process whose clock
    is more than a minute ahead) is claimable once this store's window reads it, at
    most :attr:`REFRESH` seconds later. This store's own inserts widen its window at
    once. A completion or heartbeat for a lease outside the window (claimed by a
    store whose window was wider) runs its statement unbounded: correct, only slower.
    """

    #: Seconds between reads of the live days.
    REFRESH = 5.0

    def __init__(self, queries: dict[str, str]) -> None:
        self._queries = queries
        #: The bounds (ids; lower '' before the first read: every statement
        #: unbounded) and the texts bounded by them, replaced together.
        self._state: tuple[str, str, dict[str, str]] = ("", "", {})
        self._read_at = float("-inf")

    @property
    def bounds(self) -> tuple[str, str]:
        """The smallest id the bounded statements see and the first they do not
        (``''``: no bound)."""
        lower, upper, _ = self._state
        return lower, upper

    def due(self, now: float) -> bool:
        """Whether the bounds should be read again (monotonic seconds ``now``)."""
        return now - self._read_at >= self.REFRESH

    def read(self, conn: psycopg.Connection, now: float, clock_ms: int) -> None:
        """Read the oldest and newest days holding a live execution.

        ``clock_ms`` is this store's clock: the window holds at least its day (and
        the next, within a minute of midnight), where its own inserts go.
        """
        days = partitions(conn, attached=True)
        lower_ms = clock_ms // DAY_MS * DAY_MS
        upper_ms = ((clock_ms + AHEAD_MARGIN_MS) // DAY_MS + 1) * DAY_MS
        lower, upper = id_floor(lower_ms), id_floor(upper_ms)
        if days:
            probes = sql.SQL(" UNION ALL ").join(
                sql.SQL(
                    f"SELECT {{}} AS n WHERE EXISTS (SELECT 1 FROM {{}} WHERE {LIVE_ROWS})"
                ).format(sql.Literal(n), sql.Identifier(p.name))
                for n, p in enumerate(days)
            )
            try:
                # A day locked by DDL (a prune dropping it) is not waited for: the
                # window stays as it was until the next read.
                # (The setting is put back: inside a caller's transaction this is a
                # savepoint, and a local setting would outlive it.)
                with conn.transaction():
                    was = conn.execute(
                        "SELECT current_setting('lock_timeout'),"
                        " set_config('lock_timeout', '100ms', true)"
                    ).fetchone()
                    query = sql.SQL("SELECT min(n), max(n) FROM ({}) AS live").format(probes)
                    row = conn.execute(query).fetchone()
                    if was is not None:
                        conn.execute("SELECT set_config('lock_timeout', %s, true)", (was[0],))
            except psycopg.errors.LockNotAvailable:
                self._read_at = now
                return
            if row is not None and row[0] is not None:
                oldest, newest = days[row[0]], days[row[1]]
                if oldest.lower_ms is None:
                    lower = ""
                elif oldest.lower_ms < lower_ms:
                    lower = id_floor(oldest.lower_ms)
                if newest.upper_ms is None:
                    lower = ""  # a partition open above (made by hand): no bounds
                elif newest.upper_ms > upper_ms:
                    upper = id_floor(newest.upper_ms)
        self._read_at = now
        if (lower, upper) != self.bounds:
            self._state = (lower, upper, {})

    def widen(self, ids: Sequence[str]) -> None:
        """Take these ids (about to be inserted by this store) into the window."""
        lower, upper, _ = self._state
        if not lower or not ids:
            return
        lowest, highest = min(ids), max(ids)
        if lowest >= lower and highest < upper:
            return
        if lowest < lower:
            lower = id_floor(day_of(lowest) * DAY_MS)
        if highest >= upper:
            upper = id_floor((day_of(highest) + 1) * DAY_MS)
        self._state = (lower, upper, {})

    def text(self, block: str, ids: Sequence[str] = ()) -> str:
        """``block``'s text bounded by the window; unbounded if one of ``ids`` is outside it."""
        lower, upper, texts = self._state
        if not lower or any(i < lower or i >= upper for i in ids):
            return self._queries[block]
        found = texts.get(block)
        if found is None:
            bounded = rf"\1 >= '{lower}' AND \1 < '{upper}'"
            found = texts[block] = _LIVE_BOUND.sub(bounded, self._queries[block])
        return found

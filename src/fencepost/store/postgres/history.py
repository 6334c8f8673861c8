"""The history's partitions on PostgreSQL: one per UTC day, made ahead of the rows.

Executions, their payloads and their audit trail are partitioned by RANGE of the
execution id (migration 10). Ids are UUIDv7: the first 48 bits are the creation
time in milliseconds, so ``[id_floor(day start), id_floor(next day start))`` is every
execution created that day. This module names those partitions, creates them
before a row needs one, and lists them for prune, which drops whole days (and
settles the days a prune stopped midway left detached: see settle_leftovers).

A partition is made as a plain table and then attached: ``CREATE TABLE ... PARTITION
OF`` would lock the parent against every claim while it waits for its lock, where
``ATTACH PARTITION`` takes a lock that reads and writes do not conflict with.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from fencepost.domain.ids import id_floor, id_ms
from fencepost.store.postgres.connection import QUERIES

DAY_MS = 86_400_000

#: The partitioned tables and the column each is partitioned by. Executions first:
#: it is the one prune reads to decide.
TABLES = (("executions", "id"), ("execution_data", "execution_id"), ("transitions", "execution_id"))

#: Storage settings of every executions partition (a partitioned table holds none):
#: the churn settings of migration 1.
EXECUTIONS_STORAGE = (
    "fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01, "
    "autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02, "
    "autovacuum_vacuum_cost_delay = 1"
)

#: Days made ahead of the newest row inserted, so that a day's first insert finds
#: its partition made (the DDL waits for its lock; an insert should not).
AHEAD_DAYS = 2

_BOUND = re.compile(r"FROM \((MINVALUE|'[0-9a-f-]+')\) TO \((MAXVALUE|'[0-9a-f-]+')\)")

#: One advisory lock for partition changes, so that two stores making the same day
#: do not both try (the key is arbitrary, fixed, fencepost's own).
_PARTITION_LOCK = 0x6670_6869_7374  # "fphist"


def day_of(execution_id: str) -> int:
    """The UTC day (days since the epoch) an execution id was made on."""
    return id_ms(execution_id) // DAY_MS


def day_date(day: int) -> date:
    """A day number as a date."""
    return date(1970, 1, 1) + timedelta(days=day)


def partition_name(table: str, day: int) -> str:
    """``executions_p20261203``: the table's partition for ``day``."""
    return f"{table}_p{day_date(day):%Y%m%d}"


def _ms(bound: str) -> int | None:
    if bound in ("MINVALUE", "MAXVALUE"):
        return None
    return id_ms(bound.strip("'"))


@dataclass(frozen=True)
class Partition:
    """One partition of the executions: its name and the creation times it holds."""

    name: str
    #: Milliseconds since the epoch; None: unbounded (the first partition from migration 10).
    lower_ms: int | None
    upper_ms: int | None

    @property
    def upper(self) -> datetime | None:
        """When the last execution it can hold was created (its upper bound)."""
        if self.upper_ms is None:
            return None
        return datetime.fromtimestamp(self.upper_ms / 1000, UTC)

    def covers(self, day: int) -> bool:
        """Whether every id of ``day`` falls in this partition."""
        lower_ok = self.lower_ms is None or self.lower_ms <= day * DAY_MS
        upper_ok = self.upper_ms is None or self.upper_ms >= (day + 1) * DAY_MS
        return lower_ok and upper_ok


def partitions(
    conn: psycopg.Connection, table: str = "executions", *, attached: bool = False
) -> list[Partition]:
    """The table's partitions, oldest first (``attached``: not those being detached).

    Read from the catalogue alone: no partition is locked (a bound has no column to
    name, so ``pg_get_expr`` is not given the relation to open).
    """
    found = conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, 0) FROM pg_inherits AS i "
        "JOIN pg_class AS c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass"
        + (" AND NOT i.inhdetachpending" if attached else ""),
        (table,),
    ).fetchall()
    out = []
    for name, bound in found:
        match = _BOUND.search(bound or "")
        if match is None:  # a DEFAULT partition: none is ever made
            continue
        out.append(Partition(str(name), _ms(match.group(1)), _ms(match.group(2))))
    return sorted(out, key=lambda p: -1 if p.lower_ms is None else p.lower_ms)


class DayPartitions:
    """The days a store knows to have partitions, and the making of missing ones.

    ``cover`` runs before every insert of new executions: a set lookup when the
    ids' days are known, DDL (once per day per process) when one is not.
    """

    def __init__(self, connect: object) -> None:
        #: A context manager factory giving an autocommit connection.
        self._connect = connect
        self._known: set[int] = set()
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Read the partitions again at the next insert (after prune dropped some)."""
        with self._lock:
            self._known.clear()

    def cover(self, ids: Iterable[str]) -> None:
        """Make sure a partition holds each of these ids' days, and the days ahead."""
        days = {day_of(i) for i in ids}
        if not days or days <= self._known:
            return
        wanted = days | set(range(max(days) + 1, max(days) + 1 + AHEAD_DAYS))
        with self._lock:
            if wanted <= self._known:
                return
            with self._connect() as conn:  # type: ignore[operator]
                self._known |= ensure(conn, wanted)

    def cover_days(self, days: Iterable[int]) -> None:
        """As :meth:`cover`, for days rather than ids (a store opening: today and ahead)."""
        self.cover(id_floor(d * DAY_MS) for d in days)


def ensure(conn: psycopg.Connection, days: set[int]) -> set[int]:
    """Create (and attach) a partition of each table for every day not yet covered.

    Returns the days covered now. ``conn`` is in autocommit mode; each day is made
    in its own transaction, under an advisory lock that another store making the
    same day waits for.
    """
    covered: set[int] = set()
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_PARTITION_LOCK,))
        existing = partitions(conn)
        missing = sorted(d for d in days if not any(p.covers(d) for p in existing))
        covered |= days - set(missing)
        for day in missing:
            if any(_overlaps(p, day) for p in existing):
                # Half covered (a first partition ending mid-day, made by hand): rows of
                # that day go where they fit; this day gets no partition of its own, and
                # is not asked for again on every insert.
                covered.add(day)
                continue
            for table, _column in TABLES:
                _make(conn, table, day)
            covered.add(day)
    return covered


def _overlaps(p: Partition, day: int) -> bool:
    start, end = day * DAY_MS, (day + 1) * DAY_MS
    return (p.lower_ms is None or p.lower_ms < end) and (p.upper_ms is None or p.upper_ms > start)


def _make(conn: psycopg.Connection, table: str, day: int) -> None:
    name = partition_name(table, day)
    storage = sql.SQL(f" WITH ({EXECUTIONS_STORAGE})" if table == "executions" else "")
    conn.execute(
        sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS){}").format(
            sql.Identifier(name), sql.Identifier(table), storage
        )
    )
    conn.execute(
        sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
            sql.Identifier(table),
            sql.Identifier(name),
            sql.Literal(id_floor(day * DAY_MS)),
            sql.Literal(id_floor((day + 1) * DAY_MS)),
        )
    )
    # The indexes ATTACH made are named by PostgreSQL; name them after their
    # parent's as migration 10 named the first partition's (executions_p0_claimable).
    children = conn.execute(
        "SELECT c.relname, p.relname FROM pg_index AS x "
        "JOIN pg_class AS c ON c.oid = x.indexrelid "
        "JOIN pg_inherits AS i ON i.inhrelid = x.indexrelid "
        "JOIN pg_class AS p ON p.oid = i.inhparent "
        "WHERE x.indrelid = %s::regclass",
        (name,),
    ).fetchall()
    for child, parent in children:
        wanted = name + str(parent)[len(table) :]
        if child != wanted:
            conn.execute(
                sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                    sql.Identifier(str(child)), sql.Identifier(wanted)
                )
            )
    if table == "executions":
        # The claim's plan over version-pinned rows needs these (migration 8), and
        # a partition's plan reads the partition's own statistics.
        conn.execute(
            sql.SQL("CREATE STATISTICS {} ON ((job || ':') || job_version) FROM {}").format(
                sql.Identifier(f"{name}_version_key"), sql.Identifier(name)
            )
        )


# -- retention ------------------------------------------------------------------------

#: The condition a live (not yet finished) execution's row meets.
LIVE_ROWS = "state IN ('RETRY_WAIT', 'RUNNING', 'SCHEDULED')"
_FINISHED = "state IN ('CANCELLED', 'FAILED', 'SKIPPED', 'SUCCEEDED')"


def sibling(partition: str, table: str) -> str:
    """The partition of ``table`` for the same days as the executions' ``partition``."""
    return table + partition[len("executions") :]


def all_prunable(conn: psycopg.Connection, name: str, cutoff: datetime) -> bool:
    """Whether every execution in partition ``name`` finished at or before ``cutoff``.

    Two index reads: one live row (executions_active_bucket) is enough to keep the
    day, and the newest finished one (executions_finished) must be old enough.
    """
    table = sql.Identifier(name)
    live = conn.execute(sql.SQL(f"SELECT 1 FROM {{}} WHERE {LIVE_ROWS} LIMIT 1").format(table))
    if live.fetchone() is not None:
        return False
    newest = conn.execute(
        sql.SQL(f"SELECT max(updated_at) FROM {{}} WHERE {_FINISHED}").format(table)
    ).fetchone()
    return newest is None or newest[0] is None or newest[0] <= cutoff


def drop_finished_days(
    connect: object,
    cutoff: datetime,
    *,
    concurrently: bool = True,
    on_drop: object = None,
    rollup: Mapping[str, Any],
) -> int:
    """Drop every whole partition of history older than ``cutoff``; return its row count.

    A partition goes when every execution in it finished at or before ``cutoff``
    and it ends (by creation time) before ``cutoff``. It is detached first (each of
    the three tables, ``CONCURRENTLY`` unless behind a transaction pooler, so that
    claims and completions never wait), checked again once detached (a replay may
    have revived an execution in it meanwhile: such a day is attached back), marked
    as being dropped (:data:`DROPPING`), and only then are its idempotency keys and
    commands deleted and its tables dropped: its executions in one transaction with
    the verdicts of its counted executions added to the SLO's rollups (``roll_up_day``
    in queries.sql, with the parameters ``rollup``: the store's now and the default
    objectives). ``on_drop(rows)`` is called after each day dropped.

    First it finishes what an interrupted prune left: a detach under way
    (``DETACH ... FINALIZE``), then every day whose tables it left detached but not
    dropped (see :func:`settle_leftovers`). Prunes of one store run one at a time
    (as ``fencepost prune`` from one cron entry does): a second prune running beside
    a first takes the first's day in hand for a leftover.
    """
    dropped = 0
    cutoff_ms = int(cutoff.timestamp() * 1000)

    def counted(rows: int) -> None:
        nonlocal dropped
        dropped += rows
        if callable(on_drop):
            on_drop(rows)

    with connect() as conn:  # type: ignore[operator]
        _finalize_pending(conn)
        settle_leftovers(conn, cutoff, concurrently=concurrently, on_drop=counted, rollup=rollup)
        candidates = [p for p in partitions(conn) if _ends_by(p, cutoff_ms)]
        for p in candidates:
            if not all_prunable(conn, p.name, cutoff):
                continue
            _detach(conn, p, concurrently)
            if not all_prunable(conn, p.name, cutoff):
                _attach(conn, p)
                continue
            counted(_forget_and_drop(conn, p, rollup))
    return dropped


def _ends_by(p: Partition, cutoff_ms: int) -> bool:
    """Whether every execution ``p`` can hold was created before the cutoff."""
    return p.upper_ms is not None and p.upper_ms <= cutoff_ms


# -- what an interrupted prune left ----------------------------------------------------

#: The comment a prune writes on a day's detached executions partition once the day
#: passed its check after the detach, before the first of its keys is deleted: from
#: then on the day is as good as gone, and a later prune finishes dropping it.
DROPPING = "fencepost: prune is dropping this day"

#: The names of the partitions of TABLES: ``_p`` and a UTC date (:func:`partition_name`),
#: or ``_p0`` (the first partition, made by migration 10).
_PARTITION_NAME = re.compile(r"(executions|execution_data|transitions)(_p0|_p[0-9]{8})")


@dataclass(frozen=True)
class Leftover:
    """A day of history a prune left detached (wholly or in part) when it was stopped."""

    #: The executions partition's name and bounds (from a still attached sibling, else
    #: from the name; ``_p0`` without one: open below, up to the day after its newest row).
    partition: Partition
    #: The tables (of TABLES) whose partition of the day is attached to its parent.
    attached: frozenset[str]
    #: Those whose partition of the day is a plain table; the rest have none (dropped).
    detached: frozenset[str]
    #: The prune had decided to drop the day (:data:`DROPPING`).
    dropping: bool


def leftovers(conn: psycopg.Connection) -> list[Leftover]:
    """The days of history whose partition of one of TABLES exists but is attached to
    no parent, oldest first: what a prune stopped between detaching and dropping left.

    Looked for among the tables of this store's schema (the one ``executions`` is
    in), named as the partitions are. Read from the catalogue alone.
    """
    found = conn.execute(
        "SELECT c.relname, EXISTS (SELECT 1 FROM pg_inherits AS i WHERE i.inhrelid = c.oid),"
        " coalesce(obj_description(c.oid, 'pg_class') = %s, false)"
        " FROM pg_class AS c WHERE c.relkind = 'r'"
        " AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = %s::regclass)"
        " AND c.relname ~ '^(executions|execution_data|transitions)_p[0-9]+$'",
        (DROPPING, "executions"),
    ).fetchall()
    days: dict[str, dict[str, tuple[bool, bool]]] = {}
    for name, attached, marked in found:
        match = _PARTITION_NAME.fullmatch(str(name))
        if match is not None:
            days.setdefault(match.group(2), {})[match.group(1)] = (bool(attached), bool(marked))
    out = []
    for suffix, tables in days.items():
        detached = frozenset(t for t, (attached, _) in tables.items() if not attached)
        if not detached:
            continue
        attached = frozenset(tables) - detached
        bounds = _leftover_bounds(conn, suffix, attached, detached)
        if bounds is None:  # _p and eight digits, but no date: not a name fencepost made
            continue
        dropping = tables.get("executions", (True, False))[1]
        out.append(Leftover(bounds, attached, detached, dropping))
    return sorted(out, key=lambda left: left.partition.upper_ms or 0)


def _leftover_bounds(
    conn: psycopg.Connection, suffix: str, attached: frozenset[str], detached: frozenset[str]
) -> Partition | None:
    """The bounds the day's partitions had (see :attr:`Leftover.partition`)."""
    name = "executions" + suffix
    for table in _in_order(attached):
        for p in partitions(conn, table):
            if p.name == table + suffix:
                return Partition(name, p.lower_ms, p.upper_ms)
    if suffix != "_p0":
        try:
            day = (datetime.strptime(suffix[2:], "%Y%m%d").date() - date(1970, 1, 1)).days
        except ValueError:
            return None
        return Partition(name, day * DAY_MS, (day + 1) * DAY_MS)
    # Migration 10's first partition, on its own: open below, as it was. Its upper
    # bound was at least the day after its newest row, and the next partition starts
    # at or after it: up to there it overlaps nothing. Empty, it holds nothing (and
    # names no ids, so deletes no keys).
    newest = 0
    for table, column in TABLES:
        if table in detached:
            row = conn.execute(
                sql.SQL("SELECT max({})::text FROM {}").format(
                    sql.Identifier(column), sql.Identifier(table + suffix)
                )
            ).fetchone()
            if row is not None and row[0] is not None:
                newest = max(newest, (day_of(str(row[0])) + 1) * DAY_MS)
    return Partition(name, None, newest)


def settle_leftovers(
    conn: psycopg.Connection,
    cutoff: datetime,
    *,
    concurrently: bool = True,
    on_drop: object = None,
    rollup: Mapping[str, Any],
) -> None:
    """Drop, or attach back, every day an interrupted prune left detached (:func:`leftovers`).

    Until then the day's executions are out of sight while their idempotency keys
    are taken: a submit with one of those keys, and a read or replay of one of those
    executions, is answered "being pruned" (a retryable StoreUnavailable) for as
    long as the day is left so. Each day is settled by where the prune was stopped:

    - marked :data:`DROPPING` (stopped while deleting its keys or commands, or
      dropping its tables): dropped, whatever ``cutoff`` is now, since some of its
      keys may be gone already: attached back, those executions would be stored
      without their keys, and a submit with one would make a second execution;
    - its executions partition detached, not marked (stopped after detaching, before
      its check): dropped if the day would be dropped at ``cutoff`` (it ended before
      ``cutoff`` and every execution in it finished at or before ``cutoff``, read
      from the detached table as :func:`all_prunable` reads any); else attached back,
      and readable again. A later cutoff than the stopped prune's drops what that
      one would have; a revived execution in it (a replay during the detach), or an
      earlier cutoff (a longer ``--older-than`` this time), keeps the day;
    - its executions partition attached, siblings detached (stopped while attaching
      the day back): the siblings are attached back; the day is then judged with the
      other attached days;
    - its executions partition dropped (stopped between dropping its tables, its keys
      and commands deleted before the first): the other tables are dropped.

    The SLO's rollups follow the executions partition: a day's verdicts are added to
    them in the transaction that drops it (see :func:`_forget_and_drop`), so a day
    whose executions partition still exists has added nothing (it is rolled up when
    it is dropped, or never if it is attached back), and one whose executions
    partition is gone has added its verdicts once.

    The siblings still attached of a day that goes are detached first (``CONCURRENTLY``
    as told). ``on_drop(rows)`` is called after each day whose executions were dropped.
    """
    cutoff_ms = int(cutoff.timestamp() * 1000)
    for left in leftovers(conn):
        p = left.partition
        if "executions" in left.attached:
            _attach(conn, p, left.detached)
        elif "executions" not in left.detached:
            _drop(conn, p, left.detached)
        elif left.dropping or (_ends_by(p, cutoff_ms) and all_prunable(conn, p.name, cutoff)):
            _detach(conn, p, concurrently, left.attached)
            rows = _forget_and_drop(conn, p, rollup)
            if callable(on_drop):
                on_drop(rows)
        else:
            _attach(conn, p, left.detached)


def _bounds(p: Partition) -> tuple[sql.Composable, sql.Composable]:
    lower = sql.SQL("MINVALUE") if p.lower_ms is None else sql.Literal(id_floor(p.lower_ms))
    upper = sql.SQL("MAXVALUE") if p.upper_ms is None else sql.Literal(id_floor(p.upper_ms))
    return lower, upper


#: Every one of TABLES, by name.
ALL_TABLES = frozenset(table for table, _column in TABLES)


def _detach(
    conn: psycopg.Connection, p: Partition, concurrently: bool, tables: Iterable[str] = ALL_TABLES
) -> None:
    """Detach the day's partition of each of ``tables`` (in TABLES' order: executions first)."""
    how = sql.SQL(" CONCURRENTLY" if concurrently else "")
    for table in _in_order(tables):
        conn.execute(
            sql.SQL("ALTER TABLE {} DETACH PARTITION {}{}").format(
                sql.Identifier(table), sql.Identifier(sibling(p.name, table)), how
            )
        )


def _attach(conn: psycopg.Connection, p: Partition, tables: Iterable[str] = ALL_TABLES) -> None:
    """Attach the day's partition of each of ``tables`` back (executions first)."""
    lower, upper = _bounds(p)
    for table in _in_order(tables):
        conn.execute(
            sql.SQL("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({}) TO ({})").format(
                sql.Identifier(table), sql.Identifier(sibling(p.name, table)), lower, upper
            )
        )


#: When a day is dropped, its idempotency keys are deleted a slice of this many
#: milliseconds of ids at a time (ids are UUIDv7: a span of ids is a span of time),
#: each slice one statement and its own short transaction: an index range of
#: execution_keys_execution, no lookup by key. Dropping a day of 1,428,571 keyed
#: executions took 3.6 s in all this way (the count and DROP TABLE included), against
#: 8.9 s with its keys deleted in batches of 5,000 joined by key.
KEYS_SLICE_MS = 10 * 60 * 1000


def _in_order(tables: Iterable[str]) -> list[str]:
    wanted = set(tables)
    return [table for table, _column in TABLES if table in wanted]


def _forget_and_drop(conn: psycopg.Connection, p: Partition, rollup: Mapping[str, Any]) -> int:
    """Mark a detached day :data:`DROPPING`, delete its keys and commands, then drop its
    tables (executions first, with its rollups: :func:`_roll_up_and_drop`); its row count.

    The mark comes first: a prune stopped after it leaves a day that the next one
    finishes dropping (see :func:`settle_leftovers`). Keys and commands are found by
    the day's range of ids, through an index (execution_keys_execution,
    commands_execution): what this reads is the day's keys and commands, not its rows.
    """
    conn.execute(
        sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.Identifier(p.name), sql.Literal(DROPPING))
    )
    lower, upper = _id_range(p)
    _forget_keys(conn, lower, upper)
    conn.execute(
        "DELETE FROM commands WHERE execution_id >= %s AND execution_id < %s", (lower, upper)
    )
    rows = _roll_up_and_drop(conn, p, rollup)
    _drop(conn, p, ALL_TABLES - {"executions"})
    return rows


def _roll_up_and_drop(conn: psycopg.Connection, p: Partition, rollup: Mapping[str, Any]) -> int:
    """In one transaction: add the verdicts of the detached day ``p``'s counted executions
    to the SLO's rollups (``roll_up_day``, which counts its rows too) and drop its
    executions partition; its row count.

    One transaction, so that the rollups hold a day's verdicts exactly when its
    executions are gone: a prune stopped before it commits left the day's executions,
    which the next prune rolls up as it drops them (or attaches back); one stopped
    after left nothing of them to roll up again.
    """
    query = sql.SQL(QUERIES["roll_up_day"]).format(day=sql.Identifier(p.name))
    with conn.transaction():
        found = conn.execute(query, dict(rollup)).fetchone()
        _drop(conn, p, ["executions"])
    return int(found[0]) if found else 0


def _drop(conn: psycopg.Connection, p: Partition, tables: Iterable[str]) -> None:
    for table in _in_order(tables):
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(sibling(p.name, table))))


def _forget_keys(conn: psycopg.Connection, lower: str, upper: str) -> None:
    """Delete the keys of executions with ids in [lower, upper), a slice at a time from
    the first key found; slices without keys are skipped by that index probe."""
    while True:
        found = conn.execute(
            # Ordered by the column, not by its text (the output's name), to walk the index.
            "SELECT k.execution_id::text AS first FROM execution_keys AS k"
            " WHERE k.execution_id >= %s AND k.execution_id < %s ORDER BY k.execution_id LIMIT 1",
            (lower, upper),
        ).fetchone()
        if found is None:
            return
        first = str(found[0])
        end = min(id_floor(id_ms(first) + KEYS_SLICE_MS), upper)
        conn.execute(
            "DELETE FROM execution_keys WHERE execution_id >= %s AND execution_id < %s",
            (first, end),
        )
        lower = end


def _id_range(p: Partition) -> tuple[str, str]:
    """The ids of ``p``'s days, [lower, upper), as uuid text (the ends for the open ones)."""
    lower = "00000000-0000-0000-0000-000000000000" if p.lower_ms is None else id_floor(p.lower_ms)
    upper = "ffffffff-ffff-ffff-ffff-ffffffffffff" if p.upper_ms is None else id_floor(p.upper_ms)
    return lower, upper


def _finalize_pending(conn: psycopg.Connection) -> None:
    """Finish a DETACH ... CONCURRENTLY an earlier prune was interrupted in."""
    pending = conn.execute(
        "SELECT p.relname, c.relname FROM pg_inherits AS i "
        "JOIN pg_class AS c ON c.oid = i.inhrelid JOIN pg_class AS p ON p.oid = i.inhparent "
        "WHERE i.inhdetachpending AND p.oid = ANY(ARRAY[%s::regclass, %s::regclass, %s::regclass])",
        tuple(table for table, _ in TABLES),
    ).fetchall()
    for parent, child in pending:
        conn.execute(
            sql.SQL("ALTER TABLE {} DETACH PARTITION {} FINALIZE").format(
                sql.Identifier(str(parent)), sql.Identifier(str(child))
            )
        )

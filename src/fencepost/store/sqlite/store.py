"""The SQLite backend: one file, many threads and processes on one machine.

The hot path (submit, claim, heartbeat, complete) runs a handful of statements
per batch inside one ``BEGIN IMMEDIATE`` transaction: set-based ones, or one
``executemany`` of a one-row statement where that measured faster (inserts and
the fenced completion; see ``bench/store_throughput.py``). Everything
else reads the row, lets :func:`fencepost.domain.machine.apply` decide, and
writes the change back guarded by the state and epoch it was decided from.
Time is the process clock (one machine, one clock), read through the store's
:class:`~fencepost.timing.clock.Clock`.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, closing
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

from fencepost.domain.bulk import Deletion
from fencepost.domain.checks import storable
from fencepost.domain.errors import IdempotencyConflict, NotFound
from fencepost.domain.machine import stale_reason
from fencepost.domain.models import Execution, Fence
from fencepost.domain.slo import SloMark, is_backfill, refusal_mark
from fencepost.domain.submission import NewExecution
from fencepost.store.callers import check_sqlite, driver_connection, refuse
from fencepost.store.executors import (
    Execute,
    Plan,
    Statement,
    Steps,
    in_savepoint,
    returning,
    run,
    sqlite_execute,
)
from fencepost.store.flow import FlowView, Throttle
from fencepost.store.runners import ThreadRunner
from fencepost.store.sql import latest_version, require_migrated
from fencepost.store.sqlite import rows
from fencepost.store.sqlite.connection import (
    DEFAULT_BUSY_TIMEOUT,
    DEFAULT_SYNCHRONOUS,
    MIGRATIONS_PACKAGE,
    QUERIES,
    Connections,
    Synchronous,
    applied_migrations,
    open_read_only,
    recorded_num_buckets,
    translate_errors,
)
from fencepost.store.sqlite.connection import migrate as apply_migrations
from fencepost.store.sqlstore import SqlStore
from fencepost.store.values import (
    ClaimArguments,
    Materialization,
    StoreConfig,
    adopt_buckets,
)
from fencepost.store.verbs import sql_operating, sql_reports
from fencepost.store.waiting import PollingWatcher, Watcher
from fencepost.timing.clock import SystemClock

Q = QUERIES
_MICROSECOND = timedelta(microseconds=1)
_BACKFILL = int(SloMark.BACKFILL)
T = TypeVar("T")
log = logging.getLogger("fencepost.store")

#: How far this process's clock may be from the kernel's before it may not judge leases.
#: Processes on one machine read one kernel clock, so they never honestly differ by this
#: much: a gap this wide is a faked or per-process clock (libfaketime, a time namespace).
CLOCK_TOLERANCE = 1.0


class KernelClock:
    """The kernel's wall clock as a file write stamps it, whatever this process's clock says.

    A one-byte write to an anonymous in-memory file makes the kernel set its
    modification time to the current time; reading it back takes two system calls
    (a few microseconds), which no ``LD_PRELOAD``-ed clock library rewrites.
    Unavailable (``now`` is None) where ``os.memfd_create`` is missing.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        make = getattr(os, "memfd_create", None)
        if make is not None:
            try:
                self._fd = make("fencepost-clock")
            except OSError:
                self._fd = None

    def now(self) -> float | None:
        """Seconds since the epoch by the kernel (its coarse tick), or None if unavailable."""
        with self._lock:
            if self._fd is None:
                return None
            os.pwrite(self._fd, b"\0", 0)
            return os.fstat(self._fd).st_mtime_ns / 1e9

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


#: The blocks the shared verbs run under a lock's name: inside BEGIN IMMEDIATE this
#: connection already holds the whole file, so holding a row is reading it.
_LOCKS_ARE_READS = {
    "lock_execution": Q["get_execution"],
    "lock_schedule": Q["get_schedule"],
    "share_schedule": Q["get_schedule"],  # add_occurrences builds from the schedule's row
}


class SqliteStore(SqlStore):
    """Executions in one SQLite file (WAL mode), shared safely by processes on one machine."""

    queries: ClassVar[Mapping[str, str]] = {**Q, **_LOCKS_ARE_READS}
    rows = rows
    # A write's now is this process's clock: read it once BEGIN IMMEDIATE holds the lock.
    _now_after_lock = True

    def __init__(
        self,
        path: str,
        config: StoreConfig | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        synchronous: Synchronous = DEFAULT_SYNCHRONOUS,
        migrate: bool = True,
    ) -> None:
        super().__init__(config or StoreConfig())
        self.path = path
        self.location = f"sqlite:///{path}"
        if not migrate:
            # Looked at read-only first: a file without the schema is left as it was
            # (opening the store's own connections would switch it to WAL).
            with closing(open_read_only(path)) as conn, translate_errors(path):
                require_migrated(applied_migrations(conn), MIGRATIONS_PACKAGE, self.location)
        self._db = Connections(path, busy_timeout=busy_timeout, synchronous=synchronous)
        #: (cutoff, last id deleted) of the prune in progress; see _prune_batch.
        #: Whether any limit could hold a claim, read at most once a second (store.flow).
        self._flow_view = FlowView()
        try:
            with self._db.read() as conn:
                if migrate:
                    self.migrations_applied = apply_migrations(
                        conn, num_buckets=self.config.num_buckets
                    )
                # The count the file records: adopted, or a given count refused if it differs.
                self.config = adopt_buckets(self.config, recorded_num_buckets(conn), self.location)
        except BaseException:
            self._db.close()
            raise
        self.schema_version = latest_version(MIGRATIONS_PACKAGE)
        #: Polls for every waiter of Store.wait at once (other processes write here too).
        self._watcher = PollingWatcher(self._watched, name="fencepost-sqlite-wait")
        self._kernel = KernelClock()
        self._clock_was_off = False  # see _may_judge_leases: logged on each change only

    def close(self) -> None:
        self._watcher.close()
        self._db.close()
        self._kernel.close()

    def _async_runner(self) -> ThreadRunner:
        # One thread, so one connection: this store's connection for that thread.
        return ThreadRunner(self)

    # -- the clock rule --------------------------------------------------------------------

    def _may_judge_leases(self, now: datetime) -> bool:
        """Whether this process's ``now`` may decide which leases have expired.

        Every process judges SQLite leases by its own clock. One whose clock reads more
        than :data:`CLOCK_TOLERANCE` off the kernel's (ahead: live leases would look
        expired and be taken over; behind: its leases would look expired to everyone
        else) claims nothing and reaps nothing. Checked at every claim, command claim
        and reap, inside its write transaction and with the very ``now`` it would judge
        by, so a clock that steps between two claims is caught at the second: it logs
        one error when its clock goes off, and one warning when it agrees again. A
        test's pinned clock (anything but :class:`SystemClock`) is not checked.
        """
        if not isinstance(self.clock, SystemClock):
            return True
        kernel = self._kernel.now()
        if kernel is None:
            return True
        offset = now.timestamp() - kernel
        off = abs(offset) > CLOCK_TOLERANCE
        if off and not self._clock_was_off:
            log.error(
                "this process's clock is %+.1f s off the machine's, more than %.1f s: "
                "claiming and reaping nothing on %s until it agrees",
                offset,
                CLOCK_TOLERANCE,
                self.path,
            )
        elif not off and self._clock_was_off:
            log.warning("this process's clock agrees with the machine's again; claiming")
        self._clock_was_off = off
        return not off

    # -- waiting ---------------------------------------------------------------------------

    def _waits(self) -> Watcher:
        return self._watcher

    def _can_wait_for(self, execution_id: str) -> bool:
        return self._can_name(execution_id)

    def _watched(self, ids: Sequence[str], fresh: Sequence[str]) -> dict[str, Execution]:
        """The watcher's one query per poll: finished ``ids``, and ``fresh`` ones as they are."""
        params = {"ids": json.dumps(list(ids)), "fresh": json.dumps(list(fresh))}
        with self._read() as conn:
            found = conn.execute(Q["watched_executions"], params).fetchall()
        return {e.id: e for e in map(rows.execution, found)}

    # -- dialect hooks (see store.dialect) -------------------------------------------------

    def _executor(self, conn: sqlite3.Connection) -> Execute:
        return sqlite_execute(conn)

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.read()

    def _snapshot(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.snapshot()

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._db.write()

    def _now_steps(self) -> Steps[datetime]:
        return returning(self.clock.now())  # one machine, one clock: the process's

    def _now_param(self) -> int:
        return rows.to_us(self.clock.now())

    def _t(self, value: datetime) -> int:
        return rows.to_us(value)

    def _d(self, value: timedelta) -> int | None:
        return rows.duration_us(value)

    def _array(self, values: Sequence[Any]) -> str:
        return json.dumps(values)

    def _can_name(self, row_id: str) -> bool:
        return storable(row_id)  # sqlite3 cannot even bind a lone surrogate

    def _refuse_steps(
        self, fences: Sequence[Fence], verb: str, at: Any, *, again: bool = False
    ) -> Steps[None]:
        # ``again`` is never set here: nothing on SQLite is retried (see SqlDialect._ended_steps).
        if not fences:
            return
        at = self._now_param() if at is None else at
        marks = int(refusal_mark(verb))
        yield Statement(
            Q["insert_stale_refusal"],
            [
                {
                    "execution_id": fence.execution_id,
                    "epoch": fence.epoch,
                    "actor": fence.owner,
                    "reason": stale_reason(verb),
                    "at": at,
                }
                for fence in fences
            ],
            "many",
        )
        yield Statement(
            Q["mark_stale_refusal"],
            [{"execution_id": fence.execution_id, "marks": marks} for fence in fences],
            "many",
        )

    _fences_row_by_row = True

    def _fence_params(self, fences: Sequence[Fence]) -> dict[str, Any]:
        return {"leases": _lease_keys(fences)}

    def _schedule_fence_params(self, items: Sequence[Materialization]) -> dict[str, Any]:
        fences = [
            [
                item.schedule.id,
                item.schedule.materializer,
                rows.opt_us(item.schedule.lease_until),
                rows.to_us(item.watermark),
                rows.to_us(item.next_due),
            ]
            for item in items
        ]
        return {"items": json.dumps(fences)}

    def clock_offset(self, written_at: datetime) -> float | None:
        # Leases here are judged by each process's own clock, so a process under a
        # fake or broken clock could take over live leases. The file's modification
        # time is set by the kernel when a commit writes it, whatever the writing
        # process believes the time is: right after this process's own commit it is
        # the time of that write, the reference to compare ``written_at`` with.
        if not isinstance(self.clock, SystemClock):
            return None  # a test's pinned clock is meant to differ from the wall clock
        written = [
            os.stat(p).st_mtime for p in (self.path, f"{self.path}-wal") if os.path.exists(p)
        ]
        if not written:
            return None
        return written_at.timestamp() - max(written)

    # -- submitting ----------------------------------------------------------------------

    def _insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        with self._db.write() as conn:
            chosen = run(self._insert_steps(batch), sqlite_execute(conn))
        # The usual batch, without twins: its executions are built after the commit.
        return _executions(chosen)

    def _insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        conn = check_sqlite(driver_connection(connection), store=self.location)
        cursor = conn.cursor()
        cursor.row_factory = None  # rows as tuples, whatever the caller's connection makes
        steps = self._in_caller_transaction(conn, self._insert_plan(batch).steps)
        with translate_errors(self.path):
            return _executions(run(steps, sqlite_execute(cursor)))

    def _in_caller_transaction(self, conn: sqlite3.Connection, steps: Steps[T]) -> Steps[T]:
        """``steps`` inside a savepoint of the caller's transaction on the store's file.

        With no transaction open yet (sqlite3 opens one only before a data change), a
        ``BEGIN IMMEDIATE`` opens it, as the store's own writes do: the caller's
        ``commit()`` ends it.
        """
        row = yield Statement(Q["main_database_file"], None, "one")
        file = row[0] if row else ""
        if not file or os.path.realpath(file) != os.path.realpath(self.path):
            where = repr(file) if file else "an in-memory database"
            raise refuse(f"is a connection to {where}, not to the store's file {self.path!r}")
        if not conn.in_transaction:
            yield Statement(Q["begin_immediate"])
        return (
            yield from in_savepoint(
                steps,
                savepoint=Q["caller_savepoint"],
                release=Q["caller_release_savepoint"],
                rollback_to=Q["caller_rollback_to_savepoint"],
            )
        )

    def _insert_plan(self, batch: Sequence[NewExecution]) -> Plan[list[NewExecution | Execution]]:
        """The insert verb (see :class:`~fencepost.store.base.Store._insert`) as a plan.

        It returns, per request, the new execution still to build (outside the write
        lock) or the idempotent twin read inside the transaction.
        """
        return Plan(self._insert_steps(batch))

    def _insert_steps(self, batch: Sequence[NewExecution]) -> Steps[list[NewExecution | Execution]]:
        keys = [n.idempotency_key for n in batch if n.idempotency_key is not None]
        existing: dict[str, tuple[str, str | None]] = {}
        if keys:
            found = yield Statement(Q["find_idempotency_keys"], {"keys": json.dumps(keys)}, "all")
            existing = {key: (id_, request_hash) for key, id_, request_hash in found}
        chosen: list[NewExecution | str] = []
        fresh: list[NewExecution] = []
        for new in batch:
            key = new.idempotency_key
            if key is not None and key in existing:
                twin_id, twin_hash = existing[key]
                if twin_hash != new.request_hash:
                    raise IdempotencyConflict(key, twin_id)
                chosen.append(twin_id)
                continue
            if key is not None:
                existing[key] = (new.id, new.request_hash)
            fresh.append(new)
            chosen.append(new)
        params = [_insert_params(n) for n in fresh]
        yield Statement(Q["insert_execution"], params, "many")
        yield Statement(Q["insert_execution_data"], [(n.id, n.inputs_json) for n in fresh], "many")
        if fresh:  # one instant for the whole batch (see Store.submit_many)
            yield Statement(
                Q["insert_submitted"],
                (
                    json.dumps([n.id for n in fresh]),
                    rows.to_us(fresh[0].created_at),
                    fresh[0].actor,
                ),
            )
        if len(fresh) == len(chosen):
            return list(fresh)
        # Idempotent twins, read in this transaction.
        fresh_by_id = {n.id: n for n in fresh}
        out: list[NewExecution | Execution] = []
        for item in chosen:
            if isinstance(item, NewExecution):
                out.append(item)
            elif item in fresh_by_id:
                out.append(fresh_by_id[item])
            else:
                row = yield Statement(Q["get_execution"], {"id": item}, "one")
                if row is None:
                    raise NotFound(item)
                out.append(rows.execution(row))
        return out

    # -- leasing ---------------------------------------------------------------------------

    def _flow_candidates(
        self, conn: sqlite3.Connection, params: dict[str, Any], request: ClaimArguments
    ) -> list[tuple[Any, ...]]:
        # One indexed walk per queue (executions_claimable leads with the queue), merged
        # in claim order, as a plain claim does.
        if request.queues is None:
            live = conn.execute(Q["claim_live_queues"], {"now": params["now"]}).fetchall()
            queues = [queue for (queue,) in live]
        else:
            queues = [queue for queue, _ in request.queues]
        found: list[tuple[Any, ...]] = []
        for queue in queues:
            found.extend(conn.execute(Q["flow_candidates"], params | {"queue": queue}))
        found.sort(key=lambda row: (-row[5], row[4], row[0]))
        return found[: params["n"]]

    def _write_flow(
        self,
        conn: sqlite3.Connection,
        buckets: Sequence[tuple[str, str, float, datetime, datetime, datetime | None]],
        throttles: Sequence[Throttle],
    ) -> None:
        conn.executemany(
            Q["flow_put_bucket"],
            [
                {
                    "scope": scope,
                    "key": key,
                    "tokens": tokens,
                    "at": rows.to_us(at),
                    "ready_at": rows.to_us(ready),
                    "denied_at": rows.opt_us(denied),
                }
                for scope, key, tokens, at, ready, denied in buckets
            ],
        )
        records = [
            {
                "id": t.execution_id,
                "scope": t.scope,
                "held": t.held // _MICROSECOND,
                "at": rows.to_us(t.at),
            }
            for t in throttles
        ]
        conn.executemany(Q["flow_put_throttle"], records)
        conn.executemany(Q["flow_hold"], records)
        totals: dict[str, list[int]] = {}
        for t in throttles:
            total = totals.setdefault(t.scope, [0, 0])
            total[0] += 1
            total[1] += t.held // _MICROSECOND
        conn.executemany(
            Q["flow_add_totals"],
            [{"scope": s, "count": n, "held": held} for s, (n, held) in totals.items()],
        )

    # -- commands --------------------------------------------------------------------------

    # -- the bucket count (see Store.resize_buckets) ---------------------------------------

    # -- reports and housekeeping ----------------------------------------------------------

    #: A claim waits for the write lock a bulk action's group holds: small groups, a few
    #: milliseconds each. After each, a pause of at least 5 ms: a claim that found the
    #: lock taken sleeps in growing steps (the busy handler's 1, 2, 5, 10 ms, ...) before
    #: it asks again, and a shorter pause lets the next group take the lock first, again
    #: and again (bench/bulk_actions.py).
    bulk_group = 5
    bulk_pause = 0.005

    def _delete_steps(self, current: Execution, actor: str, now: datetime) -> Steps[Deletion]:
        # Its verdicts outlive it, as a pruned execution's do (see prune_batch_plan).
        params = sql_reports.rollup_params(self, now) | {"id": current.id}
        found = yield Statement(Q["deletable"], params, "all")
        if found:
            yield Statement(Q["slo_rollup"], sql_operating.slo_rollups(found), "many")
        ids = {"ids": json.dumps([current.id])}
        for block in _DELETES:
            yield Statement(Q[block], ids)
        deletion = Deletion(
            execution_id=current.id,
            job=current.job,
            queue=current.queue,
            state=current.state,
            actor=actor,
            at=now,
        )
        yield Statement(Q["insert_deletion"], _deletion_params(deletion))
        return deletion

    # -- schedules -------------------------------------------------------------------------


#: What a deleted execution leaves in each table, deleted by id (a JSON array of one).
_DELETES = (
    "prune_commands",
    "prune_transitions",
    "prune_execution_data",
    "delete_throttles",
    "prune_executions",
)


def _deletion_params(d: Deletion) -> dict[str, Any]:
    return {
        "execution_id": d.execution_id,
        "job": d.job,
        "queue": d.queue,
        "state": str(d.state),
        "actor": d.actor,
        "at": rows.to_us(d.at),
    }


def _lease_keys(leases: Iterable[Fence]) -> str:
    return json.dumps([[lease.execution_id, lease.owner, lease.epoch] for lease in leases])


def _executions(chosen: Sequence[NewExecution | Execution]) -> list[Execution]:
    """A plan's choices as executions: each new one built, each twin as read."""
    return [item if isinstance(item, Execution) else item.to_execution() for item in chosen]


def _insert_params(n: NewExecution) -> tuple[Any, ...]:
    """The parameters of ``insert_execution``, in its order."""
    return (
        n.id,
        n.job,
        n.job_version,
        rows.to_us(n.due_at),
        n.priority,
        n.max_attempts,
        None if n.timeout is None else n.timeout // _MICROSECOND,
        n.idempotency_key,
        n.request_hash,
        n.bucket,
        n.bucket_key,
        rows.to_us(n.created_at),
        n.queue,
        n.trace_context,
        n.unset_defaults,
        n.limit_key,
        _BACKFILL if is_backfill(n.due_at, n.created_at) else 0,
    )

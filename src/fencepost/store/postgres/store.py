"""The PostgreSQL backend: one shared database for many schedulers and workers.

Claim, heartbeat and complete are one statement per batch each (a refused call's
audit is one statement more, in the same transaction). Lease decisions use the server's
clock (``clock_timestamp()``) unless a test pins the store's clock. Verbs off
the hot path lock the row, let :func:`fencepost.domain.machine.apply` decide,
and write the change back guarded by the state and epoch it was decided from.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from fencepost.domain.bulk import Action, Deletion
from fencepost.domain.errors import IdempotencyConflict, NotFound, StoreUnavailable
from fencepost.domain.events import ExecutionEvent
from fencepost.domain.machine import stale_reason
from fencepost.domain.models import (
    Execution,
    Fence,
    Page,
)
from fencepost.domain.schedules import NewOccurrence
from fencepost.domain.slo import (
    BACKFILL_SLACK,
    refusal_mark,
)
from fencepost.domain.states import Event
from fencepost.domain.submission import NewExecution
from fencepost.store.callers import check_psycopg, driver_connection, refuse
from fencepost.store.dialect import FenceKeys
from fencepost.store.executors import (
    Execute,
    Plan,
    Statement,
    Steps,
    in_savepoint,
    psycopg_execute,
    returning,
    run,
)
from fencepost.store.flow import FlowView, Throttle
from fencepost.store.postgres import rows
from fencepost.store.postgres.connection import (
    MIGRATIONS_PACKAGE,
    QUERIES,
    Connection,
    Database,
    Listener,
    applied_migrations,
    recorded_num_buckets,
    target,
    translate_errors,
)
from fencepost.store.postgres.connection import migrate as apply_migrations
from fencepost.store.postgres.history import (
    DAY_MS,
    DayPartitions,
    day_of,
    drop_finished_days,
    partition_name,
)
from fencepost.store.postgres.live_window import LiveWindow
from fencepost.store.postgres.outages import is_outage, lost_race, retried, unsent
from fencepost.store.postgres.waiting import NotifiedWatcher
from fencepost.store.sql import latest_version, require_migrated
from fencepost.store.sqlstore import SqlStore
from fencepost.store.values import (
    ExecutionFilter,
    Materialization,
    StoreConfig,
    adopt_buckets,
)
from fencepost.store.verbs import sql_reports
from fencepost.store.waiting import PollingWatcher, Watcher

Q = QUERIES
_ZERO = timedelta(0)
if TYPE_CHECKING:
    from fencepost.store.postgres.async_runner import PoolRunner

T = TypeVar("T")


def _always() -> bool:
    return True


#: Completions and heartbeats of at least this many leases get a plan made for the
#: batch at hand (psycopg's ``prepare=False``); smaller ones reuse the connection's
#: prepared statement. The generic plan of a prepared statement takes any array for
#: 10 elements and keeps the statistics it was made with, so it may pick a plan that
#: looks each lease up once per lease of the batch: nothing for a handful, the
#: square of the batch for hundreds. Planning one takes about a third of a
#: millisecond. (The claim keeps its prepared statement: its generic plan looks
#: each picked row up once, whatever the statistics, and planning it costs more.)
PLAN_PER_CALL = 64


class PostgresStore(SqlStore):
    """Executions in a PostgreSQL database shared by any number of processes and machines."""

    queries = Q
    rows = rows

    #: At most one wake-up notification per this many seconds from one store. Short:
    #: a submit that sends none waits for the workers' next poll (50 ms), so a producer
    #: submitting every 25 ms would see half its jobs picked up late; 5 ms still bounds
    #: a busy producer to 200 NOTIFYs a second.
    NOTIFY_INTERVAL = 0.005
    #: Each thread's writes go through a pooled connection of their own.
    parallel_writes = True
    #: Refresh the planner's statistics after this many rows inserted by one store
    #: (autovacuum would, but only up to a minute later).
    ANALYZE_AFTER_ROWS = 10_000

    def __init__(
        self, url: str, config: StoreConfig | None = None, *, migrate: bool = True
    ) -> None:
        super().__init__(config or StoreConfig())
        self._db = Database(url)
        schema = f"?schema={self._db.schema}" if self._db.schema else ""
        self.location = f"postgresql://{target(self._db.conninfo)}{schema}"
        self._last_notify = -math.inf
        self._notify_lock = threading.Lock()
        self._listener: Listener | None = None
        self._inserted_since_analyze = 0
        #: An id of the newest batch inserted: its partition is the one ANALYZE reads.
        self._newest_id: str | None = None
        self._history = DayPartitions(self._db.connection)
        #: The live days the hot statements name (see LiveWindow).
        self._live = LiveWindow(Q)
        #: Whether any limit could hold a claim, read at most once a second (store.flow).
        self._flow_view = FlowView()
        self._own_session: tuple[Any, ...] | None = None
        try:
            if migrate:
                self.migrations_applied = apply_migrations(
                    self._db, num_buckets=self.config.num_buckets
                )
            else:  # a reader: refuse a database without the schema, and create nothing
                applied = applied_migrations(self._db)
                require_migrated(applied, MIGRATIONS_PACKAGE, self.location)
            # The count the schema records: adopted, or a given count refused if it differs.
            self.config = adopt_buckets(self.config, recorded_num_buckets(self._db), self.location)
            self.schema_version = latest_version(MIGRATIONS_PACKAGE)
            if migrate:  # today's partitions and the days ahead, before the first insert
                today = int(self.clock.now().timestamp() * 1000) // DAY_MS
                self._history.cover_days([today])
        except BaseException:
            self._db.close()
            raise
        #: Every waiter of Store.wait in this process, on one listening connection
        #: (or polling, behind a transaction pooler without ``listen_url``).
        self._watcher: Watcher = (
            NotifiedWatcher(self._db, self._watched, name="fencepost-postgres-wait")
            if self._db.listen_conninfo is not None
            else PollingWatcher(self._watched, name="fencepost-postgres-poll")
        )

    def close(self) -> None:
        self._watcher.close()
        if self._listener is not None:
            self._listener.close()
        self._db.close()

    def _async_runner(self) -> PoolRunner:
        from fencepost.store.postgres.async_runner import PoolRunner

        return PoolRunner(self)

    @property
    def notify_channel(self) -> str:
        """The LISTEN/NOTIFY channel that wakes this store's workers (one per schema)."""
        return self._db.channel

    def wait_for_work(self, timeout: float) -> bool:
        """Block until a submit anywhere notifies this database, or ``timeout`` passes.

        Workers call it between empty claims instead of sleeping; it returns
        True when woken early. Notifications are hints, debounced by the
        submitters: a worker must still poll, and claim decides. Behind a
        transaction pooler without ``listen_url`` nothing listens: it waits out
        ``timeout`` (the worker's polls find the work).
        """
        if self._db.listen_conninfo is None:
            return super().wait_for_work(timeout)
        if self._listener is None:
            self._listener = Listener(self._db)
        return self._listener.wait(timeout)

    # -- waiting ---------------------------------------------------------------------------

    def _waits(self) -> Watcher:
        return self._watcher

    def _can_wait_for(self, execution_id: str) -> bool:
        return _is_uuid(execution_id)

    def _watched(self, ids: Sequence[str], fresh: Sequence[str]) -> dict[str, Execution]:
        """The watcher's one query per look: finished ``ids``, and ``fresh`` ones as they are."""
        named = [i for i in ids if _is_uuid(i)]  # others name no execution here
        if not named:
            return {}
        params = {"ids": named, "fresh": [i for i in fresh if _is_uuid(i)]}
        with self._db.connection() as conn:
            found = conn.execute(Q["watched_executions"], params).fetchall()
        return {e.id: e for e in map(rows.execution, found)}

    def _should_notify(self) -> bool:
        with self._notify_lock:
            now = time.monotonic()
            if now - self._last_notify < self.NOTIFY_INTERVAL:
                return False
            self._last_notify = now
            return True

    def _pinned_now(self) -> datetime | None:
        return self.clock.now_or_none()

    def _now(self, conn: Connection) -> datetime:
        """The store's now: the pinned test clock, or the server's clock."""
        return self._tx_now(conn)

    # -- retries after a lost connection (see outages) -------------------------------------

    def _retried(
        self,
        attempt: Callable[[bool], T],
        what: str,
        retry_if: Callable[[StoreUnavailable], bool] | None = None,
        *,
        only_unsent: bool = False,
    ) -> T:
        """``attempt(again)``, retried after a lost connection within ``retry_timeout``
        (``retry_if``: :func:`~fencepost.store.postgres.outages.is_outage` unless given;
        ``only_unsent``: :func:`~fencepost.store.postgres.outages.unsent`)."""
        retry_if = unsent if only_unsent else retry_if or is_outage
        return retried(attempt, budget=self._db.retry_timeout, retry_if=retry_if, what=what)

    def _ended_steps(self, fences: Sequence[Fence], events: Sequence[Event]) -> Steps[FenceKeys]:
        if not fences:
            return set()
        params = self._fence_params(fences) | {"events": [str(event) for event in events]}
        found = yield Statement(Q["ended_by_holders"], params, "all")
        return {(id_, owner, epoch) for id_, owner, epoch in found}

    # -- dialect hooks (see store.dialect) -------------------------------------------------

    def _executor(self, conn: Connection) -> Execute:
        return psycopg_execute(conn)

    def _read(self) -> AbstractContextManager[Connection]:
        return self._db.connection()

    def _write(self) -> AbstractContextManager[Connection]:
        return self._db.transaction()

    def _snapshot(self) -> AbstractContextManager[Connection]:
        return self._db.snapshot()  # each autocommit read would see its own

    def _now_steps(self) -> Steps[datetime]:
        row = yield Statement(Q["store_now"], {"now": self._pinned_now()}, "one")
        assert row is not None
        now: datetime = row[0]
        return now

    def _now_param(self) -> datetime | None:
        return self._pinned_now()

    def _t(self, value: datetime) -> datetime:
        return value  # psycopg binds aware datetimes as timestamptz

    def _d(self, value: timedelta) -> timedelta:
        return value  # psycopg binds a timedelta as an interval

    def _array(self, values: Sequence[Any]) -> list[Any]:
        return [str(v) if isinstance(v, StrEnum) else v for v in values]

    def _can_name(self, row_id: str) -> bool:
        return _is_uuid(row_id)  # ids are UUIDs here: anything else names no row

    def _refuse_steps(
        self, fences: Sequence[Fence], verb: str, at: Any, *, again: bool = False
    ) -> Steps[None]:
        # Only a pinned test clock is bound, never ``at``: the statement reads the
        # server's clock after the fenced statement it audits, so a refusal is never
        # stamped before the takeover that made it stale.
        if not fences:
            return
        yield Statement(
            Q["insert_stale_refusals"],
            self._fence_params(fences)
            | {
                "now": self._pinned_now(),
                "reason": stale_reason(verb),
                "marks": int(refusal_mark(verb)),
                "again": again,
            },
        )

    def _schedule_fence_params(self, items: Sequence[Materialization]) -> dict[str, Any]:
        return {
            "ids": [i.schedule.id for i in items],
            "materializers": [i.schedule.materializer for i in items],
            "lease_untils": [i.schedule.lease_until for i in items],
            "watermarks": [i.watermark for i in items],
            "next_dues": [i.next_due for i in items],
        }

    def _occurrence_params(
        self, occurrences: Sequence[NewOccurrence], now: Any, *, by_caller: bool
    ) -> dict[str, Any]:
        return {
            "now": now,
            "notify": self._should_notify(),
            "channel": self._db.channel,
            "ids": [o.id for o in occurrences],
            "schedule_ids": [o.schedule_id for o in occurrences],
            "slots": [o.slot for o in occurrences],
            "keys": [o.idempotency_key for o in occurrences],
            "due_ats": [o.due_at for o in occurrences],
            "skipped": _nullable([o.skipped for o in occurrences]),
            "buckets": [o.bucket for o in occurrences],
            "actors": _nullable([o.actor for o in occurrences]),
            "by_caller": by_caller,
            "backfill_slack": BACKFILL_SLACK,
        }

    def _fence_params(self, fences: Sequence[Fence]) -> dict[str, Any]:
        return {
            "ids": [fence.execution_id for fence in fences],
            "owners": [fence.owner for fence in fences],
            "epochs": [fence.epoch for fence in fences],
        }

    def _text_for(self, block: str, ids: Sequence[str] = ()) -> str:
        # Asked as a plan is made: the window, when due, is read on a connection of its
        # own (a store that only heartbeats would else name every day, as at start).
        if self._live.due(time.monotonic()):
            with self._db.connection() as conn:
                return self._hot(conn, block, ids)
        return self._live.text(block, ids)

    def _prepare_for(self, rows: int) -> bool | None:
        return _reuse_plan(rows)

    _claims_in_one_statement = True
    _writes_many_tables = True

    _resize_locks = ("lock_migrations", "lock_executions_for_resize")

    def _schedule_cursor(self, after: str | None) -> str | None:
        # A cursor is a bound, not a name: no stored id holds U+0000, so the ids
        # after "s\x00..." are exactly the ids after "s", which PostgreSQL can take.
        return None if after is None else after.partition("\x00")[0]

    # -- submitting ----------------------------------------------------------------------

    def _insert(self, batch: Sequence[NewExecution]) -> list[Execution]:
        def attempt(again: bool) -> tuple[list[Execution], int]:
            plan = self._insert_plan(batch, notify=self._should_notify, again=again)
            # A plan that is not atomic is one statement: it runs in autocommit (no
            # BEGIN and COMMIT round trips).
            with self._db.transaction() if plan.atomic else self._db.connection() as conn:
                return run(plan.steps, psycopg_execute(conn))

        executions, inserted = self._retried(attempt, "submit", retry_if=submit_retryable)
        self._count_inserts(inserted)
        return executions

    def _insert_in(self, batch: Sequence[NewExecution], connection: object) -> list[Execution]:
        conn = driver_connection(connection)
        check_psycopg(conn, psycopg.Connection, store=self.location)
        assert isinstance(conn, psycopg.Connection)
        cursor = conn.cursor()
        cursor.adapters.register_loader("uuid", TextLoader)  # this cursor's, not the caller's
        with translate_errors(callers=True):
            executions, inserted = run(
                self._caller_insert(batch), psycopg_execute(cursor, prepare=False)
            )
        self._count_inserts(inserted)
        return executions

    def _caller_insert(self, batch: Sequence[NewExecution]) -> Steps[tuple[list[Execution], int]]:
        """The insert's steps inside a caller's transaction (sync or async executor).

        Every such submit notifies: the debounce of the store's own submits would
        let a rolled-back submit swallow the wake-up of a committed one right after.
        NOTIFY is transactional: sent when the caller commits, never on a rollback.
        """
        plan = self._insert_plan(batch, notify=_always)
        return self._in_caller_transaction(plan.steps)

    def _in_caller_transaction(self, steps: Steps[T]) -> Steps[T]:
        """``steps`` inside a savepoint of the caller's transaction, on the store's
        database only, with the store's ``search_path`` and UTC (both restored after)."""
        row = yield Statement(Q["caller_session"], None, "one")
        database, started, port, search_path, zone = row
        if (database, started, port) != self._session()[:3]:
            raise refuse(
                f"connects to database {database!r} on the server on port {port} started "
                f"{started:%Y-%m-%d %H:%M:%S}, not to the store's ({self.location})"
            )
        store_path = self._session()[3]

        def settled() -> Steps[T]:
            yield Statement(Q["caller_settings"], {"search_path": store_path, "zone": "UTC"})
            result = yield from steps
            yield Statement(Q["caller_settings"], {"search_path": search_path, "zone": zone})
            return result

        return (
            yield from in_savepoint(
                settled(),
                savepoint=Q["caller_savepoint"],
                release=Q["caller_release_savepoint"],
                rollback_to=Q["caller_rollback_to_savepoint"],
            )
        )

    def _session(self) -> tuple[Any, ...]:
        """The store's own ``caller_session`` row (read once): what a caller's
        connection is compared with, and the ``search_path`` the store's tables need."""
        if self._own_session is None:
            with self._db.connection() as conn:
                self._own_session = conn.execute(Q["caller_session"]).fetchone()
        assert self._own_session is not None
        return self._own_session

    def _insert_plan(
        self, batch: Sequence[NewExecution], *, notify: Callable[[], bool], again: bool = False
    ) -> Plan[tuple[list[Execution], int]]:
        """The insert verb (see :class:`~fencepost.store.base.Store._insert`) as a plan
        returning the executions and how many rows it inserted.

        ``notify`` says, when the statement is made, whether it wakes the workers.
        ``again``: an earlier attempt of this same batch may have committed (its
        connection was lost, maybe during COMMIT). The plan first looks for the
        batch's ids (made by this process, so only that attempt can have stored them):
        found, it answers what that attempt would have answered, from the instant it
        stored them, and writes nothing; not found, it inserts as the first attempt did.
        """
        self._cover([new.id for new in batch])
        if batch:
            self._newest_id = batch[-1].id
        # Resolve repeats inside the batch first; the database resolves the rest.
        first_by_key: dict[str, NewExecution] = {}
        unique: list[NewExecution] = []
        for new in batch:
            key = new.idempotency_key
            if key is not None and key in first_by_key:
                if first_by_key[key].request_hash != new.request_hash:
                    raise IdempotencyConflict(key, first_by_key[key].id)
                continue
            if key is not None:
                first_by_key[key] = new
            unique.append(new)
        # Nothing keyed: nothing can be skipped, so nothing needs comparing, and the
        # statement alone is the whole write.
        steps = self._insert_steps(batch, unique, first_by_key, notify, again)
        return Plan(steps, atomic=bool(first_by_key))

    def _insert_steps(
        self,
        batch: Sequence[NewExecution],
        unique: list[NewExecution],
        first_by_key: dict[str, NewExecution],
        notify: Callable[[], bool],
        again: bool,
    ) -> Steps[tuple[list[Execution], int]]:
        stored = 0
        if again:
            found = yield Statement(Q["submitted_before"], {"ids": [n.id for n in unique]}, "one")
            stored, now, inserted_keyed = found
        if not stored:
            params = self._insert_params(unique, notify=notify())
            row = yield Statement(Q["insert_executions"], params, "one")
            assert row is not None
            now, inserted_keyed = row
        existing: dict[str, Execution] = {}
        skipped: list[NewExecution] = []
        if first_by_key:
            kept = set(inserted_keyed)
            skipped = [n for n in first_by_key.values() if n.id not in kept]
            if skipped:
                keys = [n.idempotency_key for n in skipped]
                found = yield Statement(Q["find_idempotency_keys"], {"keys": keys}, "all")
                twins = {key: (id_, request_hash) for key, id_, request_hash in found}
                for n in skipped:
                    assert n.idempotency_key is not None, "only keyed rows are skipped"
                    if n.idempotency_key not in twins:  # its key is taken, its row out of sight
                        raise twin_being_pruned(n.idempotency_key)
                    twin_id, twin_hash = twins[n.idempotency_key]
                    if twin_hash != n.request_hash:
                        raise IdempotencyConflict(n.idempotency_key, twin_id)
                    twin = yield Statement(Q["get_execution"], {"id": twin_id}, "one")
                    if twin is None:  # pruned by rows between the two statements
                        raise twin_being_pruned(n.idempotency_key)
                    existing[n.idempotency_key] = self.rows.execution(twin)
        # Rows an earlier attempt stored were counted by nobody: its answer was lost.
        inserted = len(unique) - len(skipped)
        made: dict[str, Execution] = {}
        out = []
        for new in batch:
            key = new.idempotency_key
            if key is not None:
                if key in existing:
                    out.append(existing[key])
                    continue
                if key in made:
                    out.append(made[key])
                    continue
            due_at = new.execute_at if new.execute_at is not None else now + (new.delay or _ZERO)
            execution = new.to_execution(due_at=due_at, created_at=now)
            if key is not None:
                made[key] = execution
            out.append(execution)
        return out, inserted

    def _count_inserts(self, rows_inserted: int) -> None:
        if self._analyze_due(rows_inserted):
            self._analyze()

    def _analyze_due(self, rows_inserted: int) -> bool:
        """Count inserted rows; True (once) when the statistics are due for a refresh."""
        with self._notify_lock:
            self._inserted_since_analyze += rows_inserted
            due = self._inserted_since_analyze >= self.ANALYZE_AFTER_ROWS
            if due:
                self._inserted_since_analyze = 0
        return due

    def _cover(self, ids: list[str]) -> None:
        """Before inserting executions with these ids: every id's day has its partition
        (DDL once a day), and the live window takes them in."""
        self._history.cover(ids)
        self._live.widen(ids)

    def _hot(self, conn: psycopg.Connection, block: str, ids: Sequence[str] = ()) -> str:
        """``block``'s text naming only the live days of history (see LiveWindow), the
        window read again on ``conn`` when it is due."""
        now = time.monotonic()
        if self._live.due(now):
            self._live.read(conn, now, int(self.clock.now().timestamp() * 1000))
        return self._live.text(block, ids)

    def _analyze(self, ids: Sequence[str] = ()) -> None:
        """Refresh the planner's statistics of the executions (a sample of them) in the
        partitions holding ``ids``, by default the one that received the newest inserts:
        the whole history's would cost as much more as there are days kept, and the
        other days have not changed."""
        if not ids:
            ids = () if self._newest_id is None else (self._newest_id,)
        with self._db.transaction() as conn:
            partitions = {
                found[0]
                for execution_id in ids
                if (found := conn.execute(Q["newest_partition"], {"id": execution_id}).fetchone())
            }
            if not partitions:
                return
            conn.execute(Q["analyze_sample"])
            for partition in sorted(partitions):
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(partition)))

    def _act_group(
        self, action: Action, execution_ids: Sequence[str], actor: str, now: datetime
    ) -> list[str]:
        """A bulk action's group, whose changes count toward the statistics' refresh as
        inserts do: a replay of 100,000 dead letters makes them all due, and until the
        planner knew, every claim walked them (claims restricted to another queue went
        from 1.7 to 20 ms, and stayed there until autovacuum's ANALYZE)."""
        done = super()._act_group(action, execution_ids, actor, now)
        if done and self._analyze_due(len(done)):
            # A batch runs in id order: its first and last ids name its partitions.
            self._analyze((done[0], done[-1]))
        return done

    def _insert_params(self, batch: Sequence[NewExecution], *, notify: bool) -> dict[str, Any]:
        return {
            "now": self._pinned_now(),
            "notify": notify,
            "channel": self._db.channel,
            "ids": [n.id for n in batch],
            "jobs": [n.job for n in batch],
            "job_versions": _nullable([n.job_version for n in batch]),
            "execute_ats": _nullable([n.execute_at for n in batch]),
            "delays": _nullable([n.delay if n.execute_at is None else None for n in batch]),
            "priorities": [n.priority for n in batch],
            "max_attempts": [n.max_attempts for n in batch],
            "timeouts": _nullable([n.timeout for n in batch]),
            "keys": _nullable([n.idempotency_key for n in batch]),
            "hashes": _nullable([n.request_hash for n in batch]),
            "buckets": [n.bucket for n in batch],
            "bucket_keys": _nullable([n.bucket_key for n in batch]),
            "inputs": [n.inputs_json for n in batch],
            "queues": [n.queue for n in batch],
            "trace_contexts": _nullable([n.trace_context for n in batch]),
            "unset_defaults": _nullable([n.unset_defaults for n in batch]),
            "limit_keys": _nullable([n.limit_key for n in batch]),
            "actor": batch[0].actor if batch else None,  # one submitter per batch
            "backfill_slack": BACKFILL_SLACK,
        }

    # -- reading -------------------------------------------------------------------------

    def _query_plan(self, filters: ExecutionFilter) -> Plan[Page]:
        if filters.after is not None and not _is_uuid(filters.after):
            # No id sorts after a non-UUID here: answered without a round trip.
            return Plan(returning(Page(items=[], next_cursor=None)), atomic=False)
        return super()._query_plan(filters)

    # -- leasing ---------------------------------------------------------------------------

    def _text(self, conn: Connection, block: str) -> str:
        return self._hot(conn, block)

    def _write_flow(
        self,
        conn: Connection,
        buckets: Sequence[tuple[str, str, float, datetime, datetime, datetime | None]],
        throttles: Sequence[Throttle],
    ) -> None:
        # One round trip for both (empty arrays insert nothing), naming the live days
        # only: the throttled executions were just leased.
        columns: list[tuple[Any, ...]] = list(zip(*buckets, strict=True)) or [()] * 6
        ids = [t.execution_id for t in throttles]
        conn.execute(
            self._hot(conn, "flow_put", ids),
            {
                "scopes": list(columns[0]),
                "keys": list(columns[1]),
                "tokens": list(columns[2]),
                "ats": list(columns[3]),
                "ready_ats": list(columns[4]),
                "denied_ats": list(columns[5]),
                "ids": ids,
                "throttle_scopes": [t.scope for t in throttles],
                "helds": [t.held for t in throttles],
                "throttle_ats": [t.at for t in throttles],
            },
        )

    # -- commands --------------------------------------------------------------------------

    # -- the bucket count (see Store.resize_buckets) ---------------------------------------

    # -- reports and housekeeping ----------------------------------------------------------

    def _prune_whole(self, cutoff: datetime, on_batch: Callable[[int], None] | None) -> int:
        total = 0

        def dropped(rows: int) -> None:
            nonlocal total
            total += rows
            if rows and on_batch is not None:
                on_batch(total)

        drop_finished_days(
            self._db.connection,
            cutoff,
            concurrently=not self._db.transaction_pooled,
            on_drop=dropped,
            rollup=sql_reports.rollup_params(self),
        )
        if total:
            self._history.forget()  # a later insert into a dropped day makes it again
        return total

    # -- a prune's window: detached, not yet dropped ----------------------------------------

    def _get_plan(self, execution_id: str) -> Plan[Execution]:
        return self._unless_being_pruned(execution_id, super()._get_plan(execution_id))

    def _transition_plan(self, execution_id: str, event: ExecutionEvent) -> Plan[Execution]:
        plan = super()._transition_plan(execution_id, event)  # cancel, replay, reschedule
        return self._unless_being_pruned(execution_id, plan)

    def _unless_being_pruned(self, execution_id: str, plan: Plan[T]) -> Plan[T]:
        """``plan``, whose :class:`NotFound` becomes a retryable :class:`StoreUnavailable`
        while the execution's day of history is being pruned.

        A prune detaches a day before it drops it (see :func:`drop_finished_days`), and
        attaches it back if one of its executions was revived meanwhile: until then,
        "not found" is not yet the answer. (A fenced write looking up its lease's row
        is not asked: an execution in such a day has finished, its fence is stale.)
        """

        def steps() -> Steps[T]:
            try:
                return (yield from plan.steps)
            except NotFound:
                if not self._can_name(execution_id):
                    raise
                day = partition_name("executions", day_of(execution_id))
                found = yield Statement(Q["day_being_pruned"], {"name": day}, "one")
                if found is None or not found[0]:
                    raise
                raise StoreUnavailable(
                    f"execution {execution_id!r} is in a day of history being pruned ({day} "
                    "is detached); try again in a moment: it is gone once the prune drops "
                    "the day, or back if the prune keeps it"
                ) from None

        return Plan(steps(), atomic=plan.atomic)

    def _delete_steps(self, current: Execution, actor: str, now: datetime) -> Steps[Deletion]:
        # One statement, as a batch of prune (its verdicts rolled up in it), at the
        # transaction's now.
        params = sql_reports.rollup_params(self) | {"id": current.id, "actor": actor, "now": now}
        row = yield Statement(Q["delete_execution"], params, "one")
        assert row is not None, f"{current.id} is held by this transaction, and finished"
        return Deletion(
            execution_id=current.id,
            job=current.job,
            queue=current.queue,
            state=current.state,
            actor=actor,
            at=now,
        )

    # -- schedules -------------------------------------------------------------------------


def twin_being_pruned(key: str) -> StoreUnavailable:
    """A keyed submit's answer when the key is taken but its execution is out of sight.

    That execution is being pruned: its day of history is detached and the day's keys
    not yet deleted (see :func:`~fencepost.store.postgres.history.drop_finished_days`),
    or a batch of prune deleted both between the submit's two statements. Nothing is
    stored; a retry finds the key free (the execution is gone) or the execution back
    (the prune kept its day), and the HTTP clients retry a keyed submit on this 503.
    """
    return StoreUnavailable(
        f"the execution holding idempotency key {key!r} is being pruned (its day of "
        "history is detached, its keys not yet deleted); nothing was stored: try again "
        "in a moment"
    )


def submit_retryable(exc: StoreUnavailable) -> bool:
    """Whether a submit tries again after ``exc``: a lost connection, or the row of its own
    earlier attempt met by a retry (see :func:`~fencepost.store.postgres.outages.lost_race`)."""
    return is_outage(exc) or lost_race(exc)


def _nullable(column: list[Any]) -> list[Any] | None:
    """A column of insert_executions, or None when it holds only NULLs.

    unnest pads a NULL array with NULLs to the length of the others, so a column
    left out costs neither its dumping here nor its parsing there.
    """
    return None if column.count(None) == len(column) else column


def _reuse_plan(batch: int) -> bool | None:
    """psycopg's ``prepare`` for a statement over ``batch`` rows: see PLAN_PER_CALL."""
    return False if batch >= PLAN_PER_CALL else None


def _is_uuid(value: str) -> bool:
    """Ids are UUIDs in PostgreSQL; anything else cannot name an execution."""
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True

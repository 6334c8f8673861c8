"""What a SQL dialect is: the hooks :class:`~fencepost.store.sqlstore.SqlStore`'s plans
are written on, and nothing that decides.

A dialect (:mod:`fencepost.store.sqlite`, :mod:`fencepost.store.postgres`) gives

* its SQL: the text of a named block (:meth:`SqlDialect._q`; PostgreSQL may give the
  text for only the days of history a plan touches, :meth:`SqlDialect._text_for`);
* its connections and clock: :meth:`SqlDialect._read`, :meth:`SqlDialect._write` and
  :meth:`SqlDialect._snapshot`, the executor of one (:meth:`SqlDialect._executor`),
  where a plan runs (:meth:`SqlDialect._run`) and whether a call is retried after a
  lost connection (:meth:`SqlDialect._retried`); the store's now as steps of a plan
  or as the parameter of one statement;
* how values are bound (:meth:`SqlDialect._t`, :meth:`SqlDialect._d`,
  :meth:`SqlDialect._array`, :meth:`SqlDialect._fence_params`,
  :meth:`SqlDialect._schedule_fence_params`, :meth:`SqlDialect._occurrence_params`) and
  how rows become values (:attr:`SqlDialect.rows`); what it is told around a plan
  that inserts executions (:meth:`SqlDialect._cover`, :meth:`SqlDialect._count_inserts`);
* what it can do (:attr:`SqlDialect._now_after_lock`,
  :attr:`SqlDialect._claims_in_one_statement`,
  :attr:`SqlDialect._writes_many_tables`, :attr:`SqlDialect._fences_row_by_row`,
  :attr:`SqlDialect._resize_locks`, :meth:`SqlDialect._prepare_for`) and
  what its ids can name (:meth:`SqlDialect._can_name`);
* the audit of a refused fenced call as steps (:meth:`SqlDialect._refuse_steps`), and
  what a retry recognises as its own earlier attempt's write (:meth:`SqlDialect._ended_steps`).

``tests/unit/test_store_shape.py`` holds a dialect to these hooks and the few plans
PostgreSQL answers some calls of itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

from fencepost.domain.checks import storable
from fencepost.domain.errors import StoreUnavailable
from fencepost.domain.models import Fence
from fencepost.domain.schedules import NewOccurrence
from fencepost.domain.states import Event
from fencepost.store.executors import Execute, Plan, Steps, run
from fencepost.store.rows import RowMapping
from fencepost.store.values import Materialization

T = TypeVar("T")
#: Fences as :func:`~fencepost.store.verbs.sql_changes.fence_key` gives them.
FenceKeys = set[tuple[str, str, int]]


class SqlDialect(ABC):
    """The hooks of a SQL dialect (see the module doc)."""

    #: The dialect's named blocks (see :func:`fencepost.store.sql.load_queries`).
    queries: ClassVar[Mapping[str, str]]
    #: The dialect's row mapping.
    rows: RowMapping
    #: Whether a one-statement write that binds the store's now runs in a transaction,
    #: so that its now is read once the write lock is held (SQLite: the process's clock,
    #: and a writer may wait for the file's lock first). False where the statement reads
    #: the database's own clock (PostgreSQL): one round trip, in autocommit.
    _now_after_lock: ClassVar[bool] = False

    def _q(self, name: str) -> str:
        """The SQL text of the block ``name`` in this dialect."""
        return self.queries[name]

    # -- dialect hooks --------------------------------------------------------------------

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]:
        """A connection in autocommit: for reads, and for a plan that is not atomic (one
        statement, which may write: a node's registration, a schedule's release)."""

    @abstractmethod
    def _write(self) -> AbstractContextManager[Any]:
        """A connection inside a write transaction, committed on a clean exit."""

    def _snapshot(self) -> AbstractContextManager[Any]:
        """A connection on which several reads see one snapshot (a report's statements).

        :meth:`_read` here; a dialect whose reads each see their own overrides it.
        """
        return self._read()

    def _tx_now(self, conn: Any) -> datetime:
        """The store's now, read inside the transaction ``conn`` holds."""
        return run(self._now_steps(), self._executor(conn))

    @abstractmethod
    def _now_steps(self) -> Steps[datetime]:
        """:meth:`_tx_now` as steps of a plan (SQLite: the process clock, no statement;
        PostgreSQL: the server's unless a test pins it)."""

    @abstractmethod
    def _now_param(self) -> Any:
        """The ``now`` parameter of a one-statement verb (None: the database's clock)."""

    @abstractmethod
    def _t(self, value: datetime) -> Any:
        """A time as this dialect binds it."""

    def _t_opt(self, value: datetime | None) -> Any:
        return None if value is None else self._t(value)

    @abstractmethod
    def _d(self, value: timedelta) -> Any:
        """A duration as this dialect binds it."""

    @abstractmethod
    def _array(self, values: Sequence[Any]) -> Any:
        """A list as this dialect binds it."""

    @abstractmethod
    def _can_name(self, row_id: str) -> bool:
        """Whether ``row_id`` can name a stored row at all."""

    @staticmethod
    def _storable(name: str) -> bool:
        """Whether a name (a node's, a schedule's) can be stored: no lone surrogates."""
        return storable(name)

    @abstractmethod
    def _refuse_steps(
        self, fences: Sequence[Fence], verb: str, at: Any, *, again: bool = False
    ) -> Steps[None]:
        """Audit refused fenced calls (a ``STALE_REFUSED`` each; nothing else changes).

        ``at`` is the store's now as this dialect binds it (:meth:`_now_param`; None:
        the statement reads the store's clock itself, after the fenced statement).
        ``again``: a retry whose earlier attempt may have committed these very
        refusals (see ``SqlStore._fenced_apply``): a refusal already on record for the same
        lease and verb is not recorded twice.
        """

    @abstractmethod
    def _fence_params(self, fences: Sequence[Fence]) -> dict[str, Any]:
        """The fences of a set-based fenced statement, bound as the dialect's SQL names
        them (PostgreSQL: three arrays; SQLite: one JSON array of triples)."""

    def _text(self, conn: Any, block: str) -> str:
        """The text of ``block`` to run on ``conn`` (PostgreSQL bounds it to the live days
        of history, read again on ``conn`` when due, so that its plan holds only their
        partitions)."""
        return self._q(block)

    def _text_for(self, block: str, ids: Sequence[str] = ()) -> str:
        """``block``'s text for a plan touching the executions ``ids`` (PostgreSQL may
        name only the days of history that hold live executions). Asked when a plan is
        made, never inside its steps: a dialect may read what it needs on a connection
        of its own."""
        return self._q(block)

    @abstractmethod
    def _schedule_fence_params(self, items: Sequence[Materialization]) -> dict[str, Any]:
        """The fences and new bounds of ``materialize_fenced``, bound as the dialect's SQL
        names them (PostgreSQL: five arrays; SQLite: one JSON array of quintuples)."""

    def _occurrence_params(
        self, occurrences: Sequence[NewOccurrence], now: Any, *, by_caller: bool
    ) -> dict[str, Any]:
        """The columns of ``insert_occurrences``, where one statement inserts occurrences
        (:attr:`_writes_many_tables`); ``now`` as :meth:`_now_param` binds it."""
        raise NotImplementedError("this dialect inserts occurrences table by table")

    def _cover(self, ids: list[str]) -> None:
        """Told, before a plan that inserts executions with these ids is run, outside
        it (PostgreSQL: every id's day has its partition, and the live window takes
        them in)."""
        return

    def _count_inserts(self, rows_inserted: int) -> None:
        """Told how many executions a committed plan inserted (PostgreSQL counts them
        toward a refresh of its planner's statistics)."""
        return

    def _prepare_for(self, rows: int) -> bool | None:
        """A set-based statement's ``prepare`` over ``rows`` rows (see Statement)."""
        return None

    #: Whether a claim chooses and leases in one statement (PostgreSQL: a CTE with ``SKIP
    #: LOCKED`` that reads the server's clock, blocks ``claim``, ``claim_queues``,
    #: ``claim_capped`` and ``claim_capped_queues``), or the plan chooses queue by queue
    #: and leases with statements of its own, in the write transaction (SQLite:
    #: ``claim_live_queues``, ``claim_candidates_queue``, ``claim_update``, ...).
    _claims_in_one_statement: ClassVar[bool] = False

    #: Whether one statement may write several tables, as PostgreSQL's data-modifying
    #: CTEs do: a fenced heartbeat also stores its progress (``heartbeat_fenced``), a
    #: completion its result and COMPLETED transition (``complete_fenced``,
    #: ``complete_returning``), a batch of prune its rollups and everything that hangs
    #: off its executions (``prune_batch``). Else the plan writes those with statements
    #: of their own (SQLite: an UPDATE or DELETE writes one table): ``set_progress``,
    #: ``set_result`` and ``insert_completed``, ``slo_rollup`` and the ``prune_*``.
    _writes_many_tables: ClassVar[bool] = False

    #: Whether a fenced completion runs once per lease, its changed-row count the
    #: verdict (SQLite: in process, one prepared statement stepped per lease costs 16 µs
    #: a row where a set-based UPDATE ... FROM, which builds its join first, costs 25),
    #: rather than once per round over all of them, returning the ids it ended.
    _fences_row_by_row: ClassVar[bool] = False

    #: The blocks a resize of the bucket count runs first, in its transaction, to wait
    #: for migrations and hold off every writer of executions (PostgreSQL). None where
    #: the write transaction itself holds the only write lock (SQLite's file lock).
    _resize_locks: ClassVar[tuple[str, ...]] = ()

    def _ended_steps(self, fences: Sequence[Fence], events: Sequence[Event]) -> Steps[FenceKeys]:
        """The ``fences`` (as :func:`~fencepost.store.verbs.sql_changes.fence_key`) whose
        lease its own holder ended with one of ``events``, as steps of a plan: what a
        retry after an unknown COMMIT recognises as its own earlier attempt's write.

        None here: only a store that retries after a lost connection asks (PostgreSQL).
        SQLite never does: it runs in this process, so a COMMIT that returns or raises
        tells its outcome, and there is no connection to lose in between.
        """
        return set()
        yield  # a generator, for yield from

    # -- running plans ---------------------------------------------------------------------

    @abstractmethod
    def _executor(self, conn: Any) -> Execute:
        """The executor function of one of the store's own connections."""

    def _run(self, plan: Plan[T]) -> T:
        """Run a verb's plan on the store's own connection: in a write transaction when
        it is atomic, else in autocommit (:meth:`_read`). (An AsyncStore runs the same
        plan on its own executor.)"""
        with self._write() if plan.atomic else self._read() as conn:
            return run(plan.steps, self._executor(conn))

    # -- a call that outlives a lost connection ----------------------------------------

    def _retried(
        self,
        attempt: Callable[[bool], T],
        what: str,
        retry_if: Callable[[StoreUnavailable], bool] | None = None,
        *,
        only_unsent: bool = False,
    ) -> T:
        """``attempt(again)``, once. A dialect whose connection can be lost in the middle
        of a call (PostgreSQL) runs it again, with ``again`` True, after such a loss:
        ``what`` names the call in its log, ``retry_if`` says which failures to retry;
        ``only_unsent``: only those that failed before any statement of the call reached
        the server (a claim, whose lost answer no retry could recognise).
        """
        return attempt(False)

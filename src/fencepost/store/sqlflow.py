"""Flow control for the SQL stores: the verbs' plans and a limited claim's reads and writes.

Written once for both dialects over their named blocks (``flow_*`` in each
``queries.sql``); what differs is only how a dialect binds times, durations and
arrays (:class:`~fencepost.store.sqlstore.SqlStore`'s ``_t``, ``_d``, ``_array``) and
how its rows hand them back (``rows.instant``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain.limits import Candidate, Held, Limit, Rate, TokenBucket, scope_of
from fencepost.store.executors import Plan, Statement, Steps, run
from fencepost.store.flow import FlowChange, Pair, Throttle, ThrottleCount, describe, ready_at
from fencepost.store.values import ClaimArguments
from fencepost.store.verbs import sql_changes, sql_reading

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


def limit_from_row(store: SqlStore, row: Sequence[Any]) -> Limit:
    """A :class:`Limit` from a row of ``limit_columns``."""
    scope, count, period, burst, concurrency, per_key, paused, source, by, at = row
    return Limit(
        scope=scope,
        rate=None if count is None else Rate(count=float(count), period=float(period)),
        burst=burst,
        concurrency=concurrency,
        per_key=bool(per_key),
        paused=bool(paused),
        source=source,
        updated_by=by,
        updated_at=None if at is None else store.rows.instant(at),
    )


def limit_params(store: SqlStore, limit: Limit, now: datetime) -> dict[str, Any]:
    return {
        "scope": limit.scope,
        "rate_count": None if limit.rate is None else limit.rate.count,
        "rate_period": None if limit.rate is None else limit.rate.period,
        "burst": limit.burst,
        "concurrency": limit.concurrency,
        "per_key": limit.per_key,
        "updated_by": limit.updated_by,
        "now": store._t(now),
    }


def log_change(
    store: SqlStore, now: datetime, actor: str | None, action: str, scope: str, detail: str
) -> Statement:
    return Statement(
        store._q("flow_log_change"),
        {
            "now": store._t(now),
            "actor": actor or "operator",
            "action": action,
            "scope": scope,
            "detail": detail,
        },
    )


# -- the verbs' plans ---------------------------------------------------------------------


def set_limit_plan(store: SqlStore, limit: Limit) -> Plan[Limit]:
    def steps() -> Steps[Limit]:
        now = yield from store._now_steps()
        row = yield Statement(store._q("flow_set_limit"), limit_params(store, limit, now), "one")
        stored = limit_from_row(store, row)
        yield log_change(store, now, limit.updated_by, "set", limit.scope, describe(stored))
        return stored

    return Plan(steps())


def read_limits_plan(store: SqlStore) -> Plan[list[Limit]]:
    def steps() -> Steps[list[Limit]]:
        found = yield Statement(store._q("flow_limits"), {}, "all")
        return [limit_from_row(store, r) for r in found]

    return Plan(steps(), atomic=False)


def remove_limit_plan(store: SqlStore, scope: str, actor: str) -> Plan[bool]:
    def steps() -> Steps[bool]:
        now = yield from store._now_steps()
        row = yield Statement(store._q("flow_get_limit"), {"scope": scope}, "one")
        if row is None:
            return False
        old = limit_from_row(store, row)
        if old.rate is None and old.concurrency is None:
            return False
        block = "flow_clear_limit" if old.paused else "flow_delete_limit"
        yield Statement(store._q(block), {"scope": scope})
        yield log_change(store, now, actor, "remove", scope, describe(old))
        return True

    return Plan(steps())


def pause_plan(store: SqlStore, queue: str, actor: str, paused: bool) -> Plan[Limit]:
    scope = scope_of("queue", queue)

    def steps() -> Steps[Limit]:
        now = yield from store._now_steps()
        row = yield Statement(store._q("flow_get_limit"), {"scope": scope}, "one")
        old = None if row is None else limit_from_row(store, row)
        params = {"scope": scope, "updated_by": actor, "now": store._t(now)}
        if paused:
            if old is not None and old.paused:
                return old
            yield Statement(store._q("flow_pause"), params)
            yield log_change(store, now, actor, "pause", scope, "")
        else:
            if old is None or not old.paused:
                return old or Limit(scope=scope)
            since = old.updated_at or now
            resumed = {
                "scope": scope,
                "queue": queue,
                "now": store._t(now),
                "since": store._t(since),
            }
            yield Statement(store._q("flow_resume_throttles"), resumed)
            if "flow_resume_held" in store.queries:  # the held time, on the executions' rows
                yield Statement(store._q("flow_resume_held"), resumed)
            if "flow_resume_totals" in store.queries:  # PostgreSQL adds them in one statement
                yield Statement(
                    store._q("flow_resume_totals"), {"scope": scope, "now": store._t(now)}
                )
            if old.rate is None and old.concurrency is None:
                yield Statement(store._q("flow_delete_limit"), {"scope": scope})
            else:
                yield Statement(store._q("flow_unpause"), params)
            yield log_change(store, now, actor, "resume", scope, "")
        row = yield Statement(store._q("flow_get_limit"), {"scope": scope}, "one")
        return Limit(scope=scope) if row is None else limit_from_row(store, row)

    return Plan(steps())


def declare_plan(store: SqlStore, limits: Sequence[Limit]) -> Plan[None]:
    def steps() -> Steps[None]:
        now = yield from store._now_steps()
        for limit in sorted(limits, key=lambda lim: lim.scope):
            written = yield Statement(
                store._q("flow_declare_limit"), limit_params(store, limit, now), "one"
            )
            if written is not None:
                yield log_change(
                    store, now, limit.updated_by, "declare", limit.scope, describe(limit)
                )

    return Plan(steps())


def changes_plan(store: SqlStore, limit: int) -> Plan[list[FlowChange]]:
    def steps() -> Steps[list[FlowChange]]:
        found = yield Statement(store._q("flow_changes"), {"limit": limit}, "all")
        return [
            FlowChange(store.rows.instant(at), actor, action, scope, detail)
            for at, actor, action, scope, detail in found
        ]

    return Plan(steps(), atomic=False)


def throttled_plan(store: SqlStore, window: timedelta | None) -> Plan[list[ThrottleCount]]:
    def steps() -> Steps[list[ThrottleCount]]:
        if window is None:
            found = yield Statement(store._q("flow_throttle_totals"), {}, "all")
        else:
            now = yield from store._now_steps()
            found = yield Statement(
                store._q("flow_throttled"), {"since": store._t(now - window)}, "all"
            )
        return [
            ThrottleCount(scope, int(n), timedelta(seconds=float(held))) for scope, n, held in found
        ]

    return Plan(steps(), atomic=False)


def throttles_plan(store: SqlStore, execution_id: str) -> Plan[list[Throttle]]:
    """:meth:`Store.throttles <fencepost.store.flow.FlowVerbs.throttles>` as a plan."""

    def throttle(row: tuple[Any, ...]) -> Throttle:
        found, scope, held, at = row
        return Throttle(str(found), scope, store.rows.duration(held), store.rows.instant(at))

    return sql_reading.trail_plan(store, "flow_throttles_of", execution_id, throttle)


def prune_plan(store: SqlStore, cutoff: datetime) -> Plan[None]:
    def steps() -> Steps[None]:
        now = yield from store._now_steps()
        params = {"cutoff": store._t(cutoff), "now": store._t(now)}
        if "flow_prune" in store.queries:
            yield Statement(store._q("flow_prune"), params)
        else:
            yield Statement(store._q("flow_prune_throttles"), params)
            yield Statement(store._q("flow_prune_buckets"), params)

    return Plan(steps())


# -- a limited claim's transaction ---------------------------------------------------------


class SqlFlow:
    """A SQL store's side of a limited claim (:class:`fencepost.store.flow.FlowTransaction`),
    on the connection of the claim's transaction; ``lease`` is the dialect's claim of
    known ids in that same transaction."""

    def __init__(self, store: SqlStore, conn: Any, now: datetime | None, lease: Any) -> None:
        self.store, self.conn, self._lease = store, conn, lease
        #: The claim's now: given, or read by :meth:`state` (after the limits' lock).
        self.now: datetime = now  # type: ignore[assignment]
        self._execute = store._executor(conn)
        #: The limits the claim runs under, by scope (set once read).
        self.by_scope: dict[str, Limit] = {}

    def _all(self, block: str, params: dict[str, Any]) -> list[Any]:
        text = self.store._text(self.conn, block)
        return run(fetched(Statement(text, params, "all")), self._execute)

    def locked_limits(self) -> list[Limit]:
        """Every limit, held for the transaction (PostgreSQL: FOR UPDATE)."""
        limits = [limit_from_row(self.store, r) for r in self._all("flow_limits_locked", {})]
        self.by_scope = {lim.scope: lim for lim in limits}
        return limits

    def state(self, limits: Sequence[Limit]) -> tuple[dict[Pair, int], dict[Pair, TokenBucket]]:
        s = self.store
        if "flow_state" not in s.queries:
            counted = [lim for lim in limits if lim.concurrency is not None]
            return self.running(counted), self.buckets(limits, None)
        found = self._all(
            "flow_state",
            {
                "now": s._now_param(),
                "scopes": s._array([lim.scope for lim in limits]),
                "kinds": s._array([lim.kind for lim in limits]),
                "names": s._array([lim.name for lim in limits]),
                "per_keys": s._array([lim.per_key for lim in limits]),
                "counted": s._array([lim.concurrency is not None for lim in limits]),
            },
        )
        running: dict[Pair, int] = {}
        buckets: dict[Pair, TokenBucket] = {}
        for kind, scope, key, number, at, denied in found:
            if kind == "now":
                self.now = s.rows.instant(at)
            elif kind == "running":
                running[(scope, key)] = int(number)
            else:
                buckets[(scope, key)] = TokenBucket(
                    tokens=float(number),
                    at=s.rows.instant(at),
                    denied_at=None if denied is None else s.rows.instant(denied),
                )
        return running, buckets

    def running(self, limits: Sequence[Limit]) -> dict[Pair, int]:
        if not limits:
            return {}
        s = self.store
        found = self._all(
            "flow_running",
            {
                "scopes": s._array([lim.scope for lim in limits]),
                "kinds": s._array([lim.kind for lim in limits]),
                "names": s._array([lim.name for lim in limits]),
                "per_keys": s._array([lim.per_key for lim in limits]),
                "now": s._t(self.now),
            },
        )
        return {(scope, key): int(n) for scope, key, n in found}

    def buckets(
        self, limits: Sequence[Limit], pairs: Iterable[Pair] | None
    ) -> dict[Pair, TokenBucket]:
        s = self.store
        if pairs is None:
            found = self._all(
                "flow_buckets_held",
                {"scopes": s._array([lim.scope for lim in limits]), "now": s._t(self.now)},
            )
        else:
            wanted = list(pairs)
            if not wanted:
                return {}
            found = self._all(
                "flow_buckets_of",
                {
                    "scopes": s._array([p[0] for p in wanted]),
                    "keys": s._array([p[1] for p in wanted]),
                },
            )
        return {
            (scope, key): TokenBucket(
                tokens=float(tokens),
                at=s.rows.instant(at),
                denied_at=None if denied is None else s.rows.instant(denied),
            )
            for scope, key, tokens, at, denied in found
        }

    def candidates(self, request: ClaimArguments, held: Held, n: int) -> list[Candidate]:
        s = self.store
        params = sql_changes.claim_params(s, request) | {
            "now": s._t(self.now),
            "n": n,
            "held_jobs": s._array(list(held.jobs)),
            "held_queues": s._array(list(held.queues)),
            "held_job_keys": s._array([f"{j}\x1f{k}" for j, k in held.job_keys]),
            "held_queue_keys": s._array([f"{q}\x1f{k}" for q, k in held.queue_keys]),
        }
        found = s._flow_candidates(self.conn, params, request)
        return [
            Candidate(id=str(i), job=job, queue=queue, limit_key=key, due_at=s.rows.instant(due))
            for i, job, queue, key, due, *_ in found
        ]

    def lease(self, request: ClaimArguments) -> Any:
        return self._lease(self.conn, request, self.now)

    def write(self, buckets: dict[Pair, TokenBucket], throttles: Sequence[Throttle]) -> None:
        self.store._write_flow(self.conn, bucket_rows(buckets, self.by_scope), throttles)


def fetched(statement: Statement) -> Steps[Any]:
    """A plan's steps of one statement: its answer."""
    found = yield statement
    return found


def bucket_rows(
    buckets: dict[Pair, TokenBucket], limits: dict[str, Limit]
) -> list[tuple[str, str, float, datetime, datetime, datetime | None]]:
    """The rows ``flow_put_bucket(s)`` writes: each bucket with its ``ready_at``."""
    return [
        (scope, key, b.tokens, b.at, ready_at(limits.get(scope), b), b.denied_at)
        for (scope, key), b in sorted(buckets.items())
    ]


__all__ = ["SqlFlow", "bucket_rows", "fetched"]

"""The reports of the SQL stores that read executions by job and objective, as steps of a
plan: the figures of ``Store.stats``, the counts by job (``Store.job_counts``), the due
groups and the service-level report (``Store.slo``).

The store runs them on the connection they need: the SLO's statements on one snapshot
(``SqlDialect._snapshot``), so that its counts, offenders and rollups agree.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from fencepost.domain.ids import id_floor
from fencepost.domain.reports import (
    DueCount,
    JobCounts,
    Lateness,
    SloOffender,
    SloReport,
    Stats,
    tabulate,
)
from fencepost.domain.slo import (
    BURN_WINDOWS,
    DAY,
    DEFAULT_CLAIM_WITHIN,
    DEFAULT_FINISH_WITHIN,
    ErrorClass,
    Tally,
    Verdict,
    day_number,
)
from fencepost.domain.states import State
from fencepost.store.executors import Plan, Statement, Steps
from fencepost.store.values import ID_CLOCK_SLACK, UNFINISHED_STATES, unix_ms
from fencepost.store.verbs.reports import (
    SloRequest,
    burn_key,
    stats_error_params,
    stats_report,
    throttle_lookback,
)
from fencepost.timing.planning import HELD, NEVER

if TYPE_CHECKING:
    from fencepost.store.sqlstore import SqlStore


def job_counts_steps(store: SqlStore, window: timedelta, job: str | None) -> Steps[JobCounts]:
    """``Store.job_counts``: the executions created in ``window`` by job and state."""
    now = yield from store._now_steps()
    start = now - window
    params = {
        # Clamped at the epoch: an id's time part cannot be negative.
        "first_id": id_floor(max(0, unix_ms(start - ID_CLOCK_SLACK))),
        "start": store._t(start),
        "now": store._t(now),
        "job": job,
    }
    found = yield Statement(store._q("job_counts"), params, "all")
    counts = tabulate((name, State(state), int(n)) for name, state, n in found)[1]
    return JobCounts(at=now, window=window, by_job=counts)


def slo_steps(store: SqlStore, request: SloRequest) -> Steps[SloReport]:
    """``Store.slo``: the verdicts in the window and the burn windows, the worst
    offenders, and (for whole days at the default objectives) the pruned days' rollups."""
    short, long = BURN_WINDOWS
    now = yield from store._now_steps()
    start = request.start(now)
    params = {
        "now": store._t(now),
        "start": store._t(start),
        "since": store._t(min(start, now - long)),
        "h6": store._t(now - long),
        "h1": store._t(now - short),
        "claim_within": store._d(request.claim_within),
        "finish_within": store._d(request.finish_within),
        "worst": request.worst,
    }
    found = yield Statement(store._q("slo"), params, "all")
    worst = (yield Statement(store._q("slo_worst"), params, "all")) if request.worst else []
    rolled: list[Any] = []
    # The rollups hold whole days at the default objectives: only a report of whole
    # days at those objectives may add them.
    if request.at_defaults and request.window >= DAY:
        days = {"first_day": day_number(start), "last_day": day_number(now)}
        rolled = yield Statement(store._q("slo_rollups_between"), days, "all")
    counts: dict[str, dict[Verdict, int]] = {}

    def add(name: str, verdict: str, n: Any) -> None:
        if n:
            tally = counts.setdefault(name, {})
            tally[Verdict(verdict)] = tally.get(Verdict(verdict), 0) + int(n)

    for objective, verdict, in_window, in_long, in_short in found:
        if verdict is None:  # undecided
            continue
        add(objective, verdict, in_window)
        add(burn_key(objective, long), verdict, in_long)
        add(burn_key(objective, short), verdict, in_short)
    for objective, verdict, n in rolled:
        add(objective, verdict, n)
    instant, duration = store.rows.instant, store.rows.duration
    return request.report(
        now,
        {name: Tally(counts=tally) for name, tally in counts.items()},
        [
            SloOffender(
                execution_id=str(id_),
                job=job,
                planned_at=instant(planned_at),
                claimed_at=None if claimed_at is None else instant(claimed_at),
                lateness=duration(lateness),
                state=State(state),
                verdict=None if verdict is None else Verdict(verdict),
            )
            for id_, job, planned_at, claimed_at, lateness, state, verdict in worst
        ],
        rolled_up=sum(int(n) for objective, _, n in rolled if objective == "claim"),
    )


def bucket_counts_plan(store: SqlStore, states: tuple[State, ...]) -> Plan[dict[int, int]]:
    """``ReportVerbs._bucket_counts``: the executions in ``states`` by bucket (every
    unfinished one through its own index)."""
    if set(states) == set(UNFINISHED_STATES):
        statement = Statement(store._q("bucket_counts_unfinished"), None, "all")
    else:
        statement = Statement(store._q("bucket_counts"), {"states": store._array(states)}, "all")

    def steps() -> Steps[dict[int, int]]:
        found = yield statement
        return {int(bucket): int(count) for bucket, count in found}

    return Plan(steps(), atomic=False)


def rollup_params(store: SqlStore, now: datetime | None = None) -> dict[str, Any]:
    """The parameters of ``slo_rollup`` (prune's, a deletion's): the verdicts at the
    default objectives, which reports add the rollups to, at ``now``, else at the
    store's now as one statement binds it (``SqlDialect._now_param``: PostgreSQL's
    statement reads the server's clock unless a test pins it)."""
    return {
        "now": store._now_param() if now is None else store._t(now),
        "claim_within": store._d(DEFAULT_CLAIM_WITHIN),
        "finish_within": store._d(DEFAULT_FINISH_WITHIN),
    }


def due_groups_plan(store: SqlStore) -> Plan[tuple[datetime, list[DueCount], int]]:
    """``ReportVerbs._due_groups``: the store's now, the due executions by job and
    pinned version, and the active schedules, in one statement (one snapshot)."""

    def steps() -> Steps[tuple[datetime, list[DueCount], int]]:
        now = yield from store._now_steps()
        params = {"now": store._t(now), "held": store._t(HELD), "never": store._t(NEVER)}
        row = yield Statement(store._q("due_groups"), params, "one")
        groups, active = row
        due = [
            DueCount(job=job, job_version=v, count=n) for job, v, n in store.rows.document(groups)
        ]
        return now, due, int(active)

    return Plan(steps(), atomic=False)


def stats_plan(store: SqlStore, window: timedelta) -> Plan[Stats]:
    """``ReportVerbs._stats``: every figure of :meth:`Store.stats` at the store's now, in
    one statement (one snapshot)."""

    def steps() -> Steps[Stats]:
        now = yield from store._now_steps()
        classify = stats_error_params()
        params = classify | {
            "now": store._t(now),
            "start": store._t(now - window),
            "held": store._t(HELD),
            "lookback": store._t(throttle_lookback(now, window)),
            "claim_within": store._d(classify["claim_within"]),
        }
        row = yield Statement(store._q("stats"), params, "one")
        counts, backlog, refused, expiries, count, ranks, longest, throttled, *more = row
        heartbeats, timed_out, failed, late_claims = more
        p50, p90, p99 = (
            (None, None, None)
            if ranks is None
            else (None if v is None else store.rows.duration(v) for v in store.rows.document(ranks))
        )
        longest = None if longest is None else store.rows.duration(longest)
        lateness = Lateness(count=count, p50=p50, p90=p90, p99=p99, max=longest)
        held = [
            (scope, n, timedelta(microseconds=us))
            for scope, n, us in store.rows.document(throttled)
        ]
        errors = {
            ErrorClass.LATE_CLAIM: late_claims,
            ErrorClass.RENEWAL_FAILED: expiries + heartbeats,
            ErrorClass.STALE_COMPLETION_REFUSED: refused - heartbeats,
            ErrorClass.TIMED_OUT: timed_out,
            ErrorClass.HANDLER_FAILED: failed,
        }
        by_group = store.rows.document(counts)
        return stats_report(
            now, window, by_group, backlog, lateness, refused, expiries, held, errors
        )

    return Plan(steps(), atomic=False)

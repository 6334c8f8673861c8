"""The memory store's reports, history charts, prune and deletions."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from fencepost.domain.bulk import DELETED, Action, Deletion, DeletionPage
from fencepost.domain.errors import (
    InvalidTransition,
)
from fencepost.domain.history import Finished, RollUp, SummaryBy, Totals, Window
from fencepost.domain.models import (
    Execution,
)
from fencepost.domain.reports import (
    DueCount,
    JobCounts,
    SloOffender,
    SloReport,
    Stats,
    event_class,
    lateness,
    tabulate,
)
from fencepost.domain.slo import (
    BURN_WINDOWS,
    DAY,
    DEFAULT_CLAIM_WITHIN,
    ErrorClass,
    Tally,
    Verdict,
    claim_verdict,
    counted,
    day_number,
    finish_verdict,
    merge,
    rollup_verdicts,
    tally,
)
from fencepost.domain.states import (
    TERMINAL_STATES,
    WAITING_STATES,
    Event,
    State,
)
from fencepost.store.memory.core import MemoryCore, RowFacts
from fencepost.store.verbs.reports import SloRequest, burn_key, stats_report, throttle_lookback
from fencepost.timing.planning import HELD, NEVER

_ZERO = timedelta(0)


class MemoryReports(MemoryCore):
    """Reports, the history charts, prune and deletions."""

    def _bucket_counts(self, states: tuple[State, ...]) -> dict[int, int]:
        with self._lock:
            return dict(Counter(e.bucket for e in self._rows.values() if e.state in states))

    def _stats(self, window: timedelta) -> Stats:
        with self._lock:
            now = self.clock.now()
            start = now - window
            counts = [(e.job, e.queue, e.state, 1) for e in self._rows.values()]
            backlog = sum(
                1
                for e in self._rows.values()
                if e.state in WAITING_STATES and e.due_at <= now and e.due_at < HELD
            )
            late: list[timedelta] = []
            refused = expiries = 0
            errors: Counter[ErrorClass] = Counter()
            # Throttle records read back to tell throttled claims from late ones.
            lookback = throttle_lookback(now, window)
            throttled_at: dict[str, list[datetime]] = {}
            held: dict[str, tuple[int, timedelta]] = {}
            for th in self._throttles:
                if lookback < th.at <= now:
                    throttled_at.setdefault(th.execution_id, []).append(th.at)
                if start < th.at <= now:
                    n, total = held.get(th.scope, (0, _ZERO))
                    held[th.scope] = (n + 1, total + th.held)
            for trail in self._audit.values():
                for t in trail:
                    if not start < t.at <= now:
                        continue
                    error = event_class(t.event, t.from_state, t.reason)
                    if error is not None:
                        errors[error] += 1
                    if t.event is Event.STALE_REFUSED:
                        refused += 1
                    elif t.event is Event.LEASE_EXPIRED:
                        expiries += 1
                    elif t.event is Event.CLAIMED:
                        due_at = self._rows[t.execution_id].due_at
                        expiries += t.from_state is State.RUNNING
                        marks = throttled_at.get(t.execution_id, ())
                        if not any(due_at <= mark <= t.at for mark in marks):
                            late.append(max(t.at - due_at, _ZERO))
            # Late first claims, from the facts the SLO keeps (as the SQL stores read
            # them off the row): the claim objective's verdict at its default.
            for execution_id, facts in self._facts.items():
                claimed = facts.first_claimed_at
                row = self._rows.get(execution_id)
                if row is None or claimed is None or not start < claimed <= now:
                    continue
                verdict = claim_verdict(facts.of(row), now, DEFAULT_CLAIM_WITHIN)
                errors[ErrorClass.LATE_CLAIM] += verdict is Verdict.LATE_CLAIM
        throttled = [(scope, n, total) for scope, (n, total) in held.items()]
        return stats_report(
            now, window, counts, backlog, lateness(late), refused, expiries, throttled, errors
        )

    def _due_groups(self) -> tuple[datetime, list[DueCount], int]:
        with self._lock:
            now = self.clock.now()
            groups = Counter(
                (e.job, e.job_version)
                for e in self._rows.values()
                if e.state in WAITING_STATES and e.due_at <= now and e.due_at < HELD
            )
            active = sum(1 for s in self._schedules.values() if not s.paused and s.next_due < NEVER)
        due = [DueCount(job=job, job_version=v, count=n) for (job, v), n in groups.items()]
        return now, due, active

    def _job_counts(self, window: timedelta, job: str | None) -> JobCounts:
        with self._lock:
            now = self.clock.now()
            found = [
                (e.job, e.state, 1)
                for e in self._rows.values()
                if now - window < e.created_at <= now and (job is None or e.job == job)
            ]
        return JobCounts(at=now, window=window, by_job=tabulate(found)[1])

    def _slo(self, request: SloRequest) -> SloReport:
        with self._lock:
            now = self.clock.now()
            start = request.start(now)
            recent = {w: now - w for w in BURN_WINDOWS}
            since = min(start, *recent.values())
            rows = [
                (e, self._facts.get(e.id, RowFacts()).of(e))
                for e in self._rows.values()
                if e.planned_at is not None and since <= e.planned_at <= now
            ]
            rolled = (
                [
                    (objective, verdict, n)
                    for (day, _, objective, verdict), n in self._rollups.items()
                    if day_number(start) <= day <= day_number(now)
                ]
                if request.at_defaults and request.window >= DAY
                else []
            )
        verdicts: dict[str, list[Verdict | None]] = {}
        offenders = []
        for e, facts in rows:
            if not counted(facts):
                continue
            claim = claim_verdict(facts, now, request.claim_within)
            finish = finish_verdict(facts, now, request.finish_within, request.claim_within)
            for objective, verdict in (("claim", claim), ("finish", finish)):
                names = [objective] if facts.planned_at >= start else []
                names += [
                    burn_key(objective, w) for w, at in recent.items() if facts.planned_at >= at
                ]
                for name in names:
                    verdicts.setdefault(name, []).append(verdict)
            if facts.planned_at < start:
                continue
            claimed_at = facts.first_claimed_at
            offenders.append(
                SloOffender(
                    execution_id=e.id,
                    job=e.job,
                    planned_at=facts.planned_at,
                    claimed_at=claimed_at,
                    lateness=max(
                        (now if claimed_at is None else claimed_at) - facts.planned_at, _ZERO
                    ),
                    state=e.state,
                    verdict=claim,
                )
            )
        offenders.sort(key=lambda o: (-o.lateness, o.planned_at, o.execution_id))
        tallies = {name: tally(vs) for name, vs in verdicts.items()}
        from_rollups: dict[str, Counter[Verdict]] = {"claim": Counter(), "finish": Counter()}
        for objective, verdict, n in rolled:
            from_rollups[objective][verdict] += n
        for name, counts in from_rollups.items():
            tallies[name] = merge(tallies.get(name, Tally()), Tally(counts=counts))
        rolled_up = sum(from_rollups["claim"].values())
        return request.report(now, tallies, offenders[: request.worst], rolled_up)

    def _roll_up_history(self, max_rows: int, *, wait: bool) -> RollUp:
        if not self._rolling_up.acquire(blocking=wait):  # another thread is rolling up
            with self._lock:
                mark = self._minutes.mark
            return RollUp(executions=0, rolled_up_to=mark.rolled_up_to, caught_up=False)
        try:
            with self._lock:
                return self._roll_up_locked(max_rows)
        finally:
            self._rolling_up.release()

    def _roll_up_locked(self, max_rows: int) -> RollUp:
        """One roll-up, under the store's lock (see store.history.MinuteRows)."""
        reading = self._minutes.range(self.clock.now())
        finished = [
            (
                e.id,
                Finished(
                    job=e.job,
                    queue=e.queue,
                    attempt=e.attempt,
                    finished_at=e.updated_at,
                    facts=self._facts.get(e.id, RowFacts()).of(e),
                ),
            )
            for e in self._rows.values()
            if e.state.is_terminal
        ]
        throttles = [
            (t.at, t.held, e.job, e.queue)
            for t in self._throttles
            if (e := self._rows.get(t.execution_id)) is not None
        ]
        return self._minutes.roll_up(reading, finished, throttles, max_rows)

    def _history_sums(
        self, window: Window, job: str | None, queue: str | None
    ) -> tuple[datetime, datetime | None, dict[int, Totals]]:
        with self._lock:
            now = self.clock.now()
            sums = self._minutes.sums(window, now, job, queue)
            return now, self._minutes.mark.rolled_up_to, sums

    def _summary_sums(
        self, window: Window, by: SummaryBy
    ) -> tuple[datetime, datetime | None, dict[str, Totals]]:
        with self._lock:
            now = self.clock.now()
            sums = self._minutes.by_name(window, now, by)
            return now, self._minutes.mark.rolled_up_to, sums

    def _prune_history(self, before: int) -> None:
        with self._lock:
            self._minutes.prune(before)

    def _store_now(self) -> datetime:
        return self.clock.now()

    def _count_prunable(self, cutoff: datetime) -> int:
        with self._lock:
            return sum(1 for e in self._rows.values() if _prunable(e, cutoff))

    def _prune_batch(self, cutoff: datetime, batch: int) -> int:
        with self._lock:
            doomed = sorted(
                (e for e in self._rows.values() if _prunable(e, cutoff)),
                key=lambda e: (e.updated_at, e.id),
            )[:batch]
            now = self.clock.now()
            for e in doomed:
                self._forget(e, now)
            return len(doomed)

    def _forget(self, e: Execution, now: datetime) -> None:
        """Delete a finished execution and what is kept of it (prune, delete)."""
        # Its verdicts outlive it, in the day's rollups (domain.slo).
        facts = self._facts.pop(e.id, RowFacts()).of(e)
        for objective, verdict in rollup_verdicts(facts, now):
            self._rollups[(day_number(facts.planned_at), e.job, objective, verdict)] += 1
        del self._rows[e.id]
        del self._request_hashes[e.id]
        self._trace_contexts.pop(e.id, None)
        self._unset.pop(e.id, None)
        if e.idempotency_key is not None:
            del self._by_key[e.idempotency_key]
        self._audit.pop(e.id, None)
        self._commands.pop(e.id, None)

    # -- acting on many --------------------------------------------------------------------

    def _act_group(
        self, action: Action, execution_ids: Sequence[str], actor: str, now: datetime
    ) -> list[str]:
        with self._lock:  # each check and its change at once, as a transaction would
            return super()._act_group(action, execution_ids, actor, now)

    def _delete(self, execution_id: str, actor: str) -> Deletion:
        with self._lock:
            e = self._row(execution_id)
            if not e.state.is_terminal:
                raise InvalidTransition(e.id, e.state, DELETED)
            now = self.clock.now()
            self._forget(e, now)
            self._throttles = [t for t in self._throttles if t.execution_id != e.id]
            deletion = Deletion(
                execution_id=e.id, job=e.job, queue=e.queue, state=e.state, actor=actor, at=now
            )
            self._deletion_log.append((self._next_seq(), deletion))
            return deletion

    def _deletions(self, limit: int, after: int | None) -> DeletionPage:
        with self._lock:
            found = [(n, d) for n, d in self._deletion_log if after is None or n > after]
        more = len(found) > limit
        found = found[:limit]
        return DeletionPage(
            items=[d for _, d in found], next_cursor=str(found[-1][0]) if more else None
        )

    def _prune_deletions(self, cutoff: datetime) -> None:
        with self._lock:
            self._deletion_log = [(n, d) for n, d in self._deletion_log if d.at > cutoff]


def _prunable(e: Execution, cutoff: datetime) -> bool:
    return e.state in TERMINAL_STATES and e.updated_at <= cutoff

"""The contract of the service-level report (see :mod:`fencepost.domain.slo`).

Measured from the planned time, which retries, takeovers and replays never move;
backfills and replays left out and counted; every miss in one error class; the
error budget and its burn rates; and a report that ``prune`` does not change.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.models import Lease, Occurrence
from fencepost.domain.reports import SloReport
from fencepost.domain.slo import ErrorClass, Verdict
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import ContractFixtures, at
from fencepost.timing.planning import HELD

DAY = 86_400.0


def claim_one(store: Store, clock: ManualClock, second: float, job: str = "job") -> Lease:
    """Claim the one due execution of ``job`` at ``second``."""
    clock.set(second)
    (lease,) = store.claim("w", jobs=[job], ttl=10_000)
    return lease


def finish(store: Store, clock: ManualClock, lease: Lease, second: float) -> None:
    clock.set(second)
    store.complete(lease, "ok")


def counts(report: SloReport) -> tuple[Any, ...]:
    """Every figure of a report but its worst offenders and its instant."""
    return (report.window, report.start, report.claimed, report.finished)


class SloContract(ContractFixtures):
    """The service-level report: planned time, exclusions, classes, budget, pruning."""

    def test_a_claim_60_s_late_then_retried_is_a_claim_miss(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", execute_at=at(10))
        lease = claim_one(store, clock, 70)  # 60 s after the planned time
        clock.set(71)
        store.fail(lease, "boom", retry_in=5)  # due again at 76: the planned time stays
        again = claim_one(store, clock, 76)
        finish(store, clock, again, 77)
        stored = store.get(e.id)
        assert (stored.planned_at, stored.due_at) == (at(10), at(76))
        report = store.slo(window=1000)
        assert (report.claimed.met, report.claimed.total) == (0, 1)
        assert report.claimed.misses == {ErrorClass.LATE_CLAIM: 1}
        # Finished 67 s after the planned time: met.
        assert (report.finished.met, report.finished.total) == (1, 1)
        (offender,) = report.worst
        assert (offender.planned_at, offender.claimed_at, offender.lateness) == (
            at(10),
            at(70),
            timedelta(seconds=60),
        )
        assert offender.verdict is Verdict.LATE_CLAIM

    def test_a_finish_503_s_after_the_planned_time_is_a_finish_miss(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit("job", execute_at=at(0))
        lease = claim_one(store, clock, 1)
        clock.set(2)
        store.fail(lease, "boom", retry_in=400)  # due again at 402
        again = claim_one(store, clock, 402)
        finish(store, clock, again, 503)
        report = store.slo(window=1000)
        assert (report.claimed.met, report.claimed.total) == (1, 1)
        assert (report.finished.met, report.finished.total) == (0, 1)
        assert report.finished.misses[ErrorClass.HANDLER_FAILED] == 1
        assert report.finished.consumed == 1

    def test_a_backfill_is_excluded_and_counted(self, store: Store, clock: ManualClock) -> None:
        clock.set(DAY)
        store.add_schedule("job", every=3600, id="s")
        past = [Occurrence(slot=at(h * 3600), due_at=at(h * 3600)) for h in range(6)]
        backfilled = store.add_occurrences("s", past)
        late_submit = store.submit("job", execute_at=at(DAY - 3600))  # asked for the past
        just_now = store.submit("job", execute_at=at(DAY - 0.5))  # a clock a little behind
        clock.set(DAY + 1)
        for _ in range(8):
            lease = claim_one(store, clock, DAY + 1)
            store.complete(lease, "ok")
        report = store.slo(window=2 * DAY)
        for objective in (report.claimed, report.finished):
            assert objective.excluded["backfill"] == 7
            assert (objective.met, objective.total) == (1, 1), "only the submit for now counts"
        assert {e.planned_at for e in backfilled} == {o.due_at for o in past}
        by_id = {o.execution_id: o.verdict for o in store.slo(window=2 * DAY, worst=20).worst}
        assert by_id[late_submit.id] is Verdict.BACKFILL
        assert by_id[just_now.id] is Verdict.MET

    def test_a_replay_is_excluded_and_counted(self, store: Store, clock: ManualClock) -> None:
        e = store.submit("job", execute_at=at(0), max_attempts=1)
        lease = claim_one(store, clock, 1)
        clock.set(2)
        store.fail(lease, "fatal", retryable=False)
        assert store.slo(window=1000).finished.met == 1, "a dead letter in time is met"
        clock.set(600)
        store.replay(e.id)
        finish(store, clock, claim_one(store, clock, 601), 602)
        assert store.get(e.id).planned_at == at(0)
        report = store.slo(window=1000)
        for objective in (report.claimed, report.finished):
            assert objective.excluded["replay"] == 1
            assert objective.total == 0

    def test_each_finish_miss_is_attributed_to_one_class(
        self, store: Store, clock: ManualClock
    ) -> None:
        classes = {
            "expired": ErrorClass.RENEWAL_FAILED,
            "refused-heartbeat": ErrorClass.RENEWAL_FAILED,
            "stale": ErrorClass.STALE_COMPLETION_REFUSED,
            "timeout": ErrorClass.TIMED_OUT,
            "failed": ErrorClass.HANDLER_FAILED,
            "late": ErrorClass.LATE_CLAIM,
            "long": ErrorClass.RAN_LONG,
        }
        # Every one planned at 0 and submitted then (not a backfill).
        expected = {store.submit(job, execute_at=at(0)).id: c for job, c in classes.items()}
        # The lease ran out and was reaped; the next attempt finished late.
        clock.set(1)
        (lease,) = store.claim("w", jobs=["expired"], ttl=5)
        clock.set(10)
        assert store.reap_expired() == 1
        finish(store, clock, claim_one(store, clock, 400, "expired"), 401)
        # A refused heartbeat (a fence the store does not hold), and no takeover.
        held = claim_one(store, clock, 1, "refused-heartbeat")
        with pytest.raises(StaleLease):
            store.heartbeat(replace(held, epoch=held.epoch + 1))
        finish(store, clock, held, 400)
        # A stale completion: released, claimed again, the first holder completes.
        first = claim_one(store, clock, 1, "stale")
        store.release(first)
        second = claim_one(store, clock, 2, "stale")
        clock.set(3)
        with pytest.raises(StaleLease):
            store.complete(first, "zombie")
        finish(store, clock, second, 400)
        # Timed out once, then finished late.
        lease = claim_one(store, clock, 1, "timeout")
        clock.set(2)
        store.fail(lease, "ran past its timeout", timed_out=True, retry_in=300)
        finish(store, clock, claim_one(store, clock, 302, "timeout"), 400)
        # Failed once, then finished late.
        lease = claim_one(store, clock, 1, "failed")
        clock.set(2)
        store.fail(lease, "boom", retry_in=300)
        finish(store, clock, claim_one(store, clock, 302, "failed"), 400)
        # Claimed late, nothing failed.
        finish(store, clock, claim_one(store, clock, 350, "late"), 351)
        # Claimed at once, ran long.
        finish(store, clock, claim_one(store, clock, 1, "long"), 400)
        clock.set(1000)
        report = store.slo(window=2000)
        assert report.finished.total == len(expected)
        assert report.finished.met == 0
        want = dict.fromkeys(report.finished.misses, 0)
        for c in expected.values():
            want[c] += 1
        assert report.finished.misses == want
        assert report.finished.consumed == len(expected)
        # Every first claim came 1 s after the planned time but the late one's (350 s).
        assert report.claimed.misses == {ErrorClass.LATE_CLAIM: 1}

    def test_time_held_by_a_limit_is_excused_and_counted(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.set_limit("job:held", concurrency=1)
        first, second = (store.submit("held", execute_at=at(0)).id for _ in range(2))
        (lease,) = store.claim("w", jobs=["held"], limit=2, ttl=10_000)
        assert lease.execution_id == first
        finish(store, clock, lease, 200)
        again = claim_one(store, clock, 200, "held")  # held back for 200 s
        assert again.execution_id == second
        finish(store, clock, again, 201)
        report = store.slo(window=1000)
        assert report.claimed.excluded["throttled"] == 1
        assert (report.claimed.met, report.claimed.total) == (1, 1)
        assert report.finished.excluded["throttled"] == 0, "finished within 5 min: met"
        assert report.finished.total == 2
        by_id = {o.execution_id: o.verdict for o in report.worst}
        assert by_id[second] is Verdict.THROTTLED

    def test_the_budget_and_its_burn_rates(self, store: Store, clock: ManualClock) -> None:
        clock.set(10 * 3600)
        # 100 executions over the last 10 hours, one late claim in the last hour and
        # one five and a half hours ago.
        for n in range(100):
            planned = 10 * 3600 - (100 - n) * 360 + 1
            clock.set(planned)
            store.submit("job", execute_at=at(planned))
            late = n in (45, 95)  # 5.5 hours ago, and in the last hour
            lease = claim_one(store, clock, planned + (30 if late else 1))
            finish(store, clock, lease, planned + 40)
        clock.set(10 * 3600)
        report = store.slo(window=DAY, claim_target=0.95)
        claimed = report.claimed
        assert (claimed.met, claimed.total, claimed.target) == (98, 100, 0.95)
        assert claimed.budget == pytest.approx(5.0)
        assert claimed.consumed == 2
        assert claimed.remaining == pytest.approx(3.0)
        assert not claimed.missed
        assert not report.missed
        one_hour, six_hours = claimed.burn
        assert (one_hour.window, one_hour.met, one_hour.total) == (timedelta(hours=1), 9, 10)
        assert one_hour.rate == pytest.approx((1 / 10) / 0.05)
        assert (six_hours.met, six_hours.total) == (58, 60)
        assert six_hours.rate == pytest.approx((2 / 60) / 0.05)
        strict = store.slo(window=DAY, claim_target=0.99)
        assert strict.claimed.missed
        assert strict.missed
        assert strict.claimed.remaining == pytest.approx(-1.0)
        assert not strict.finished.missed

    def test_a_window_of_days_starts_at_midnight(self, store: Store, clock: ManualClock) -> None:
        clock.set(3 * DAY + 3600)
        report = store.slo(window=2 * DAY)
        assert report.start == at(DAY), "midnight of the day the window starts in"
        assert store.slo(window=3600).start == at(3 * DAY)
        clock.set(DAY)
        store.submit("job", execute_at=at(DAY))  # planned exactly at the start: counted
        clock.set(3 * DAY + 3600)
        assert store.slo(window=2 * DAY).claimed.total == 1, "never claimed: a late claim"

    def test_the_report_before_a_prune_equals_the_report_after(
        self, store: Store, clock: ManualClock
    ) -> None:
        # 30 days, four executions a day: on time, claimed late, failed then finished
        # late, and a backfill; the report after `prune --older-than 14d` is the same.
        for day in range(30):
            base = day * DAY
            for k, job in enumerate(("on-time", "late", "retried")):
                planned = base + k * 3600
                clock.set(planned)
                store.submit(job, execute_at=at(planned))
                if job == "on-time":
                    finish(store, clock, claim_one(store, clock, planned + 1, job), planned + 2)
                elif job == "late":
                    finish(store, clock, claim_one(store, clock, planned + 60, job), planned + 61)
                else:
                    lease = claim_one(store, clock, planned + 1, job)
                    clock.set(planned + 2)
                    store.fail(lease, "boom", retry_in=600)
                    again = claim_one(store, clock, planned + 602, job)
                    finish(store, clock, again, planned + 603)
            clock.set(base + 5 * 3600)
            store.submit("backfill", execute_at=at(base))
            backfill = claim_one(store, clock, base + 5 * 3600, "backfill")
            finish(store, clock, backfill, base + 5 * 3600)
        clock.set(30 * DAY + 3600)
        before = store.slo()
        assert before.rolled_up == 0
        assert before.claimed.total == 90, "every day is in the window, backfills left out"
        assert before.claimed.excluded["backfill"] == 30
        pruned = store.prune(older_than=timedelta(days=14))
        assert pruned > 0
        after = store.slo()
        assert counts(after) == counts(before)
        assert after.rolled_up > 0
        # A report at other objectives cannot use the rollups: stored executions only.
        other = store.slo(claim_within=11)
        assert other.rolled_up == 0
        assert other.claimed.total < before.claimed.total

    def test_bad_slo_arguments_name_the_field(self, store: Store) -> None:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"window": 0}, "window"),
            ({"claim_within": -1}, "claim_within"),
            ({"finish_within": "5m"}, "finish_within"),
            ({"worst": -1}, "worst"),
            ({"worst": 10_001}, "worst"),
            ({"worst": 1.5}, "worst"),
            ({"claim_target": 1}, "claim_target"),
            ({"claim_target": 0}, "claim_target"),
            ({"claim_target": float("nan")}, "claim_target"),
            ({"finish_target": float("inf")}, "finish_target"),
            ({"finish_target": -0.5}, "finish_target"),
            ({"finish_target": "0.99"}, "finish_target"),
            ({"finish_target": True}, "finish_target"),
        ]
        for arguments, field in cases:
            with pytest.raises(ValidationError) as caught:
                store.slo(**arguments)
            assert caught.value.field == field
        assert store.slo(claim_within=0, finish_within=0).claimed.total == 0

    def test_planned_time_survives_a_takeover_and_reads_everywhere(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", execute_at=at(5))
        clock.set(6)
        store.claim("w", ttl=1)
        clock.set(100)
        (taken,) = store.claim("other", ttl=10)  # takes the expired lease over
        assert taken.execution_id == e.id
        assert store.get(e.id).planned_at == at(5)
        assert store.query().items[0].planned_at == at(5)
        assert store.get(e.id).state is State.RUNNING

    def test_an_occurrence_held_by_its_overlap_policy_counts_from_its_slot(
        self, store: Store, clock: ManualClock
    ) -> None:
        clock.set(100)
        store.add_schedule("job", every=60, id="s")
        # Stored held (due far ahead) until the run before it ends, as buffer_one does.
        (held,) = store.add_occurrences("s", [Occurrence(slot=at(100), due_at=HELD)])
        assert held.planned_at == at(100)
        clock.set(105)
        store.reschedule(held.id, at(105))  # the run before it ended
        finish(store, clock, claim_one(store, clock, 106), 107)
        report = store.slo(window=1000)
        assert (report.claimed.met, report.claimed.total) == (1, 1)
        assert (report.finished.met, report.finished.total) == (1, 1)

    def test_a_pause_and_the_claim_after_it_excuse_one_wait_not_two(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("job", execute_at=at(0), queue="q")
        store.pause_queue("q")
        clock.set(50)
        assert store.claim("w", queues=["q"], ttl=10_000) == []  # held by the pause
        clock.set(100)
        store.resume_queue("q")
        lease = claim_one(store, clock, 105)
        assert lease.execution_id == e.id
        finish(store, clock, lease, 500)
        report = store.slo(window=1000)
        assert report.claimed.excluded["throttled"] == 1, "claimed 5 s after the pause"
        # Held 105 s before its claim, not 100 + 105: finished 395 s late net.
        assert report.finished.misses[ErrorClass.RAN_LONG] == 1
        assert report.finished.excluded["throttled"] == 0

    def test_a_retry_held_by_a_pause_does_not_excuse_a_late_first_claim(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit("job", execute_at=at(0), queue="q")
        lease = claim_one(store, clock, 60)  # 60 s late, nothing held it
        clock.set(61)
        store.fail(lease, "boom", retry_in=5)
        store.pause_queue("q")
        clock.set(70)
        assert store.claim("w", queues=["q"], ttl=10_000) == []
        clock.set(200)
        store.resume_queue("q")
        finish(store, clock, claim_one(store, clock, 201), 202)
        report = store.slo(window=1000)
        assert report.claimed.misses == {ErrorClass.LATE_CLAIM: 1}
        assert report.claimed.excluded["throttled"] == 0

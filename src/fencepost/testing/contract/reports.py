"""The contract of buckets, nodes and the reports built on them.

Per-bucket caps on claims, node registration and its lapse, the bucket report
(unowned, duplicated, orphans), bucket counts, ``stats`` (counts, backlog, claim
lateness, refusals and expiries) and the SLO report at its boundaries.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.catalogue import job_entry
from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.limits import ThrottleCount
from fencepost.domain.models import Lease, Occurrence
from fencepost.domain.reports import DueCount, Lateness, SloOffender, SloShare, Stats, Unserved
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    _US,
    ContractFixtures,
    StoreFactory,
    _keys_in_distinct_buckets,
    at,
)
from fencepost.testing.factory import ExecutionFactory
from fencepost.timing.planning import HELD, NEVER


class ReportsContract(ContractFixtures):
    """Buckets and nodes, bucket counts, stats and the SLO report."""

    # -- buckets and nodes ---------------------------------------------------------------

    def test_max_per_bucket_caps_running_executions(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job", "bucket_key": "tenant-a"} for _ in range(6)])
        store.submit_many([{"job": "job", "bucket_key": "tenant-b"} for _ in range(2)])
        bucket_a = store.query(limit=1).items[0].bucket
        first = store.claim("w1", limit=10, max_per_bucket=2)
        assert sorted(lease.execution_id for lease in first) == sorted(
            e.id for e in store.query(state="RUNNING").items
        )
        per_bucket = Counter(store.get(lease.execution_id).bucket for lease in first)
        assert max(per_bucket.values()) == 2
        assert len(first) == 4, "two of tenant-a, both of tenant-b"
        assert store.claim("w2", limit=10, max_per_bucket=2) == [], "every bucket is full"
        assert len(store.claim("uncapped", limit=1)) == 1, "the cap binds only who passes it"
        done = next(lease for lease in first if store.get(lease.execution_id).bucket == bucket_a)
        store.complete(done, "ok")
        assert store.claim("w2", limit=10, max_per_bucket=2) == [], "the uncapped one took it"
        store.complete(next(lease for lease in first if lease != done), "ok")
        assert len(store.claim("w2", limit=10, max_per_bucket=2)) == 1

    def test_capped_takeovers_do_not_count_twice(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job", "bucket_key": "k"} for _ in range(3)])
        store.claim("a", limit=3, max_per_bucket=1, ttl=5)  # one
        clock.set(5)
        taken = store.claim("b", limit=3, max_per_bucket=1, ttl=5)
        assert [lease.epoch for lease in taken] == [2], "the expired one, nothing new"

    def test_bad_max_per_bucket(self, store: Store) -> None:
        with pytest.raises(ValidationError) as caught:
            store.claim("w", max_per_bucket=0)
        assert caught.value.field == "max_per_bucket"

    def test_nodes_register_renew_and_lapse(self, store: Store, clock: ManualClock) -> None:
        node = store.register_node("host:1", buckets=[3, 1], ttl=10)
        assert (node.id, node.kind, node.buckets, node.started_at, node.expires_at) == (
            "host:1",
            "worker",
            (3, 1),
            at(0),
            at(10),
        )
        clock.set(8)
        renewed = store.register_node("host:1", buckets=[2], kind="scheduler", ttl=10)
        assert (renewed.started_at, renewed.heartbeat_at, renewed.buckets) == (at(0), at(8), (2,))
        assert [n.id for n in store.nodes()] == ["host:1"]
        clock.set(18)
        assert store.nodes() == [], "live strictly before expires_at"
        assert [n.id for n in store.nodes(live_only=False)] == ["host:1"]
        store.deregister_node("host:1")
        store.deregister_node("never-registered")
        assert store.nodes(live_only=False) == []
        assert store.register_node(buckets=None).id.endswith(f":{os.getpid()}")

    def test_bad_node_registration(self, store: Store) -> None:
        for arguments, field in (
            ({"buckets": [64]}, "buckets"),
            ({"ttl": 0}, "ttl"),
            ({"kind": ""}, "kind"),
        ):
            with pytest.raises(ValidationError) as caught:
                store.register_node("n", **arguments)
            assert caught.value.field == field
        assert store.nodes(live_only=False) == []

    def test_bucket_report(self, store: Store, clock: ManualClock) -> None:
        stuck = store.submit("job", bucket_key="nobody-home")
        lonely = stuck.bucket
        covered = [b for b in range(64) if b != lonely]
        store.register_node("a", buckets=covered[:40], ttl=60)
        store.register_node("b", buckets=covered[35:], ttl=60)
        store.register_node("gone", buckets=[lonely], ttl=1)
        clock.set(100)
        store.register_node("a", buckets=covered[:40], ttl=60)
        store.register_node("b", buckets=covered[35:], ttl=60)
        fresh = store.submit("job", bucket_key="nobody-home")
        report = store.bucket_report(orphaned_after=60)
        assert report.unowned == [lonely]
        assert report.duplicated == {b: ["a", "b"] for b in covered[35:40]}
        assert [e.id for e in report.orphans] == [stuck.id], "changed 100 s ago, not just now"
        assert fresh.id not in {e.id for e in report.orphans}

        store.register_node("floater", buckets=None, ttl=60)
        floating = store.bucket_report(orphaned_after=60)
        assert (floating.unowned, floating.orphans, floating.floating) == ([], [], ["floater"])

    # -- reports -------------------------------------------------------------------------

    def test_bucket_counts(self, store: Store, make: ExecutionFactory) -> None:
        x, y, z = _keys_in_distinct_buckets(3, store.config.num_buckets)
        bx, by, bz = (bucket_for(key, store.config.num_buckets) for key in (x, y, z))
        make.scheduled("a", bucket_key=x)
        make.running("b", bucket_key=x)
        make.retry_waiting("c", bucket_key=x)
        make.scheduled("d", bucket_key=y, delay=3600)
        make.succeeded("e", bucket_key=y)
        make.dead("f", bucket_key=z)
        expected = dict(sorted({bx: 3, by: 1}.items()))
        assert store.bucket_counts() == expected, "unfinished ones by default"
        assert list(store.bucket_counts()) == sorted(expected), "in bucket order"
        assert store.bucket_counts(states=[State.SCHEDULED, "RETRY_WAIT", State.RUNNING]) == (
            expected
        )
        assert store.bucket_counts(states="SUCCEEDED") == {by: 1}
        assert store.bucket_counts(states=[State.FAILED, State.SUCCEEDED]) == dict(
            sorted({by: 1, bz: 1}.items())
        )
        assert store.bucket_counts(states=State.RUNNING) == {bx: 1}
        assert store.bucket_counts(states=[]) == {}
        assert store.bucket_counts(states="CANCELLED") == {}, "only buckets with executions"
        for states in ("DONE", ["RUNNING", "nope"]):
            with pytest.raises(ValidationError) as caught:
                store.bucket_counts(states=states)
            assert caught.value.field == "states"

    def test_stats_counts_by_state_and_job(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        make.running("a")
        make.scheduled("a")
        make.scheduled("a", delay=600)
        make.succeeded("b")
        make.succeeded("b")
        make.dead("b")
        make.retry_waiting("c")
        store.cancel(make.scheduled("c").id)
        clock.set(50)
        stats = store.stats()
        assert (stats.at, stats.window) == (at(50), timedelta(hours=1))
        zeros = dict.fromkeys(State, 0)
        assert stats.by_state == zeros | {
            State.SCHEDULED: 2,
            State.RUNNING: 1,
            State.RETRY_WAIT: 1,
            State.SUCCEEDED: 2,
            State.FAILED: 1,
            State.CANCELLED: 1,
        }
        assert list(stats.by_state) == list(State), "every state, zeros included"
        assert list(stats.by_job) == ["a", "b", "c"]
        assert stats.by_job["a"] == zeros | {State.SCHEDULED: 2, State.RUNNING: 1}
        assert stats.by_job["b"] == zeros | {State.SUCCEEDED: 2, State.FAILED: 1}
        assert stats.by_job["c"] == zeros | {State.RETRY_WAIT: 1, State.CANCELLED: 1}
        assert stats.due_backlog == 1, "the one due at 0; not the one due at 600, nor the retry"
        assert store.stats(window=timedelta(minutes=5)).window == timedelta(minutes=5)
        for window in (0, -1, "1h", None):
            with pytest.raises(ValidationError) as caught:
                store.stats(window=window)  # type: ignore[arg-type]
            assert caught.value.field == "window"

    def test_stats_on_an_empty_store(self, store: Store, clock: ManualClock) -> None:
        stats = store.stats(window=60)
        assert stats == Stats(
            at=at(0),
            window=timedelta(minutes=1),
            by_state=dict.fromkeys(State, 0),
            by_job={},
            due_backlog=0,
            claim_lateness=Lateness(count=0, p50=None, p90=None, p99=None, max=None),
            stale_refused=0,
            lease_expiries=0,
            unserved=Unserved(at=at(0), due=[], executions=[], active_schedules=0, schedulers=[]),
        )

    # -- unserved work -----------------------------------------------------------------

    def test_unserved_names_due_executions_no_live_node_serves(
        self, store_factory: StoreFactory, clock: ManualClock
    ) -> None:
        store = store_factory(clock, unknown_jobs="allow")
        store.submit_many([{"job": "report"}, {"job": "report"}, {"job": "mail"}])
        store.submit("report", execute_at=at(100))  # not due yet
        store.publish_jobs([job_entry("ship", 4), job_entry("ship", 5)])
        store.submit("ship")  # pinned to the latest: 5
        store.submit("ship", version=4)
        (retried,) = [store.submit("ship", version=4, max_attempts=3)]
        (lease,) = store.claim("w", ids=[retried.id])
        store.fail(lease, "boom", retry_in=0)  # RETRY_WAIT, due now: counted
        store.submit("running")
        store.claim("w", jobs=["running"])  # RUNNING: not waiting
        store.add_schedule("held", every=60, id="s")
        store.add_occurrences("s", [Occurrence(slot=at(60), due_at=HELD)])  # held: not due
        store.register_node("w1", jobs=[("ship", 4), ("mail", 1)], ttl=60)
        store.register_node("gone", jobs=[("report", 1), ("ship", 5)], ttl=1)
        clock.set(1)  # "gone" lapsed: live strictly before expires_at
        report = store.unserved()
        assert report.at == at(1)
        assert report.due == [
            DueCount(job="mail", job_version=None, count=1),
            DueCount(job="report", job_version=None, count=2),
            DueCount(job="ship", job_version=4, count=2),
            DueCount(job="ship", job_version=5, count=1),
        ]
        # An unpinned execution runs on any version ("mail" v1 serves it); a pinned one
        # only on its own ("ship" v4 does not serve v5), as claims filter by version.
        assert report.executions == [
            DueCount(job="report", job_version=None, count=2),
            DueCount(job="ship", job_version=5, count=1),
        ]
        assert report.due_unserved == 3
        assert [g.label for g in report.executions] == ["report", "ship v5"]
        assert report.due_of("ship") == (3, 1)
        assert sum(g.count for g in report.due) == store.stats().due_backlog
        assert store.stats().unserved == report
        # A node serving another version of "report" serves its unpinned executions.
        store.register_node("w2", jobs=[("report", 7), ("ship", 5)], ttl=60)
        assert store.unserved().executions == []

    def test_unserved_counts_due_at_now_and_not_a_microsecond_later(
        self, store: Store, clock: ManualClock
    ) -> None:
        clock.set(100)
        store.submit("job", execute_at=at(100))
        store.submit("job", execute_at=at(100) + _US)
        assert store.unserved().executions == [DueCount(job="job", job_version=None, count=1)]
        clock.set(at(100) + _US)
        assert store.unserved().due_unserved == 2

    def test_unserved_schedules_while_no_scheduler_node_lives(
        self, store: Store, clock: ManualClock
    ) -> None:
        for name in ("a", "b", "paused", "finished"):
            store.add_schedule("job", every=60, id=name)
        store.pause_schedule("paused")
        (finished,) = [s for s in store.acquire_schedules("m") if s.id == "finished"]
        store.release_schedules([s for s in store.schedules().items if s.id != "finished"])
        store.materialize([(finished, [], at(0), NEVER)])  # no slot left: never fires again
        report = store.unserved()
        assert (report.active_schedules, report.schedulers, report.schedules) == (2, [], 2)
        store.register_node("worker", jobs=[("job", 1)], ttl=60)
        assert store.unserved().schedules == 2, "a worker runs no schedule"
        store.register_node("materializer", kind="scheduler", ttl=10)
        served = store.unserved()
        assert (served.active_schedules, served.schedulers, served.schedules) == (
            2,
            ["materializer"],
            0,
        )
        clock.set(10)
        assert store.unserved().schedules == 2, "its registration lapsed"

    def test_stats_backlog_boundary(self, store: Store, clock: ManualClock) -> None:
        clock.set(100)
        store.submit("job", execute_at=at(100))  # due_at == now: due
        store.submit("job", execute_at=at(99))
        store.submit("job", execute_at=at(100) + _US)  # not yet
        (lease,) = store.claim("w", limit=1)
        store.fail(lease, "boom", retry_in=0)  # RETRY_WAIT, due now
        store.submit("running", execute_at=at(50))
        store.claim("w", jobs=["running"])
        assert store.stats().due_backlog == 2
        clock.set(at(100) + _US)
        assert store.stats().due_backlog == 3

    def test_stats_backlog_leaves_held_occurrences_out(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.add_schedule("job", every=60, id="s")
        store.add_occurrences("s", [Occurrence(slot=at(60), due_at=HELD)])
        store.submit("job", execute_at=HELD - timedelta(days=1))
        clock.set(HELD + timedelta(days=1))
        # Even once the clock passes HELD, a held occurrence is waiting for its turn, not due.
        assert store.stats().due_backlog == 1

    def test_stats_claim_lateness_percentiles(self, store: Store, clock: ManualClock) -> None:
        clock.set(1000)
        store.submit_many([{"job": "job", "execute_at": at(1000 - k)} for k in range(1, 101)])
        assert len(store.claim("w", limit=100)) == 100  # late by 1 s .. 100 s
        late = store.stats().claim_lateness
        assert late == Lateness(
            count=100,
            p50=timedelta(seconds=50),
            p90=timedelta(seconds=90),
            p99=timedelta(seconds=99),
            max=timedelta(seconds=100),
        )

    def test_stats_lateness_of_few_claims(self, store: Store, clock: ManualClock) -> None:
        clock.set(100)
        store.submit_many([{"job": "job", "execute_at": at(100 - k)} for k in (7, 3, 5)])
        store.submit("retried", execute_at=at(90))
        store.claim("w", limit=10, jobs=["job"])  # late by 7, 3 and 5 s
        (lease,) = store.claim("w", jobs=["retried"])  # late by 10 s at first ...
        store.fail(lease, "boom", retry_in=50)  # ... but now due at 150: counted as 0
        clock.set(200)
        store.claim("w", jobs=["retried"])  # late by 50 s
        late = store.stats().claim_lateness
        # Nearest rank of 0, 3, 5, 7, 50: p50 is the 3rd value, p90 and p99 the 5th.
        assert late == Lateness(
            count=5,
            p50=timedelta(seconds=5),
            p90=timedelta(seconds=50),
            p99=timedelta(seconds=50),
            max=timedelta(seconds=50),
        )
        store.submit("solo", execute_at=at(150))
        clock.set(210)
        store.claim("w", jobs=["solo"])
        assert store.stats(window=5).claim_lateness == Lateness(
            count=1,
            p50=timedelta(seconds=60),
            p90=timedelta(seconds=60),
            p99=timedelta(seconds=60),
            max=timedelta(seconds=60),
        )

    def test_stats_window_boundary(self, store: Store, clock: ManualClock) -> None:
        store.submit_many([{"job": "job"} for _ in range(3)])
        for second in (0, 10, 20):
            clock.set(second)
            store.claim("w", limit=1, ttl=10_000)
        clock.set(3610)
        store.submit("job", execute_at=at(3605))
        store.claim("w", limit=1)  # at == now: inside the window

        def lateness(window: float | timedelta) -> tuple[int, timedelta | None]:
            late = store.stats(window=window).claim_lateness
            return late.count, late.max

        # The window is (now - window, now]: a claim at exactly now - window is out.
        assert lateness(3600) == (2, timedelta(seconds=20))
        assert lateness(timedelta(seconds=3600, microseconds=1)) == (3, timedelta(seconds=20))
        assert lateness(3610 + 1e-6) == (4, timedelta(seconds=20))
        assert lateness(1e-6) == (1, timedelta(seconds=5))

    def test_stats_counts_refusals_and_expiries(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        lost = make.running("x", ttl=5)
        make.running("y", ttl=5)
        clock.set(1)
        with pytest.raises(StaleLease):
            store.complete(replace(lost, epoch=99), "forged")
        clock.set(5)
        (taken,) = store.claim("w2", jobs=["x"])  # a takeover: the lost lease expired
        assert taken.epoch == 2
        assert store.reap_expired() == 1  # y's lease expired too
        with pytest.raises(StaleLease):
            store.heartbeat(lost)
        clock.set(6)
        stats = store.stats(window=6)  # (0, 6]: the claims at 0 are out
        assert (stats.stale_refused, stats.lease_expiries) == (2, 2)
        assert stats.claim_lateness.count == 1, "the takeover"
        assert stats.claim_lateness.max == timedelta(seconds=5), "late by the time since due"
        narrow = store.stats(window=1)  # (5, 6]
        assert (narrow.stale_refused, narrow.lease_expiries, narrow.claim_lateness.count) == (
            0,
            0,
            0,
        )
        wide = store.stats(window=7)  # (-1, 6]
        assert (wide.stale_refused, wide.lease_expiries, wide.claim_lateness.count) == (2, 2, 3)

    def test_stats_count_throttled_claims_apart_from_late_ones(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.set_limit("job:mail", rate="1/s", burst=1)
        store.submit_many([{"job": "mail"} for _ in range(3)] + [{"job": "other"}])
        assert len(store.claim("w", limit=10)) == 2  # one mail (the burst), and other
        clock.set(5)
        (second,) = store.claim("w", limit=10)  # held 5 s by the rate
        clock.set(10)
        store.claim("w", limit=10)  # the last mail, held 10 s
        stats = store.stats(window=60)
        assert stats.claim_lateness == Lateness(
            count=2, p50=timedelta(0), p90=timedelta(0), p99=timedelta(0), max=timedelta(0)
        ), "the throttled claims are not late ones"
        assert stats.throttled == [ThrottleCount("job:mail", 2, timedelta(seconds=15.0))]
        assert store.stats(window=6).throttled == [  # (4, 10]: both records
            ThrottleCount("job:mail", 2, timedelta(seconds=15.0))
        ]
        assert store.stats(window=5).throttled == [  # (5, 10]: the claim at 5 is out
            ThrottleCount("job:mail", 1, timedelta(seconds=10.0))
        ]
        # A retry is due again later: its claim is measured from then, and is late.
        store.fail(second, "boom", retry_in=10)  # due at 20
        clock.set(25)
        (retried,) = store.claim("w", jobs=["mail"])
        assert retried.execution_id == second.execution_id
        late = store.stats(window=60).claim_lateness
        # 0, 0, 0 (the first claim of the retried one, before its current due time), 5.
        assert (late.count, late.max) == (4, timedelta(seconds=5))

    def test_stats_count_a_paused_queues_claims_as_throttled(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.pause_queue("slow", actor="ops")
        store.submit_many([{"job": "job", "queue": "slow"} for _ in range(2)])
        store.submit("job")
        clock.set(20)
        assert len(store.claim("w", limit=10)) == 1, "the paused queue's wait"
        store.resume_queue("slow", actor="ops")  # records both as throttled, 20 s each
        clock.set(30)
        assert len(store.claim("w", limit=10)) == 2  # 30 s after due
        stats = store.stats(window=60)
        assert stats.claim_lateness.count == 1, "only the other queue's claim"
        assert stats.claim_lateness.max == timedelta(seconds=20)
        assert stats.throttled == [ThrottleCount("queue:slow", 2, timedelta(seconds=40.0))]
        # Throttle records are read back one window before the window's start: from
        # a 10 s window at 30, those after 10 (the resume at 20 is one); from a 5 s
        # window, those after 20 only, so the claims at 30 count as late.
        assert store.stats(window=10).claim_lateness.count == 0
        assert store.stats(window=10).throttled == []
        late = store.stats(window=5).claim_lateness
        assert (late.count, late.max) == (2, timedelta(seconds=30))

    # -- job counts ------------------------------------------------------------------------

    def test_job_counts_count_executions_created_in_the_window(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        make.scheduled("a")  # created at 0, finished at 100: outside a window from 50
        clock.set(100)
        (early,) = store.claim("w", jobs=["a"])
        store.complete(early, "late finish")
        make.scheduled("a", delay=3600)
        make.dead("a")
        make.running("b")
        store.cancel(make.scheduled("b").id)
        make.scheduled("idle")
        clock.set(200)
        counts = store.job_counts(window=150)  # created in (50, 200]
        assert (counts.at, counts.window) == (at(200), timedelta(seconds=150))
        zeros = dict.fromkeys(State, 0)
        assert counts.by_job == {
            "a": zeros | {State.SCHEDULED: 1, State.FAILED: 1},
            "b": zeros | {State.RUNNING: 1, State.CANCELLED: 1},
            "idle": zeros | {State.SCHEDULED: 1},
        }, "by creation: the execution created at 0 and finished at 100 is not counted"
        assert list(counts.by_job) == ["a", "b", "idle"]
        assert list(counts.by_job["a"]) == list(State), "every state, zeros included"
        assert store.job_counts(window=250).by_job["a"][State.SUCCEEDED] == 1
        assert store.job_counts(window=150, job="b").by_job == {"b": counts.by_job["b"]}
        assert store.job_counts(job="nobody").by_job == {}
        assert store.job_counts().window == timedelta(days=1), "the default window"

    def test_job_counts_window_boundaries(self, store: Store, clock: ManualClock) -> None:
        clock.set(100)
        store.submit("job")
        clock.set(200)
        store.submit("job")
        # (start, now]: created at the start is out, created at now is in.
        assert store.job_counts(window=100).by_job["job"][State.SCHEDULED] == 1
        assert (
            store.job_counts(window=timedelta(seconds=100) + _US).by_job["job"][State.SCHEDULED]
            == 2
        )
        clock.set(at(200) + _US)
        assert store.job_counts(window=_US).by_job == {}
        assert store.job_counts(window=timedelta(days=36500)).by_job["job"][State.SCHEDULED] == 2

    def test_job_counts_refuse_bad_arguments(self, store: Store) -> None:
        for window in (0, -1, "1h", None, float("nan"), 10**30, True):
            with pytest.raises(ValidationError) as refused:
                store.job_counts(window=window)  # type: ignore[arg-type]
            assert refused.value.field == "window"
        for job in ("", "a\x00b", "\ud800", "x" * 5000, 7):
            with pytest.raises(ValidationError) as refused:
                store.job_counts(job=job)  # type: ignore[arg-type]
            assert refused.value.field == "job"

    def test_slo_shares_and_worst(self, store: Store, clock: ManualClock) -> None:
        def due(name: str, second: float) -> str:
            return store.submit(name, execute_at=at(second)).id

        def claim(name: str, second: float) -> Lease:
            clock.set(second)
            (lease,) = store.claim("w", jobs=[name], ttl=10_000)
            return lease

        def finish(lease: Lease, second: float) -> None:
            clock.set(second)
            store.complete(lease, "ok")

        on_time = due("on-time", 100)  # claimed at the claim boundary, finished in time
        late = due("late", 200)  # claimed late, finished at the finish boundary
        slow = due("slow", 300)  # claimed in time, finished too late
        unclaimed = due("unclaimed", 500)
        undecided = due("undecided", 995)  # neither objective decided yet
        cancelled = due("cancelled", 450)  # never claimed: not meant to run
        store.cancel(cancelled)
        dead = due("dead", 600)  # a dead letter counts as finished
        aborted = due("aborted", 650)  # cancelled while running: never finishes
        running = due("running", 900)
        due("future", 2000)
        early = due("early", 50)  # due exactly at now - window: outside
        store.add_schedule("job", every=60, id="s")
        (skipped,) = store.add_occurrences(
            "s", [Occurrence(slot=at(400), due_at=at(400), skipped="misfire")]
        )
        first = claim("on-time", 110)
        finish(first, 150)
        second = claim("late", 230)
        third = claim("slow", 301)
        finish(second, 500)
        fourth = claim("dead", 600)
        finish(third, 601)
        clock.set(610)
        store.fail(fourth, "fatal", retryable=False)
        fifth = claim("aborted", 651)
        store.abort(fifth)
        claim("running", 905)
        clock.set(1000)

        report = store.slo(window=950, claim_within=10, finish_within=300, worst=3)
        assert (report.at, report.window) == (at(1000), timedelta(seconds=950))
        assert (report.claim_within, report.finish_within) == (
            timedelta(seconds=10),
            timedelta(seconds=300),
        )
        # Claimed: on-time, late, slow, dead, aborted, running, and unclaimed (500 s overdue);
        # met by all but late and unclaimed. Undecided (5 s overdue) is left out.
        assert report.claimed == SloShare(met=5, total=7, share=5 / 7)
        # Finished: on-time, late, slow, dead; unclaimed and aborted are overdue (500 s,
        # 350 s); running (100 s) and undecided are not decided yet. Met: on-time, late, dead.
        assert report.finished == SloShare(met=3, total=6, share=0.5)
        assert report.worst == [
            SloOffender(
                execution_id=unclaimed,
                job="unclaimed",
                due_at=at(500),
                claimed_at=None,
                lateness=timedelta(seconds=500),
                state=State.SCHEDULED,
            ),
            SloOffender(
                execution_id=late,
                job="late",
                due_at=at(200),
                claimed_at=at(230),
                lateness=timedelta(seconds=30),
                state=State.SUCCEEDED,
            ),
            SloOffender(
                execution_id=on_time,
                job="on-time",
                due_at=at(100),
                claimed_at=at(110),
                lateness=timedelta(seconds=10),
                state=State.SUCCEEDED,
            ),
        ]
        everyone = store.slo(window=950, worst=100).worst
        listed = [o.execution_id for o in everyone]
        assert listed == [unclaimed, late, on_time, running, undecided, slow, aborted, dead], (
            "by lateness, then due_at"
        )
        assert {cancelled, skipped.id, early}.isdisjoint(listed)
        assert store.slo(window=950, worst=0).worst == []
        # One microsecond wider, the window takes in the execution due at 50.
        wider = store.slo(window=timedelta(seconds=950, microseconds=1), worst=1)
        assert (wider.claimed.total, wider.finished.total) == (8, 7)
        assert wider.worst[0].execution_id == early

    def test_slo_decides_at_the_boundaries(self, store: Store, clock: ManualClock) -> None:
        store.submit("job", execute_at=at(0))
        clock.set(10)
        assert store.slo(claim_within=10, finish_within=10).claimed == SloShare(0, 0, None)
        clock.set(at(10) + _US)
        report = store.slo(claim_within=10, finish_within=20)
        assert report.claimed == SloShare(0, 1, 0.0), "overdue now: a miss"
        assert report.finished == SloShare(0, 0, None), "not decided yet"
        (lease,) = store.claim("w", ttl=100)
        clock.set(20)
        store.complete(lease, "ok")
        report = store.slo(claim_within=10, finish_within=20)
        assert report.claimed == SloShare(0, 1, 0.0)
        assert report.finished == SloShare(1, 1, 1.0), "finished exactly at due_at + 20 s"
        assert store.slo(claim_within=timedelta(seconds=10, microseconds=1)).claimed == SloShare(
            1, 1, 1.0
        )

    def test_slo_measures_retries_against_the_latest_due_time(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit("job", execute_at=at(0))
        (lease,) = store.claim("w", ttl=100)
        clock.set(5)
        store.fail(lease, "boom", retry_in=60)  # due again at 65
        clock.set(100)
        (again,) = store.claim("w", ttl=100)
        store.complete(again, "ok")
        report = store.slo(claim_within=10, finish_within=300)
        # The first claim (at 0) is measured against the current due_at (65): on time.
        assert report.claimed == SloShare(1, 1, 1.0)
        assert report.finished == SloShare(1, 1, 1.0)
        (offender,) = report.worst
        assert (offender.due_at, offender.claimed_at, offender.lateness) == (
            at(65),
            at(0),
            timedelta(0),
        )

    def test_bad_slo_names_the_field(self, store: Store) -> None:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"window": 0}, "window"),
            ({"claim_within": -1}, "claim_within"),
            ({"finish_within": "5m"}, "finish_within"),
            ({"worst": -1}, "worst"),
            ({"worst": 10_001}, "worst"),
            ({"worst": 1.5}, "worst"),
        ]
        for arguments, field in cases:
            with pytest.raises(ValidationError) as caught:
                store.slo(**arguments)
            assert caught.value.field == field
        assert store.slo(claim_within=0, finish_within=0).claimed.total == 0

"""The contract of buckets, nodes and the reports built on them.

Per-bucket caps on claims, node registration and its lapse, the bucket report
(unowned, duplicated, orphans), bucket counts, ``stats`` (counts, backlog, claim
lateness, refusals and expiries, the error classes); the SLO report is in :mod:`.slo`.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.catalogue import job_entry
from fencepost.domain.errors import StaleLease, ValidationError
from fencepost.domain.limits import ThrottleCount
from fencepost.domain.models import Occurrence
from fencepost.domain.reports import STATS_ERROR_CLASSES, DueCount, Lateness, Stats, Unserved
from fencepost.domain.slo import ErrorClass
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    US,
    ContractFixtures,
    StoreFactory,
    at,
    keys_in_distinct_buckets,
)
from fencepost.testing.factory import ExecutionFactory
from fencepost.timing.planning import HELD, NEVER


class ReportsContract(ContractFixtures):
    """Buckets and nodes, bucket counts and stats."""

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
        x, y, z = keys_in_distinct_buckets(3, store.config.num_buckets)
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
            errors=dict.fromkeys(STATS_ERROR_CLASSES, 0),
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
        store.submit("job", execute_at=at(100) + US)
        assert store.unserved().executions == [DueCount(job="job", job_version=None, count=1)]
        clock.set(at(100) + US)
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
        store.submit("job", execute_at=at(100) + US)  # not yet
        (lease,) = store.claim("w", limit=1)
        store.fail(lease, "boom", retry_in=0)  # RETRY_WAIT, due now
        store.submit("running", execute_at=at(50))
        store.claim("w", jobs=["running"])
        assert store.stats().due_backlog == 2
        clock.set(at(100) + US)
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

    # -- stats: error classes --------------------------------------------------------------

    def test_stats_count_each_error_class_by_its_name(
        self, store: Store, clock: ManualClock, make: ExecutionFactory
    ) -> None:
        """Each class counts its own events: a refused heartbeat is a renewal failure,
        never a stale completion; timeouts and handler failures are counted apart."""
        hb = make.running("hb", ttl=5)
        make.running("reaped", ttl=5)
        stale = make.running("stale", ttl=600)
        store.fail(make.running("timeout"), "ran past 10s", timed_out=True, retry_in=600)
        store.fail(make.running("flaky"), "boom", retry_in=600)
        make.dead("fatal")
        with pytest.raises(StaleLease):
            store.complete(replace(stale, epoch=99), "forged")
        with pytest.raises(StaleLease):
            store.fail(replace(stale, epoch=99), "forged")
        store.set_limit("job:mail", rate="1/20s", burst=1)
        store.submit_many([{"job": "mail"}, {"job": "mail"}])
        assert len(store.claim("w", jobs=["mail"], limit=2)) == 1
        for job in ("edge", "just", "late", "replayed"):
            store.submit(job, max_attempts=1)  # all due at 0
        store.submit("backfill", execute_at=at(-60))  # created for the past: left out
        clock.set(5)
        store.claim("w2", jobs=["hb"])  # a takeover of the expired lease
        assert store.reap_expired() == 1  # reaped's
        with pytest.raises(StaleLease):
            store.heartbeat(hb)  # the lost lease's worker renews: refused
        clock.set(10)
        store.claim("w", jobs=["edge"])  # exactly 10 s after its planned time: on time
        clock.set(at(10) + US)
        store.claim("w", jobs=["just"])  # a microsecond late
        clock.set(20)
        store.claim("w", jobs=["late", "backfill"], limit=2)
        assert len(store.claim("w", jobs=["mail"])) == 1  # held 20 s by the rate: not late
        (replayed,) = store.claim("w", jobs=["replayed"])  # late, then replayed: left out
        store.fail(replayed, "fatal", retryable=False)
        store.replay(replayed.execution_id, actor="ops")
        clock.set(30)
        stats = store.stats(window=60)
        assert stats.errors == {
            ErrorClass.LATE_CLAIM: 2,  # just, late
            ErrorClass.RENEWAL_FAILED: 3,  # the takeover, the reaped lease, the heartbeat
            ErrorClass.TIMED_OUT: 1,
            ErrorClass.HANDLER_FAILED: 3,  # flaky, fatal, replayed
            ErrorClass.STALE_COMPLETION_REFUSED: 2,  # the forged complete and fail
            ErrorClass.THROTTLED: 1,
        }
        assert list(stats.errors) == list(STATS_ERROR_CLASSES)
        assert ErrorClass.RAN_LONG not in stats.errors, "a verdict, not an event"
        # The old figures keep their meaning: every refusal, every lease lost.
        assert (stats.stale_refused, stats.lease_expiries) == (3, 2)
        assert stats.errors[ErrorClass.THROTTLED] == sum(t.count for t in stats.throttled)
        # The window is (at - window, at]: events at exactly t=5 are out of (5, 30].
        assert store.stats(window=25).errors == dict.fromkeys(STATS_ERROR_CLASSES, 0) | {
            ErrorClass.LATE_CLAIM: 2,
            ErrorClass.HANDLER_FAILED: 1,
            ErrorClass.THROTTLED: 1,
        }
        # A first claim at exactly at - window is out; a microsecond later, in.
        assert store.stats(window=20).errors[ErrorClass.LATE_CLAIM] == 2
        window = timedelta(seconds=20) - US  # (10 s + 1 us, 30]
        assert store.stats(window=window).errors[ErrorClass.LATE_CLAIM] == 1
        assert store.stats(window=1).errors == dict.fromkeys(STATS_ERROR_CLASSES, 0)

    def test_stats_count_a_late_claim_once_at_its_first_claim(
        self, store: Store, clock: ManualClock
    ) -> None:
        """late_claim is the first claim's, measured from the planned time: a retry's
        claim, due again later, is not a second late claim, nor a late one."""
        store.submit("job", max_attempts=3)
        clock.set(15)
        (first,) = store.claim("w")
        store.fail(first, "boom", retry_in=100)
        clock.set(200)  # the retry is claimed 85 s after its own due time
        store.claim("w")
        assert store.stats(window=300).errors[ErrorClass.LATE_CLAIM] == 1
        assert store.stats(window=100).errors[ErrorClass.LATE_CLAIM] == 0
        assert store.stats(window=100).errors[ErrorClass.HANDLER_FAILED] == 0

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
            store.job_counts(window=timedelta(seconds=100) + US).by_job["job"][State.SCHEDULED] == 2
        )
        clock.set(at(200) + US)
        assert store.job_counts(window=US).by_job == {}
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

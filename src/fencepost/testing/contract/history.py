"""The contract of the history charts (see :mod:`fencepost.domain.history`).

Executions finished in known minutes with known lateness and outcomes give exact
counters and percentiles in every window; the roll-up's watermark never counts a
row twice (batch after batch, or from several threads at once), does not miss a
row committed within the grace, and prune deletes executions, not what was rolled
up from them. Bad arguments are refused naming them; names no execution has give
empty charts.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.domain.history import History, HistoryPoint, SummaryRow
from fencepost.domain.models import Lease, Occurrence
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import ContractFixtures, at

S = timedelta(seconds=1)


def claim(store: Store, clock: ManualClock, second: float, job: str) -> Lease:
    """Claim the one due execution of ``job`` at ``second``."""
    clock.set(second)
    (lease,) = store.claim("w", jobs=[job], ttl=10_000)
    return lease


def finished_in_known_minutes(store: Store, clock: ManualClock) -> None:
    """Executions planned at t=0 (minute 0 of the timeline), each claimed and finished
    at a known second (a minute is 60 s: t=70 is in minute 1):

    * ``a`` (queue ``q``): claimed 0.5 s late, SUCCEEDED at 70; and claimed 30 s
      late (a claim miss), SUCCEEDED at 75;
    * ``b``: claimed 2 s late, failed and retried, claimed again, dead-lettered at 130;
    * ``c``: cancelled at 65, never claimed (counted by no objective);
    * ``t``: claimed 1 s late, timed out and retried, SUCCEEDED at 400 (a finish miss);
    * ``bf``: a backfill planned an hour back, claimed at 5 and SUCCEEDED at 6 (its
      claim counts, its lateness and verdicts do not);
    * ``s-job``: a schedule's occurrence SKIPPED at 0.
    """
    clock.set(0)
    for job, queue in (("a", "q"), ("a", "q"), ("b", None), ("c", None), ("t", None)):
        store.submit(job, queue=queue)
    store.submit("bf", execute_at=at(-3600))
    store.add_schedule("s-job", every=60, id="s")
    store.add_occurrences("s", [Occurrence(slot=at(0), due_at=at(0), skipped="misfire")])
    first = claim(store, clock, 0.5, "a")
    t = claim(store, clock, 1, "t")
    b = claim(store, clock, 2, "b")
    clock.set(2)
    store.fail(t, "ran past its timeout", timed_out=True, retry_in=1)
    clock.set(3)
    store.fail(b, "boom", retry_in=5)
    t = claim(store, clock, 3, "t")
    bf = claim(store, clock, 5, "bf")
    clock.set(6)
    store.complete(bf, "ok")
    b = claim(store, clock, 10, "b")
    second = claim(store, clock, 30, "a")
    clock.set(65)
    (c,) = store.query(job="c").items
    store.cancel(c.id)
    clock.set(70)
    store.complete(first, "ok")
    clock.set(75)
    store.complete(second, "ok")
    clock.set(130)
    store.fail(b, "fatal", retryable=False)
    clock.set(400)
    store.complete(t, "ok")


def counters(p: HistoryPoint) -> dict[str, Any]:
    """A point's figures but its instant, for comparing: the counts and durations that
    are not zero, and the burn rates that are not None."""
    out = {}
    for name in HistoryPoint.__dataclass_fields__:
        value = getattr(p, name)
        if name.endswith("_burn"):
            if value is not None:
                out[name] = value
        elif name != "at" and value not in (0, None, timedelta(0)):
            out[name] = value
    return out


def nonzero(chart: History) -> dict[float, dict[str, Any]]:
    """The points with anything in them, by their instant's second on the timeline."""
    base = at(0)
    return {(p.at - base).total_seconds(): counters(p) for p in chart.points if counters(p)}


#: What finished_in_known_minutes leaves in each minute (non-zero figures only).
MINUTE_0 = {
    "skipped": 1,
    "succeeded": 1,  # bf
    "claims": 5,
    "lateness_p50": S,  # of 0.5 s, 1 s, 2 s, 30 s (bf's left out): rank 2
    "lateness_p99": 30 * S,
    "claim_counted": 4,
    "claim_missed": 1,
    "claim_burn": pytest.approx((1 / 4) / 0.01),
}
MINUTE_1 = {
    "succeeded": 2,
    "cancelled": 1,
    "finish_counted": 2,
    "finish_burn": 0.0,
}
MINUTE_2 = {"dead": 1, "retried": 1, "finish_counted": 1, "finish_burn": 0.0}
MINUTE_6 = {
    "succeeded": 1,
    "retried": 1,
    "timed_out": 1,
    "finish_counted": 1,
    "finish_missed": 1,
    "finish_burn": pytest.approx(1 / 0.001),
}
WHOLE = {
    "skipped": 1,
    "succeeded": 4,
    "dead": 1,
    "cancelled": 1,
    "retried": 2,
    "timed_out": 1,
    "claims": 5,
    "lateness_p50": S,
    "lateness_p99": 30 * S,
    "claim_counted": 4,
    "claim_missed": 1,
    "finish_counted": 4,
    "finish_missed": 1,
    "claim_burn": pytest.approx((1 / 4) / 0.01),
    "finish_burn": pytest.approx((1 / 4) / 0.001),
}


def rolled_up(store: Store, **options: Any) -> int:
    """Roll up until caught up; how many executions were read."""
    total = 0
    while True:
        done = store.roll_up_history(**options)
        total += done.executions
        if done.caught_up:
            return total


class HistoryContract(ContractFixtures):
    """The history charts: minute rows rolled up from finished executions."""

    def test_known_minutes_give_exact_counters_and_percentiles(
        self, store: Store, clock: ManualClock
    ) -> None:
        finished_in_known_minutes(store, clock)
        clock.set(500)
        assert store.history().rolled_up_to is None, "nothing rolled up yet"
        assert all(not counters(p) for p in store.history().points)
        done = store.roll_up_history()
        assert (done.executions, done.caught_up) == (7, True)
        assert done.rolled_up_to == at(440), "up to now - 60 s (the grace)"
        hour = store.history(window="hour")
        assert (hour.window, hour.step, len(hour.points)) == ("hour", 60 * S, 60)
        assert (hour.start, hour.end) == (at(540 - 3600), at(540)), "the last step holds now"
        assert [p.at for p in hour.points] == [hour.start + i * 60 * S for i in range(60)]
        assert (hour.job, hour.queue, hour.rolled_up_to) == (None, None, at(440))
        assert nonzero(hour) == {0: MINUTE_0, 60: MINUTE_1, 120: MINUTE_2, 360: MINUTE_6}
        day = store.history(window="day")
        assert (day.step, len(day.points), day.end) == (900 * S, 96, at(900))
        assert nonzero(day) == {0: WHOLE}
        week = store.history(window="week")
        assert (week.step, len(week.points), week.end) == (3600 * S, 168, at(3600))
        assert nonzero(week) == {0: WHOLE}

        only_a = store.history(job="a")
        assert (only_a.job, only_a.queue) == ("a", None)
        a_minutes = {
            0: {
                "claims": 2,
                "lateness_p50": 0.5 * S,
                "lateness_p99": 30 * S,
                "claim_counted": 2,
                "claim_missed": 1,
                "claim_burn": pytest.approx((1 / 2) / 0.01),
            },
            60: {"succeeded": 2, "finish_counted": 2, "finish_burn": 0.0},
        }
        assert nonzero(only_a) == a_minutes
        assert nonzero(store.history(queue="q")) == a_minutes
        assert nonzero(store.history(job="a", queue="q")) == a_minutes
        assert nonzero(store.history(job="b", queue="q")) == {}
        assert nonzero(store.history(job="b", queue="default")) == {
            0: {"claims": 1, "lateness_p50": 2.5 * S, "lateness_p99": 2.5 * S}
            | {"claim_counted": 1, "claim_burn": 0.0},
            120: MINUTE_2,
        }

        def row(name: str, **figures: Any) -> SummaryRow:
            values: dict[str, Any] = {"succeeded": 0, "dead": 0, "retried": 0, "claims": 0}
            values |= {"lateness_p50": None, "lateness_p99": None, "throttled": timedelta(0)}
            return SummaryRow(name=name, **(values | figures))

        by_job = store.history_summary(window="day", by="job")
        assert (by_job.window, by_job.by, by_job.end) == ("day", "job", at(900))
        assert by_job.rows == [
            row("a", succeeded=2, claims=2, lateness_p50=0.5 * S, lateness_p99=30 * S),
            row("b", dead=1, retried=1, claims=1, lateness_p50=2.5 * S, lateness_p99=2.5 * S),
            row("bf", succeeded=1, claims=1),
            row("c"),
            row("s-job"),
            row("t", succeeded=1, retried=1, claims=1, lateness_p50=S, lateness_p99=S),
        ]
        by_queue = store.history_summary(by="queue")
        assert by_queue.rows == [
            row(
                "default",
                succeeded=2,
                dead=1,
                retried=2,
                claims=3,
                lateness_p50=S,
                lateness_p99=2.5 * S,
            ),
            row("q", succeeded=2, claims=2, lateness_p50=0.5 * S, lateness_p99=30 * S),
        ]
        clock.set(500 + 3 * 3600)
        assert nonzero(store.history()) == {}, "the hour has moved on"
        assert nonzero(store.history(window="day")) == {0: WHOLE}

    def test_the_watermark_never_counts_a_row_twice(self, store: Store, clock: ManualClock) -> None:
        finished_in_known_minutes(store, clock)
        clock.set(500)
        # One execution per transaction: seven of them, then one that reads none.
        steps = [store.roll_up_history(max_rows=1) for _ in range(8)]
        assert [s.executions for s in steps] == [1] * 7 + [0]
        assert [s.caught_up for s in steps] == [False] * 7 + [True]
        assert nonzero(store.history(window="day")) == {0: WHOLE}
        assert store.roll_up_history().executions == 0
        assert nonzero(store.history(window="day")) == {0: WHOLE}
        # Finished since, rolled up by four threads at once, batch by batch.
        clock.set(500)
        for _ in range(12):
            store.submit("more", queue="q")
        for n in range(12):
            clock.set(501 + n)
            lease = claim(store, clock, 501 + n, "more")
            store.complete(lease, "ok")
        clock.set(700)
        read: list[int] = []
        failed: list[BaseException] = []

        def roll_up() -> None:
            try:
                read.append(rolled_up(store, max_rows=2))
            except BaseException as exc:  # reported below, not lost in the thread
                failed.append(exc)

        threads = [threading.Thread(target=roll_up) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failed == []
        assert sum(read) == 12
        whole = nonzero(store.history(window="day"))[0]
        assert (whole["succeeded"], whole["claims"]) == (4 + 12, 5 + 12)
        assert (whole["claim_counted"], whole["finish_counted"]) == (16, 16)

    def test_a_row_committed_within_the_grace_is_not_missed(
        self, store: Store, clock: ManualClock
    ) -> None:
        # A finish stamped at t=100 but committed after a roll-up at t=130 (which read
        # up to t=70, the grace before it) is read by the next roll-up.
        store.submit("late-commit")
        early = claim(store, clock, 1, "late-commit")
        clock.set(130)
        assert store.roll_up_history().rolled_up_to == at(70)
        clock.set(100)
        store.complete(early, "ok")
        clock.set(200)
        assert store.roll_up_history().executions == 1
        # One stamped earlier than the watermark (committed more than the grace
        # late) is not, nor is its claim: the charts say how far they go (rolled_up_to).
        store.submit("too-late")
        late = claim(store, clock, 201, "too-late")
        clock.set(400)
        assert store.roll_up_history().rolled_up_to == at(340)
        clock.set(300)
        store.complete(late, "ok")
        clock.set(500)
        assert store.roll_up_history().executions == 0
        by_job = {r.name: r.succeeded for r in store.history_summary().rows}
        assert by_job == {"late-commit": 1}

    def test_prune_keeps_what_was_rolled_up(self, store: Store, clock: ManualClock) -> None:
        finished_in_known_minutes(store, clock)
        clock.set(1000)
        # Not rolled up yet: prune rolls up what it deletes first.
        assert store.history().rolled_up_to is None
        assert store.prune(older_than=0) == 7
        assert store.query().items == [], "every execution is gone"
        assert nonzero(store.history(window="day")) == {0: WHOLE}
        assert store.roll_up_history().executions == 0
        assert nonzero(store.history(window="day")) == {0: WHOLE}
        clock.set(6 * 86400)
        assert nonzero(store.history(window="week")) == {0: WHOLE}
        store.prune(older_than=0)  # the minute rows are 6 days old: kept
        assert nonzero(store.history(window="week")) == {0: WHOLE}

    def test_throttled_time_counts_in_the_minute_of_its_record(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.set_limit("job:held", concurrency=1)
        store.submit("held", queue="slow")
        store.submit("held", queue="slow")
        (first,) = store.claim("w", jobs=["held"], limit=2, ttl=10_000)
        clock.set(200)
        store.complete(first, "ok")
        second = claim(store, clock, 200, "held")  # held back for 200 s
        clock.set(201)
        store.complete(second, "ok")
        clock.set(400)
        rolled_up(store)
        chart = nonzero(store.history(job="held"))
        assert chart[180]["throttled"] == 200 * S  # the record's minute: t=200
        assert sum((p.throttled for p in store.history().points), timedelta(0)) == 200 * S
        (row,) = store.history_summary(by="queue").rows
        assert (row.name, row.throttled, row.claims) == ("slow", 200 * S, 2)

    def test_a_replayed_dead_letter_counts_its_outcomes_and_one_claim(
        self, store: Store, clock: ManualClock
    ) -> None:
        e = store.submit("replayed", max_attempts=1)
        lease = claim(store, clock, 1, "replayed")
        clock.set(70)
        store.fail(lease, "fatal", retryable=False)
        clock.set(200)
        rolled_up(store)
        clock.set(200)
        assert store.replay(e.id).state is State.SCHEDULED
        again = claim(store, clock, 201, "replayed")
        clock.set(250)
        store.complete(again, "ok")
        clock.set(400)
        rolled_up(store)
        chart = nonzero(store.history())
        assert {s: (f.get("dead", 0), f.get("succeeded", 0)) for s, f in chart.items()} == {
            0: (0, 0),
            60: (1, 0),
            240: (0, 1),
        }
        assert chart[0]["claims"] == 1, "its first claim, once"
        assert sum(p.claims for p in store.history().points) == 1

    def test_bad_arguments_are_refused_naming_them(self, store: Store) -> None:
        for verb, arguments, field in BAD_ARGUMENTS:
            with pytest.raises(ValidationError) as refused:
                getattr(store, verb)(**arguments)
            assert refused.value.field == field, (verb, arguments)

    def test_names_no_execution_has_give_empty_charts(
        self, store: Store, clock: ManualClock
    ) -> None:
        store.submit("a", queue="q")
        finish = claim(store, clock, 1, "a")
        store.complete(finish, "ok")
        clock.set(200)
        rolled_up(store)
        for name in UNKNOWN_NAMES:
            for chart in (
                store.history(job=name),
                store.history(queue=name),
                store.history(job=name, queue=name),
                store.history(window="week", job="a", queue=name),
            ):
                assert len(chart.points) in (60, 168)
                assert nonzero(chart) == {}, name
            assert store.history(job=name).job == name
        assert nonzero(store.history(job="a"))[0]["succeeded"] == 1


#: Arguments every store refuses, naming them: ``(verb, arguments, field)``.
BAD_ARGUMENTS: list[tuple[str, dict[str, Any], str]] = [
    *(
        ("history", {"window": bad}, "window")
        for bad in (
            "month",
            "HOUR",
            "",
            None,
            3600,
            "hour\x00",
            "\ud800",
            "hour" * 10_000,
            ["hour"],
        )
    ),
    ("history", {"job": 1}, "job"),
    ("history", {"job": ["a"]}, "job"),
    ("history", {"job": {"a": 1}}, "job"),
    ("history", {"queue": b"q"}, "queue"),
    ("history", {"queue": 1.5}, "queue"),
    *(("history_summary", {"by": bad}, "by") for bad in ("name", "", None, "job\x00")),
    ("history_summary", {"window": "year"}, "window"),
    *(
        ("roll_up_history", {"max_rows": bad}, "max_rows")
        for bad in (0, -1, 100_001, 10**30, 1.5, True, "10")
    ),
    ("roll_up_history", {"wait": "yes"}, "wait"),
    ("roll_up_history", {"wait": None}, "wait"),
]

#: Job and queue names no execution has: each gives an empty chart, never an error.
UNKNOWN_NAMES = [
    "",
    " ",
    "nul\x00",
    "\ud800",
    "x" * 100_000,
    "'; DROP TABLE history_minutes; --",
    "%",
    "_",
    "a%",
    "é",
]

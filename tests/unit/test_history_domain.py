"""The history charts' pure parts: the histogram, the windows, what a finished execution
adds where, and where a roll-up reads from and leaves its watermark.

The stores' behaviour is the contract suite's (fencepost.testing.contract.history);
here are the boundaries the suite would need many executions to reach.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from importlib import resources

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.domain.history import (
    BUCKETS,
    COLUMNS,
    GRACE,
    LATENESS_BOUNDS,
    RETENTION,
    SPANS,
    WINDOWS,
    Finished,
    ThrottledMinute,
    Totals,
    Window,
    burn,
    increments,
    lateness_bucket,
    minute_number,
    minute_start,
    percentile,
    span,
    spread,
)
from fencepost.domain.slo import SloFacts, SloMark
from fencepost.domain.states import State
from fencepost.store.history import MIN_ID, Watermark, advanced, roll_up_range

T0 = datetime(2026, 1, 1, tzinfo=UTC)
S = timedelta(seconds=1)
US = timedelta(microseconds=1)


def test_a_lateness_equal_to_a_bound_is_in_its_bucket() -> None:
    assert lateness_bucket(timedelta(0)) == 0
    assert lateness_bucket(-5 * S) == 0, "a claim before its planned time: on time"
    assert lateness_bucket(LATENESS_BOUNDS[0]) == 0
    assert lateness_bucket(LATENESS_BOUNDS[0] + US) == 1
    ten = LATENESS_BOUNDS.index(10 * S)  # the claim objective is a bound
    assert lateness_bucket(10 * S) == ten
    assert lateness_bucket(10 * S + US) == ten + 1
    assert lateness_bucket(LATENESS_BOUNDS[-1]) == BUCKETS - 2
    assert lateness_bucket(LATENESS_BOUNDS[-1] + US) == BUCKETS - 1
    assert lateness_bucket(timedelta(days=365)) == BUCKETS - 1


def test_percentiles_are_nearest_rank_bucket_bounds() -> None:
    histogram = [0] * BUCKETS
    assert percentile(histogram, 0.5) is None
    histogram[lateness_bucket(0.3 * S)] = 99  # in (0.25 s, 0.5 s]
    histogram[lateness_bucket(20 * S)] = 1  # in (10 s, 30 s]
    assert percentile(histogram, 0.5) == 0.5 * S
    assert percentile(histogram, 0.99) == 0.5 * S, "rank 99 of 100"
    assert percentile(histogram, 1.0) == 30 * S
    histogram[-1] = 100  # past the last bound: the last bound
    assert percentile(histogram, 0.99) == LATENESS_BOUNDS[-1]
    assert percentile([0, 1] + [0] * (BUCKETS - 2), 0.01) == LATENESS_BOUNDS[1], "rank 1"


def test_burn_is_the_missed_share_over_the_budget() -> None:
    assert burn(0, 0, 0.99) is None
    assert burn(0, 10, 0.99) == 0.0
    assert burn(1, 100, 0.99) == pytest.approx(1.0)
    assert burn(5, 10, 0.999) == pytest.approx(500.0)


@pytest.mark.parametrize(
    ("window", "now", "start", "end"),
    [
        (Window.HOUR, T0 + 30 * S, T0 - 59 * 60 * S, T0 + 60 * S),
        (Window.HOUR, T0, T0 - 59 * 60 * S, T0 + 60 * S),  # at a step's start: its own step
        (Window.HOUR, T0 - US, T0 - 60 * 60 * S, T0),
        (Window.DAY, T0 + 901 * S, T0 + 1800 * S - 86400 * S, T0 + 1800 * S),
        (Window.WEEK, T0 + 3599 * S, T0 + 3600 * S - 7 * 86400 * S, T0 + 3600 * S),
    ],
)
def test_a_window_is_whole_steps_the_last_holding_now(
    window: Window, now: datetime, start: datetime, end: datetime
) -> None:
    assert span(window, now) == (start, end)


def test_minute_numbers() -> None:
    assert minute_number(datetime(1970, 1, 1, 0, 1, tzinfo=UTC)) == 1
    assert minute_number(T0 + 59 * S) == minute_number(T0)
    assert minute_start(minute_number(T0 + 61 * S)) == T0 + 60 * S


def finished(
    at: float,
    *,
    state: State = State.SUCCEEDED,
    claimed: float | None = 0,
    planned: float = 0,
    attempt: int = 1,
    marks: SloMark = SloMark.NONE,
    job: str = "j",
) -> Finished:
    """An execution planned at ``planned``, first claimed at ``claimed``, finished at ``at``
    (seconds after T0)."""
    first_finished = T0 + at * S if state in (State.SUCCEEDED, State.FAILED) else None
    return Finished(
        job=job,
        queue="q",
        attempt=attempt,
        finished_at=T0 + at * S,
        facts=SloFacts(
            state=state,
            planned_at=T0 + planned * S,
            first_claimed_at=None if claimed is None else T0 + claimed * S,
            first_finished_at=first_finished,
            held=timedelta(0),
            marks=marks,
        ),
    )


def added(
    *rows: Finished, held: tuple[ThrottledMinute, ...] = ()
) -> dict[tuple[int, str], dict[str, int]]:
    """increments() by (minute from T0, job), non-zero counters by name."""
    base = minute_number(T0)
    return {
        (minute - base, job): {COLUMNS[i]: n for i, n in enumerate(counters) if n}
        for (minute, job, _), counters in increments(rows, held).items()
    }


def test_outcomes_go_to_the_finish_minute_and_claims_to_the_claim_minute() -> None:
    late = f"late_{lateness_bucket(2 * S)}"
    assert added(finished(130, claimed=2)) == {
        (0, "j"): {"claims": 1, late: 1, "claim_counted": 1},
        (2, "j"): {"succeeded": 1, "finish_counted": 1},
    }
    assert added(finished(30, claimed=2)) == {
        (0, "j"): {"claims": 1, late: 1, "claim_counted": 1, "succeeded": 1, "finish_counted": 1}
    }


def test_each_terminal_state_and_mark_has_its_counter() -> None:
    rows = [
        finished(1, state=State.FAILED, attempt=3, marks=SloMark.HANDLER_FAILED),
        finished(1, state=State.CANCELLED, claimed=None),
        finished(1, state=State.SKIPPED, claimed=None),
        finished(1, marks=SloMark.TIMED_OUT, attempt=2),
    ]
    got = added(*rows)[0, "j"]
    assert {k: v for k, v in got.items() if not k.startswith(("late_", "claim", "finish"))} == {
        "succeeded": 1,
        "dead": 1,
        "cancelled": 1,
        "skipped": 1,
        "retried": 2,
        "timed_out": 1,
    }
    assert (got["claims"], got["claim_counted"], got["finish_counted"]) == (2, 2, 2)


def test_a_claimed_execution_cancelled_before_it_finished_misses_the_finish() -> None:
    # Cancelled 10 s after its claim: its verdict is taken once 5 minutes passed.
    got = added(finished(20, state=State.CANCELLED, claimed=10))[0, "j"]
    assert (got["finish_counted"], got["finish_missed"]) == (1, 1)
    assert (got["claim_counted"], got.get("claim_missed", 0)) == (1, 0)


def test_backfills_and_replays_add_what_they_should() -> None:
    backfill = finished(10, claimed=5, planned=-3600, marks=SloMark.BACKFILL)
    assert added(backfill) == {(0, "j"): {"succeeded": 1, "claims": 1}}, "no lateness, no verdict"
    replayed = finished(10, claimed=5, attempt=2, marks=SloMark.REPLAYED | SloMark.TIMED_OUT)
    assert added(replayed) == {(0, "j"): {"succeeded": 1, "retried": 1}}, "its outcome only"


def test_held_time_goes_to_its_minute_in_microseconds() -> None:
    held = (ThrottledMinute(minute=minute_number(T0) + 3, job="j", queue="q", held=1.5 * S),)
    assert added(held=held) == {(3, "j"): {"throttled_us": 1_500_000}}


def test_each_minute_is_added_into_its_quarter_and_its_hour() -> None:
    base = minute_number(T0)  # an hour's first minute
    one = [1] + [0] * (len(COLUMNS) - 1)
    rows = spread({(base + 14, "j", "q"): one, (base + 16, "j", "q"): one})
    assert {key: counters[0] for key, counters in rows.items()} == {
        (1, base + 14, "j", "q"): 1,
        (1, base + 16, "j", "q"): 1,
        (15, base, "j", "q"): 1,
        (15, base + 15, "j", "q"): 1,
        (60, base, "j", "q"): 2,
    }
    assert tuple(sorted(w.minutes for w in WINDOWS.values())) == SPANS


def test_totals_read_the_sums_in_column_order() -> None:
    values = list(range(len(COLUMNS)))
    totals = Totals.of(values)
    assert (totals.succeeded, totals.finish_missed) == (0, len(COLUMNS) - 1)
    assert totals.lateness == tuple(values[7 : 7 + BUCKETS])
    assert totals.throttled == timedelta(microseconds=COLUMNS.index("throttled_us"))
    assert Totals.of([None] * len(COLUMNS)) == Totals()
    with pytest.raises(ValueError, match="counters"):
        Totals.of([0])


@pytest.mark.parametrize("package", ["fencepost.store.sqlite", "fencepost.store.postgres"])
def test_the_minute_table_has_the_columns_in_order(package: str) -> None:
    schema = resources.files(package).joinpath("schema.sql").read_text()
    table = re.search(r"CREATE TABLE history_minutes \((.*?)\n\)", schema, re.S)
    assert table is not None
    names = re.findall(r"^\s+(\w+)\s+\w+", table[1], re.M)
    assert names[:4] == ["span_minutes", "minute", "job", "queue"]
    assert tuple(n for n in names[4:] if n != "PRIMARY") == COLUMNS


# -- the roll-up's range and watermark ---------------------------------------------------


def test_a_first_roll_up_reads_the_retention_up_to_the_grace() -> None:
    now = T0 + 3600 * S
    reading = roll_up_range(Watermark(), now)
    assert (reading.after_at, reading.after_id) == (now - RETENTION, MIN_ID)
    assert reading.until == now - GRACE
    assert reading.throttles_from == now - RETENTION
    old = Watermark(finished_at=now - 9 * RETENTION, finished_id="x", throttled_at=T0)
    assert roll_up_range(old, now).after_at == now - RETENTION, "never older than kept"


def test_a_full_batch_stops_at_its_last_row_and_a_short_one_at_the_grace() -> None:
    now = T0 + 3600 * S
    mark = Watermark(finished_at=T0, finished_id="a", throttled_at=T0)
    reading = roll_up_range(mark, now)
    last = (T0 + 10 * S, "b")
    full, caught_up = advanced(reading, last, full=True)
    assert (full.finished_at, full.finished_id, full.throttled_at) == (*last, T0 + 10 * S)
    assert (full.rolled_up_to, caught_up) == (T0 + 10 * S, False)
    short, caught_up = advanced(reading, last, full=False)
    assert (short.finished_at, short.finished_id) == (now - GRACE, MIN_ID)
    assert (short.throttled_at, caught_up) == (now - GRACE, True)


def test_a_clock_that_went_back_never_moves_the_watermark_back() -> None:
    mark = Watermark(finished_at=T0 + 100 * S, finished_id="m", throttled_at=T0 + 100 * S)
    reading = roll_up_range(mark, T0 + 120 * S)  # the grace before now is behind the mark
    assert reading.until == reading.after_at == T0 + 100 * S, "an empty range"
    after, _ = advanced(reading, None, full=False)
    assert (after.finished_at, after.finished_id) == (T0 + 100 * S, "m")
    assert after.throttled_at == T0 + 100 * S


def test_window_names_are_checked() -> None:
    from fencepost.domain.history import require_by, require_filter, require_window

    assert require_window("week") is Window.WEEK
    assert require_by("queue").value == "queue"
    assert require_filter(None, "job") is None
    for bad in ("Week", "", None, 7, "x" * 1000):
        with pytest.raises(ValidationError) as refused:
            require_window(bad)
        assert refused.value.field == "window"
        assert len(refused.value.message) < 200
    with pytest.raises(ValidationError) as refused:
        require_filter(7, "queue")
    assert refused.value.field == "queue"

"""The report arithmetic shared by the backends: nearest-rank percentiles, shares, tables."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fencepost import Lateness, State
from fencepost.domain.reports import (
    NO_LATENESS,
    PERCENTILES,
    lateness,
    nearest_rank,
    tabulate,
)


def seconds(*values: float) -> list[timedelta]:
    return [timedelta(seconds=v) for v in values]


def test_percentiles_of_one_to_a_hundred() -> None:
    assert lateness(reversed(seconds(*range(1, 101)))) == Lateness(
        count=100,
        p50=timedelta(seconds=50),
        p90=timedelta(seconds=90),
        p99=timedelta(seconds=99),
        max=timedelta(seconds=100),
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param((4,), (4, 4, 4, 4), id="one"),
        pytest.param((1, 2), (1, 2, 2, 2), id="two"),
        pytest.param((0, 3, 5, 7, 50), (5, 50, 50, 50), id="five"),
        pytest.param(range(1, 11), (5, 9, 10, 10), id="ten"),
    ],
)
def test_nearest_rank_picks_a_value(
    values: tuple[int, ...], expected: tuple[int, int, int, int]
) -> None:
    late = lateness(seconds(*values))
    assert (late.p50, late.p90, late.p99, late.max) == tuple(seconds(*expected))
    assert late.count == len(seconds(*values))


def test_no_values() -> None:
    assert lateness([]) == NO_LATENESS == Lateness(count=0, p50=None, p90=None, p99=None, max=None)


def test_floating_point_ranks_equal_exact_ranks() -> None:
    """ceil(f * n) in doubles (what percentile_disc computes) is the exact ceil(p * n / 100)."""
    for fraction, percent in zip(PERCENTILES, (50, 90, 99), strict=True):
        for n in range(1, 100_001):
            exact = -(-percent * n // 100)
            ordered = range(1, n + 1)
            assert nearest_rank(ordered, fraction) == exact, (fraction, n)


def test_tabulate_lists_every_state_and_sorts_jobs() -> None:
    by_state, by_job = tabulate(
        [("b", State.RUNNING, 2), ("a", State.FAILED, 1), ("b", State.RUNNING, 1)]
    )
    zeros = dict.fromkeys(State, 0)
    assert by_state == zeros | {State.RUNNING: 3, State.FAILED: 1}
    assert list(by_job) == ["a", "b"]
    assert by_job["b"] == zeros | {State.RUNNING: 3}
    assert tabulate([]) == (zeros, {})

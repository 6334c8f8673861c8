"""Capped exponential backoff with full jitter."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fencepost import RetryPolicy, ValidationError


@pytest.mark.parametrize(
    ("attempt", "cap"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, 300.0), (64, 300.0), (10_000, 300.0)],
)
def test_cap_doubles_then_stops_at_max_delay(attempt: int, cap: float) -> None:
    assert RetryPolicy(base_delay=1, max_delay=300).cap(attempt) == cap


@given(
    attempt=st.integers(1, 200),
    base=st.floats(0.001, 100),
    factor=st.floats(1, 1000),
    seed=st.integers(0, 2**32),
)
def test_delay_stays_inside_the_jitter_bounds(
    attempt: int, base: float, factor: float, seed: int
) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=base * factor)
    delay = policy.delay(attempt, random.Random(seed))
    assert timedelta(0) <= delay <= timedelta(seconds=policy.cap(attempt))


def test_the_random_source_is_injectable() -> None:
    policy = RetryPolicy(base_delay=1, max_delay=60)
    first = [policy.delay(5, random.Random(7)) for _ in range(3)]
    assert len(set(first)) == 1, "same seed, same delay"
    spread = {policy.delay(5, random.Random(seed)) for seed in range(50)}
    assert len(spread) == 50
    assert max(spread) - min(spread) > timedelta(seconds=8), "jitter spans the window"


def test_full_jitter_uses_uniform_over_zero_to_cap() -> None:
    calls: list[tuple[float, float]] = []

    class Recorder(random.Random):
        def uniform(self, a: float, b: float) -> float:
            calls.append((a, b))
            return b

    rng = Recorder()
    assert RetryPolicy(base_delay=2, max_delay=10).delay(3, rng) == timedelta(seconds=8)
    assert calls == [(0.0, 8.0)]


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"base_delay": 0}, "base_delay"), ({"base_delay": 5, "max_delay": 1}, "max_delay")],
)
def test_bad_policy(arguments: dict[str, float], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RetryPolicy(**arguments)
    assert caught.value.field == field


def test_attempts_start_at_one() -> None:
    with pytest.raises(ValidationError):
        RetryPolicy().cap(0)

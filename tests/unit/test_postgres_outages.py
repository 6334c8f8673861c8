"""Which failures the PostgreSQL store retries, and how long its backoff lasts."""

from __future__ import annotations

import psycopg
import psycopg.errors
import psycopg_pool
import pytest

from fencepost.domain.errors import StoreUnavailable
from fencepost.store.postgres import outages


def _unavailable(cause: BaseException) -> StoreUnavailable:
    try:
        raise StoreUnavailable(f"postgresql store: {cause}") from cause
    except StoreUnavailable as exc:
        return exc


@pytest.mark.parametrize(
    ("cause", "outage"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.lookup("57P01")("terminating connection"), True),  # admin shutdown
        (psycopg.errors.lookup("57P02")("crash shutdown"), True),
        (psycopg.errors.lookup("57P03")("the database system is starting up"), True),
        (psycopg.errors.lookup("25006")("read-only transaction"), True),  # a standby
        (psycopg.errors.lookup("08006")("connection failure"), True),
        (psycopg_pool.PoolTimeout("couldn't get a connection"), True),
        (psycopg_pool.PoolClosed("the pool is closed"), False),  # the store was closed
        (psycopg.errors.lookup("57014")("canceling statement"), False),  # a timeout
        (psycopg.errors.lookup("23505")("duplicate key"), False),
        (psycopg.errors.lookup("40001")("could not serialize"), False),
        (ValueError("ours"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_only_a_lost_connection_or_a_departing_server_is_an_outage(
    cause: BaseException, outage: bool
) -> None:
    assert outages.is_outage(_unavailable(cause)) is outage


def test_only_a_pool_error_means_nothing_was_sent() -> None:
    assert outages.unsent(_unavailable(psycopg_pool.PoolTimeout("no connection")))
    assert not outages.unsent(_unavailable(psycopg.OperationalError("lost")))
    assert not outages.unsent(StoreUnavailable("no cause"))


def test_the_backoff_grows_with_full_jitter_up_to_its_cap_within_its_budget() -> None:
    backoff = outages.Backoff(3600)
    waits = [backoff.next_wait() for _ in range(12)]
    bounds = [min(outages.BACKOFF_CAP, outages.BACKOFF_FIRST * 2**n) for n in range(12)]
    assert all(w is not None and 0 <= w <= b for w, b in zip(waits, bounds, strict=True))
    assert outages.Backoff(0).next_wait() is None


def test_retried_stops_at_a_failure_that_is_no_outage() -> None:
    calls: list[bool] = []

    def attempt(again: bool) -> None:
        calls.append(again)
        if len(calls) == 1:
            raise _unavailable(psycopg.OperationalError("lost"))
        raise _unavailable(psycopg.errors.lookup("57014")("canceling statement"))

    with pytest.raises(StoreUnavailable, match="canceling"):
        outages.retried(attempt, budget=10)
    assert calls == [False, True]

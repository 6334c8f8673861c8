"""The reaper (``fencepost.scheduler.reaper``): batches, their cap, and a thread that lasts."""

from __future__ import annotations

import threading

import pytest

from fencepost.domain.errors import StoreUnavailable
from fencepost.scheduler.reaper import Reaper, reap_all


class Backlog:
    """A store whose expired leases are a number; each call reaps up to ``limit`` of them."""

    def __init__(self, expired: int, *, fail_first: BaseException | None = None) -> None:
        self.expired = expired
        self.calls: list[int] = []
        self.fail_first = fail_first
        self.called = threading.Event()

    def reap_expired(self, *, limit: int = 1000) -> int:
        self.calls.append(limit)
        if self.fail_first is not None:
            exc, self.fail_first = self.fail_first, None
            raise exc
        reaped = min(limit, self.expired)
        self.expired -= reaped
        if not self.expired:
            self.called.set()
        return reaped


@pytest.mark.parametrize(
    ("expired", "calls"),
    [
        pytest.param(0, 1, id="nothing"),
        pytest.param(999, 1, id="one-short-batch"),
        pytest.param(1000, 2, id="a-full-batch-then-an-empty-one"),
        pytest.param(2500, 3, id="until-a-batch-comes-back-short"),
    ],
)
def test_reap_all_goes_on_while_batches_come_back_full(expired: int, calls: int) -> None:
    store = Backlog(expired)
    assert reap_all(store) == expired
    assert store.calls == [1000] * calls


def test_batches_caps_the_transactions() -> None:
    store = Backlog(2500)
    assert reap_all(store, limit=100, batches=1) == 100
    assert store.calls == [100]


@pytest.mark.parametrize(
    "failure", [StoreUnavailable("down"), RuntimeError("bug")], ids=["outage", "error"]
)
def test_the_reaper_thread_outlives_a_failed_pass(failure: BaseException) -> None:
    store = Backlog(1500, fail_first=failure)
    reaper = Reaper(store, interval=0.01)
    reaper.start()
    try:
        assert store.called.wait(5), "the reaper did not try again after a failed pass"
    finally:
        reaper.stop()
    assert store.expired == 0

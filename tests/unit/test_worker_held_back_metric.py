"""A worker's ``fencepost_worker_claims_held_back_total``: claims a rate limit held work back from.

A real worker on a memory store, its metrics served on a free loopback port; the
counter is read from the worker's own registry.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fencepost.app import App
from fencepost.domain.states import State
from fencepost.jobs.context import Context
from tests.unit.test_worker import running, wait_until


@pytest.fixture
def app() -> Iterator[App]:
    app = App("memory://")
    yield app
    app.close()


def test_a_claim_a_rate_held_back_is_counted(app: App) -> None:
    @app.job("tick")
    def tick(ctx: Context) -> None:
        return None

    app.store.set_limit("job:tick", rate="1/h", burst=1)
    first, *rest = [app.submit("tick").id for _ in range(3)]
    worker = app.worker(concurrency=4)
    worker.serve_metrics(0)
    assert worker.metrics is not None
    registry = worker.metrics.registry

    def held_back() -> float:
        return registry.get_sample_value("fencepost_worker_claims_held_back_total") or 0.0

    assert held_back() == 0
    with running(worker):
        wait_until(lambda: app.store.get(first).state is State.SUCCEEDED, 10, "the burst's one")
        wait_until(lambda: held_back() >= 1, 10, "a claim held back by the rate")
    assert [app.store.get(i).state for i in rest] == [State.SCHEDULED] * 2
    claimed = registry.get_sample_value("fencepost_leases_claimed_total", {"job": "tick"})
    assert claimed == 1

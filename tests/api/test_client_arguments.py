"""``Client`` takes the store's argument names, and refuses a bad batch as the store does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import fencepost
from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain.errors import ValidationError
from fencepost.store.base import Store
from tests.api.support import TestClient


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def test_submit_takes_version_and_delay_by_the_stores_names(remote: Client, store: Store) -> None:
    execution = remote.submit("a", {"n": 1}, version=3, delay=timedelta(minutes=5))
    stored = store.get(execution.id)
    assert (stored.job_version, stored.due_at - stored.created_at) == (3, timedelta(minutes=5))


def test_job_version_still_works_and_warns(remote: Client, store: Store) -> None:
    with pytest.warns(DeprecationWarning, match="give version") as caught:
        execution = remote.submit("a", job_version=2)
    assert caught[0].filename == __file__  # the warning points at the caller
    assert store.get(execution.id).job_version == 2
    with pytest.warns(DeprecationWarning, match="give version") as caught:
        [made] = remote.submit_many([{"job": "a", "job_version": 4}])
    assert caught[0].filename == __file__
    assert made.job_version == 4
    with (
        pytest.warns(DeprecationWarning, match="give version"),
        pytest.raises(ValidationError) as both,
    ):
        remote.submit("a", version=1, job_version=2)
    assert both.value.field == "job_version"


def test_a_timeout_travels_as_seconds(remote: Client, store: Store) -> None:
    made = remote.submit("a", timeout=timedelta(minutes=2))
    assert made.timeout == store.get(made.id).timeout == timedelta(minutes=2)
    assert remote.submit("a", timeout=0.5).timeout == timedelta(seconds=0.5)
    [first, second] = remote.submit_many([{"job": "a"}, {"job": "a", "timeout": 10}])
    assert (first.timeout, second.timeout) == (None, timedelta(seconds=10))
    assert remote.submit("a", timeout=None).timeout is None  # the store's default


@pytest.mark.parametrize("timeout", [0, -1, 1e308, 1e-9, timedelta(0)])
def test_a_timeout_the_service_refuses_is_named(remote: Client, store: Store, timeout: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        remote.submit("a", timeout=timeout)
    assert refused.value.field == "timeout_seconds"
    with pytest.raises(ValidationError) as refused:
        remote.submit_many([{"job": "a"}, {"job": "a", "timeout": timeout}])
    assert refused.value.field == "items.1.timeout_seconds"
    assert store.query().items == []


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), float("-inf")])
def test_a_timeout_json_cannot_carry_is_refused_before_sending(
    remote: Client, store: Store, timeout: float
) -> None:
    with pytest.raises(ValidationError) as refused:
        remote.submit("a", timeout=timeout)
    assert refused.value.field == "timeout_seconds"
    with pytest.raises(ValidationError) as refused:
        remote.submit_many([{"job": "a"}, {"job": "a", "timeout": timeout}])
    assert refused.value.field == "[1].timeout_seconds"
    with pytest.raises(ValidationError) as refused:
        remote.submit("a", delay=timeout)
    assert refused.value.field == "delay_seconds"
    assert store.query().items == []


def test_a_job_s_timeout_applies_unless_the_submit_gives_one(store: Store) -> None:
    app = fencepost.App(store)

    @app.job("report", timeout=timedelta(seconds=60))
    def report() -> None:
        """A job with a timeout of its own."""

    with (
        TestClient(create_app(store, registry=app.registry)) as http,
        Client("http://testserver", http=http) as remote,
    ):
        assert remote.submit("report").timeout == timedelta(seconds=60)
        assert remote.submit("report", timeout=5).timeout == timedelta(seconds=5)
        [batched] = remote.submit_many([{"job": "report", "timeout": 7}])
        assert batched.timeout == timedelta(seconds=7)


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"inputs": {}}, "[1].job"),
        ({"job": "a", "colour": "red"}, "[1].colour"),
        ("a", "[1]"),
    ],
)
def test_a_bad_batch_item_is_a_validation_error_naming_it(
    remote: Client, store: Store, item: Any, field: str
) -> None:
    """As ``Store.submit_many`` refuses it (it was a KeyError or TypeError), and nothing is sent."""
    with pytest.raises(ValidationError) as refused:
        remote.submit_many([{"job": "a"}, item])
    assert refused.value.field == field
    with pytest.raises(ValidationError) as by_store:
        store.submit_many([{"job": "a"}, item])
    assert by_store.value.field == field
    assert store.query().items == []


def test_schedule_calls_take_the_stores_names(remote: Client, store: Store) -> None:
    added = remote.add_schedule(
        "tick", every=timedelta(minutes=1), misfire_grace=5, version=2, id="t"
    )
    assert (added.every, added.misfire_grace, added.job_version) == (
        timedelta(minutes=1),
        timedelta(seconds=5),
        2,
    )
    changed = remote.update_schedule("t", every=120, version=None)
    assert (changed.every, changed.job_version) == (timedelta(minutes=2), None)
    with pytest.warns(DeprecationWarning, match="give version"):
        changed = remote.update_schedule("t", job_version=7)
    assert changed.job_version == store.get_schedule("t").job_version == 7

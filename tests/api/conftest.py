"""Fixtures for the HTTP service's tests: a store on each backend and a client for it."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from fencepost.api import create_app
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient


@pytest.fixture
def clock() -> ManualClock:
    """The pinned clock of stores in modules marked ``manual_clock`` (at t = 0)."""
    return ManualClock()


@pytest.fixture
def store(request: pytest.FixtureRequest, store_factory: Callable[..., Store]) -> Store:
    """A fresh store of each backend (memory, SQLite, PostgreSQL; see tests/conftest.py).

    On the ``clock`` fixture when the test is marked ``manual_clock``.
    """
    pinned = request.node.get_closest_marker("manual_clock") is not None
    return store_factory(request.getfixturevalue("clock") if pinned else None)


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """An in-process client of an app with auth off and a 4 KiB body cap."""
    with TestClient(create_app(store, max_body_bytes=4096)) as c:
        yield c

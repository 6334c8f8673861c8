"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import fencepost
from fencepost.store.base import Store
from tests import postgres
from tests.integration._tools import Procs


@pytest.fixture(params=["sqlite", "postgres"])
def shared_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL that several processes share: a SQLite file, or a PostgreSQL schema.

    Name it before the fixtures that start processes on it (``workers``, ``processes``):
    fixtures are torn down in reverse, and a schema dropped under a live process
    deadlocks with it.
    """
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    postgres.require_postgres()
    schema = postgres.new_schema()
    try:
        yield postgres.store_url(schema)
    finally:
        postgres.drop_schema(schema)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Processes the test starts, each in its own group; all killed when it ends."""
    started = Procs(tmp_path)
    yield started
    started.close()


@pytest.fixture
def clock_db(tmp_path: Path) -> Iterator[tuple[str, Store]]:
    """A SQLite store file the test's processes share, and the test's own store on it."""
    url = f"sqlite:///{tmp_path / 'clock.db'}"
    store = fencepost.connect(url)
    yield url, store
    store.close()

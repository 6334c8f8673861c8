"""Shared fixtures: ``store_factory`` is parametrized over every backend."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost.store.base import Store
from tests import postgres

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_factory(backend: str, tmp_path: Path) -> Iterator[Callable[..., Store]]:
    """Open fresh, empty stores of one backend; all are closed after the test."""
    if backend == "postgres":
        postgres.require_postgres()
    opened: list[Store] = []
    schemas: list[str] = []
    counter = itertools.count()

    def factory(clock: Any, **options: Any) -> Store:
        if backend == "memory":
            url = "memory://"
        elif backend == "sqlite":
            url = f"sqlite:///{tmp_path / f'store-{next(counter)}.db'}"
        else:
            schemas.append(postgres.new_schema())
            url = postgres.store_url(schemas[-1]) + "&pool_min=1&pool_max=2"
        store = fencepost.connect(url, clock=clock, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()
    for schema in schemas:
        postgres.drop_schema(schema)

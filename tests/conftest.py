"""Shared fixtures: ``store_factory`` is parametrized over every backend."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost.store.base import Store

BACKENDS = ["memory", "sqlite"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_factory(backend: str, tmp_path: Path) -> Iterator[Callable[..., Store]]:
    """Open fresh, empty stores of one backend; all are closed after the test."""
    opened: list[Store] = []
    counter = itertools.count()

    def factory(clock: Any, **options: Any) -> Store:
        if backend == "memory":
            url = "memory://"
        else:
            url = f"sqlite:///{tmp_path / f'store-{next(counter)}.db'}"
        store = fencepost.connect(url, clock=clock, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()

"""Fixtures for the ``fencepost`` command's acceptance tests.

``database`` is an empty store URL — a SQLite file, then a PostgreSQL schema —
that a test fills through the public store verbs (``database.store(clock)``)
before it runs the real ``fencepost`` command against it in a subprocess
(:func:`tests.acceptance.cli.fencepost`). The command uses the real clock: a
test that needs the past prepares it with a ``ManualClock`` set behind real time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost.store import Store
from tests import postgres


@dataclass
class Database:
    """One empty database for one test, and the stores the test opened on it."""

    backend: str
    url: str
    path: Path | None = None  #: the SQLite file
    schema: str | None = None  #: the PostgreSQL schema
    opened: list[Store] = field(default_factory=list)

    def store(self, clock: Any = None, **options: Any) -> Store:
        """A store on this database (closed after the test); ``clock`` pins its time."""
        store = fencepost.connect(self.url, clock=clock, **options)
        self.opened.append(store)
        return store


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """An empty database of each backend the command supports."""
    if request.param == "sqlite":
        path = tmp_path / "fencepost.db"
        db = Database(backend="sqlite", url=f"sqlite:///{path}", path=path)
    else:
        postgres.require_postgres()
        schema = postgres.new_schema()
        db = Database(backend="postgres", url=postgres.store_url(schema), schema=schema)
    yield db
    for store in db.opened:
        store.close()
    if db.schema is not None:
        postgres.drop_schema(db.schema)

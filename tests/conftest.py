"""Shared fixtures: ``store_factory`` is parametrized over every backend.

A module may widen ``backend`` to :data:`ASYNC_BACKENDS` (``async-memory``, ...): the
factory then opens the same store and hands it over as an
:class:`~tests.awaited.AwaitedStore`, whose AsyncStore verbs are awaited; or to
``postgres-pgbouncer``: the PostgreSQL store through a PgBouncer in transaction
pooling mode (one for the whole session, started when first asked for).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest

import fencepost
from fencepost.store.base import Store
from tests import postgres
from tests.awaited import AwaitedStore

BACKENDS = ["memory", "sqlite", "postgres"]
#: The same backends reached through AsyncStore's coroutines (tests/awaited.py).
ASYNC_BACKENDS = [f"async-{name}" for name in BACKENDS]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pgbouncer_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tests' database through a PgBouncer in transaction pooling mode."""
    from tests.integration._pgbouncer import pgbouncer

    postgres.require_postgres()
    with pgbouncer(tmp_path_factory.mktemp("pgbouncer")) as bouncer:
        yield bouncer.dsn


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[postgres.SchemaPool]:
    """The schemas of this test process's PostgreSQL stores (see SchemaPool)."""
    pool = postgres.SchemaPool()
    yield pool
    pool.close()


@pytest.fixture
def store_factory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Store]]:
    """Open fresh, empty stores of one backend; all are closed after the test."""
    awaited = backend.startswith("async-")
    backend = backend.removeprefix("async-")
    server = postgres.dsn()
    schema_pool: postgres.SchemaPool | None = None
    if backend.startswith("postgres"):
        postgres.require_postgres()
        schema_pool = request.getfixturevalue("postgres_schemas")
    if backend == "postgres-pgbouncer":
        server = request.getfixturevalue("pgbouncer_dsn")
    opened: list[Store] = []
    schemas: list[str] = []
    counter = itertools.count()

    def factory(clock: Any, **options: Any) -> Store:
        if backend == "memory":
            url = "memory://"
        elif backend == "sqlite":
            url = f"sqlite:///{tmp_path / f'store-{next(counter)}.db'}"
        else:
            assert schema_pool is not None
            schemas.append(schema_pool.take())
            url = postgres.store_url(schemas[-1], server) + "&pool_min=1&pool_max=2"
        store: Any = fencepost.connect(url, clock=clock, **options)
        if awaited:
            store = AwaitedStore(store)
        opened.append(store)
        return cast(Store, store)

    yield factory
    for store in opened:
        store.close()
    for schema in schemas:
        assert schema_pool is not None
        schema_pool.give_back(schema)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The run's last step, in the main process (not in each xdist worker)."""
    if not hasattr(session.config, "workerinput"):
        postgres.vacuum_catalogues()


def _encodable(text: str) -> str:
    """``text`` with lone surrogates escaped (``\\ud800``): what UTF-8 can carry."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Escape lone surrogates in a report's captured output and failure text.

    The hostile-value tests log texts holding lone surrogates on purpose; pytest-xdist
    sends each report from its worker as UTF-8, and an unencodable one would crash the
    worker (and lose its remaining tests) instead of being shown.
    """
    report.sections = [(title, _encodable(content)) for title, content in report.sections]
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        text = str(report.longrepr)
        if _encodable(text) != text:
            report.longrepr = _encodable(text)

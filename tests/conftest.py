"""Shared fixtures: ``store_factory`` is parametrized over every backend.

A module may widen ``backend`` to :data:`ASYNC_BACKENDS` (``async-memory``, ...): the
factory then opens the same store and hands it over as an
:class:`~tests.awaited.AwaitedStore`, whose AsyncStore verbs are awaited; or to
``postgres-pgbouncer``: the PostgreSQL store through a PgBouncer in transaction
pooling mode (one for the whole session, started when first asked for).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

import fencepost
from fencepost.store.base import Store
from tests import postgres
from tests.awaited import AwaitedStore

if TYPE_CHECKING:
    from tests.integration._pgbouncer import PgBouncer

BACKENDS = ["memory", "sqlite", "postgres"]
#: The same backends reached through AsyncStore's coroutines (tests/awaited.py).
ASYNC_BACKENDS = [f"async-{name}" for name in BACKENDS]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pgbouncer_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction pooling mode in front of the tests' database."""
    from tests.integration._pgbouncer import pgbouncer

    postgres.require_postgres()
    with pgbouncer(tmp_path_factory.mktemp("pgbouncer")) as bouncer:
        yield bouncer


@pytest.fixture(scope="session")
def pgbouncer_dsn(pgbouncer_server: PgBouncer) -> str:
    """The tests' database through that PgBouncer."""
    return pgbouncer_server.dsn


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[postgres.SchemaPool]:
    """The schemas of this test process's PostgreSQL stores (see SchemaPool)."""
    pool = postgres.SchemaPool()
    yield pool
    pool.close()


class FreshStores:
    """Opens fresh, empty stores of one backend (``factory(clock, **options)``)."""

    def __init__(self, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self._awaited = backend.startswith("async-")
        self._backend = backend.removeprefix("async-")
        self._tmp_path = tmp_path
        self._server = postgres.dsn()
        self._schemas: postgres.SchemaPool | None = None
        if self._backend.startswith("postgres"):
            postgres.require_postgres()
            self._schemas = request.getfixturevalue("postgres_schemas")
        #: The PgBouncer in between (postgres-pgbouncer), whose log a failed start shows.
        self._bouncer: PgBouncer | None = None
        if self._backend == "postgres-pgbouncer":
            self._bouncer = request.getfixturevalue("pgbouncer_server")
            self._server = self._bouncer.dsn
        #: Each store opened and not yet released, with its schema (PostgreSQL).
        self._opened: list[tuple[Store, str | None]] = []
        self._counter = itertools.count()

    def __call__(self, clock: Any, **options: Any) -> Store:
        schema = None
        if self._backend == "memory":
            url = "memory://"
        elif self._backend == "sqlite":
            url = f"sqlite:///{self._tmp_path / f'store-{next(self._counter)}.db'}"
        else:
            assert self._schemas is not None
            schema = self._schemas.take()
            url = postgres.store_url(schema, self._server) + "&pool_min=1&pool_max=2"
        try:
            store: Any = fencepost.connect(url, clock=clock, **options)
        except Exception as error:
            if self._bouncer is not None:  # what PgBouncer said of it, for the report
                error.add_note(self._bouncer.log_tail())
            raise
        if self._awaited:
            store = AwaitedStore(store)
        self._opened.append((store, schema))
        return cast(Store, store)

    def release(self, store: Store) -> None:
        """Close ``store`` (again, if its user did) and hand its schema on at once."""
        for i, (opened, schema) in enumerate(self._opened):
            if opened is store:
                del self._opened[i]
                store.close()
                if schema is not None:
                    assert self._schemas is not None
                    self._schemas.give_back(schema)
                return
        raise ValueError("not a store this factory opened")

    def release_all(self) -> None:
        while self._opened:
            self.release(self._opened[-1][0])


@pytest.fixture
def store_factory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[FreshStores]:
    """Open fresh, empty stores of one backend; all are closed after the test."""
    factory = FreshStores(backend, tmp_path, request)
    yield factory
    factory.release_all()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the run so that the tests marked slow start first, the rest in collection order.

    The test processes (``make test`` runs three) take tests in this order as each
    finishes its last: a test of a minute started last keeps one process busy after the
    others ran out of work, where started first the short ones fill in around it. The
    browser tests keep their place in the collection order.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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

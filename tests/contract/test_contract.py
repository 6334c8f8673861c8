"""Every shipped backend passes the one contract suite, and so does AsyncStore on each,
and the PostgreSQL store through PgBouncer in transaction pooling mode."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, cast

import pytest

from fencepost.store.base import Store
from fencepost.testing.contract import StoreContract
from tests.awaited import AwaitedStore
from tests.conftest import ASYNC_BACKENDS, FreshStores


class OneStoreAtATime(StoreContract):
    """The fencing state machine opens a store per example and closes it when the
    example ends. Here its factory releases the previous example's store first, so that
    on PostgreSQL each example gets the schema the one before it emptied rather than a
    new one, migrated and given day partitions: 150 examples took 106 s that way."""

    @pytest.mark.slow
    def test_random_workers_never_break_fencing(self, store_factory: Callable[..., Store]) -> None:
        assert isinstance(store_factory, FreshStores)
        stores = store_factory
        previous: list[Store] = []

        def one_at_a_time(clock: Any, **options: Any) -> Store:
            if previous:
                stores.release(previous.pop())
            previous.append(stores(clock, **options))
            return previous[-1]

        super().test_random_workers_never_break_fencing(one_at_a_time)


class TestStoreContract(OneStoreAtATime):
    """Runs once per backend: see the ``store_factory`` fixture in tests/conftest.py."""


class TestAsyncStoreContract(OneStoreAtATime):
    """The same suite through AsyncStore on each backend (tests/awaited.py), by the same
    ``store_factory``, every verb awaited, the worker's included. The fencing state
    machine runs a fifth of its examples here."""

    fencing_machine_examples = 30

    @pytest.fixture(params=ASYNC_BACKENDS)
    def backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)


class TestPgBouncerContract(OneStoreAtATime):
    """The PostgreSQL store through PgBouncer in transaction pooling mode (see
    tests/integration/_pgbouncer.py). The fencing state machine runs a fifth of its
    examples here: the direct run explores the property, this one shows that the
    pooler changes nothing. Its stores mostly open schemas an earlier test emptied
    (tests/postgres.py); stores migrating new schemas through the pooler are in
    tests/integration/test_postgres_pgbouncer.py."""

    fencing_machine_examples = 30

    @pytest.fixture(params=["postgres-pgbouncer"])
    def backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)


@pytest.mark.parametrize("backend", ASYNC_BACKENDS, indirect=True)
def test_the_async_backends_run_asyncstore_s_executors(
    backend: str, store_factory: Callable[..., Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite's async runs go through AsyncStore: on PostgreSQL its own pool (the
    sync store's code never touches the database), on SQLite its dedicated thread, in
    memory its event loop."""
    awaited = cast(AwaitedStore, store_factory(None))
    sync_store: Any = awaited.sync_store
    ran_on: list[tuple[str, str]] = []
    for name in ("_insert", "get"):
        original = getattr(sync_store, name)

        def recording(*args: Any, _name: str = name, _original: Any = original) -> Any:
            ran_on.append((_name, threading.current_thread().name.split("_")[0]))
            return _original(*args)

        monkeypatch.setattr(sync_store, name, recording)
    execution = cast(Store, awaited).submit("job", {"n": 1})
    assert cast(Store, awaited).get(execution.id).inputs == {"n": 1}
    assert awaited.awaited == {"submit": 1, "get": 1}
    if backend == "async-postgres":
        assert ran_on == []
        assert awaited.async_store._runner._pool is not None  # type: ignore[attr-defined]
    else:
        thread = "fencepost-sqlite" if backend == "async-sqlite" else "fencepost-awaited"
        assert ran_on == [("_insert", thread), ("get", thread)]

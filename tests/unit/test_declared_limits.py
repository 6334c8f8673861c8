"""Limits declared with jobs, and workers that sleep until the next token.

``@app.job(rate_limit=..., rate_burst=..., concurrency=..., limit_per_key=...)`` and the
same keys in a definition file are checked at declaration (the field named); a worker
publishing its jobs declares them to the store, where an operator's limit wins. A
worker whose claim a rate held back waits for the next token (at most a second)
instead of claiming every poll interval. On the memory store, with the real clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from fencepost.app import App
from fencepost.domain.errors import DefinitionError, ValidationError
from fencepost.domain.limits import Rate
from fencepost.domain.states import State
from fencepost.jobs.catalogue import entry_of, limits_of
from fencepost.jobs.definitions import load_definition
from fencepost.jobs.spec import declared_limit
from fencepost.store.base import Store
from fencepost.worker.runtime import Worker, WorkerOptions


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    pytest.fail(f"timed out waiting: {message or predicate}")


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    worker.start()
    try:
        yield worker
    finally:
        worker.stop(immediate=True)
        assert worker.join(10), "the worker did not stop"


@pytest.fixture
def app() -> Iterator[App]:
    app = App("memory://")
    yield app
    app.close()


# -- declaring -------------------------------------------------------------------------


def test_a_job_declares_its_limit(app: App) -> None:
    @app.job("charge", rate_limit="50/s", concurrency=10)
    def charge() -> None: ...

    @app.job(rate_limit="100/h", rate_burst=3, limit_per_key=True)
    def per_tenant() -> None: ...

    @app.job("plain")
    def plain() -> None: ...

    limits = {spec.name: spec.limit for spec in app.registry}
    assert limits["plain"] is None
    charge_limit, tenant_limit = limits["charge"], limits["per_tenant"]
    assert charge_limit is not None
    assert tenant_limit is not None
    assert (charge_limit.scope, charge_limit.rate, charge_limit.burst) == (
        "job:charge",
        Rate(50.0, 1.0),
        5,
    )
    assert (charge_limit.concurrency, charge_limit.per_key, charge_limit.source) == (
        10,
        False,
        "code",
    )
    assert (tenant_limit.scope, tenant_limit.burst, tenant_limit.per_key) == (
        "job:per_tenant",
        3,
        True,
    )


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"rate_limit": "fast"}, "rate_limit"),
        ({"rate_limit": 50}, "rate_limit"),
        ({"rate_limit": "0/s"}, "rate_limit"),
        ({"rate_limit": "1/century"}, "rate_limit"),
        ({"rate_limit": "5/s", "rate_burst": 0}, "rate_burst"),
        ({"rate_limit": "5/s", "rate_burst": 1.5}, "rate_burst"),
        ({"rate_burst": 3}, "rate_burst"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"concurrency": 2**40}, "concurrency"),
        ({"limit_per_key": True}, "limit_per_key"),
        ({"concurrency": 1, "limit_per_key": "yes"}, "limit_per_key"),
    ],
    ids=repr,
)
def test_a_bad_declaration_fails_at_once_naming_its_field(
    app: App, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as named:
        app.job("x", **options)
    assert named.value.field == field

    def handler() -> None: ...

    with pytest.raises(ValidationError) as unnamed:  # named by the function: at decoration
        app.job(**options)(handler)
    assert unnamed.value.field == field
    assert len(app.registry) == 0


def test_nothing_declared_is_no_limit() -> None:
    assert declared_limit("job") is None
    assert declared_limit("job", limit_per_key=False) is None


def test_a_limit_is_not_part_of_the_catalogue_entry(app: App) -> None:
    """Declaring (or changing) a limit never makes a published version conflict."""

    def handler() -> None: ...

    plain, limited = App("memory://"), App("memory://")
    plain.job("j")(handler)
    limited.job("j", rate_limit="5/s", concurrency=2)(handler)
    (a,), (b,) = list(plain.registry), list(limited.registry)
    assert entry_of(a).digest == entry_of(b).digest
    assert b.limit is not None
    assert a.limit is None


def test_a_job_s_limit_is_its_latest_version_s(app: App) -> None:
    def handler() -> None: ...

    app.job("j", version=1, rate_limit="1/s")(handler)
    app.job("j", version=2, rate_limit="2/s")(handler)
    app.job("k", version=1, concurrency=3)(handler)
    app.job("k", version=2)(handler)
    app.job("m", version=1)(handler)
    (only,) = limits_of(app.registry)
    assert (only.scope, only.rate) == ("job:j", Rate(2.0, 1.0))


def test_app_submits_and_schedules_with_a_limit_key(app: App) -> None:
    @app.job("charge", concurrency=1, limit_per_key=True)
    def charge() -> None: ...

    made = app.submit("charge", limit_key="tenant-1")
    handle = app.schedule("charge", every=60, id="s", limit_key="tenant-2")
    assert (made.limit_key, app.store.get_schedule("s").limit_key) == ("tenant-1", "tenant-2")
    assert handle.schedule.limit_key == "tenant-2"
    with pytest.raises(ValidationError) as caught:
        app.submit("charge", limit_key="a\x00b")
    assert caught.value.field == "limit_key"


# -- definition files ------------------------------------------------------------------


def _definition(tmp_path: Path, **keys: Any) -> Path:
    path = tmp_path / "job.yaml"
    doc = {"name": "report", "run": {"command": ["true"]}} | keys
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_a_definition_file_declares_a_limit(tmp_path: Path) -> None:
    spec = load_definition(
        _definition(tmp_path, rate_limit="3000/min", rate_burst=10, limit_per_key=True)
    )
    assert spec.limit is not None
    assert (spec.limit.scope, spec.limit.rate, spec.limit.burst, spec.limit.per_key) == (
        "job:report",
        Rate(3000.0, 60.0),
        10,
        True,
    )
    assert load_definition(_definition(tmp_path, concurrency=4)).limit is not None
    assert load_definition(_definition(tmp_path)).limit is None


@pytest.mark.parametrize(
    ("keys", "field"),
    [
        ({"rate_limit": "soon"}, "rate_limit"),
        ({"rate_burst": 5}, "rate_burst"),
        ({"concurrency": -1}, "concurrency"),
        ({"concurrency": "10"}, "concurrency"),
        ({"limit_per_key": "true", "concurrency": 1}, "limit_per_key"),
        ({"rate_limits": "5/s"}, "rate_limits"),
    ],
    ids=repr,
)
def test_a_bad_limit_in_a_definition_file_names_the_file_and_field(
    tmp_path: Path, keys: dict[str, Any], field: str
) -> None:
    path = _definition(tmp_path, **keys)
    with pytest.raises(DefinitionError) as caught:
        load_definition(path)
    assert (caught.value.path, caught.value.field) == (path, field)


# -- publishing declares ---------------------------------------------------------------


def test_a_worker_publishing_its_jobs_declares_their_limits(app: App) -> None:
    @app.job("charge", rate_limit="50/s", concurrency=10)
    def charge() -> None: ...

    @app.job("free")
    def free() -> None: ...

    store = app.store
    store.set_limit("job:free", concurrency=7)  # an operator's: no declaration touches it
    with running(Worker(store, app.registry)):
        wait_until(lambda: store.jobs(), message="the jobs published")
        declared = wait_until(
            lambda: [lim for lim in store.limits() if lim.scope == "job:charge"],
            message="the limit declared",
        )
    (charge_limit,) = declared
    assert (charge_limit.source, charge_limit.rate, charge_limit.concurrency) == (
        "code",
        Rate(50.0, 1.0),
        10,
    )
    assert [c.action for c in store.flow_changes() if c.scope == "job:charge"] == ["declare"]
    free_limit = next(lim for lim in store.limits() if lim.scope == "job:free")
    assert (free_limit.source, free_limit.concurrency) == ("operator", 7)


def test_an_operator_s_limit_wins_over_a_declaration(app: App) -> None:
    @app.job("charge", rate_limit="50/s")
    def charge() -> None: ...

    app.store.set_limit("job:charge", rate="1/s", actor="ops")
    app.submit("charge")  # App publishes (and declares) before its first submit
    (stored,) = app.store.limits()
    assert (stored.source, stored.rate) == ("operator", Rate(1.0, 1.0))


def test_a_job_that_stops_declaring_keeps_its_declared_limit_until_removed(app: App) -> None:
    """The chosen rule: publishing never removes a declaration (workers of two releases
    publishing at once would otherwise switch it off and on); an operator removes it."""

    def handler() -> None: ...

    first = App(app.store)
    first.job("j", rate_limit="5/s")(handler)
    first.submit("j")
    later = App(app.store)
    later.job("j", version=2)(handler)  # the next release declares nothing
    later.submit("j")
    (kept,) = app.store.limits()
    assert (kept.scope, kept.source, kept.rate) == ("job:j", "code", Rate(5.0, 1.0))
    app.store.remove_limit("job:j")
    later.job("k")(handler)
    later.submit("k")  # publishing again brings nothing back
    assert app.store.limits() == []


# -- sleeping until the next token -----------------------------------------------------


class CountingStore:
    """A store (or a client: anything with ``claim``) whose claims are counted, the
    time of each (monotonic)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.claims: list[float] = []
        self._lock = threading.Lock()

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            self.claims.append(time.monotonic())
        return self._store.claim(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_worker_held_by_a_rate_does_not_claim_in_a_busy_loop(app: App) -> None:
    @app.job("tick", rate_limit="1/s")  # a burst of 1: one start a second
    def tick() -> None: ...

    store = app.store
    ids = [store.submit("tick").id for _ in range(6)]
    counting = CountingStore(store)
    options = WorkerOptions(poll_interval=0.05, concurrency=4)
    with running(Worker(counting, app.registry, options)):  # type: ignore[arg-type]
        wait_until(
            lambda: sum(store.get(i).state is State.SUCCEEDED for i in ids) >= 3,
            message="three ticks",
        )
        ended = time.monotonic()
        claims = [t for t in counting.claims if t <= ended]
    window = ended - claims[0]
    # The rate held: the third start came two tokens after the first.
    assert window >= 1.8, window
    # A worker that polled every 50 ms would have claimed window / 0.05 >= 36 times.
    # Sleeping until the next token, each token costs at most the claim that takes it
    # and one woken a hair before it: not one right after (though the worker had
    # room) nor one when the finished handler wakes the loop. Over the window's
    # tokens (one a second, and the first).
    bound = 2 * (int(window) + 2)
    assert len(claims) <= bound, (len(claims), window)
    assert len(claims) < window / options.poll_interval / 2


def test_the_held_wait_is_bounded_by_the_poll_interval_and_a_second(app: App) -> None:
    def handler() -> None: ...

    app.job("j")(handler)
    worker = Worker(app.store, app.registry, WorkerOptions(poll_interval=0.05))
    now = time.monotonic()
    assert worker._idle_wait(now) == pytest.approx(0.05)
    for held_for, wait in [
        (30.0, 1.0),  # a slow rate's next token: look again within a second
        (0.4, 0.4),
        (0.001, 0.05),  # a fast rate: no faster than the poll interval
    ]:
        worker._held_for = held_for
        worker._hold(now)
        assert worker._idle_wait(now) == pytest.approx(wait)
        # Later in the same wait (a finished handler woke the loop): only the rest.
        assert worker._idle_wait(now + wait / 2) == pytest.approx(wait / 2)

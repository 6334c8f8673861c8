"""``fencepost.client.AsyncClient``: every coroutine against the real service, beside the
sync ``Client``: the same results (every model field), the same errors, and ``wait``.

Both clients talk to one in-process app over one store: the sync one through the
``client`` fixture's TestClient, the async one through ``httpx.ASGITransport`` on the
same app. The store's clock is pinned (``manual_clock``), so figures taken "now" by
two calls a moment apart are the same figures.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.client import AsyncClient, Client, Forbidden, Unauthorized
from fencepost.domain.errors import (
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    StoreUnavailable,
    ValidationError,
)
from fencepost.domain.states import CommandKind, State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient
from tests.api.test_jobs import publish

pytestmark = pytest.mark.manual_clock

T = TypeVar("T")
#: A job ``publish`` publishes with no input schema.
NIGHTLY = "reports/nightly"
BASE = "http://testserver"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite for every test here; those parametrized with ``both`` add PostgreSQL."""
    return str(request.param)


both = pytest.mark.parametrize("backend", ["sqlite", "postgres"])
#: A TestClient warns of a timeout given to a request (it applies none); the sync
#: ``wait``'s long-polls give one: the client's own, lengthened by the time the service
#: may hold them.
sync_long_polls = pytest.mark.filterwarnings(
    "ignore:You should not use the 'timeout' argument with the TestClient"
)


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client(BASE, http=client) as c:
        yield c


def run(
    app: Any,
    scenario: Callable[[AsyncClient], Awaitable[T]],
    *,
    token: str | None = None,
    sent: list[httpx.Request] | None = None,
    on_send: Callable[[httpx.Request], None] | None = None,
) -> T:
    """``scenario`` on an event loop with an ``AsyncClient`` of ``app``, in process.

    ``sent`` collects every request the client sends; ``on_send`` is called with each.
    """

    async def record(request: httpx.Request) -> None:
        if sent is not None:
            sent.append(request)
        if on_send is not None:
            on_send(request)

    async def main() -> T:
        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url=BASE,
            event_hooks={"request": [record]},
        )
        async with AsyncClient(BASE, token=token, http=http) as aclient:
            return await scenario(aclient)

    return asyncio.run(main())


def errors_of(call: Callable[[], Any]) -> BaseException:
    """The exception ``call`` raises (it must raise one)."""
    try:
        call()
    except Exception as exc:  # any error: the caller compares it
        return exc
    raise AssertionError("no error was raised")


async def async_error(call: Awaitable[Any]) -> BaseException:
    """The exception awaiting ``call`` raises (it must raise one)."""
    try:
        await call
    except Exception as exc:  # any error: the caller compares it
        return exc
    raise AssertionError("no error was raised")


def assert_same_error(sync: BaseException, asynchronous: BaseException) -> None:
    """Both clients raised the same error: class, field, message."""
    assert type(asynchronous) is type(sync)
    assert getattr(asynchronous, "field", None) == getattr(sync, "field", None)
    assert str(asynchronous) == str(sync)


def populated(store: Store, clock: ManualClock) -> dict[str, str]:
    """A store with published jobs, nodes, a finished run, a dead letter, a running
    execution, waiting ones and a schedule; the ids by role."""
    publish(store, clock)
    dead = store.submit(NIGHTLY, {"to": "a"}, max_attempts=1, bucket_key="tenant-9")
    [lease] = store.claim("w", ids=[dead.id])
    store.fail(lease, "boom", retryable=False)
    running = store.submit(NIGHTLY, {"to": "b"}, priority=4)
    store.claim("w", ids=[running.id], ttl=3600)
    waiting = store.submit(NIGHTLY, {"to": "c"}, delay=30, queue="slow")
    store.add_schedule(NIGHTLY, cron="0 3 * * *", timezone="Europe/London", id="nightly")
    store.add_schedule("report", every=60, id="minutely", inputs={"day": "x"})
    return {"dead": dead.id, "running": running.id, "waiting": waiting.id}


# -- reading -----------------------------------------------------------------------------


@both
def test_every_read_is_the_sync_clients(
    client: TestClient, remote: Client, store: Store, clock: ManualClock
) -> None:
    ids = populated(store, clock)
    after = datetime(2026, 3, 28, tzinfo=UTC)
    reads: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
        ("get", (ids["running"],), {}),
        ("query", (), {}),
        ("query", (), {"state": State.RUNNING}),
        ("query", (), {"state": ["SCHEDULED", State.FAILED], "job": NIGHTLY, "limit": 1}),
        ("query", (), {"newest_first": True, "queue": "slow"}),
        ("query", (), {"schedule": "nightly"}),
        ("dead_letters", (), {}),
        ("dead_letters", (), {"job": "report", "limit": 5}),
        ("transitions", (ids["dead"],), {}),
        ("attempts", (ids["dead"],), {}),
        ("stats", (), {"window": timedelta(hours=3)}),
        ("jobs", (), {"window": 3600}),
        ("job", ("report",), {}),
        ("job", ("reports/nightly",), {"window": 60.0}),
        ("slo", (), {"window": 9000, "claim_within": 5, "worst": 2}),
        ("bucket_report", (), {"orphaned_after": 0, "limit": 10}),
        ("get_schedule", ("nightly",), {}),
        ("schedules", (), {}),
        ("schedules", (), {"job": "report", "paused": False, "limit": 1}),
        ("preview", ("nightly", 3), {"after": after}),
        ("preview", ("minutely",), {}),
        ("nodes", (), {}),
    ]

    async def scenario(aclient: AsyncClient) -> list[Any]:
        return [await getattr(aclient, name)(*args, **kwargs) for name, args, kwargs in reads]

    got = run(client.app, scenario)
    for (name, args, kwargs), answer in zip(reads, got, strict=True):
        assert answer == getattr(remote, name)(*args, **kwargs), name
    # Not empty pages compared with empty ones: the reads found what was made.
    assert len(got[1].items) == 6
    assert [e.id for e in got[6].items] == [ids["dead"]]
    assert [v.version for v in got[12].versions] == [1, 2]
    assert [t.hour for t in got[19]] == [3, 2, 2]
    assert {n.id for n in got[21]} == {"w1", "w2"}


def test_a_page_cursor_travels_as_after(client: TestClient, remote: Client, store: Store) -> None:
    for n in range(5):
        store.submit("x", {"n": n})

    async def scenario(aclient: AsyncClient) -> list[str]:
        ids, after = [], None
        while True:
            page = await aclient.query(limit=2, after=after)
            ids += [e.id for e in page.items]
            if page.next_cursor is None:
                return ids
            after = page.next_cursor

    assert run(client.app, scenario) == [e.id for e in remote.query(limit=10).items]


# -- writing -----------------------------------------------------------------------------


@both
def test_submits_and_operator_actions_are_the_sync_clients(
    client: TestClient, remote: Client, store: Store
) -> None:
    when = datetime(2031, 1, 1, 12, tzinfo=UTC)
    dead = store.submit("y", max_attempts=1)
    [lease] = store.claim("w", ids=[dead.id])
    store.fail(lease, "boom", retryable=False)
    running = store.submit("z")
    store.claim("w", ids=[running.id])
    order: dict[str, Any] = {
        "execute_at": when,
        "max_attempts": 4,
        "priority": 3,
        "timeout": timedelta(seconds=9),
        "bucket_key": "k",
        "queue": "mail",
        "idempotency_key": "order-1",
    }

    async def scenario(aclient: AsyncClient) -> dict[str, Any]:
        return {
            "submitted": await aclient.submit("email", {"to": "a@example.com"}, **order),
            "delayed": await aclient.submit("email", delay=60, version=2),
            "batch": await aclient.submit_many(
                [{"job": "a", "inputs": {"n": i}, "idempotency_key": f"k{i}"} for i in range(3)]
            ),
            "empty": await aclient.submit_many([]),
            "replayed": await aclient.replay(dead.id),
            "command": await aclient.request(running.id, "cancel"),
            "paused": await aclient.request(running.id, CommandKind.PAUSE),
        }

    done = run(client.app, scenario)
    submitted = done["submitted"]
    assert (submitted.due_at, submitted.max_attempts, submitted.priority) == (when, 4, 3)
    assert remote.get(submitted.id) == submitted == store.get(submitted.id)
    # The same idempotency key through the sync client: the same execution, every field.
    assert remote.submit("email", {"to": "a@example.com"}, **order) == submitted
    assert remote.get(done["delayed"].id) == done["delayed"]
    assert done["delayed"].job_version == 2
    assert [e.inputs for e in done["batch"]] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert remote.submit_many([{"job": "a", "inputs": {"n": 0}, "idempotency_key": "k0"}]) == [
        done["batch"][0]
    ]
    assert done["empty"] == []
    assert done["replayed"] == remote.get(dead.id)
    assert done["replayed"].state is State.SCHEDULED
    assert (done["command"].kind, done["command"].execution_id) == (CommandKind.CANCEL, running.id)
    assert done["paused"].kind is CommandKind.PAUSE
    assert store.commands(running.id) == [done["command"], done["paused"]]

    # A cancel: the async answer is what the sync client reads back.
    waiting = store.submit("x")
    cancelled = run(client.app, lambda a: a.cancel(waiting.id))
    assert cancelled.state is State.CANCELLED
    assert cancelled == remote.get(waiting.id)


@both
def test_schedules_round_trip_as_through_the_sync_client(
    client: TestClient, remote: Client, store: Store
) -> None:
    async def scenario(aclient: AsyncClient) -> list[Any]:
        made = await aclient.add_schedule(
            "nightly", cron="0 3 * * *", timezone="Europe/London", id="n", version=2
        )
        return [
            made,
            await aclient.pause_schedule("n"),
            await aclient.resume_schedule("n"),
            await aclient.update_schedule("n", priority=5, misfire_grace=30),
            await aclient.get_schedule("n"),
            await aclient.delete_schedule("n"),
        ]

    made, paused, resumed, updated, read, deleted = run(client.app, scenario)
    assert (made.id, made.job_version, made.timezone) == ("n", 2, "Europe/London")
    assert paused.paused
    assert not resumed.paused
    assert (updated.priority, updated.misfire_grace) == (5, timedelta(seconds=30))
    assert read == updated
    assert deleted is None
    assert store.schedules().items == []
    assert_same_error(
        errors_of(lambda: remote.get_schedule("n")),
        run(client.app, lambda a: async_error(a.get_schedule("n"))),
    )
    # The same schedule made by the sync client reads back equal to the async one's.
    again = remote.add_schedule(
        "nightly", cron="0 3 * * *", timezone="Europe/London", id="n", version=2
    )
    assert run(client.app, lambda a: a.get_schedule("n")) == again == remote.get_schedule("n")


# -- errors ------------------------------------------------------------------------------


BAD_CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any], type[Exception], str | None]] = [
    ("get", ("missing",), {}, NotFound, None),
    ("cancel", ("missing",), {}, NotFound, None),
    ("replay", ("missing",), {}, NotFound, None),
    ("transitions", ("missing",), {}, NotFound, None),
    ("job", ("never-published",), {}, NotFound, None),
    ("get_schedule", ("missing",), {}, NotFound, None),
    ("pause_schedule", ("missing",), {}, NotFound, None),
    ("delete_schedule", ("missing",), {}, NotFound, None),
    ("submit", ("x",), {"execute_at": datetime(2030, 1, 1)}, ValidationError, "execute_at"),
    ("submit", ("x",), {"max_attempts": 0}, ValidationError, "max_attempts"),
    # Refused before sending, as JSON the service would not take: the body is named.
    ("submit", ("x", {"bad": math.nan}), {}, ValidationError, "body"),
    ("submit", ("x\x00y",), {}, ValidationError, "body"),
    ("submit", ("",), {}, ValidationError, "job"),
    ("submit", ("x" * 100_000,), {}, ValidationError, None),
    ("submit", ("x",), {"priority": 2**70}, ValidationError, "priority"),
    ("submit", ("x",), {"delay": "soon"}, ValidationError, "delay_seconds"),  # the wire name
    ("submit_many", ([{"job": "a"}, {"job": "a", "max_attempts": 0}],), {}, ValidationError, None),
    ("submit_many", (["not a mapping"],), {}, ValidationError, "[0]"),
    ("submit_many", ([{"job": "a", "colour": 1}],), {}, ValidationError, "[0].colour"),
    ("query", (), {"limit": 0}, ValidationError, None),
    ("query", (), {"state": "BOGUS"}, ValidationError, None),
    ("stats", (), {"window": -1}, ValidationError, None),
    ("request", ("missing", "explode"), {}, ValueError, None),
    ("add_schedule", ("x",), {"cron": "not a cron"}, ValidationError, None),
    # An option add_schedule does not take: the TypeError Store.add_schedule gives, unsent.
    ("add_schedule", ("x",), {"every": 5, "colour": 1}, TypeError, None),
    ("preview", ("missing",), {}, NotFound, None),
    ("wait", ("missing",), {"timeout": 1}, NotFound, None),
    ("wait", ("missing",), {"timeout": -1}, ValidationError, "timeout"),
    ("wait", ("missing",), {"timeout": math.nan}, ValidationError, "timeout"),
    ("wait", ("missing",), {"timeout": "soon"}, ValidationError, "timeout"),
    ("wait", ("missing",), {"timeout": True}, ValidationError, "timeout"),
    # The service-level report's targets and window: refused naming the argument,
    # before sending, but for a window only the service bounds (ten years).
    *[
        ("slo", (), {name: bad}, ValidationError, name)
        for name in ("claim_target", "finish_target")
        for bad in (math.nan, math.inf, -math.inf, -1, 0, 1, 1.0, 1e308, True, None)
    ],
    *[
        ("slo", (), {"claim_target": bad}, ValidationError, "claim_target")
        for bad in ("abc", "", "\x00", "\ud800", "0.99")
    ],
    *[
        ("slo", (), {"window": bad}, ValidationError, "window")
        for bad in (0, -1, timedelta(seconds=-5), 1e308, math.nan, math.inf, "30d", "\x00")
    ],
    ("slo", (), {"window": 20 * 366 * 86400}, ValidationError, "window"),
    ("slo", (), {"claim_within": -1}, ValidationError, "claim_within"),
    ("slo", (), {"finish_within": math.inf}, ValidationError, "finish_within"),
    ("slo", (), {"worst": -1}, ValidationError, "worst"),
]


@sync_long_polls
@pytest.mark.parametrize(("verb", "args", "kwargs", "error", "field"), BAD_CALLS)
def test_errors_are_the_sync_clients(
    client: TestClient,
    remote: Client,
    verb: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[Exception],
    field: str | None,
) -> None:
    sync = errors_of(lambda: getattr(remote, verb)(*args, **kwargs))
    asynchronous = run(client.app, lambda a: async_error(getattr(a, verb)(*args, **kwargs)))
    assert isinstance(sync, error), repr(sync)
    assert_same_error(sync, asynchronous)
    if field is not None:
        assert getattr(asynchronous, "field", None) == field


@both
def test_conflicts_are_the_sync_clients(client: TestClient, remote: Client, store: Store) -> None:
    remote.submit("charge", {"cents": 100}, idempotency_key="order-1")
    finished = store.submit("x")
    [lease] = store.claim("w", ids=[finished.id])
    store.complete(lease, None)
    sync_conflict = errors_of(
        lambda: remote.submit("charge", {"cents": 5}, idempotency_key="order-1")
    )
    sync_cancel = errors_of(lambda: remote.cancel(finished.id))

    async def scenario(aclient: AsyncClient) -> tuple[BaseException, BaseException]:
        return (
            await async_error(aclient.submit("charge", {"cents": 5}, idempotency_key="order-1")),
            await async_error(aclient.cancel(finished.id)),
        )

    conflict, cancel = run(client.app, scenario)
    assert isinstance(conflict, IdempotencyConflict)
    assert_same_error(sync_conflict, conflict)
    assert isinstance(cancel, InvalidTransition)
    assert_same_error(sync_cancel, cancel)


def test_tokens_and_scopes(store: Store) -> None:
    token, reader = "s" * 20, "r" * 20
    auth = Auth(
        {
            token: Principal(name="submitter", scopes=frozenset({Scope.SUBMIT, Scope.READ})),
            reader: Principal(name="reader", scopes=frozenset({Scope.READ})),
        }
    )
    with TestClient(create_app(store, auth=auth)) as http:
        app = http.app
        made = run(app, lambda a: a.submit("x"), token=token)
        assert run(app, lambda a: a.get(made.id), token=reader) == store.get(made.id)
        for key, error in ((None, Unauthorized), ("wrong" * 5, Unauthorized), (reader, Forbidden)):
            sync = errors_of(lambda key=key: Client(BASE, token=key, http=http).submit("x"))
            asynchronous = run(app, lambda a: async_error(a.submit("x")), token=key)
            assert isinstance(sync, error)
            assert_same_error(sync, asynchronous)
    assert len(store.query().items) == 1


def test_an_unreachable_service_is_store_unavailable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there

    async def scenario() -> BaseException:
        # retry_timeout=0: the answer at once, not after the default 30 s of retries
        async with AsyncClient(f"http://127.0.0.1:{port}", timeout=2, retry_timeout=0) as aclient:
            return await async_error(aclient.get("x"))

    assert isinstance(asyncio.run(scenario()), StoreUnavailable)


# -- deprecated names ---------------------------------------------------------------------


def test_job_version_still_works_and_warns_at_the_callers_line(
    client: TestClient, store: Store
) -> None:
    async def scenario(aclient: AsyncClient) -> None:
        with pytest.warns(DeprecationWarning, match="give version") as caught:
            made = await aclient.submit("x", job_version=2)
        assert caught[0].filename == __file__  # the warning points at the caller
        assert made.job_version == 2
        with pytest.warns(DeprecationWarning, match="give version") as caught:
            await aclient.submit_many([{"job": "x", "job_version": 3}])
        assert caught[0].filename == __file__
        with pytest.warns(DeprecationWarning, match="give version") as caught:
            await aclient.add_schedule("x", every=60, id="s", job_version=2)
        assert caught[0].filename == __file__
        with pytest.warns(DeprecationWarning, match="give version") as caught:
            updated = await aclient.update_schedule("s", job_version=4)
        assert caught[0].filename == __file__
        assert updated.job_version == 4
        with pytest.warns(DeprecationWarning, match="give version"):
            twice = await async_error(aclient.submit("x", version=1, job_version=2))
        assert isinstance(twice, ValidationError)
        assert twice.field == "job_version"

    run(client.app, scenario)
    assert sorted(e.job_version for e in store.query().items) == [2, 3]


# -- wait ----------------------------------------------------------------------------------


@contextmanager
def complete_later(
    store: Store, execution_id: str, delay: float, *, after: threading.Event | None = None
) -> Iterator[None]:
    """Complete ``execution_id`` through the store ``delay`` seconds after ``after`` is
    set (or after entering), on a thread joined on leaving, so it never outlives the
    store."""
    leaving = threading.Event()

    def finish() -> None:
        if after is not None and not after.wait(timeout=30):
            return
        if leaving.wait(timeout=delay):
            return
        [lease] = store.claim("w", ids=[execution_id])
        store.complete(lease, {"done": True})

    thread = threading.Thread(target=finish)
    thread.start()
    try:
        yield
    finally:
        leaving.set()
        if after is not None:
            after.set()
        thread.join()


@both
def test_wait_returns_once_a_concurrent_completion_lands(
    client: TestClient, remote: Client, store: Store
) -> None:
    execution = store.submit("x")
    # The app's first request builds its route table (seconds on a loaded machine): done
    # here, so that what is timed below is the wait alone.
    assert remote.get(execution.id).state is State.SCHEDULED
    sent: list[httpx.Request] = []
    # The completion lands a second after the held poll is sent, however slowly the
    # first plain look was answered.
    polling = threading.Event()

    def record(request: httpx.Request) -> None:
        sent.append(request)
        if "wait" in request.url.params:
            polling.set()

    with complete_later(store, execution.id, 1.0, after=polling):
        started = time.monotonic()
        done = run(client.app, lambda a: a.wait(execution.id), on_send=record)
        took = time.monotonic() - started
    assert done.state is State.SUCCEEDED
    assert done.result == {"done": True}
    assert done == remote.get(execution.id) == remote.wait(execution.id, timeout=0)
    assert 1.0 <= took < 6
    # A plain look first (it learns the service's bound, 30 s), then one poll the
    # service held until the completion landed: not a loop of polls.
    waits = [r.url.params.get("wait") for r in sent]
    assert waits == [None, "30"]
    # The service may hold it 30 s: the client waits that much longer for an answer
    # than its own read timeout (httpx's default, 5 s), not a timeout mid-poll.
    assert [r.extensions["timeout"]["read"] for r in sent] == [5.0, 35.0]


@sync_long_polls
def test_the_sync_client_waits_the_same_way(remote: Client, store: Store) -> None:
    execution = store.submit("x")
    with complete_later(store, execution.id, 0.3):
        done = remote.wait(execution.id, timeout=timedelta(seconds=20))
    assert done == store.get(execution.id)
    assert done.state is State.SUCCEEDED


@sync_long_polls
@pytest.mark.parametrize("state", [State.CANCELLED, State.FAILED])
def test_wait_returns_every_terminal_state(
    client: TestClient, remote: Client, store: Store, state: State
) -> None:
    execution = store.submit("x", max_attempts=1)
    if state is State.CANCELLED:
        store.cancel(execution.id)
    else:
        [lease] = store.claim("w", ids=[execution.id])
        store.fail(lease, "boom")
    done = run(client.app, lambda a: a.wait(execution.id, timeout=5))
    assert done.state is state
    assert done == remote.wait(execution.id)


def test_wait_raises_timeout_error_once_its_timeout_passes(
    client: TestClient, remote: Client, store: Store
) -> None:
    execution = store.submit("x", delay=3600)
    # The app's first request builds its route table (seconds on a loaded machine): done
    # here, so that the time past the timeout below is the wait's own.
    assert remote.get(execution.id).state is State.SCHEDULED
    sent: list[httpx.Request] = []
    started = time.monotonic()
    refused = run(client.app, lambda a: async_error(a.wait(execution.id, timeout=1.6)), sent=sent)
    took = time.monotonic() - started
    assert isinstance(refused, TimeoutError)
    assert not isinstance(refused, StoreUnavailable)
    assert 1.6 <= took < 3.5
    # A plain look, then one poll held for the time left (within the bound): it ends
    # with the timeout, not a stream of short polls.
    waits = [r.url.params.get("wait") for r in sent]
    assert waits[0] is None
    assert 2 <= len(waits) <= 3, waits
    assert all(0 < float(w) <= 1.6 for w in waits[1:]), waits
    sync = errors_of(lambda: remote.wait(execution.id, timeout=0))
    assert isinstance(sync, TimeoutError)
    assert store.get(execution.id).state is State.SCHEDULED


# -- what a worker loads -----------------------------------------------------------------


def test_the_sync_client_loads_nothing_of_the_async_one() -> None:
    """The sync client (so a ``--server`` worker) loads no event loop and no AsyncClient:
    of fencepost's client, only the verbs it runs and its own modules."""
    code = (
        "import sys\n"
        "from fencepost.client import Client\n"
        "from fencepost.domain.errors import StoreUnavailable\n"
        "try:\n"
        "    Client('http://127.0.0.1:9', timeout=2, retry_timeout=0).get('x')\n"
        "except StoreUnavailable:\n"
        "    print(' '.join(sorted(sys.modules)))\n"
    )
    run_ = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    modules = set(run_.stdout.split())
    assert "fencepost.client.http" in modules  # the request was made
    assert {m for m in modules if m.startswith("fencepost.client")} == {
        "fencepost.client",
        "fencepost.client.arguments",
        "fencepost.client.errors",
        "fencepost.client.exchange",
        "fencepost.client.http",
        "fencepost.client.retries",
        "fencepost.client.verbs",
        "fencepost.client.worker_verbs",
    }
    assert not {"asyncio", "trio", "sniffio"} & {m.partition(".")[0] for m in modules}

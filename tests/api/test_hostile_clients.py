"""Slow, unauthenticated and guessing clients, driven at the ASGI level.

Each request is one call of the app with a ``receive`` this file controls: one that
fails the test if the body is read at all, one that never sends the rest of it, and
a client address of its choosing. The guard is :mod:`fencepost.api.guard`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from fastapi import FastAPI

import fencepost
from fencepost.api import create_app
from fencepost.api.auth import CSRF_COOKIE, SESSION_COOKIE, Auth, Scope
from fencepost.api.guard import ANONYMOUS_MAX_BODY_BYTES, RouteScopes
from fencepost.api.limits import ByteBudget, FailureLimiter, client_key
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import PROBLEMS, TestClient, assert_problem
from tests.api.test_auth import PRINCIPALS, ROUTE_IDS, ROUTES, TOKENS, UNKNOWN_TOKEN, policy

Receive = Callable[[], Awaitable[dict[str, Any]]]
HERE = ("127.0.0.1", 40001)
THERE = ("127.0.0.2", 40002)
MiB = 1_048_576


@dataclass
class Answer:
    """What the app sent back."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def assert_problem(self, status: int, kind: str) -> None:
        assert self.status == status, self.body
        assert self.headers["content-type"] == "application/problem+json"
        problem = self.json()
        assert problem["type"] == PROBLEMS + kind
        assert problem["status"] == status
        assert problem["title"]
        assert problem["detail"]


def unread() -> Receive:
    """A ``receive`` for a body that must not be read."""

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    return receive


def body(data: bytes) -> Receive:
    """A ``receive`` that delivers ``data`` in two chunks, then waits for a disconnect."""
    chunks = [data[: len(data) // 2], data[len(data) // 2 :]]

    async def receive() -> dict[str, Any]:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return receive


def stalled(first: bytes) -> Receive:
    """A ``receive`` that delivers ``first`` and then never the rest (a slow loris)."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": first, "more_body": True}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return receive


async def call(
    app: FastAPI,
    method: str,
    path: str,
    receive: Receive,
    *,
    headers: dict[str, str] | None = None,
    length: int | None = None,
    client: tuple[str, int] = HERE,
) -> Answer:
    """One request to ``app``; ``length`` is the Content-Length it announces."""
    given = {"host": "localhost", **{k.lower(): v for k, v in (headers or {}).items()}}
    raw = [(k.encode(), v.encode()) for k, v in given.items()]
    if length is not None:
        raw += [(b"content-length", str(length).encode()), (b"content-type", b"application/json")]
    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": raw,
        "client": client,
        "server": ("127.0.0.1", 8080),
    }
    start: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        else:
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    headers_out = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return Answer(status=start["status"], headers=headers_out, body=b"".join(chunks))


def run(app: FastAPI, *args: Any, **kwargs: Any) -> Answer:
    async def main() -> Answer:
        return await call(app, *args, **kwargs)

    return anyio.run(main)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def memory() -> Iterator[Store]:
    """The guard never reaches the store when it refuses: one backend is enough here."""
    store = fencepost.connect("memory://")
    try:
        yield store
    finally:
        store.close()


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- authentication happens before the body is read ------------------------------------


def fill(path: str) -> str:
    return path.replace("{", "").replace("}", "").replace(":path", "")


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
def test_every_guarded_route_refuses_before_reading_a_body(
    memory: Store, method: str, path: str
) -> None:
    app = create_app(memory, auth=Auth(PRINCIPALS))
    wrong = next(t for s, t in TOKENS.items() if s not in {policy(method, path), Scope.ADMIN})
    for headers, status, kind in [
        ({}, 401, "unauthorized"),
        (bearer(UNKNOWN_TOKEN), 401, "unauthorized"),
        (bearer(wrong), 403, "forbidden"),
    ]:
        answer = run(app, method, fill(path), unread(), headers=headers, length=MiB)
        answer.assert_problem(status, kind)
        # The rest of the body is on its way: the connection goes, rather than drain it.
        assert answer.headers["connection"] == "close"
    assert memory.query().items == []


def test_a_session_without_the_csrf_header_is_refused_before_its_body(memory: Store) -> None:
    auth = Auth(PRINCIPALS)
    session = auth.open_session(PRINCIPALS[TOKENS[Scope.ADMIN]])
    app = create_app(memory, auth=auth)
    cookie = {"Cookie": f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}=abc"}
    answer = run(app, "POST", "/executions", unread(), headers=cookie, length=100)
    answer.assert_problem(403, "csrf")


def test_auth_off_still_refuses_a_cross_site_post_before_its_body(memory: Store) -> None:
    app = create_app(memory)
    evil = {"Origin": "https://evil.example"}
    answer = run(app, "POST", "/executions", unread(), headers=evil, length=100)
    answer.assert_problem(403, "csrf")


def test_the_guard_demands_exactly_the_scope_of_each_route(memory: Store) -> None:
    # The guard's own reading of the route table agrees with the rules test_auth checks
    # on the dependencies: a route it missed would read its body before refusing.
    app = create_app(memory)
    scopes = RouteScopes()
    for method, path in ROUTES:
        probe = {"type": "http", "method": method, "path": fill(path), "root_path": ""}
        assert scopes(app, probe) == (policy(method, path),), (method, path)
    for method, path in [("GET", "/healthz"), ("POST", "/session"), ("GET", "/nowhere")]:
        probe = {"type": "http", "method": method, "path": path, "root_path": ""}
        assert scopes(app, probe) == (), (method, path)


def test_a_valid_token_has_its_body_read_and_served(memory: Store) -> None:
    app = create_app(memory, auth=Auth(PRINCIPALS))
    data = json.dumps({"job": "email"}).encode()
    answer = run(
        app,
        "POST",
        "/executions",
        body(data),
        headers=bearer(TOKENS[Scope.SUBMIT]),
        length=len(data),
    )
    assert answer.status == 201, answer.body
    assert [e.job for e in memory.query().items] == ["email"]
    assert app.state.body_budget.used == 0


def test_without_credentials_a_public_route_takes_only_a_small_body(memory: Store) -> None:
    app = create_app(memory, auth=Auth(PRINCIPALS))
    big = ANONYMOUS_MAX_BODY_BYTES + 1
    answer = run(app, "POST", "/session", unread(), length=big)
    answer.assert_problem(413, "body-too-large")
    assert answer.headers["connection"] == "close"
    # A caller with a valid token is held to the ordinary cap (the route then says 422).
    data = json.dumps({"token": "x" * (big - 20)}).encode()
    answer = run(
        app, "POST", "/session", body(data), headers=bearer(TOKENS[Scope.READ]), length=len(data)
    )
    answer.assert_problem(422, "validation")


# -- time limits ------------------------------------------------------------------------


def test_a_body_that_stalls_gets_408_and_the_connection_closes(memory: Store) -> None:
    app = create_app(memory, auth=Auth(PRINCIPALS), body_timeout=0.3)
    # The app's first request builds its route table (seconds on a loaded machine): one
    # here, so that what is timed below is the stalled body's deadline alone.
    warm = run(app, "GET", "/executions", unread(), headers=bearer(TOKENS[Scope.READ]))
    assert warm.status == 200, warm.body
    started = time.monotonic()
    answer = run(
        app,
        "POST",
        "/executions",
        stalled(b'{"job": "em'),
        headers=bearer(TOKENS[Scope.SUBMIT]),
        length=100,
    )
    elapsed = time.monotonic() - started
    answer.assert_problem(408, "request-timeout")
    assert answer.headers["connection"] == "close"
    assert 0.3 <= elapsed < 3, elapsed
    assert memory.query().items == []
    assert app.state.body_budget.used == 0  # what it held is given back


def test_a_chunked_body_that_stalls_gets_408_too(memory: Store) -> None:
    app = create_app(memory, body_timeout=0.2)
    answer = run(
        app,
        "POST",
        "/executions",
        stalled(b'{"job"'),
        headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
    )
    answer.assert_problem(408, "request-timeout")


# -- the budget of buffered bodies ------------------------------------------------------


def test_bodies_beyond_the_budget_get_503_with_retry_after(memory: Store) -> None:
    app = create_app(memory, auth=Auth(PRINCIPALS), body_budget=2 * MiB, body_timeout=0.5)
    token = bearer(TOKENS[Scope.SUBMIT])
    answers: dict[str, Answer] = {}

    async def hold(name: str) -> None:
        answers[name] = await call(
            app, "POST", "/executions", stalled(b"x" * 1000), headers=token, length=MiB
        )

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(hold, "first")
            group.start_soon(hold, "second")
            await anyio.sleep(0.1)  # both hold their MiB now
            assert app.state.body_budget.used == 2 * MiB
            answers["third"] = await call(
                app, "POST", "/executions", unread(), headers=token, length=10
            )
            # A request without a body needs none of the budget.
            answers["read"] = await call(
                app, "GET", "/executions", unread(), headers=bearer(TOKENS[Scope.READ])
            )

    anyio.run(main)
    answers["third"].assert_problem(503, "body-budget-spent")
    assert answers["third"].headers["retry-after"] == "1"
    assert answers["third"].headers["connection"] == "close"
    assert answers["read"].status == 200
    answers["first"].assert_problem(408, "request-timeout")
    answers["second"].assert_problem(408, "request-timeout")
    assert app.state.body_budget.used == 0
    data = b'{"job": "after"}'
    assert (
        run(app, "POST", "/executions", body(data), headers=token, length=len(data)).status == 201
    )


def test_a_chunked_body_is_charged_as_it_arrives() -> None:
    budget = ByteBudget(10)
    assert budget.take(6)
    assert not budget.take(5)
    assert budget.used == 6
    budget.give(6)
    assert budget.take(10)


# -- failed authentications per address --------------------------------------------------


@pytest.fixture
def limited(memory: Store) -> tuple[FastAPI, Clock, Auth]:
    clock = Clock()
    auth = Auth(PRINCIPALS)
    failures = FailureLimiter(burst=20, window=60.0, monotonic=clock)
    return create_app(memory, auth=auth, failures=failures), clock, auth


def test_after_20_wrong_tokens_an_address_gets_429_and_others_do_not(
    limited: tuple[FastAPI, Clock, Auth],
) -> None:
    app, clock, _ = limited
    read = bearer(TOKENS[Scope.READ])
    for _ in range(20):
        run(app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN)).assert_problem(
            401, "unauthorized"
        )
    refused = run(app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN))
    refused.assert_problem(429, "too-many-auth-failures")
    assert refused.headers["retry-after"] == "3"  # 20 a minute: one more every 3 s
    # Refused unchecked, a valid token too: else 200-or-429 would tell a guess apart.
    run(app, "GET", "/executions", unread(), headers=read).assert_problem(
        429, "too-many-auth-failures"
    )
    run(app, "GET", "/healthz", unread()).assert_problem(429, "too-many-auth-failures")
    # Another address is not affected, neither its valid token nor its own failures.
    assert run(app, "GET", "/executions", unread(), headers=read, client=THERE).status == 200
    run(
        app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN), client=THERE
    ).assert_problem(401, "unauthorized")
    clock.now += 3.0  # one failure's worth paid back
    assert run(app, "GET", "/executions", unread(), headers=read).status == 200
    run(app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN)).assert_problem(
        401, "unauthorized"
    )
    run(app, "GET", "/executions", unread(), headers=read).assert_problem(
        429, "too-many-auth-failures"
    )
    clock.now += 60.0
    assert run(app, "GET", "/executions", unread(), headers=read).status == 200


def test_what_counts_as_a_failed_authentication(limited: tuple[FastAPI, Clock, Auth]) -> None:
    app, _, _ = limited
    failures: FailureLimiter = app.state.failures
    # No credentials at all guess nothing (and the dashboard sends some before signing in).
    for _ in range(30):
        run(app, "GET", "/executions", unread()).assert_problem(401, "unauthorized")
    assert failures.retry_after(client_key(HERE)) == 0
    # A malformed header does; so does a wrong token on a public route (GET /session
    # would otherwise answer whether it is valid, unlimited) and a sign-in's wrong token.
    run(app, "GET", "/executions", unread(), headers={"Authorization": "Basic x"})
    run(app, "GET", "/session", unread(), headers=bearer(UNKNOWN_TOKEN))
    sign_in = json.dumps({"token": UNKNOWN_TOKEN}).encode()
    run(app, "POST", "/session", body(sign_in), length=len(sign_in)).assert_problem(
        401, "unauthorized"
    )
    for _ in range(17):
        run(app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN))
    run(app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN)).assert_problem(
        429, "too-many-auth-failures"
    )
    # A sign-in from the blocked address is refused before its body is read.
    run(app, "POST", "/session", unread(), length=100).assert_problem(429, "too-many-auth-failures")


def test_a_live_session_is_served_from_a_blocked_address(
    limited: tuple[FastAPI, Clock, Auth],
) -> None:
    # A session id is 256 random bits: checking one tells a guesser nothing useful, and
    # an operator signed in on the same host as a misbehaving client keeps the dashboard.
    app, _, auth = limited
    session = auth.open_session(PRINCIPALS[TOKENS[Scope.READ]])
    for _ in range(21):
        run(app, "GET", "/executions", unread(), headers=bearer(UNKNOWN_TOKEN))
    cookie = {"Cookie": f"{SESSION_COOKIE}={session}"}
    assert run(app, "GET", "/executions", unread(), headers=cookie).status == 200
    forged = {"Cookie": f"{SESSION_COOKIE}=forged"}
    run(app, "GET", "/executions", unread(), headers=forged).assert_problem(
        429, "too-many-auth-failures"
    )


def test_with_auth_off_nothing_is_limited(memory: Store) -> None:
    app = create_app(memory)
    for _ in range(30):
        run(app, "GET", "/executions", unread(), headers={"Authorization": "Basic x"})
    assert run(app, "GET", "/executions", unread()).status == 200


def test_the_limiter_tracks_a_bounded_number_of_addresses() -> None:
    clock = Clock()
    failures = FailureLimiter(burst=2, window=10.0, max_addresses=100, monotonic=clock)
    for i in range(1000):
        failures.fail(f"10.0.{i // 256}.{i % 256}")
    assert len(failures) == 100
    failures.fail("10.9.9.9")
    failures.fail("10.9.9.9")
    assert failures.retry_after("10.9.9.9") == pytest.approx(5.0)
    assert failures.retry_after("10.0.0.0") == 0  # the oldest went first
    clock.now += 10.0
    assert failures.retry_after("10.9.9.9") == 0
    assert len(failures) < 100  # paid debts are forgotten when looked at


def test_an_ipv6_client_counts_as_its_64() -> None:
    assert client_key(("2001:db8:1:2:aaaa::1", 1)) == client_key(("2001:db8:1:2:bbbb::2", 1))
    assert client_key(("2001:db8:1:2::1", 1)) != client_key(("2001:db8:1:3::1", 1))
    assert client_key(("::ffff:10.1.2.3", 1)) == "10.1.2.3"
    assert client_key(("127.0.0.2", 1)) == "127.0.0.2"
    assert client_key(None) == "unknown"


# -- the Host check, when auth is off -------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost:8080", True),
        ("127.0.0.1", True),
        ("127.0.0.2:8080", True),
        ("[::1]:8080", True),
        ("LOCALHOST", True),
        ("evil.example:8080", False),
        ("localhost.evil.example", False),
        ("10.0.0.1", False),
        ("", False),
    ],
)
def test_without_tokens_a_foreign_host_is_a_problem(
    memory: Store, host: str, allowed: bool
) -> None:
    app = create_app(memory, loopback_only=True)
    receive = body(b'{"job": "x"}') if allowed else unread()
    answer = run(app, "POST", "/executions", receive, headers={"host": host}, length=12)
    if allowed:
        assert answer.status == 201, answer.body
        return
    answer.assert_problem(400, "host-not-allowed")
    assert answer.json()["field"] == "host"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["connection"] == "close"
    assert memory.query().items == []


def test_an_unexpected_error_is_a_problem_without_its_detail(memory: Store) -> None:
    """A bug's 500 is a problem document too, and tells the client nothing of the bug."""

    def broken() -> None:
        raise RuntimeError("secret detail of the bug")

    memory.stats = broken  # type: ignore[method-assign]
    with TestClient(create_app(memory), raise_server_exceptions=False) as client:
        response = client.get("/stats")
    assert_problem(response, 500, "internal")
    assert "secret" not in response.text


# -- hostile report parameters ---------------------------------------------------------

#: Query values no target may be, as a client puts them in the URL: NaN and the
#: infinities in every spelling a float parser takes, the bounds and beyond, text, an
#: empty value, an escaped NUL and the UTF-8 of a lone surrogate (which no valid
#: UTF-8 holds).
HOSTILE_TARGETS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "-1",
    "0",
    "0.0",
    "1",
    "1.0",
    "1e308",
    "1e309",
    "abc",
    "",
    "%00",
    "0.5%00",
    "%ED%A0%80",
    "0x1p-1",
]
#: Windows no report takes: none, negative, beyond ten years, not finite, not a number.
HOSTILE_WINDOWS = ["0", "-1", "-0.5", "1e308", "316224001", "nan", "inf", "abc", "", "%00"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        *[("claim_target", v) for v in HOSTILE_TARGETS],
        *[("finish_target", v) for v in HOSTILE_TARGETS],
        *[("window", v) for v in HOSTILE_WINDOWS],
    ],
)
def test_a_hostile_slo_parameter_is_a_422_naming_it_and_changes_nothing(
    field: str, value: str
) -> None:
    store = fencepost.connect("memory://", clock=ManualClock())  # one instant: equal reports
    app = create_app(store)
    store.submit("ledger")
    before = (store.query().items, run(app, "GET", "/slo", unread()).json())
    answer = run(app, "GET", f"/slo?worst=5&{field}={value}", unread())
    answer.assert_problem(422, "validation")
    problem = answer.json()
    assert problem["field"] == field
    assert problem["detail"].startswith(f"{field}: ")
    after = run(app, "GET", "/slo", unread())
    assert after.status == 200
    assert (store.query().items, after.json()) == before


def test_the_targets_boundaries_inside_are_taken(memory: Store) -> None:
    app = create_app(memory)
    answer = run(app, "GET", "/slo?claim_target=5e-324&finish_target=0.9999999999999999", unread())
    assert answer.status == 200, answer.body
    body = answer.json()
    assert (body["claimed"]["target"], body["finished"]["target"]) == (5e-324, 0.9999999999999999)

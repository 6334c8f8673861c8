"""Who may call what: every route's scope, 401/403 problems, sessions and CSRF.

The routes are read from the app itself, so a route another module adds later is
held to the same rules without changing this file: it must refuse a caller
without credentials, and allow exactly one scope plus ``admin``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

import fencepost
from fencepost.api import create_app
from fencepost.api.auth import CSRF_COOKIE, SESSION_COOKIE, Auth, Principal, Scope
from fencepost.store.base import Store
from tests.api.support import TestClient, assert_problem, running

#: One token per scope, each allowed only that scope.
TOKENS = {scope: f"{scope.value}-token-0123456789" for scope in Scope}
PRINCIPALS = {
    token: Principal(name=f"{scope.value}-caller", scopes=frozenset({scope}))
    for scope, token in TOKENS.items()
}
UNKNOWN_TOKEN = "not-a-configured-token-0123"

#: Paths anyone may call: health, the spec and its viewers, and the dashboard's page,
#: its static files and its sign-in (which takes the token in its body).
PUBLIC = ("/healthz", "/readyz", "/openapi.json", "/", "/session")
PUBLIC_PREFIXES = ("/docs", "/static/")

#: Operator actions on one execution, or on many (bulk actions): admin only.
OPERATOR_ACTIONS = {
    ("DELETE", "/executions/{execution_id}"),
    ("POST", "/executions/actions"),
    *(
        ("POST", f"/executions/{{execution_id}}/{action}")
        for action in ("cancel", "pause", "resume", "replay")
    ),
}


#: Reads that take a body: a preview of a rule stored nowhere.
READ_POSTS = {("POST", "/schedules/preview")}


def is_public(path: str) -> bool:
    return path in PUBLIC or path.startswith(PUBLIC_PREFIXES)


def guarded_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) of ``app`` that is not public, included routers expanded."""
    routes = set()
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute) and not is_public(context.path):
            routes.update((method, context.path) for method in context.methods)
    return sorted(routes, key=lambda route: (route[1], route[0]))


def _routes() -> list[tuple[str, str]]:
    store = fencepost.connect("memory://")
    try:
        return guarded_routes(create_app(store))
    finally:
        store.close()


ROUTES = _routes()
ROUTE_IDS = [f"{method} {path}" for method, path in ROUTES]


def policy(method: str, path: str) -> Scope:
    """The scope the service's rules assign a route (admin is always allowed too)."""
    if method == "GET" or (method, path) in READ_POSTS:
        return Scope.READ
    if (method, path) in {("POST", "/executions"), ("POST", "/executions/batch")}:
        return Scope.SUBMIT
    if (method, path) in OPERATOR_ACTIONS or path.startswith("/schedules"):
        return Scope.ADMIN
    if path.startswith(("/limits/", "/queues/")):  # flow control: the operator's
        return Scope.ADMIN
    return Scope.WORK  # everything else is the worker protocol


# -- a store with something in it to change, and requests that would change it ----------


@dataclass(frozen=True)
class Seeded:
    """Ids of stored objects that path parameters name."""

    scheduled: str
    running: str
    schedule: str

    def fill(self, path: str) -> str:
        """``path`` with its parameters named: seeded ids where they fit, else a placeholder."""
        known = {
            "execution_id": self.scheduled,
            "schedule_id": self.schedule,
            "task": self.schedule,
        }
        return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: known.get(m[1], f"auth-{m[1]}"), path)


def seed(store: Store) -> Seeded:
    scheduled = store.submit("auth-scheduled")
    started = running(store, "auth-running")
    schedule = store.add_schedule("auth-nightly", cron="0 3 * * *")
    store.register_node("auth-node")
    return Seeded(scheduled=scheduled.id, running=started, schedule=schedule.id)


def snapshot(store: Store, seeded: Seeded) -> Any:
    """Everything a request could change, to compare before and after."""
    return (
        store.query(limit=1000).items,
        [store.transitions(i) for i in (seeded.scheduled, seeded.running)],
        [store.commands(i) for i in (seeded.scheduled, seeded.running)],
        store.schedules(limit=1000).items,
        store.nodes(live_only=False),
        store.limits(),
    )


BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/executions"): {"job": "auth-probe"},
    ("POST", "/executions/batch"): {"items": [{"job": "auth-probe"}]},
}


def send(
    client: TestClient, method: str, path: str, seeded: Seeded, headers: dict[str, str]
) -> Any:
    body = BODIES.get((method, path), {}) if method in {"POST", "PUT", "PATCH"} else None
    return client.request(method, seeded.fill(path), json=body, headers=headers)


@pytest.fixture
def seeded(store: Store) -> Seeded:
    return seed(store)


@pytest.fixture
def secured(store: Store) -> Iterator[TestClient]:
    """A client of an app with one token per scope; server errors come back as 500s."""
    app = create_app(store, auth=Auth(PRINCIPALS))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


# -- every route ---------------------------------------------------------------------------


def test_routes_are_found() -> None:
    # Guards the enumeration itself: an empty list would make the tables below vacuous.
    assert {("POST", "/executions"), ("GET", "/executions"), *OPERATOR_ACTIONS} <= set(ROUTES)
    assert not any(is_public(path) for _, path in ROUTES)


# Which scope a route takes is the app's, not the store's: the guard decides before the
# body is read and before any route reaches the store, so the route tables run on one
# backend (the scoped routes' work on each backend is what their own modules test).
@pytest.mark.parametrize("backend", ["memory"])
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
def test_every_route_refuses_a_caller_without_valid_credentials(
    secured: TestClient, store: Store, seeded: Seeded, method: str, path: str
) -> None:
    before = snapshot(store, seeded)
    for authorization in [None, f"Bearer {UNKNOWN_TOKEN}", "Basic x", "Bearer", "Bearer  "]:
        headers = {} if authorization is None else {"Authorization": authorization}
        response = send(secured, method, path, seeded, headers)
        assert_problem(response, 401, "unauthorized")
        assert response.headers["www-authenticate"].startswith("Bearer"), authorization
    assert snapshot(store, seeded) == before


@pytest.mark.parametrize("backend", ["memory"])
@pytest.mark.parametrize(("method", "path"), ROUTES, ids=ROUTE_IDS)
def test_every_route_allows_one_scope_and_admin(
    secured: TestClient, store: Store, seeded: Seeded, method: str, path: str
) -> None:
    allowed = set()
    for scope, token in TOKENS.items():
        before = snapshot(store, seeded)
        response = send(secured, method, path, seeded, {"Authorization": f"Bearer {token}"})
        if response.status_code in {401, 403}:
            assert_problem(response, 403, "forbidden")
            assert snapshot(store, seeded) == before, f"{scope} was refused but changed the store"
        else:
            allowed.add(scope)
    assert allowed == {policy(method, path), Scope.ADMIN}


def test_public_routes_need_no_credentials(secured: TestClient) -> None:
    for path in ("/healthz", "/readyz", "/openapi.json"):
        assert secured.get(path).status_code == 200, path


# -- named cases, spelled out ------------------------------------------------------------------


def bearer(scope: Scope) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[scope]}"}


def test_submit_scope_submits_and_read_or_work_cannot(secured: TestClient, store: Store) -> None:
    for scope in (Scope.READ, Scope.WORK):
        refused = secured.post("/executions", json={"job": "x"}, headers=bearer(scope))
        assert_problem(refused, 403, "forbidden")
    assert store.query().items == []
    created = secured.post("/executions", json={"job": "x"}, headers=bearer(Scope.SUBMIT))
    assert created.status_code == 201, created.text
    assert [e.id for e in store.query().items] == [created.json()["id"]]


def test_only_admin_cancels(secured: TestClient, store: Store) -> None:
    execution = store.submit("x")
    for scope in (Scope.READ, Scope.SUBMIT, Scope.WORK):
        refused = secured.delete(f"/executions/{execution.id}", headers=bearer(scope))
        assert_problem(refused, 403, "forbidden")
    assert store.get(execution.id).state == "SCHEDULED"
    done = secured.delete(f"/executions/{execution.id}", headers=bearer(Scope.ADMIN))
    assert done.status_code == 200, done.text
    assert store.get(execution.id).state == "CANCELLED"


def test_scheme_is_case_insensitive(secured: TestClient) -> None:
    response = secured.get("/executions", headers={"Authorization": f"bearer {TOKENS[Scope.READ]}"})
    assert response.status_code == 200, response.text


def test_a_prefix_of_a_token_is_unknown(secured: TestClient) -> None:
    token = TOKENS[Scope.ADMIN]
    for presented in (token[:-1], token + "x", token.upper()):
        response = secured.get("/executions", headers={"Authorization": f"Bearer {presented}"})
        assert_problem(response, 401, "unauthorized")


# -- dashboard sessions ---------------------------------------------------------------------


@pytest.fixture
def session_app(store: Store) -> tuple[FastAPI, str]:
    auth = Auth(PRINCIPALS)
    session = auth.open_session(PRINCIPALS[TOKENS[Scope.ADMIN]])
    return create_app(store, auth=auth), session


def test_a_session_cookie_reads_without_csrf(session_app: tuple[FastAPI, str]) -> None:
    app, session = session_app
    with TestClient(app) as client:
        response = client.get("/executions", headers={"Cookie": f"{SESSION_COOKIE}={session}"})
    assert response.status_code == 200, response.text


def test_a_session_cookie_changes_state_only_with_the_csrf_header(
    session_app: tuple[FastAPI, str], store: Store
) -> None:
    app, session = session_app
    cookies = f"{SESSION_COOKIE}={session}; {CSRF_COOKIE}=abc"
    with TestClient(app) as client:
        refused = client.post("/executions", json={"job": "x"}, headers={"Cookie": cookies})
        assert_problem(refused, 403, "csrf")
        assert store.query().items == []
        allowed = client.post(
            "/executions", json={"job": "x"}, headers={"Cookie": cookies, "X-CSRF-Token": "abc"}
        )
    assert allowed.status_code == 201, allowed.text
    assert len(store.query().items) == 1


def test_an_unknown_or_closed_session_is_unauthorized(
    session_app: tuple[FastAPI, str],
) -> None:
    app, session = session_app
    with TestClient(app) as client:
        unknown = client.get("/executions", headers={"Cookie": f"{SESSION_COOKIE}=forged"})
        app.state.auth.close_session(session)
        closed = client.get("/executions", headers={"Cookie": f"{SESSION_COOKIE}={session}"})
    assert_problem(unknown, 401, "unauthorized")
    assert_problem(closed, 401, "unauthorized")


def test_a_session_expires_after_its_ttl_without_use(store: Store) -> None:
    now = [0.0]
    auth = Auth(PRINCIPALS, monotonic=lambda: now[0])
    session = auth.open_session(PRINCIPALS[TOKENS[Scope.READ]])
    now[0] = 11 * 3600.0
    assert auth.session(session) is not None  # used: its expiry slides to 23 h
    now[0] = 23 * 3600.0 - 1
    assert auth.session(session) is not None
    now[0] += 12 * 3600.0
    assert auth.session(session) is None


# -- CSRF with auth off ------------------------------------------------------------------------

EVIL = {"Origin": "https://evil.example"}


def test_cross_site_post_without_csrf_is_refused(client: TestClient, store: Store) -> None:
    response = client.post("/executions", json={"job": "x"}, headers=EVIL)
    assert_problem(response, 403, "csrf")
    assert store.query().items == []


def test_post_from_a_non_browser_client_needs_no_csrf(client: TestClient, store: Store) -> None:
    response = client.post("/executions", json={"job": "x"})
    assert response.status_code == 201, response.text
    assert len(store.query().items) == 1


def test_post_with_matching_csrf_cookie_and_header(client: TestClient, store: Store) -> None:
    headers = {**EVIL, "Cookie": f"{CSRF_COOKIE}=abc", "X-CSRF-Token": "abc"}
    response = client.post("/executions", json={"job": "x"}, headers=headers)
    assert response.status_code == 201, response.text
    assert len(store.query().items) == 1


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(
            {**EVIL, "Cookie": f"{CSRF_COOKIE}=abc", "X-CSRF-Token": "abd"}, id="mismatch"
        ),
        pytest.param({**EVIL, "Cookie": f"{CSRF_COOKIE}=abc"}, id="cookie-only"),
        pytest.param({**EVIL, "X-CSRF-Token": "abc"}, id="header-only"),
        pytest.param({"Cookie": "other=1", "X-CSRF-Token": "abc"}, id="cookies-no-origin"),
        pytest.param({**EVIL, "Cookie": f"{CSRF_COOKIE}=", "X-CSRF-Token": ""}, id="both-empty"),
    ],
)
def test_post_with_a_bad_csrf_pair_is_refused(
    client: TestClient, store: Store, headers: dict[str, str]
) -> None:
    response = client.post("/executions", json={"job": "x"}, headers=headers)
    assert_problem(response, 403, "csrf")
    assert store.query().items == []


def test_cross_site_get_needs_no_csrf(client: TestClient) -> None:
    assert client.get("/executions", headers=EVIL).status_code == 200


def test_every_unsafe_method_is_checked(client: TestClient, store: Store) -> None:
    execution = store.submit("x")
    response = client.delete(f"/executions/{execution.id}", headers=EVIL)
    assert_problem(response, 403, "csrf")
    assert store.get(execution.id).state == "SCHEDULED"


def test_a_bearer_token_needs_no_csrf_even_from_an_origin(store: Store) -> None:
    with TestClient(create_app(store, auth=Auth(PRINCIPALS))) as client:
        response = client.post(
            "/executions", json={"job": "x"}, headers={**EVIL, **bearer(Scope.SUBMIT)}
        )
    assert response.status_code == 201, response.text
    assert len(store.query().items) == 1


# -- the lockout holds whatever other addresses do (issue 32) -----------------------------------


def test_a_locked_out_address_stays_locked_while_10100_others_fail_once_each() -> None:
    """The adversary's scenario: 10,100 other addresses, one failure each, used to push
    the locked-out address out of the (10,000-address) table, with 20 fresh guesses."""
    import anyio

    from fencepost.api.limits import DEFAULT_FAILURE_BURST, FailureLimiter

    now = [1000.0]
    failures = FailureLimiter(monotonic=lambda: now[0])  # the defaults: 20, 60 s, 10,000
    # The guard refuses before any route reaches the store: one backend is enough.
    store = fencepost.connect("memory://")
    app = create_app(store, auth=Auth(PRINCIPALS), failures=failures)

    async def status(address: str, token: str) -> int:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": "/executions", "raw_path": b"/executions",
            "root_path": "", "query_string": b"", "client": (address, 40000),
            "server": ("127.0.0.1", 8080),
            "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {token}".encode())],
        }  # fmt: skip
        sent: list[int] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                sent.append(message["status"])

        await app(scope, receive, send)
        return sent[0]

    async def scenario() -> None:
        guesser = "203.0.113.7"
        for _ in range(DEFAULT_FAILURE_BURST):
            assert await status(guesser, UNKNOWN_TOKEN) == 401
        assert await status(guesser, UNKNOWN_TOKEN) == 429  # locked out
        for i in range(10_100):
            address = f"10.{i // 65_536}.{i // 256 % 256}.{i % 256}"
            assert await status(address, UNKNOWN_TOKEN) == 401
        # Still locked out: not one more guess, and a valid token is refused too.
        assert await status(guesser, UNKNOWN_TOKEN) == 429
        assert await status(guesser, TOKENS[Scope.READ]) == 429
        now[0] += 60.0  # the whole lockout (and the debt) has passed: guesses again
        assert await status(guesser, TOKENS[Scope.READ]) == 200

    try:
        anyio.run(scenario)
    finally:
        store.close()
    assert len(failures) <= 2 * failures.max_addresses

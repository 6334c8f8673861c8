"""The dashboard's server side: the page and its assets, sign-in sessions, CSRF, reports.

Runs in-process over the memory and SQLite stores on a ManualClock; the page's own
behaviour in a real browser is tests/browser/test_dashboard_browser.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from html.parser import HTMLParser
from http.cookies import SimpleCookie
from typing import Any

import pytest

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.api.dashboard import ASSETS
from fencepost.domain.buckets import bucket_for
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.api.support import TestClient, assert_problem, running

ADMIN_TOKEN = "admin-token-0123456789"
READ_TOKEN = "read-token-0123456789"
TOKENS = {
    ADMIN_TOKEN: Principal(name="operator", scopes=frozenset({Scope.ADMIN})),
    READ_TOKEN: Principal(name="viewer", scopes=frozenset({Scope.READ})),
}
CROSS_SITE = "https://evil.example"

pytestmark = pytest.mark.manual_clock


@pytest.fixture
def secured(store: Store) -> Iterator[TestClient]:
    """A client of an app with auth on (an admin and a read-only token)."""
    with TestClient(create_app(store, auth=Auth(TOKENS))) as c:
        yield c


def set_cookies(response: Any) -> dict[str, Any]:
    """The cookies a response sets, by name, as parsed morsels."""
    found: dict[str, Any] = {}
    for header in response.headers.get_list("set-cookie"):
        parsed: SimpleCookie = SimpleCookie()
        parsed.load(header)
        found.update(parsed)
    return found


def open_page(client: TestClient) -> str:
    """Load the dashboard as a browser would; return the CSRF token its cookie holds."""
    assert client.get("/").status_code == 200
    token = client.cookies.get("fencepost_csrf")
    assert token
    return token


def sign_in(client: TestClient, token: str = ADMIN_TOKEN) -> str:
    """Sign in through the page; return the CSRF token."""
    csrf = open_page(client)
    response = client.post("/session", json={"token": token}, headers={"X-CSRF-Token": csrf})
    assert response.status_code == 204, response.text
    return csrf


def dead_letter(store: Store, job: str = "flaky") -> str:
    """A FAILED execution (one attempt, failed for good); its id."""
    execution = store.submit(job, max_attempts=1)
    [lease] = store.claim("worker-1", jobs=[job])
    store.fail(lease, "boom", retryable=False)
    assert store.get(execution.id).state is State.FAILED
    return execution.id


def snapshot(store: Store, execution_id: str) -> tuple[Any, ...]:
    """What a refused request must leave untouched: the row and its audit trail."""
    return store.get(execution_id), store.transitions(execution_id)


# -- the page and its assets ---------------------------------------------------------------


class PageParser(HTMLParser):
    """Collects what the CSP forbids or depends on: scripts, styles, event attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.stylesheets: list[str | None] = []
        self.inline: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self.scripts.append(found)
            self.in_script = True
        if tag == "style":
            self.inline.append("<style>")
        if tag == "link" and found.get("rel") == "stylesheet":
            self.stylesheets.append(found.get("href"))
        for name, _ in attrs:
            if name == "style" or name.startswith("on"):
                self.inline.append(f"{tag} {name}=")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_script = False

    def handle_data(self, data: str) -> None:
        if self.in_script and data.strip():
            self.inline.append("inline script")


def test_page_is_html_with_security_headers_and_a_csrf_cookie(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert "unsafe-eval" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["x-frame-options"] == "DENY"
    cookie = set_cookies(response)["fencepost_csrf"]
    assert len(cookie.value) >= 24
    assert cookie["samesite"] == "strict"
    assert cookie["path"] == "/"
    assert not cookie["httponly"]  # the page's script must read it to echo it back
    assert not cookie["secure"]  # plain http: a Secure cookie would not be stored


def test_page_keeps_the_csrf_cookie_it_already_set(client: TestClient) -> None:
    first = open_page(client)
    again = client.get("/")
    assert "fencepost_csrf" not in set_cookies(again)
    assert client.cookies.get("fencepost_csrf") == first


def test_each_browser_gets_its_own_csrf_token(store: Store) -> None:
    app = create_app(store)
    with TestClient(app) as one, TestClient(app) as two:
        assert open_page(one) != open_page(two)


def test_page_has_no_inline_script_or_style(client: TestClient) -> None:
    # The CSP would block them, and the page would silently not work.
    page = PageParser()
    page.feed(client.get("/").text)
    assert page.inline == []
    assert page.scripts == [{"type": "module", "src": "/static/app.js"}]
    assert page.stylesheets == [
        "/static/style.css",
        "/static/vendor/uplot-1.6.32/uPlot.min.css",
        "/static/css/charts.css",
        "/static/css/console-operate.css",
        "/static/css/timeline.css",
        "/static/css/console-find.css",
    ]


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("app.js", "text/javascript; charset=utf-8"),
        ("js/views/executions.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
def test_assets_are_served_with_their_media_types(
    client: TestClient, name: str, media_type: str
) -> None:
    response = client.get(f"/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.content  # not an empty file


@pytest.mark.parametrize(
    "name",
    [
        "index.html",
        "missing.js",
        "..%2Fdashboard.py",
        "%2e%2e",
        "js/",
        "js/missing.js",
        "js%2F..%2Fapp.js",
    ],
)
def test_only_the_listed_assets_are_served(client: TestClient, name: str) -> None:
    assert_problem(client.get(f"/static/{name}"), 404, "not-found")


def test_the_scripts_insert_no_markup(client: TestClient) -> None:
    # The browser test proves a hostile job name renders as text; this keeps every
    # script of the page's own off the APIs that parse strings as markup or code.
    forbidden = (
        r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function"
    )
    scripts = [name for name in ASSETS if name.endswith(".js") and not name.startswith("vendor/")]
    assert "app.js" in scripts
    assert "js/views/execution.js" in scripts
    for name in scripts:
        script = client.get(f"/static/{name}").text
        assert [m.group(0) for m in re.finditer(forbidden, script)] == [], name


def test_the_page_is_not_in_the_api_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/" not in paths
    assert "/static/{name}" not in paths
    assert {"/session", "/nodes", "/buckets", "/stats", "/slo"} <= set(paths)


# -- sign-in sessions ----------------------------------------------------------------------


def test_session_without_auth(client: TestClient) -> None:
    assert client.get("/session").json() == {
        "auth": False,
        "name": "anonymous",
        "scopes": ["admin"],
    }
    csrf = open_page(client)
    response = client.post("/session", json={"token": "anything"}, headers={"X-CSRF-Token": csrf})
    assert response.status_code == 204
    assert set_cookies(response) == {}  # nothing to sign in to


def test_sign_in_sets_a_session_cookie_that_authenticates_reads(
    secured: TestClient, store: Store
) -> None:
    store.submit("email")
    assert_problem(secured.get("/executions"), 401, "unauthorized")
    assert secured.get("/session").json() == {"auth": True, "name": None, "scopes": []}
    csrf = open_page(secured)
    response = secured.post("/session", json={"token": ADMIN_TOKEN}, headers={"X-CSRF-Token": csrf})
    assert response.status_code == 204, response.text
    cookie = set_cookies(response)["fencepost_session"]
    assert cookie["httponly"]
    assert cookie["samesite"] == "strict"
    assert cookie["path"] == "/"
    assert cookie.value != ADMIN_TOKEN  # a session id, not the token itself
    assert [e["job"] for e in secured.get("/executions").json()["items"]] == ["email"]
    assert secured.get("/session").json() == {"auth": True, "name": "operator", "scopes": ["admin"]}


def test_sign_in_with_an_unknown_token_is_401_naming_token(secured: TestClient) -> None:
    csrf = open_page(secured)
    response = secured.post(
        "/session", json={"token": "not-a-token-0123456789"}, headers={"X-CSRF-Token": csrf}
    )
    assert_problem(response, 401, "unauthorized", "token")
    assert "fencepost_session" not in set_cookies(response)
    assert_problem(secured.get("/executions"), 401, "unauthorized")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({}, "token", id="missing"),
        pytest.param({"token": ""}, "token", id="empty"),
        pytest.param({"token": 12}, "token", id="not-a-string"),
        pytest.param({"token": ADMIN_TOKEN, "remember": True}, "remember", id="unknown-field"),
    ],
)
def test_bad_sign_in_body_is_422(secured: TestClient, body: dict[str, Any], field: str) -> None:
    csrf = open_page(secured)
    response = secured.post("/session", json=body, headers={"X-CSRF-Token": csrf})
    assert_problem(response, 422, "validation", field)
    assert "fencepost_session" not in set_cookies(response)


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-header"),
        pytest.param({"X-CSRF-Token": "forged"}, id="wrong-header"),
    ],
)
def test_sign_in_needs_the_csrf_header(secured: TestClient, headers: dict[str, str]) -> None:
    # Otherwise a page elsewhere could sign the browser in as the attacker.
    open_page(secured)
    response = secured.post("/session", json={"token": ADMIN_TOKEN}, headers=headers)
    assert_problem(response, 403, "csrf")
    assert "fencepost_session" not in set_cookies(response)
    assert_problem(secured.get("/executions"), 401, "unauthorized")


def test_sign_out_ends_the_session(secured: TestClient) -> None:
    csrf = sign_in(secured)
    session = secured.cookies.get("fencepost_session")
    assert session
    response = secured.delete("/session", headers={"X-CSRF-Token": csrf})
    assert response.status_code == 204
    assert secured.cookies.get("fencepost_session") is None
    assert_problem(secured.get("/executions"), 401, "unauthorized")
    # The old id is dead on the server too, not just forgotten by this browser.
    secured.cookies.set("fencepost_session", session)
    assert_problem(secured.get("/executions"), 401, "unauthorized")


def test_sign_out_needs_the_csrf_header(secured: TestClient) -> None:
    sign_in(secured)
    assert_problem(secured.delete("/session"), 403, "csrf")
    assert secured.get("/executions").status_code == 200


def test_signing_in_again_replaces_the_session(secured: TestClient) -> None:
    sign_in(secured)
    first = secured.cookies.get("fencepost_session")
    sign_in(secured, READ_TOKEN)
    assert secured.get("/session").json()["name"] == "viewer"
    secured.cookies.set("fencepost_session", first)
    assert_problem(secured.get("/executions"), 401, "unauthorized")


# -- CSRF on state-changing requests -------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-header"),
        pytest.param({"X-CSRF-Token": "forged"}, id="wrong-header"),
    ],
)
def test_cookie_authenticated_replay_needs_the_csrf_header(
    secured: TestClient, store: Store, headers: dict[str, str]
) -> None:
    execution_id = dead_letter(store)
    sign_in(secured)
    before = snapshot(store, execution_id)
    assert_problem(secured.post(f"/executions/{execution_id}/replay", headers=headers), 403, "csrf")
    assert snapshot(store, execution_id) == before


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-header"),
        pytest.param({"X-CSRF-Token": "forged"}, id="wrong-header"),
    ],
)
def test_cookie_authenticated_cancel_needs_the_csrf_header(
    secured: TestClient, store: Store, headers: dict[str, str]
) -> None:
    execution_id = store.submit("email").id
    sign_in(secured)
    before = snapshot(store, execution_id)
    assert_problem(secured.delete(f"/executions/{execution_id}", headers=headers), 403, "csrf")
    assert snapshot(store, execution_id) == before


def test_cookie_authenticated_actions_with_the_csrf_header_succeed(
    secured: TestClient, store: Store
) -> None:
    dead = dead_letter(store)
    waiting = store.submit("email").id
    csrf = sign_in(secured)
    headers = {"X-CSRF-Token": csrf}
    replayed = secured.post(f"/executions/{dead}/replay", headers=headers)
    assert replayed.status_code == 200, replayed.text
    assert store.get(dead).state is State.SCHEDULED
    cancelled = secured.delete(f"/executions/{waiting}", headers=headers)
    assert cancelled.status_code == 200, cancelled.text
    assert store.get(waiting).state is State.CANCELLED


def test_a_read_only_session_cannot_act(secured: TestClient, store: Store) -> None:
    execution_id = dead_letter(store)
    csrf = sign_in(secured, READ_TOKEN)
    before = snapshot(store, execution_id)
    response = secured.post(f"/executions/{execution_id}/replay", headers={"X-CSRF-Token": csrf})
    assert_problem(response, 403, "forbidden")
    assert snapshot(store, execution_id) == before


def test_bearer_requests_need_no_csrf_header(store: Store) -> None:
    execution_id = dead_letter(store)
    with TestClient(create_app(store, auth=Auth(TOKENS))) as api:
        response = api.post(
            f"/executions/{execution_id}/replay",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Origin": CROSS_SITE},
        )
    assert response.status_code == 200, response.text
    assert store.get(execution_id).state is State.SCHEDULED


def test_cross_site_form_post_is_refused_with_auth_off(client: TestClient, store: Store) -> None:
    # With auth off a page on any site could make the browser POST to localhost; the
    # browser sends Origin, but cannot send our cookie (SameSite) or a custom header.
    execution_id = dead_letter(store)
    before = snapshot(store, execution_id)
    response = client.post(f"/executions/{execution_id}/replay", headers={"Origin": CROSS_SITE})
    assert_problem(response, 403, "csrf")
    assert snapshot(store, execution_id) == before
    submitted = client.post(
        "/executions",
        content="job=evil",
        headers={"Origin": CROSS_SITE, "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_problem(submitted, 403, "csrf")
    assert [e.id for e in store.query().items] == [execution_id]


def test_the_page_can_act_with_auth_off(client: TestClient, store: Store) -> None:
    execution_id = store.submit("email").id
    csrf = open_page(client)
    assert_problem(client.delete(f"/executions/{execution_id}"), 403, "csrf")
    assert store.get(execution_id).state is State.SCHEDULED
    response = client.delete(f"/executions/{execution_id}", headers={"X-CSRF-Token": csrf})
    assert response.status_code == 200, response.text
    assert store.get(execution_id).state is State.CANCELLED


# -- reports -------------------------------------------------------------------------------


def test_nodes_lists_the_live_nodes(client: TestClient, store: Store) -> None:
    store.register_node("worker-b", buckets=[3, 1, 2], ttl=30)
    store.register_node("worker-a", ttl=30)
    store.register_node("gone", ttl=30)
    store.deregister_node("gone")
    body = client.get("/nodes").json()
    assert [(n["id"], n["kind"], n["buckets"]) for n in body] == [
        ("worker-a", "worker", None),
        ("worker-b", "worker", [1, 2, 3]),
    ]
    expires = store.clock.now() + timedelta(seconds=30)
    assert [datetime.fromisoformat(n["expires_at"]) for n in body] == [expires, expires]


def test_buckets_report_duplicates_holes_and_orphans(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    stray = bucket_for("tenant-stray")
    shared = (stray + 1) % 64
    store.register_node("node-a", buckets=[b for b in range(64) if b != stray], ttl=3600)
    store.register_node("node-b", buckets=[shared], ttl=3600)
    orphan = store.submit("sync", bucket_key="tenant-stray").id
    finished = store.submit("sync", bucket_key="tenant-stray").id
    store.cancel(finished)
    store.submit("sync", bucket_key=next(k for k in map(str, range(999)) if bucket_for(k) != stray))
    fresh = client.get("/buckets").json()
    assert fresh["orphans"] == []  # unchanged for less than the default 300 s
    clock.advance(301)
    body = client.get("/buckets").json()
    assert body["num_buckets"] == 64
    assert body["duplicated"] == [shared]
    assert body["unowned"] == [stray]
    assert body["floating"] == []
    assert [e["id"] for e in body["orphans"]] == [orphan]
    by_bucket = {b["bucket"]: b for b in body["buckets"]}
    assert len(by_bucket) == 64
    assert by_bucket[shared]["owners"] == ["node-a", "node-b"]
    assert by_bucket[shared]["duplicated"] is True
    assert by_bucket[stray] == {
        "bucket": stray,
        "owners": [],
        "executions": 1,  # the cancelled one is finished
        "duplicated": False,
        "unowned": True,
    }
    quick = client.get("/buckets", params={"orphaned_after": 0}).json()
    assert [e["id"] for e in quick["orphans"]] == [orphan]


def test_a_node_for_any_bucket_leaves_no_holes(client: TestClient, store: Store) -> None:
    store.register_node("anywhere", ttl=60)
    store.submit("sync")
    body = client.get("/buckets", params={"orphaned_after": 0}).json()
    assert (body["unowned"], body["floating"], body["orphans"]) == ([], ["anywhere"], [])


def test_stats_report_counts_and_claim_lateness(
    client: TestClient, store: Store, clock: ManualClock
) -> None:
    for _ in range(3):
        store.submit("email")
    store.submit("later", delay=3600)
    clock.advance(5)
    store.claim("worker-1", limit=2, jobs=["email"])
    body = client.get("/stats", params={"window": 60}).json()
    assert body["window_seconds"] == 60
    assert body["by_state"] == {s.value: 0 for s in State} | {"SCHEDULED": 2, "RUNNING": 2}
    assert body["by_job"]["later"]["SCHEDULED"] == 1
    assert body["due_backlog"] == 1
    assert body["claim_lateness"] == {"count": 2, "p50": 5.0, "p90": 5.0, "p99": 5.0, "max": 5.0}
    assert (body["stale_refused"], body["lease_expiries"]) == (0, 0)
    clock.advance(61)
    late = client.get("/stats", params={"window": 60}).json()["claim_lateness"]
    assert late == {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}


def test_slo_reports_the_shares(client: TestClient, store: Store, clock: ManualClock) -> None:
    running(store, "email")
    clock.advance(20)
    store.submit("email")
    clock.advance(15)  # the second is now 15 s late and unclaimed
    body = client.get("/slo", params={"window": 3600, "claim_within": 10}).json()
    claimed = body["claimed"]
    assert (claimed["met"], claimed["total"], claimed["share"]) == (1, 2, 0.5)
    assert (claimed["misses"], claimed["missed"]) == ({"late_claim": 1}, True)
    assert body["claim_within_seconds"] == claimed["within_seconds"] == 10
    assert [o["lateness_seconds"] for o in body["worst"]] == [15.0, 0.0]
    assert [o["verdict"] for o in body["worst"]] == ["late_claim", "met"]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        pytest.param("/stats", {"window": 0}, "window", id="stats-zero-window"),
        pytest.param("/stats", {"window": -5}, "window", id="stats-negative-window"),
        pytest.param("/stats", {"window": "nan"}, "window", id="stats-nan-window"),
        pytest.param("/stats", {"window": "inf"}, "window", id="stats-inf-window"),
        pytest.param("/stats", {"window": "1e300"}, "window", id="stats-huge-window"),
        pytest.param("/stats", {"window": "hour"}, "window", id="stats-text-window"),
        pytest.param("/buckets", {"orphaned_after": -1}, "orphaned_after", id="buckets-negative"),
        pytest.param("/buckets", {"limit": 0}, "limit", id="buckets-zero-limit"),
        pytest.param("/slo", {"claim_within": "1e300"}, "claim_within", id="slo-huge"),
        pytest.param("/slo", {"worst": -1}, "worst", id="slo-negative-worst"),
    ],
)
def test_bad_report_parameters_are_422(
    client: TestClient, path: str, params: dict[str, Any], field: str
) -> None:
    assert_problem(client.get(path, params=params), 422, "validation", field)


@pytest.mark.parametrize("path", ["/nodes", "/buckets", "/stats", "/slo"])
def test_reports_need_the_read_scope(secured: TestClient, path: str) -> None:
    assert_problem(secured.get(path), 401, "unauthorized")
    response = secured.get(path, headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert response.status_code == 200, response.text

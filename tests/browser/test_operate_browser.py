"""Seeing over time and operating queues, schedules, jobs and nodes, in a real browser.

One uvicorn server per backend (SQLite, then PostgreSQL) with two tokens: ``ops``
(admin) and ``viewer`` (read only), each signed in on its own page for the whole
module. Every action is taken through the page and checked in the store: a schedule
edited (new cron and zone, previewed before saving) has the new rule, its fire times
and materialized occurrences follow it; Run now creates an execution audited as
``ops``; a queue paused in the page is paused in the store. The charts draw points
from executions finished minutes ago (written through a second store with a
ManualClock, then rolled up), and a read-only token sees no control at all.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
import uvicorn
from playwright.sync_api import Browser, BrowserContext, Page, expect

import fencepost
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.catalogue import job_entry
from fencepost.domain.policies import Misfire, Overlap
from fencepost.scheduler.handle import ScheduleHandle
from fencepost.scheduler.materializer import Materializer, MaterializerOptions
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.timing.rules import fire_times
from tests import postgres
from tests.browser import test_dashboard_browser as dashboard
from tests.browser.test_dashboard_browser import HOSTILE, PATIENCE_MS, STARTUP_SECONDS, PageTrouble

pytestmark = pytest.mark.browser

browser = dashboard.browser

ADMIN_TOKEN = "operate-admin-token-0123456789"
READ_TOKEN = "operate-viewer-token-0123456789"
TOKENS = {
    ADMIN_TOKEN: Principal(name="ops", scopes=frozenset({Scope.ADMIN})),
    READ_TOKEN: Principal(name="viewer", scopes=frozenset({Scope.READ})),
}


@dataclass
class Served:
    """A server over one backend's store, and that store's URL (for a second store)."""

    url: str
    store: Store
    base_url: str
    #: The whole minute, ten minutes before the server started, the history begins at.
    base: datetime


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    schema = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('operate') / 'operate.db'}"
    else:
        postgres.require_postgres()
        schema = postgres.new_schema()
        url = postgres.store_url(schema)
    base = seed_history(url)
    store = fencepost.connect(url)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(store, auth=Auth(TOKENS)), host="127.0.0.1", port=0, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, name="operate-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the uvicorn server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(url=url, store=store, base_url=f"http://127.0.0.1:{port}", base=base)
    finally:
        server.should_exit = True
        thread.join()
        store.close()
        if schema is not None:
            postgres.drop_schema(schema)


@dataclass
class Tab:
    """A page signed in with one token, and what it reported."""

    page: Page
    trouble: PageTrouble

    def fine(self) -> None:
        """No console error, uncaught exception or dialog since the last check."""
        assert self.trouble.errors == []
        assert self.trouble.dialogs == []


def signed_in(browser: Browser, served: Served, token: str, name: str) -> Iterator[Tab]:
    context: BrowserContext = browser.new_context(
        base_url=served.base_url, viewport={"width": 1400, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(PATIENCE_MS)
    expect.set_options(timeout=PATIENCE_MS)
    trouble = PageTrouble(page)
    page.goto("/#/queues")
    page.fill("#token", token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text(f"signed in as {name}")
    try:
        yield Tab(page, trouble)
    finally:
        context.close()


@pytest.fixture(scope="module")
def admin(browser: Browser, served: Served) -> Iterator[Tab]:
    yield from signed_in(browser, served, ADMIN_TOKEN, "ops")


@pytest.fixture(scope="module")
def reader(browser: Browser, served: Served) -> Iterator[Tab]:
    yield from signed_in(browser, served, READ_TOKEN, "viewer")


def seed_history(url: str) -> datetime:
    """Executions of job ``charted`` (queue ``charts``) that finished ten minutes ago,
    written through a second store whose clock stands then: at the first whole minute
    three claimed 20 s late succeed, two minutes later one fails for good. Written
    before the server starts, since the roll-up reads forward from its watermark: a
    row stamped in the past after a roll-up passed its time is never counted."""
    base = (datetime.now(UTC) - timedelta(minutes=10)).replace(second=0, microsecond=0)
    clock = ManualClock(base)
    with fencepost.connect(url, clock=clock) as past:
        past.publish_jobs([job_entry("charted", 1)])
        past.submit_many([{"job": "charted", "queue": "charts"} for _ in range(3)])
        clock.set(base + timedelta(seconds=20))
        for lease in past.claim("w", jobs=["charted"], limit=3, ttl=600):
            past.complete(lease, "ok")
        clock.set(base + timedelta(minutes=2))
        past.submit("charted", queue="charts", max_attempts=1)
        (lease,) = past.claim("w", jobs=["charted"], ttl=600)
        past.fail(lease, "boom", retryable=False)
    return base


def roll_up(store: Store) -> None:
    while not store.roll_up_history().caught_up:
        pass


def test_charts_draw_what_finished_minutes_ago(served: Served, admin: Tab) -> None:
    store, tab = served.store, admin.page
    roll_up(store)  # what seed_history wrote, if the service has not rolled it up yet
    first, dead = served.base, served.base + timedelta(minutes=2)

    tab.goto("/#/history?window=hour&job=charted")
    throughput = tab.locator('#view-history figure[data-chart="throughput"]')
    expect(throughput.locator(".chart-total.succeeded")).to_have_text("succeeded 3")
    expect(throughput.locator(".chart-total.dead")).to_have_text("dead letters 1")
    expect(throughput.locator("canvas").first).to_be_attached()  # uPlot drew the plot
    # The figures table holds the two minutes that hold something, newest first.
    rows = throughput.locator("table.chart-table tbody tr")
    expect(rows).to_have_count(2)
    assert [
        datetime.fromisoformat(a) for a in rows.evaluate_all("rs => rs.map(r => r.dataset.step)")
    ] == [dead, first]
    expect(rows.nth(1).locator("td.succeeded")).to_have_text("3")
    expect(rows.nth(0).locator("td.dead")).to_have_text("1")
    lateness = tab.locator('#view-history figure[data-chart="lateness"]')
    expect(lateness.locator(".chart-total.lateness_p99")).to_contain_text("max ")
    expect(tab.locator("#history-job")).to_have_value("charted")
    # The window is a picker kept in the URL; a day's steps are 15 minutes.
    tab.select_option("#history-window", "day")
    expect(tab.locator("#history-note")).to_contain_text("one point per 15 min")
    assert "window=day" in tab.url
    assert "job=charted" in tab.url
    expect(throughput.locator(".chart-total.succeeded")).to_have_text("succeeded 3")
    tab.select_option("#history-queue", "charts")
    expect(tab.locator("#history-queue")).to_have_value("charts")
    assert "queue=charts" in tab.url

    # Hostile pickers in a hand-made URL: an unknown window is the hour, odd names are
    # names (nothing matches them), shown as text.
    tab.goto(f"/#/history?window=decade&job={quote(HOSTILE)}&queue={quote(chr(0) + '%_%')}")
    expect(tab.locator("#history-window")).to_have_value("hour")
    expect(tab.locator("#history-job")).to_have_value(HOSTILE)
    expect(tab.locator("#history-queue")).to_have_value("\x00%_%")
    expect(throughput.locator(".chart-total.succeeded")).to_have_text("succeeded 0")
    assert tab.locator("img").count() == 0

    # The overview charts the last hour of every job from the same history.
    overview = tab.locator('#overview-chart figure[data-chart="overview"]')
    expect(overview.locator("canvas").first).to_be_attached()
    expect(overview.locator(".chart-total.succeeded")).not_to_have_text("succeeded –")

    # The queue's last hour, and the job's page charts its history.
    tab.goto("/#/queues")
    row = tab.locator('#queues tr[data-queue="charts"]')
    expect(row.locator("td.finished")).to_have_text("4 (1 dead)")
    expect(row.locator("td.lateness")).not_to_have_text("–")
    tab.goto("/#/jobs/charted")
    job = tab.locator('#job-history figure[data-chart="job-throughput"]')
    expect(job.locator(".chart-total.succeeded")).to_have_text("succeeded 3")
    expect(job.locator(".chart-total.dead")).to_have_text("dead letters 1")
    admin.fine()


def test_nodes_show_the_leases_each_holds(served: Served, admin: Tab) -> None:
    store, tab = served.store, admin.page
    store.register_node("node-a", buckets=range(0, 40), ttl=3600)
    store.register_node(HOSTILE, buckets=range(30, 64), ttl=3600)
    store.submit_many([{"job": "held"} for _ in range(3)])
    store.claim("node-a", jobs=["held"], limit=2, ttl=3600)
    store.claim(HOSTILE, jobs=["held"], limit=1, ttl=3600)
    tab.goto("/#/nodes")
    expect(tab.locator('#nodes tr[data-node="node-a"] td.held')).to_have_text("2")
    expect(tab.locator(f'#nodes tr[data-node="{HOSTILE}"] td.held')).to_have_text("1")
    expect(tab.locator('dd[data-field="owned twice"]')).to_contain_text("30-39")
    assert tab.locator("img").count() == 0  # the hostile node id reached the page as text
    admin.fine()


def dst_shifts(cron: str, zone: str, fires: list[datetime]) -> list[str]:
    """The "DST: a → b" marks the page must show between these fire times."""

    def offset(instant: datetime) -> str:
        delta = instant.astimezone(ZoneInfo(zone)).utcoffset()
        assert delta is not None
        minutes = int(delta.total_seconds() // 60)
        return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02}:{abs(minutes) % 60:02}"

    offsets = [offset(f) for f in fires]
    return [f"DST: {a} → {b}" for a, b in itertools.pairwise(offsets) if a != b]


def fires_in(locator: Any) -> list[datetime]:
    return [
        datetime.fromisoformat(t) for t in locator.evaluate_all("ls => ls.map(l => l.dataset.fire)")
    ]


def test_a_schedule_edited_run_and_paused_in_the_page(served: Served, admin: Tab) -> None:
    store, tab = served.store, admin.page
    store.add_schedule("nightly", cron="0 3 * * *", timezone="Europe/London", id="edit-me")
    tab.goto("/#/schedules")
    tab.locator('#schedules tr[data-id="edit-me"] a.schedule-link').click()
    expect(tab.locator("#schedule-id")).to_have_text("edit-me")
    upcoming = tab.locator("#schedule-upcoming li")
    expect(upcoming).to_have_count(10)
    stored = ScheduleHandle(store, store.get_schedule("edit-me")).preview(1)
    assert fires_in(upcoming)[0] == stored[0]
    expect(upcoming.first.locator("time")).to_contain_text("03:00")  # in its own zone

    # The editor previews the edited (unsaved) rule: monthly crosses a DST change.
    tab.get_by_role("button", name="Edit").click()
    preview = tab.locator("#edit-preview li")
    tab.fill("#edit-cron", "0 3 1 * *")
    expect(preview.first).to_contain_text("-01 03:00")
    shifts = dst_shifts("0 3 1 * *", "Europe/London", fires_in(preview))
    assert shifts, "ten monthly fire times cross a change of offset"
    expect(tab.locator("#edit-preview .dst-shift")).to_have_text(shifts)
    # A bad rule is said beside the form, naming its field; nothing is saved.
    tab.fill("#edit-cron", "61 * * * *")
    expect(tab.locator("#edit-error")).to_contain_text("cron")
    tab.fill("#edit-cron", "30 9 * * *")
    tab.fill("#edit-timezone", "Mars/Base")
    expect(tab.locator("#edit-error")).to_contain_text("timezone")
    assert store.get_schedule("edit-me").cron == "0 3 * * *"
    # Chromium reports each refused preview (a 422) as a console error: expected here.
    assert admin.trouble.errors
    assert all("422" in error for error in admin.trouble.errors)
    admin.trouble.errors.clear()

    started = datetime.now(UTC)
    tab.fill("#edit-timezone", "America/New_York")
    tab.select_option("#edit-misfire", "skip")
    tab.select_option("#edit-overlap", "skip")
    expect(tab.locator("#edit-error")).to_be_hidden()
    expect(tab.locator("#edit-preview-zone")).to_have_text("(America/New_York)")
    expect(preview.first).to_contain_text("09:30 -0")
    expected = fire_times(
        "30 9 * * *", timezone="America/New_York", after=started - timedelta(seconds=30), count=11
    )
    assert fires_in(preview) in (expected[:10], expected[1:])
    tab.get_by_role("button", name="Save").click()  # asks first
    assert store.get_schedule("edit-me").cron == "0 3 * * *"
    tab.get_by_role("button", name="Confirm save").click()
    expect(tab.locator("#notice")).to_have_text("Schedule saved.")
    saved = store.get_schedule("edit-me")
    assert (saved.cron, saved.timezone) == ("30 9 * * *", "America/New_York")
    assert (saved.misfire, saved.overlap) == (Misfire.SKIP, Overlap.SKIP)
    expect(tab.locator('#schedule-fields dd[data-field="zone"]')).to_have_text("America/New_York")
    expect(upcoming.first).to_contain_text("09:30")
    handle = ScheduleHandle(store, saved)
    assert fires_in(upcoming) == handle.preview(
        10, after=fires_in(upcoming)[0] - timedelta(microseconds=1)
    )
    assert fires_in(upcoming)[0] == handle.preview(1)[0]
    # A materializer plans it by the new rule: with overlap "skip" it stores nothing
    # ahead, and looks at it again at the page's first fire time.
    Materializer(store, MaterializerOptions()).run_once()
    planned = store.get_schedule("edit-me")
    assert planned.next_due == fires_in(upcoming)[0]
    assert planned.watermark < planned.next_due

    # Run now asks first, then runs one execution audited with the token's name.
    tab.get_by_role("button", name="Run now").click()
    tab.get_by_role("button", name="Confirm run now").click()
    expect(tab.locator("#notice")).to_have_text("Schedule run: an execution was submitted.")
    runs = [e for e in store.query(schedule="edit-me").items if e.slot is None]
    assert len(runs) == 1
    assert store.transitions(runs[0].id)[0].actor == "ops"
    expect(tab.locator(f'#schedule-runs tr[data-id="{runs[0].id}"]')).to_contain_text("run now")

    # Pause asks first; its slots not yet run are then recorded SKIPPED (misfires).
    actions = tab.locator("#schedule-actions")
    actions.get_by_role("button", name="Pause").click()
    assert store.get_schedule("edit-me").paused is False
    actions.get_by_role("button", name="Confirm pause").click()
    expect(actions.get_by_role("button", name="Resume")).to_be_visible()
    assert store.get_schedule("edit-me").paused is True
    expect(tab.locator("#schedule-misfires tr[data-id]").first).to_contain_text("paused")
    actions.get_by_role("button", name="Resume").click()  # no question: it can be undone
    expect(actions.get_by_role("button", name="Pause")).to_be_visible()
    assert store.get_schedule("edit-me").paused is False
    admin.fine()


def test_a_queue_paused_in_the_page_is_paused_in_the_store(served: Served, admin: Tab) -> None:
    store, tab = served.store, admin.page
    store.submit_many([{"job": "mail", "queue": "pausable"} for _ in range(2)])
    tab.goto("/#/queues")
    row = tab.locator('#queues tr[data-queue="pausable"]')
    expect(row.locator("td.waiting")).to_have_text("2")
    row.get_by_role("button", name="Pause").click()
    expect(row.get_by_role("button", name="Confirm pause")).to_be_visible()
    assert store.paused_queues() == []
    row.get_by_role("button", name="Confirm pause").click()
    expect(row.locator("td.paused-by")).to_have_text("ops")
    assert [(q.scope, q.updated_by) for q in store.paused_queues()] == [("queue:pausable", "ops")]
    row.get_by_role("button", name="Resume").click()
    expect(row.locator("td.status")).to_have_text("active")
    assert store.paused_queues() == []
    admin.fine()


def test_a_read_only_token_sees_no_control(served: Served, reader: Tab) -> None:
    store, tab = served.store, reader.page
    store.add_schedule("report", cron="0 6 * * *", id="read-only")
    store.submit("mail", queue="watched")
    tab.goto("/#/schedules")
    expect(tab.locator('#schedules tr[data-id="read-only"]')).to_be_visible()
    expect(tab.locator("#schedules button")).to_have_count(0)
    tab.goto("/#/schedules/read-only")
    expect(tab.locator("#schedule-upcoming li")).to_have_count(10)
    expect(tab.locator("#view-schedule button")).to_have_count(0)
    expect(tab.locator("#schedule-editor")).to_have_count(0)
    tab.goto("/#/queues")
    expect(tab.locator('#queues tr[data-queue="watched"]')).to_be_visible()
    expect(tab.locator("#queues button")).to_have_count(0)
    # The service refuses what the page no longer offers, and lets the token preview.
    answers = tab.evaluate(
        """async () => {
          const csrf = document.cookie.split("; ")
            .find((c) => c.startsWith("fencepost_csrf=")).split("=")[1];
          const post = (path, body) => fetch(path, {
            method: "POST",
            headers: {"X-CSRF-Token": decodeURIComponent(csrf), "Content-Type": "application/json"},
            body: JSON.stringify(body || {}),
          }).then((r) => r.status);
          return [
            await post("/schedules/read-only/run"),
            await post("/queues/watched/pause"),
            await post("/schedules/preview", {cron: "0 6 * * *", count: 1}),
          ];
        }"""
    )
    assert answers == [403, 403, 200]
    assert store.query(schedule="read-only").items == []
    assert store.paused_queues() == []
    # Chromium reports the two refused requests as console errors: they were expected.
    assert len(reader.trouble.errors) == 2
    assert all("403" in e for e in reader.trouble.errors)
    reader.trouble.errors.clear()
    reader.fine()


#: Makes the tab say it is hidden or visible again, as a browser does for a tab left behind.
SHOW = """(state) => {
  Object.defineProperty(document, "visibilityState", {configurable: true, get: () => state});
  document.dispatchEvent(new Event("visibilitychange"));
}"""


def test_a_hidden_tab_polls_nothing_and_refreshes_when_shown(
    browser: Browser, served: Served
) -> None:
    context = browser.new_context(base_url=served.base_url)
    try:
        tab = context.new_page()
        trouble = PageTrouble(tab)
        tab.clock.install()
        tab.goto("/#/queues")
        tab.fill("#token", ADMIN_TOKEN)
        tab.get_by_role("button", name="Sign in").click()
        expect(tab.locator("#who")).to_have_text("signed in as ops", timeout=PATIENCE_MS)
        # Rendered: the refresh after signing in is done and its timer set (a fake one).
        expect(tab.locator("#queues tr").first).to_be_attached(timeout=PATIENCE_MS)
        polls: list[str] = []
        tab.on(
            "request",
            lambda request: polls.append(request.url) if "/stats" in request.url else None,
        )
        with tab.expect_request(lambda request: "/stats" in request.url, timeout=PATIENCE_MS):
            tab.clock.run_for(3000)  # the page's timer: one more poll
        tab.evaluate(SHOW, "hidden")
        # Any poll already on its way finishes; then a minute of timers starts none.
        tab.evaluate("() => fetch('/healthz').then((r) => r.status)")
        before = len(polls)
        tab.clock.run_for(60_000)
        tab.evaluate("() => fetch('/healthz').then((r) => r.status)")
        assert len(polls) == before, "a hidden tab polled"
        with tab.expect_request(lambda request: "/stats" in request.url, timeout=PATIENCE_MS):
            tab.evaluate(SHOW, "visible")
        assert trouble.errors == []
    finally:
        context.close()


def test_screens_fit_a_phone(browser: Browser, served: Served, tmp_path: Path) -> None:
    """The views this module adds, at 390 px (every view is at both widths in the
    dashboard test's overflow check, on a SQLite store without auth)."""
    served.store.add_schedule("report", cron="0 3 1 * *", timezone="Europe/Paris", id="phone")
    context = browser.new_context(base_url=served.base_url, viewport={"width": 390, "height": 900})
    try:
        tab = context.new_page()
        trouble = PageTrouble(tab)
        tab.goto("/#/schedules/phone")
        tab.fill("#token", ADMIN_TOKEN)
        tab.get_by_role("button", name="Sign in").click()
        for route, ready in [
            ("/#/schedules/phone", "#schedule-upcoming li"),
            ("/#/history?window=week", '#view-history figure[data-chart="burn"] canvas'),
            ("/#/queues", "#queues tr"),
            ("/#/nodes", "#nodes tr"),
        ]:
            tab.goto(route)
            expect(tab.locator(ready).first).to_be_attached(timeout=PATIENCE_MS)
            if route.startswith("/#/schedules/"):
                # The editor, turned to an interval: its slots keep the schedule's phase
                # (an interval schedule's slots are its creation time + k * every).
                tab.get_by_role("button", name="Edit").click()
                tab.get_by_role("radio", name="every").check()
                tab.fill("#edit-every", "5400")
                preview = tab.locator("#edit-preview li")
                expect(tab.locator("#edit-preview-zone")).to_have_text("(UTC)")
                expect(preview).to_have_count(10)
                fires = fires_in(preview)
                created = served.store.get_schedule("phone").created_at
                assert {b - a for a, b in itertools.pairwise(fires)} == {timedelta(seconds=5400)}
                assert (fires[0] - created) % timedelta(seconds=5400) == timedelta(0)
            overflow = tab.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            tab.screenshot(
                path=str(tmp_path / f"{route.strip('/#').replace('/', '-')}.png"), full_page=True
            )
            assert overflow <= 0, f"{route} at 390 px is {overflow} px wider than the screen"
        assert trouble.errors == []
    finally:
        context.close()

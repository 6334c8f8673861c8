"""The dashboard in a real browser: Debian's chromium, driven by Playwright.

A uvicorn server on a free loopback port serves the app over a SQLite store that
the test seeds and then checks directly: a click in the page must change the
store, and a hostile job name must reach the screen as text. Every test also
fails on any console error or uncaught exception in the page.

Chromium comes from Debian (``apt-get install chromium``), never from
``playwright install``; without it these tests fail rather than skip, since CI
installs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, expect, sync_playwright

import fencepost
from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.catalogue import JobDefaults, JobSource, job_entry
from fencepost.domain.states import State
from fencepost.store.base import Store

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
#: A job name that would load an image and run a script if it were ever parsed as HTML.
HOSTILE = "<img src=x onerror=alert(1)>"
#: How long a page may take to show what the test waits for (polls run every 2.5 s).
PATIENCE_MS = 10_000
#: How long the server may take to start listening before the test gives up.
STARTUP_SECONDS = 15.0


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: the dashboard test needs Debian's chromium "
            "(apt-get install chromium); do not use 'playwright install'"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            # This machine has no outside network: keep Chromium from trying to reach it.
            args=[
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-gpu",
            ],
        )
        yield launched
        launched.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = fencepost.connect(f"sqlite:///{tmp_path / 'dashboard.db'}")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def auth() -> Auth | None:
    """The server's credentials: none (auth off) unless a test parametrizes ``auth``."""
    return None


@pytest.fixture
def base_url(store: Store, auth: Auth | None) -> Iterator[str]:
    """A real uvicorn server over ``store``, on a free loopback port."""
    server = uvicorn.Server(
        uvicorn.Config(create_app(store, auth=auth), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="dashboard-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the uvicorn server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


class PageTrouble:
    """Everything a page reports that a normal session never should."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("dialog", self._dialog)

    def _console(self, message: ConsoleMessage) -> None:
        # Chromium also reports failed requests (4xx/5xx) here, as errors.
        if message.type == "error":
            self.errors.append(message.text)

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@pytest.fixture
def page(browser: Browser, base_url: str) -> Iterator[tuple[Page, PageTrouble]]:
    context = browser.new_context(base_url=base_url)
    opened = context.new_page()
    opened.set_default_timeout(PATIENCE_MS)
    expect.set_options(timeout=PATIENCE_MS)
    trouble = PageTrouble(opened)
    try:
        yield opened, trouble
    finally:
        context.close()


def dead_letter(store: Store, job: str) -> str:
    """A FAILED execution: one attempt, failed for good."""
    execution = store.submit(job, max_attempts=1, inputs={"to": "ops@example.com"})
    [lease] = store.claim("worker-1", jobs=[job])
    store.fail(lease, "SMTP refused <b>550</b>", retryable=False)
    return execution.id


def seed(store: Store) -> dict[str, str]:
    """Three ordinary executions, one with a hostile job name, and one dead letter."""
    ids = {name: store.submit(name, inputs={"n": 1}).id for name in ("report", "email", "sync")}
    ids["hostile"] = store.submit(HOSTILE, inputs={"html": "<script>alert(2)</script>"}).id
    ids["dead"] = dead_letter(store, "notify")
    return ids


def test_page_lists_executions_and_shows_hostile_names_as_text(
    page: tuple[Page, PageTrouble], store: Store
) -> None:
    tab, trouble = page
    ids = seed(store)
    tab.goto("/")
    executions = tab.locator("#executions tr")
    expect(executions).to_have_count(5)
    for execution_id in ids.values():
        expect(tab.locator(f'#executions tr[data-id="{execution_id}"]')).to_be_visible()
    hostile = tab.locator(f'#executions tr[data-id="{ids["hostile"]}"] td.job')
    expect(hostile).to_have_text(HOSTILE)
    # Rendered as text: no element was made from it, no handler of it ran.
    assert tab.locator("img").count() == 0
    # Live refresh: an execution submitted after the page loaded appears by itself.
    late = store.submit("arrived-later").id
    expect(tab.locator(f'#executions tr[data-id="{late}"]')).to_be_visible()
    # The filters narrow the list to one job.
    tab.fill("#filter-job", "email")
    tab.get_by_role("button", name="Apply").click()
    expect(executions).to_have_count(1)
    expect(executions.first).to_have_attribute("data-id", ids["email"])
    # The overview charts the last hour of stored history (uPlot draws on a canvas).
    overview = tab.locator('#overview-chart figure[data-chart="overview"]')
    expect(overview.locator("canvas").first).to_be_attached()
    assert tab.locator("img").count() == 0
    assert trouble.dialogs == []
    assert trouble.errors == []


def test_the_queue_column_and_filter(page: tuple[Page, PageTrouble], store: Store) -> None:
    tab, trouble = page
    mail = store.submit("send", queue="emails").id
    hostile = store.submit("send", queue=HOSTILE).id
    plain = store.submit("send").id
    tab.goto("/")
    executions = tab.locator("#executions tr")
    expect(executions).to_have_count(3)
    expect(tab.locator(f'#executions tr[data-id="{mail}"] td.queue')).to_have_text("emails")
    expect(tab.locator(f'#executions tr[data-id="{plain}"] td.queue')).to_have_text("default")
    expect(tab.locator(f'#executions tr[data-id="{hostile}"] td.queue')).to_have_text(HOSTILE)
    tab.fill("#filter-queue", "emails")
    tab.get_by_role("button", name="Apply").click()
    expect(executions).to_have_count(1)
    expect(executions.first).to_have_attribute("data-id", mail)
    assert "queue=emails" in tab.url
    tab.fill("#filter-queue", HOSTILE)
    tab.get_by_role("button", name="Apply").click()
    expect(executions).to_have_count(1)
    expect(executions.first).to_have_attribute("data-id", hostile)
    assert tab.locator("img").count() == 0
    assert trouble.dialogs == []
    assert trouble.errors == []


def test_cancel_from_the_execution_view(page: tuple[Page, PageTrouble], store: Store) -> None:
    tab, trouble = page
    ids = seed(store)
    tab.goto("/")
    tab.locator(f'#executions tr[data-id="{ids["hostile"]}"] a').click()
    expect(tab.locator("#execution-id")).to_have_text(ids["hostile"])
    expect(tab.locator('dd[data-field="job"]')).to_have_text(HOSTILE)
    expect(tab.locator("#execution-inputs")).to_contain_text("<script>alert(2)</script>")
    tab.get_by_role("button", name="Cancel").click()  # asks first: nothing happens yet
    confirm = tab.get_by_role("button", name="Confirm cancel")
    expect(confirm).to_be_visible()
    assert store.get(ids["hostile"]).state is State.SCHEDULED
    confirm.click()
    expect(tab.locator('dd[data-field="state"]')).to_have_text("CANCELLED")
    expect(tab.locator("#transitions")).to_contain_text("CANCELLED")
    assert store.get(ids["hostile"]).state is State.CANCELLED
    assert [store.get(ids[name]).state for name in ("report", "email", "sync")] == [
        State.SCHEDULED
    ] * 3
    assert tab.locator("img").count() == 0
    assert trouble.dialogs == []
    assert trouble.errors == []


def test_replay_a_dead_letter(page: tuple[Page, PageTrouble], store: Store) -> None:
    tab, trouble = page
    ids = seed(store)
    tab.goto("/")
    tab.get_by_role("link", name="Dead letters").click()
    dead = tab.locator(f'#dead-letters tr[data-id="{ids["dead"]}"]')
    expect(dead).to_contain_text("SMTP refused <b>550</b>")
    dead.get_by_role("button", name="Replay").click()
    dead.get_by_role("button", name="Confirm replay").click()
    expect(tab.locator("#notice")).to_have_text("Execution replayed.")
    expect(dead).to_have_count(0)
    expect(tab.locator("#dead-letters")).to_have_text("No dead letters.")
    replayed = store.get(ids["dead"])
    assert replayed.state is State.SCHEDULED
    assert replayed.attempt == 0
    assert trouble.dialogs == []
    assert trouble.errors == []


def test_pause_a_schedule_and_see_nodes_and_buckets(
    page: tuple[Page, PageTrouble], store: Store
) -> None:
    tab, trouble = page
    store.add_schedule(HOSTILE, cron="0 3 * * *", timezone="Europe/London", id="nightly")
    store.register_node("node-a", buckets=range(0, 40), ttl=3600)
    store.register_node("node-b", buckets=range(30, 64), ttl=3600)
    tab.goto("/#/schedules")
    nightly = tab.locator('#schedules tr[data-id="nightly"]')
    expect(nightly.locator("td.job")).to_have_text(HOSTILE)
    expect(nightly).to_contain_text("0 3 * * * (Europe/London)")
    nightly.get_by_role("button", name="Pause").click()  # asks first
    assert store.get_schedule("nightly").paused is False
    nightly.get_by_role("button", name="Confirm pause").click()
    expect(nightly.get_by_role("button", name="Resume")).to_be_visible()
    assert store.get_schedule("nightly").paused is True
    tab.get_by_role("link", name="Nodes & buckets").click()
    expect(tab.locator("#nodes tr")).to_have_count(2)
    expect(tab.locator('dd[data-field="owned twice"]')).to_have_text("30-39 (node-a, node-b)")
    expect(tab.locator('dd[data-field="holes (no live owner)"]')).to_have_text("none")
    expect(tab.locator("#bucket-grid .duplicated")).to_have_count(10)
    assert tab.locator("img").count() == 0
    assert trouble.dialogs == []
    assert trouble.errors == []


def publish_report(store: Store, name: str = HOSTILE) -> None:
    """Two versions of job ``name`` (hostile text in its description and schema), one
    other job, a live node serving version 2, and a day's runs of it."""
    store.publish_jobs(
        [
            job_entry(name, 1, input_schema={"type": "object", "properties": {"day": {}}}),
            job_entry(
                name,
                2,
                input_schema={
                    "type": "object",
                    "properties": {"day": {"type": "string"}, HOSTILE_FIELD: {"type": "string"}},
                },
                defaults=JobDefaults(max_attempts=5, timeout=30, queue="reports"),
                description=SCRIPT,
                source=JobSource(kind="code", where="app.jobs:report"),
            ),
            job_entry("ping", 1),
        ]
    )
    store.register_node("worker-a", jobs=[(name, 2)], ttl=3600)
    store.submit(name, inputs={"day": "2026-01-01"})
    done = store.submit(name, inputs={"day": "2026-01-02"})
    [lease] = store.claim("worker-a", ids=[done.id])
    store.complete(lease, None)


#: Text that would run a script if it were parsed as HTML.
SCRIPT = "<script>alert(3)</script>"
#: An input name that would load an image if it were parsed as HTML.
HOSTILE_FIELD = "<img src=y onerror=alert(4)>"


def test_the_jobs_view_and_a_jobs_detail(page: tuple[Page, PageTrouble], store: Store) -> None:
    tab, trouble = page
    publish_report(store)
    tab.goto("/")
    tab.get_by_role("link", name="Jobs", exact=True).click()
    rows = tab.locator("#jobs tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_have_attribute("data-job", HOSTILE)
    hostile = tab.locator("#jobs tr").nth(0)
    expect(hostile.locator("td.job")).to_have_text(HOSTILE)
    expect(hostile.locator("td").nth(1)).to_have_text("2 (of 2)")
    expect(hostile.locator("td.defaults")).to_have_text("max_attempts=5 timeout=30 s queue=reports")
    expect(hostile.locator("td.inputs")).to_have_text(f"{HOSTILE_FIELD}, day")  # by name
    expect(hostile.locator("td.nodes")).to_have_text("worker-a")
    expect(hostile.locator('td[data-state="SCHEDULED"]')).to_have_text("1")
    expect(hostile.locator('td[data-state="SUCCEEDED"]')).to_have_text("1")
    expect(hostile.locator('td[data-state="FAILED"]')).to_have_text("0")
    expect(rows.nth(1).locator("td.nodes")).to_have_text("–")
    # The detail, on click: every version, the latest first, its schemas as text.
    hostile.get_by_role("link", name=HOSTILE).click()
    expect(tab.locator("#view-job")).to_be_visible()
    expect(tab.locator("#job-name")).to_have_text(HOSTILE)
    expect(tab.locator('#job-fields dd[data-field="versions"]')).to_have_text("1, 2")
    expect(tab.locator('#job-counts [data-state="SUCCEEDED"]')).to_have_text("1")
    versions = tab.locator(".job-version")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_have_attribute("data-version", "2")
    latest = versions.nth(0)
    expect(latest.locator('dd[data-field="description"]')).to_have_text(SCRIPT)
    expect(latest.locator('dd[data-field="source"]')).to_have_text("code app.jobs:report")
    expect(latest.locator('dd[data-field="nodes"]')).to_have_text("worker-a")
    expect(latest.locator('dd[data-field="digest"]')).to_have_text(store.job(HOSTILE)[1].digest)
    expect(latest.locator("pre.input-schema")).to_contain_text(f'"{HOSTILE_FIELD}": {{')
    expect(latest.locator("pre.output-schema")).to_have_text("–")
    expect(versions.nth(1).locator('dd[data-field="nodes"]')).to_have_text("none live")
    # Rendered as text: no element was made from the hostile values, no script ran.
    assert tab.locator("img").count() == 0
    assert tab.locator("main script").count() == 0
    tab.get_by_role("link", name="← Jobs").click()
    expect(rows).to_have_count(2)
    assert trouble.dialogs == []
    assert trouble.errors == []


TOKEN = "dashboard-admin-token-0123456789"


@pytest.mark.parametrize(
    "auth", [Auth({TOKEN: Principal(name="ops", scopes=frozenset({Scope.ADMIN}))})]
)
def test_sign_in_when_auth_is_on(page: tuple[Page, PageTrouble], store: Store, auth: Auth) -> None:
    tab, trouble = page
    ids = seed(store)
    tab.goto("/")
    expect(tab.locator("#sign-in")).to_be_visible()
    expect(tab.locator("#main")).to_be_hidden()
    tab.fill("#token", TOKEN)
    tab.get_by_role("button", name="Sign in").click()
    expect(tab.locator("#executions tr")).to_have_count(5)
    expect(tab.locator("#who")).to_have_text("signed in as ops")
    # The session cookie is out of the page's reach; the CSRF cookie is meant to be read.
    cookies = tab.evaluate("document.cookie")
    assert "fencepost_csrf=" in cookies
    assert "fencepost_session" not in cookies
    # State-changing requests work over the session (cookie plus CSRF header).
    tab.locator(f'#executions tr[data-id="{ids["report"]}"] a').click()
    tab.get_by_role("button", name="Cancel").click()
    tab.get_by_role("button", name="Confirm cancel").click()
    expect(tab.locator('dd[data-field="state"]')).to_have_text("CANCELLED")
    assert store.get(ids["report"]).state is State.CANCELLED
    assert trouble.errors == []
    # The session ends on the server: the next poll is refused and the page asks again.
    [session] = [c["value"] for c in tab.context.cookies() if c["name"] == "fencepost_session"]
    auth.close_session(session)
    expect(tab.locator("#sign-in")).to_be_visible()
    assert trouble.errors
    assert all("401" in error for error in trouble.errors), trouble.errors
    assert trouble.dialogs == []


def test_the_api_docs_load_with_no_request_leaving_the_service(
    browser: Browser, base_url: str
) -> None:
    page = browser.new_page()
    trouble = PageTrouble(page)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(base_url + "/docs")
    title = page.locator(".swagger-ui .info .title")
    expect(title).to_contain_text("fencepost", timeout=PATIENCE_MS)
    expect(page.locator(".opblock-summary-path", has_text="/executions").first).to_be_visible()
    assert len(requested) > 2, requested  # the page, its script and style, the spec
    ours = (base_url + "/", f"blob:{base_url}/")
    outside = [url for url in requested if not url.startswith(ours)]
    assert outside == [], f"/docs asked for {outside}"
    assert page.request.get(base_url + "/redoc").status == 404  # it would call a CDN
    page.close()
    assert trouble.errors == []


TRACEBACK = (
    "ValueError: no rows for 2026-11-28\n"
    "Traceback (most recent call last):\n"
    '  File "jobs.py", line 12, in nightly_report\n'
    "    rows = load_rows(day)\n"
    '  File "jobs.py", line 4, in load_rows\n'
    '    raise ValueError(f"no rows for {day}")\n'
    "ValueError: no rows for 2026-11-28\n"
)


def test_a_traceback_is_a_collapsed_monospace_block_that_opens(
    page: tuple[Page, PageTrouble], store: Store
) -> None:
    tab, trouble = page
    failed = store.submit("nightly-report", max_attempts=1).id
    [lease] = store.claim("worker-1", jobs=["nightly-report"])
    store.fail(lease, TRACEBACK, retryable=False)
    tab.goto("/")
    row = tab.locator(f'#executions tr[data-id="{failed}"]')
    trace = row.locator("td.error details.trace")
    expect(trace.locator("summary")).to_have_text("ValueError: no rows for 2026-11-28")
    expect(trace.locator("pre")).to_be_hidden()  # collapsed to its last line
    font = trace.locator("summary").evaluate("el => getComputedStyle(el).fontFamily")
    assert "monospace" in font
    # The short id in the list, the whole one on hover.
    link = row.locator("a.id")
    assert link.get_attribute("title") == failed
    assert link.inner_text() == f"{failed[:8]}…{failed[-4:]}"
    trace.locator("summary").click()
    block = trace.locator("pre")
    expect(block).to_be_visible()
    expect(block).to_contain_text('File "jobs.py", line 4, in load_rows')
    assert block.evaluate("el => getComputedStyle(el).whiteSpace") == "pre"  # lines kept
    assert "monospace" in block.evaluate("el => getComputedStyle(el).fontFamily")
    # The execution's own page shows it open.
    link.click()
    detail = tab.locator('dd[data-field="error"] details.trace')
    expect(detail.locator("pre")).to_be_visible()
    expect(detail.locator("pre")).to_contain_text("Traceback (most recent call last):")
    assert trouble.errors == []


def test_a_running_execution_offers_pause_or_resume_by_its_state(
    page: tuple[Page, PageTrouble], store: Store
) -> None:
    tab, trouble = page
    running = store.submit("long-report").id
    store.claim("worker-1", jobs=["long-report"], ttl=3600)
    tab.goto(f"/#/executions/{running}")
    actions = tab.locator("#execution-actions")
    expect(actions.get_by_role("button", name="Pause")).to_be_visible()
    expect(actions.get_by_role("button", name="Resume")).to_have_count(0)
    actions.get_by_role("button", name="Pause").click()  # no confirmation: it can be undone
    expect(actions.get_by_role("button", name="Resume")).to_be_visible()
    expect(actions.get_by_role("button", name="Pause")).to_have_count(0)
    assert [c.kind.value for c in store.commands(running)] == ["pause"]
    actions.get_by_role("button", name="Resume").click()
    expect(actions.get_by_role("button", name="Pause")).to_be_visible()
    assert [c.kind.value for c in store.commands(running)] == ["pause", "resume"]
    assert trouble.errors == []


@pytest.mark.parametrize("width", [1400, 390])
def test_no_view_overflows_sideways_at_desktop_and_phone_widths(
    browser: Browser, base_url: str, store: Store, tmp_path: Path, width: int
) -> None:
    ids = seed(store)
    failed = store.submit("nightly-report", max_attempts=1).id
    [lease] = store.claim("worker-1", jobs=["nightly-report"])
    store.fail(lease, TRACEBACK + "x" * 400, retryable=False)
    store.add_schedule("nightly-report", cron="0 3 * * *", timezone="Europe/London", id="n")
    store.register_node("node-a", buckets=range(0, 64), ttl=3600)
    publish_report(store, "nightly-report")
    tab = browser.new_page(base_url=base_url, viewport={"width": width, "height": 900})
    trouble = PageTrouble(tab)
    views = {
        "executions": ("/", "#executions tr"),
        "execution": (f"/#/executions/{failed}", 'dd[data-field="error"] details.trace'),
        "schedules": ("/#/schedules", "#schedules tr"),
        "dead-letters": ("/#/dead-letters", "#dead-letters tr"),
        "nodes": ("/#/nodes", "#nodes tr"),
        "jobs": ("/#/jobs", "#jobs tr"),
        "job": ("/#/jobs/nightly-report", ".job-version"),
        "schedule": ("/#/schedules/n", "#schedule-upcoming li"),
        "queues": ("/#/queues", "#queues tr"),
        "slo": ("/#/slo", "#slo-objectives tr"),
        "history": ("/#/history?window=day", '#view-history figure[data-chart="burn"] canvas'),
    }
    for name, (route, ready) in views.items():
        tab.goto(route)
        expect(tab.locator(ready).first).to_be_visible(timeout=PATIENCE_MS)
        if name == "executions":  # an opened traceback scrolls inside its cell, not the page
            tab.locator("details.trace summary").first.click()
        if name == "schedule":  # the editor and its preview fit too
            tab.get_by_role("button", name="Edit").click()
            expect(tab.locator("#edit-preview li").first).to_be_visible(timeout=PATIENCE_MS)
        if name == "history":  # so do the charts' figures, opened
            for figures in tab.locator("#view-history details.chart-data summary").all():
                figures.click()
        overflow = tab.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        tab.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=True)
        assert overflow <= 0, f"{name} at {width} px is {overflow} px wider than the screen"
        nav = tab.locator(".top nav")
        box = nav.bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= width, f"the nav overflows ({name})"
    assert ids  # the seeded rows are on the pages above
    tab.close()
    assert trouble.errors == []


def test_a_warning_names_the_work_no_live_process_serves(
    page: tuple[Page, PageTrouble], store: Store
) -> None:
    tab, trouble = page
    store.submit_many([{"job": HOSTILE}, {"job": HOSTILE}])
    store.publish_jobs([job_entry("ship", 4), job_entry("ship", 5)])
    store.submit("ship")  # pinned to version 5
    store.add_schedule("ship", every=3600, id="hourly", version=4)
    store.register_node("worker-a", jobs=[("ship", 4)], ttl=3600)
    tab.goto("/")
    panel = tab.locator("#unserved")
    expect(panel).to_be_visible()
    hostile = panel.locator(f'li[data-job="{HOSTILE}"]')
    expect(hostile).to_have_text(f"{HOSTILE}: 2 due executions, no live worker serves this job")
    expect(panel.locator('li[data-job="ship"][data-version="5"]')).to_contain_text(
        "1 due execution pinned to version 5, which no live worker serves"
    )
    expect(panel.locator("li[data-schedules]")).to_contain_text(
        "1 active schedule, no scheduler running"
    )
    # The name links to its waiting executions, and reached the page as text.
    hostile.get_by_role("link", name=HOSTILE).click()
    expect(tab.locator("#executions tr")).to_have_count(2)
    assert tab.locator("img").count() == 0
    # Once live processes serve all of it, the next poll takes the warning away.
    store.register_node("worker-b", jobs=[(HOSTILE, 1), ("ship", 5)], ttl=3600)
    store.register_node("materializer", kind="scheduler", ttl=3600)
    expect(panel).to_be_hidden()
    assert trouble.dialogs == []
    assert trouble.errors == []

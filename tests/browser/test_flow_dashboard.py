"""The dashboard's Queues & limits view in a real browser (Debian's chromium, Playwright).

Limits and pauses are set through the store; the page must list them, a click on
Pause or Resume must change the store (audited under the signed-in token's name),
a read-only token must not be able to, and a hostile queue name must reach the
screen as text. The server, browser and page fixtures are the dashboard test's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from fencepost.api.auth import Auth, Principal, Scope
from fencepost.store.base import Store
from tests.browser import test_dashboard_browser as dashboard
from tests.browser.test_dashboard_browser import HOSTILE, PATIENCE_MS, PageTrouble

pytestmark = pytest.mark.browser

# The dashboard test's fixtures: Debian's chromium, a SQLite store, a uvicorn server over
# it (auth off unless a test parametrizes ``auth``) and a page that records its troubles.
browser = dashboard.browser
store = dashboard.store
auth = dashboard.auth
base_url = dashboard.base_url
page = dashboard.page

ADMIN_TOKEN = "flow-admin-token-0123456789"
READ_TOKEN = "flow-viewer-token-0123456789"
TOKENS = Auth(
    {
        ADMIN_TOKEN: Principal(name="alice", scopes=frozenset({Scope.ADMIN})),
        READ_TOKEN: Principal(name="viewer", scopes=frozenset({Scope.READ})),
    }
)


def seed(store: Store) -> None:
    """Two limits (one on the hostile queue), executions in three queues, and one
    execution the paused queue ``batch`` held until it was resumed (throttled)."""
    store.set_limit("job:mail", rate="50/s", burst=5, concurrency=3, per_key=True, actor="seed")
    store.set_limit(f"queue:{HOSTILE}", concurrency=2, actor="seed")
    store.submit_many([{"job": "mail", "queue": "emails"} for _ in range(2)])
    store.submit("send", queue=HOSTILE)
    store.pause_queue("batch", actor="seed")
    store.submit("nightly", queue="batch")
    store.resume_queue("batch", actor="seed")


def sign_in(tab: Page, token: str) -> None:
    tab.goto("/#/queues")
    tab.fill("#token", token)
    tab.get_by_role("button", name="Sign in").click()


@pytest.mark.parametrize("auth", [TOKENS])
def test_limits_and_queues_are_listed_and_a_click_pauses_and_resumes(
    page: tuple[Page, PageTrouble], store: Store
) -> None:
    tab, trouble = page
    seed(store)
    sign_in(tab, ADMIN_TOKEN)
    expect(tab.locator("#view-queues")).to_be_visible()
    expect(tab.locator("nav a.current")).to_have_text("Queues & limits")

    mail = tab.locator('#limits tr[data-scope="job:mail"]')
    expect(mail.locator("td.rate")).to_have_text("50/s")
    expect(mail.locator("td.burst")).to_have_text("5")
    expect(mail.locator("td.concurrency")).to_have_text("3")
    expect(mail.locator("td.per-key")).to_have_text("yes")
    expect(mail.locator("td.source")).to_have_text("operator")
    expect(mail.locator("td.updated-by")).to_have_text("seed")
    hostile_limit = tab.locator("#limits tr").nth(1)
    expect(hostile_limit.locator("td.scope")).to_have_text(f"queue:{HOSTILE}")
    expect(hostile_limit.locator("td.rate")).to_have_text("–")
    expect(tab.locator("#limits tr")).to_have_count(2)  # batch's pause is no limit

    queues = tab.locator("#queues tr")
    expect(queues).to_have_count(3)  # by name: the hostile one sorts first
    hostile = queues.nth(0)
    expect(hostile).to_have_attribute("data-queue", HOSTILE)
    expect(hostile.locator("td.queue")).to_have_text(HOSTILE)
    expect(hostile.locator("td.limit")).to_have_text("2 at once")
    expect(hostile.locator("td.waiting")).to_have_text("1")
    batch = tab.locator('#queues tr[data-queue="batch"]')
    expect(batch.locator("td.throttled")).to_contain_text("1 (held")
    expect(tab.locator('#throttled tr[data-scope="queue:batch"] td.count')).to_have_text("1")
    expect(tab.locator("#figures")).to_contain_text("throttled 1")

    emails = tab.locator('#queues tr[data-queue="emails"]')
    expect(emails.locator("td.status")).to_have_text("active")
    expect(emails.locator("td.waiting")).to_have_text("2")
    emails.get_by_role("button", name="Pause").click()  # asks first
    expect(emails.get_by_role("button", name="Confirm pause")).to_be_visible()
    assert store.paused_queues() == []
    emails.get_by_role("button", name="Confirm pause").click()
    expect(emails.locator("td.status")).to_have_text("paused")
    expect(emails.locator("td.paused-by")).to_have_text("alice")
    [paused] = store.paused_queues()
    assert (paused.scope, paused.updated_by) == ("queue:emails", "alice")
    assert store.claim("w", queues=["emails"]) == []
    emails.get_by_role("button", name="Resume").click()
    expect(emails.get_by_role("button", name="Pause")).to_be_visible()
    expect(emails.locator("td.status")).to_have_text("active")
    assert store.paused_queues() == []
    assert [c.action for c in store.flow_changes(limit=2)] == ["resume", "pause"]
    assert {c.actor for c in store.flow_changes(limit=2)} == {"alice"}

    # The hostile name goes back to the service intact, as one path segment.
    hostile.get_by_role("button", name="Pause").click()
    hostile.get_by_role("button", name="Confirm pause").click()
    expect(hostile.locator("td.status")).to_have_text("paused")
    assert [q.scope for q in store.paused_queues()] == [f"queue:{HOSTILE}"]
    assert store.paused_queues()[0].concurrency == 2, "its limit stays"
    # Its name links to its executions.
    hostile.get_by_role("link", name=HOSTILE).click()
    expect(tab.locator("#executions tr")).to_have_count(1)
    expect(tab.locator("#executions td.queue")).to_have_text(HOSTILE)

    assert tab.locator("img").count() == 0  # rendered as text: no element made from it
    assert trouble.dialogs == []
    assert trouble.errors == []


@pytest.mark.parametrize("auth", [TOKENS])
def test_a_read_only_token_cannot_pause(page: tuple[Page, PageTrouble], store: Store) -> None:
    tab, trouble = page
    seed(store)
    store.pause_queue("batch", actor="ops")
    sign_in(tab, READ_TOKEN)
    emails = tab.locator('#queues tr[data-queue="emails"]')
    expect(emails.locator("td.status")).to_have_text("active")
    batch = tab.locator('#queues tr[data-queue="batch"]')
    expect(batch.locator("td.paused-by")).to_have_text("ops")
    # No control at all for a token that could not use it.
    expect(tab.locator("#queues button")).to_have_count(0)
    assert [q.scope for q in store.paused_queues()] == ["queue:batch"]
    assert trouble.dialogs == []
    assert trouble.errors == []


def test_no_limits_and_no_queues_say_so_and_fit_a_phone(
    browser: Browser, base_url: str, store: Store, tmp_path: Path
) -> None:
    tab = browser.new_page(base_url=base_url, viewport={"width": 390, "height": 900})
    trouble = PageTrouble(tab)
    tab.goto("/#/queues")
    expect(tab.locator("#limits")).to_have_text("No limits.", timeout=PATIENCE_MS)
    expect(tab.locator("#queues")).to_have_text("No queues yet.")
    expect(tab.locator("#throttled")).to_have_text("Nothing was throttled.")
    seed(store)
    store.set_limit("job:" + "a-very-long-job-name-" * 8, rate="3000/min", concurrency=10)
    expect(tab.locator("#queues tr")).to_have_count(3, timeout=PATIENCE_MS)  # live refresh
    expect(tab.locator("#limits tr")).to_have_count(3)
    overflow = tab.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    tab.screenshot(path=str(tmp_path / "queues-390.png"), full_page=True)
    assert overflow <= 0, f"the queues view is {overflow} px wider than the screen"
    tab.close()
    assert trouble.errors == []

"""The dashboard's overview figures name the error classes as ``stats`` does, in a real
browser: a refused heartbeat is a renewal failure, a refused completion a stale
completion, never both lumped as "stale completions refused". The server, browser and
page fixtures are the dashboard test's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from playwright.sync_api import Page, expect

from fencepost.domain.errors import StaleLease
from fencepost.store.base import Store
from tests.browser import test_dashboard_browser as dashboard
from tests.browser.test_dashboard_browser import PageTrouble

pytestmark = pytest.mark.browser

browser = dashboard.browser
store = dashboard.store
auth = dashboard.auth
base_url = dashboard.base_url
page = dashboard.page


def test_the_overview_names_each_error_class(page: tuple[Page, PageTrouble], store: Store) -> None:
    tab, trouble = page
    store.submit("work")
    (lease,) = store.claim("w", ttl=600)
    forged = replace(lease, epoch=99)  # a worker whose lease was replaced
    with pytest.raises(StaleLease):
        store.heartbeat(forged)
    for _ in range(2):
        with pytest.raises(StaleLease):
            store.complete(forged, "late")
    store.fail(lease, "boom", retry_in=600)
    tab.goto("/")
    figures = tab.locator("#figures")
    expect(figures).to_contain_text("renewal_failed 1")
    expect(figures).to_contain_text("stale_completion_refused 2")
    expect(figures).to_contain_text("handler_failed 1")
    expect(figures).to_contain_text("timed_out 0")
    expect(figures).to_contain_text("late_claim 0")
    expect(figures).to_contain_text("throttled 0")
    expect(figures).not_to_contain_text("stale completions refused")
    assert trouble.errors == []

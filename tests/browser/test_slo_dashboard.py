"""The dashboard's SLO view in a real browser (Debian's chromium, Playwright).

The history is written ten minutes in the past, through a second store on the same
SQLite file with a ManualClock (the server's store keeps the real clock, so the
report is taken now): executions of known verdicts. The page must show the figures
the report holds, each in its place, and link each offender to its execution. The
server, browser and page fixtures are the dashboard test's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

import fencepost
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.browser import test_dashboard_browser as dashboard
from tests.browser.test_dashboard_browser import HOSTILE, PATIENCE_MS, PageTrouble

pytestmark = pytest.mark.browser

browser = dashboard.browser
store = dashboard.store
auth = dashboard.auth
base_url = dashboard.base_url
page = dashboard.page


def in_the_past(tmp_path: Path) -> tuple[Store, ManualClock, datetime]:
    """A store on the dashboard's SQLite file whose clock stands ten minutes ago."""
    base = (datetime.now(UTC) - timedelta(minutes=10)).replace(microsecond=0)
    clock = ManualClock(base)
    return fencepost.connect(f"sqlite:///{tmp_path / 'dashboard.db'}", clock=clock), clock, base


def prepare(tmp_path: Path) -> tuple[dict[str, str], datetime]:
    """Executions planned at ``base`` (ten minutes ago) unless said otherwise:

    * ``a``: claimed 2 s late, completed at 3 s: meets both objectives;
    * ``b``: claimed 30 s late, completed at 40 s: a claim miss (``late_claim``);
    * the hostile name: never claimed: misses both (``late_claim``);
    * ``e``: claimed at 1 s, failed, its retry an hour away: a finish miss
      (``handler_failed``);
    * ``d``: submitted for an hour before ``base``: a backfill, excluded.
    """
    past, clock, base = in_the_past(tmp_path)
    with past:

        def at(seconds: float) -> None:
            clock.set(base + timedelta(seconds=seconds))

        ids = {job: past.submit(job).id for job in ("a", "b", HOSTILE, "e")}
        ids["d"] = past.submit("d", execute_at=base - timedelta(hours=1)).id
        at(1)
        (e,) = past.claim("w", jobs=["e"], ttl=60)
        at(2)
        (a,) = past.claim("w", jobs=["a"], ttl=60)
        past.fail(e, "boom", retry_in=3600)
        at(3)
        past.complete(a, "ok")
        at(30)
        (b,) = past.claim("w", jobs=["b"], ttl=60)
        at(40)
        past.complete(b, "ok")
    return ids, base


def cells(row: Locator, **expected: str) -> None:
    """Each ``td.<name>`` of ``row`` has the text given for it."""
    for name, text in expected.items():
        expect(row.locator(f"td.{name.replace('_', '-')}")).to_have_text(text)


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_the_slo_view_shows_the_reports_figures_and_links_its_offenders(
    page: tuple[Page, PageTrouble], store: Store, tmp_path: Path
) -> None:
    tab, trouble = page
    ids, base = prepare(tmp_path)
    tab.goto("/#/executions")
    expect(tab.locator("#executions tr")).to_have_count(5)
    tab.get_by_role("link", name="SLO").click()
    expect(tab.locator("#view-slo")).to_be_visible()
    expect(tab.locator("nav a.current")).to_have_text("SLO")

    claim = tab.locator('#slo-objectives tr[data-objective="claim"]')
    cells(claim, met="2", total="4", share="50.00%", target="99.00%", verdict="MISSED")
    cells(claim, budget="0.04", consumed="2", remaining="-1.96", burn_1h="50.00", burn_6h="50.00")
    expect(claim.locator("td.remaining")).to_have_class("num remaining overspent")
    expect(claim.locator("td.burn-1h")).to_have_attribute(
        "title", "2 of 4 decided in the last 1 h missed"
    )
    finish = tab.locator('#slo-objectives tr[data-objective="finish"]')
    cells(finish, met="2", total="4", share="50.00%", target="99.90%", verdict="MISSED")
    cells(finish, budget="0.004", consumed="2", remaining="-2", burn_1h="500.00")
    expect(tab.locator("#slo-objectives .flag.missed")).to_have_count(2)

    late = tab.locator('#slo-misses tr[data-class="late_claim"]')
    cells(late, claim="2", finish="1")
    cells(tab.locator('#slo-misses tr[data-class="handler_failed"]'), claim="–", finish="1")
    cells(tab.locator('#slo-misses tr[data-class="timed_out"]'), claim="–", finish="0")
    expect(tab.locator("#slo-misses tr")).to_have_count(6)
    cells(tab.locator('#slo-excluded tr[data-reason="backfill"]'), claim="1", finish="1")
    cells(tab.locator('#slo-excluded tr[data-reason="throttled"]'), claim="0", finish="0")
    expect(tab.locator("#slo-claim-within")).to_have_text("10 s")
    expect(tab.locator("#slo-finish-within")).to_have_text("5 min")
    expect(tab.locator("#slo-window")).to_have_text("30 d")
    expect(tab.locator("#slo-rolled-up")).to_have_text("0")

    worst = tab.locator("#slo-worst tr")
    expect(worst).to_have_count(5)
    order = [ids[name] for name in ("d", HOSTILE, "b", "a", "e")]
    assert [worst.nth(i).get_attribute("data-id") for i in range(5)] == order
    verdicts = ["backfill", "late_claim", "late_claim", "met", "met"]
    assert [worst.nth(i).locator("td.verdict").inner_text() for i in range(5)] == verdicts
    b = tab.locator(f'#slo-worst tr[data-id="{ids["b"]}"]')
    expect(b.locator("td.lateness")).to_have_text("30 s")
    expect(b.locator("td.time").nth(0)).to_have_attribute("title", iso(base))
    expect(b.locator("td.time").nth(1)).to_have_attribute(
        "title", iso(base + timedelta(seconds=30))
    )
    hostile = tab.locator(f'#slo-worst tr[data-id="{ids[HOSTILE]}"]')
    expect(hostile.locator("td.job")).to_have_text(HOSTILE)

    # An offender's id links to its execution.
    hostile.get_by_role("link").click()
    expect(tab.locator("#view-execution")).to_be_visible()
    expect(tab.locator("#execution-id")).to_have_text(ids[HOSTILE])
    assert tab.locator("img").count() == 0  # the hostile name stayed text
    assert trouble.dialogs == []
    assert trouble.errors == []


def test_met_objectives_and_an_empty_window_fit_a_phone(
    browser: Browser, base_url: str, store: Store, tmp_path: Path
) -> None:
    tab = browser.new_page(base_url=base_url, viewport={"width": 390, "height": 900})
    trouble = PageTrouble(tab)
    tab.goto("/#/slo")
    claim = tab.locator('#slo-objectives tr[data-objective="claim"]')
    expect(claim.locator("td.verdict")).to_have_text("no data", timeout=PATIENCE_MS)
    expect(claim.locator("td.share")).to_have_text("–")
    expect(claim.locator("td.burn-1h")).to_have_text("–")
    expect(tab.locator("#slo-worst")).to_have_text("No executions planned in the window.")

    past, clock, base = in_the_past(tmp_path)
    with past:
        done = past.submit("on-time").id
        clock.set(base + timedelta(seconds=1))
        (lease,) = past.claim("w", ttl=60)
        clock.set(base + timedelta(seconds=2))
        past.complete(lease, "ok")
    # Away and back: the view reads the report again when it is opened.
    tab.goto("/#/jobs")
    expect(tab.locator("#view-jobs")).to_be_visible()
    tab.goto("/#/slo")
    for objective in ("claim", "finish"):
        row = tab.locator(f'#slo-objectives tr[data-objective="{objective}"]')
        cells(row, met="1", total="1", share="100.00%", verdict="MET", consumed="0", burn_1h="0.00")
    expect(tab.locator("#slo-objectives .flag.met")).to_have_count(2)
    expect(tab.locator(f'#slo-worst tr[data-id="{done}"] td.verdict')).to_have_text("met")
    overflow = tab.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    tab.screenshot(path=str(tmp_path / "slo-390.png"), full_page=True)
    assert overflow <= 0, f"the SLO view is {overflow} px wider than the screen"
    tab.close()
    assert trouble.errors == []

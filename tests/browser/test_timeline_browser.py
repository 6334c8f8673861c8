"""The execution timeline drawn in a real browser (Debian's chromium, Playwright).

Real executions on a real store (SQLite, then PostgreSQL), written with a ManualClock:
one whose lease (epoch 1, a hostile owner) expired and was taken over (epoch 2), the
old owner's completion refused; one running its second attempt after a failure, with
a pause requested. A uvicorn server serves them. The page, on the server's origin and
under the dashboard's Content-Security-Policy, fetches ``/executions/{id}/timeline``,
imports ``/static/js/timeline.js`` and links ``/static/css/timeline.css``, then draws:
two lease bars labelled with their epochs and owners, the refused completion inside
the epoch-1 row's drawn extent (after its bar, on its after-life) and not on epoch 2's,
the hostile owner as text, and a drawing that fits a 390 px wide screen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn
from playwright.sync_api import Browser, Page, Route

from fencepost.api import create_app
from fencepost.api.dashboard import CONTENT_SECURITY_POLICY
from fencepost.domain.errors import StaleLease
from fencepost.domain.states import CommandKind
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.browser import test_dashboard_browser as dashboard
from tests.browser.test_dashboard_browser import HOSTILE, PATIENCE_MS, STARTUP_SECONDS, PageTrouble

pytestmark = pytest.mark.browser

browser = dashboard.browser

#: An empty page on the server's origin (answered by the test, not the server), under the
#: dashboard's own CSP: an inline style the drawing set would be refused, and reported.
BLANK = "/timeline-test-page"

#: Draws the timeline of one execution into the page and returns the figures checked.
DRAW = """
async (id) => {
  if (!document.querySelector("link[data-timeline]")) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = "/static/css/timeline.css";
    link.dataset.timeline = "";
    const loaded = new Promise((resolve, reject) => {
      link.onload = resolve;
      link.onerror = reject;
    });
    document.head.append(link);
    await loaded;
  }
  const response = await fetch(`/executions/${id}/timeline`);
  const model = await response.json();
  const { drawTimeline } = await import("/static/js/timeline.js");
  const drawn = drawTimeline(model);
  drawn.id = `t-${id}`;
  document.body.append(drawn);
  const box = (node) => {
    const r = node.getBoundingClientRect();
    return { left: r.left, right: r.right, top: r.top, bottom: r.bottom, height: r.height };
  };
  const leases = [...drawn.querySelectorAll("g.tl-lease")].map((row) => ({
    epoch: row.dataset.epoch,
    owner: row.dataset.owner,
    label: row.querySelector("text.tl-label").textContent,
    labelBox: box(row.querySelector("text.tl-label")),
    bar: box(row.querySelector("rect.tl-bar")),
    afterlife: (after => after && box(after))(row.querySelector("rect.tl-afterlife")),
    refused: [...row.querySelectorAll("g.tl-refused")].map((mark) => ({
      box: box(mark.querySelector("path")),
      title: mark.querySelector("title").textContent,
      stroke: getComputedStyle(mark.querySelector("path")).stroke,
    })),
    running: row.classList.contains("tl-running"),
    hatches: row.querySelectorAll("line.tl-hatch").length,
  }));
  return {
    status: response.status,
    model,
    isSvg: drawn instanceof SVGSVGElement,
    width: box(drawn).right - box(drawn).left,
    screen: document.documentElement.clientWidth,
    styled: drawn.querySelectorAll("[style]").length,
    leases,
    waits: [...drawn.querySelectorAll("rect.tl-wait")].map((w) => w.getAttribute("class")),
    marks: [...drawn.querySelectorAll("g.tl-mark")].map((m) => m.getAttribute("class")),
    text: drawn.textContent,
  };
}
"""


def lease_taken_over(store: Store, clock: ManualClock) -> str:
    """The lease-timeline example with a hostile first owner (t in seconds)."""
    execution = store.submit("job")
    clock.set(10)
    (old,) = store.claim(HOSTILE, ttl=5)
    clock.set(15)  # the old lease ends: live strictly before lease_until
    (new,) = store.claim("worker-b", ttl=5)
    clock.set(16)
    with pytest.raises(StaleLease):
        store.complete(old, "stale output")
    store.complete(new, "output")
    return execution.id


def running_again(store: Store, clock: ManualClock) -> str:
    """Failed once at 22, retried at 30, running; a pause asked at 31."""
    execution = store.submit("busy")
    clock.set(20)
    (first,) = store.claim("worker-c", jobs=["busy"], ttl=60)
    clock.set(22)
    store.fail(first, "boom", retry_in=5)
    clock.set(30)
    (store.claim("worker-c", jobs=["busy"], ttl=60))
    clock.set(31)
    store.request(execution.id, CommandKind.PAUSE, actor="alice")
    clock.set(35)
    return execution.id


@pytest.fixture
def served(
    backend: str, store_factory: Callable[..., Store]
) -> Iterator[tuple[str, Store, ManualClock]]:
    """A uvicorn server on a free loopback port over a fresh store with a pinned clock."""
    clock = ManualClock()
    store = store_factory(clock)
    server = uvicorn.Server(
        uvicorn.Config(create_app(store), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="timeline-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:  # polled: uvicorn offers no event to wait on
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the uvicorn server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", store, clock
    finally:
        server.should_exit = True
        thread.join()


@pytest.fixture
def phone(browser: Browser, served: tuple[str, Store, ManualClock]) -> Iterator[Page]:
    """A 390 px wide page on the server's origin, under the dashboard's CSP."""
    base_url = served[0]
    context = browser.new_context(base_url=base_url, viewport={"width": 390, "height": 800})
    tab = context.new_page()
    tab.set_default_timeout(PATIENCE_MS)

    def blank(route: Route) -> None:
        route.fulfill(
            status=200,
            content_type="text/html; charset=utf-8",
            headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY},
            body="<!doctype html><html><head><title>timeline</title></head><body></body></html>",
        )

    tab.route(f"**{BLANK}", blank)
    try:
        yield tab
    finally:
        context.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_a_takeover_is_drawn_with_the_refused_completion_on_the_old_lease(
    phone: Page, served: tuple[str, Store, ManualClock]
) -> None:
    _, store, clock = served
    taken_over = lease_taken_over(store, clock)
    busy = running_again(store, clock)
    trouble = PageTrouble(phone)
    phone.goto(BLANK)

    drawn: dict[str, Any] = phone.evaluate(DRAW, taken_over)

    assert drawn["status"] == 200
    assert drawn["isSvg"]
    assert [(x["epoch"], x["owner"]) for x in drawn["leases"]] == [
        ("1", HOSTILE),
        ("2", "worker-b"),
    ]
    old, new = drawn["leases"]
    assert old["label"] == f"epoch 1 · {HOSTILE} — taken over"
    assert new["label"] == "epoch 2 · worker-b — succeeded"
    [refused] = old["refused"]
    assert new["refused"] == [], "the stale completion carried epoch 1, not the new lease's"
    assert refused["title"] == (
        f"stale complete refused at 2026-01-01T00:00:16Z from owner {HOSTILE}"
    )
    mark = refused["box"]
    middle = (mark["left"] + mark["right"]) / 2
    # After the bar of epoch 1 (its lease had ended at 15), on its after-life up to 16,
    # within epoch 1's row: the drawn extent of the old lease, not the new one's row.
    assert old["bar"]["left"] < old["bar"]["right"] <= middle
    assert old["afterlife"] is not None
    assert old["bar"]["right"] - 1 <= old["afterlife"]["left"] <= middle
    assert middle <= old["afterlife"]["right"] + 1
    assert old["bar"]["top"] <= (mark["top"] + mark["bottom"]) / 2 <= old["bar"]["bottom"]
    assert mark["bottom"] < new["labelBox"]["top"]
    assert refused["stroke"] == "rgb(197, 48, 48)"  # timeline.css's rule, by class
    # The epoch-2 bar starts where epoch 1's lease ended: the takeover at 15.
    assert abs(new["bar"]["left"] - old["bar"]["right"]) < 1

    # Readable on a phone: the drawing fits the screen, its labels are legible and inside.
    assert 300 < drawn["width"] <= drawn["screen"] <= 390
    for lease in drawn["leases"]:
        assert lease["labelBox"]["height"] >= 8
        assert lease["labelBox"]["right"] <= drawn["width"] + 1

    # The running one: hatched open end, the retry delay, the pause requested.
    other: dict[str, Any] = phone.evaluate(DRAW, busy)
    first, second = other["leases"]
    assert (first["label"], first["running"]) == ("epoch 1 · worker-c — failed, retrying", False)
    assert second["running"]
    assert second["hatches"] > 0
    assert "tl-wait tl-wait-retry-delay" in other["waits"]
    assert "tl-wait tl-wait-paused tl-open-end" in other["waits"]
    assert "tl-mark tl-mark-pause-requested" in other["marks"]

    assert drawn["styled"] == other["styled"] == 0
    assert HOSTILE in drawn["text"]
    assert phone.locator("img").count() == 0  # the hostile owner stayed text
    assert trouble.dialogs == []
    assert trouble.errors == []

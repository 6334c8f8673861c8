"""The console's find, understand and act-on-many views in a real browser, on each SQL store.

A uvicorn server with auth on (an admin token "ops", a read-only one "viewer") serves a
SQLite or PostgreSQL store whose clock is pinned half an hour before the real now (so
the page's "last hour" is the store's too, and a lease can be let expire without
waiting). Each test drives the page as an operator would and checks the store:

* a URL holding filters restores the form, and the list and counts per state match the
  store's own ``query`` and ``count_by_state``; a count narrows to its state; a quick
  pick and Reset work; "select all N matching" then a bulk replay (dry run, confirm,
  batches of 500 chained by cursor) replays exactly the 500 dead letters of one job
  among another job's, each audited as the signed-in token;
* a read-only token gets no checkboxes, bulk bar or action buttons, and a POST made
  from the page's own context is refused (403);
* an execution taken over, with the old owner's completion refused, shows its timeline
  (two lease bars), attempts, folded inputs and audit trail; one that succeeded after a
  failed attempt states its success and keeps the failure in its attempts only;
* at 1,400 and 390 px no view overflows sideways, and hostile filter values give an
  empty list or the API's 422 in the banner, never a broken page.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import uvicorn
from playwright.sync_api import Browser, Page, Request, Route, expect

from fencepost.api import create_app
from fencepost.api.auth import Auth, Principal, Scope
from fencepost.domain.errors import StaleLease
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from tests.browser import test_dashboard_browser as dashboard
from tests.browser.test_dashboard_browser import HOSTILE, PATIENCE_MS, STARTUP_SECONDS, PageTrouble

pytestmark = pytest.mark.browser

browser = dashboard.browser

SQL_BACKENDS = ["sqlite", "postgres"]
ADMIN_TOKEN = "console-find-admin-token-0123456789"
READ_TOKEN = "console-find-read-token-0123456789"
TOKENS = {
    ADMIN_TOKEN: Principal(name="ops", scopes=frozenset({Scope.ADMIN})),
    READ_TOKEN: Principal(name="viewer", scopes=frozenset({Scope.READ})),
}
#: A failure whose first line is its message (as fencepost stores them), with a traceback.
TRACEBACK = (
    "ValueError: no rows for 100% of days\n"
    "Traceback (most recent call last):\n"
    '  File "jobs.py", line 12, in nightly_report\n'
    "    rows = load_rows(day)\n"
    "ValueError: no rows for 100% of days\n"
)


@pytest.fixture
def served(
    backend: str, store_factory: Callable[..., Store]
) -> Iterator[tuple[str, Store, ManualClock]]:
    """A server with auth on over a fresh store whose clock reads half an hour ago."""
    clock = ManualClock(datetime.now(UTC) - timedelta(minutes=30))
    store = store_factory(clock)
    app = create_app(store, auth=Auth(TOKENS))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, name="console-find-server", daemon=True)
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
def tab(
    browser: Browser, served: tuple[str, Store, ManualClock]
) -> Iterator[tuple[Page, PageTrouble]]:
    context = browser.new_context(base_url=served[0], viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PATIENCE_MS)
    expect.set_options(timeout=PATIENCE_MS)
    trouble = PageTrouble(page)
    try:
        yield page, trouble
    finally:
        context.close()


def sign_in(page: Page, token: str, name: str) -> None:
    page.goto("/")
    page.fill("#token", token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text(f"signed in as {name}")


def select_all_matching(page: Page, view: str, count: int, trouble: PageTrouble) -> None:
    """Tick the page's box of ``view`` and take "Select all ``count`` matching this filter".

    Should the button not come, the failure says what the view showed instead (its
    selection, its select-all button, its rows and counts, the page's errors): one run
    under load once waited in vain for it.
    """
    page.locator(f"#{view}-select-page").check()
    button = page.get_by_role("button", name=f"Select all {count} matching this filter")
    try:
        expect(button).to_be_visible()
    except AssertionError as exc:
        state = page.evaluate(
            """(view) => ({
                url: location.href,
                pageBox: document.getElementById(`${view}-select-page`)?.checked,
                selection: document.getElementById(`${view}-selection`)?.textContent,
                selectAll: [document.getElementById(`${view}-select-all`)?.hidden,
                            document.getElementById(`${view}-select-all`)?.textContent],
                rows: document.querySelectorAll(`#${view} tr[data-id]`).length,
                ticked: document.querySelectorAll(`#${view} input.pick:checked`).length,
                counts: document.getElementById(`${view}-counts`)?.textContent,
                banner: document.getElementById("banner-text")?.textContent,
            })""",
            view,
        )
        errors = trouble.errors
        raise AssertionError(f"no select-all button: {state}; page errors {errors}") from exc
    button.click()


def dead_letters(store: Store, job: str, n: int, error: str) -> list[str]:
    """``n`` FAILED executions of ``job`` (one attempt each, failed for good)."""
    ids = [e.id for e in store.submit_many([{"job": job, "max_attempts": 1}] * n)]
    leases = store.claim("seeder", ids=ids, limit=n, ttl=3600)
    assert len(leases) == n
    for lease in leases:
        store.fail(lease, error, retryable=False)
    return ids


def shown_ids(page: Page) -> list[str]:
    rows = page.locator("#executions tr[data-id]")
    ids: list[str] = rows.evaluate_all("rows => rows.map((row) => row.dataset.id)")
    return ids


def expect_list_matches(page: Page, store: Store, filters: dict[str, Any]) -> None:
    """The list shows the store's newest 50 for ``filters``, and the counts its counts."""
    counts = store.count_by_state(**filters)
    for state, n in counts.items():
        expect(
            page.locator(f'#executions-counts li[data-state="{state.value}"] .count')
        ).to_have_text(str(n))
    expect(page.locator("#executions-total")).to_have_text(f"{sum(counts.values())} matching")
    expected = [e.id for e in store.query(**filters, newest_first=True, limit=50).items]
    expect(page.locator("#executions tr[data-id]")).to_have_count(len(expected))
    assert shown_ids(page) == expected


def only_status_errors(trouble: PageTrouble, *statuses: int) -> None:
    """The page reported nothing but the refused requests the test made on purpose."""
    assert trouble.dialogs == []
    unexpected = [e for e in trouble.errors if not any(f"status of {s}" in e for s in statuses)]
    assert unexpected == []


@pytest.mark.parametrize("backend", SQL_BACKENDS, indirect=True)
def test_filters_round_trip_through_the_url_then_replay_all_that_match(
    tab: tuple[Page, PageTrouble], served: tuple[str, Store, ManualClock]
) -> None:
    page, trouble = tab
    _, store, clock = served
    emails = dead_letters(store, "email", 30, "SMTP 550: mailbox full")
    early = store.submit("report").id  # before the boundary: the created range leaves it out
    clock.advance(60)
    boundary = clock.now()
    reports = dead_letters(store, "report", 500, TRACEBACK)
    waiting = [store.submit("report").id for _ in range(3)]
    clock.advance(1)
    sign_in(page, ADMIN_TOKEN, "ops")

    # (c) A URL with filters: the form shows them as typed, the list and counts are the store's.
    wide = {
        "state": ["FAILED", "SCHEDULED"],
        "job": "report",
        "created_after": boundary.isoformat(),
    }
    page.goto("/#/executions?" + urlencode(wide, doseq=True))
    expect_list_matches(
        page,
        store,
        {"state": [State.FAILED, State.SCHEDULED], "job": "report", "created_after": boundary},
    )
    expect(page.locator("#filter-job")).to_have_value("report")
    expect(page.locator("#filter-created_after")).to_have_value(boundary.isoformat())
    expect(page.locator("#filter-form details.more-filters")).to_have_attribute("open", "")
    for state in State:
        box = page.locator(f"#filter-state-{state.value}")
        if state.value in wide["state"]:
            expect(box).to_be_checked()
        else:
            expect(box).not_to_be_checked()
    assert page.locator("#executions-counts .count").all_inner_texts() == [
        "3",
        "0",
        "0",
        "0",
        "500",
        "0",
        "0",
    ]

    # Every other filter, in one URL: outcome, bucket, error text with a literal "%".
    bucket = store.get(reports[0]).bucket
    narrow = {
        "job": "report",
        "outcome": "failed",
        "bucket": str(bucket),
        "error": "100% OF",
        "finished_before": (clock.now() + timedelta(seconds=1)).isoformat(),
        "queue": "default",
    }
    page.goto("/#/executions?" + urlencode(narrow))
    expect_list_matches(
        page,
        store,
        {
            "job": "report",
            "outcome": "failed",
            "bucket": bucket,
            "error": "100% OF",
            "finished_before": clock.now() + timedelta(seconds=1),
            "queue": "default",
        },
    )
    expect(page.locator("#filter-outcome")).to_have_value("failed")
    expect(page.locator("#filter-bucket")).to_have_value(str(bucket))
    expect(page.locator("#filter-error")).to_have_value("100% OF")
    assert len(shown_ids(page)) >= 1

    # A count narrows to its state; a quick pick sets a range; Reset clears everything.
    page.goto("/#/executions?" + urlencode(wide, doseq=True))
    expect(page.locator("#executions tr[data-id]")).to_have_count(50)
    page.locator('#executions-counts li[data-state="SCHEDULED"] a').click()
    expect(page.locator("#executions tr[data-id]")).to_have_count(3)
    assert sorted(shown_ids(page)) == sorted(waiting)
    expect(page.locator("#filter-state-FAILED")).not_to_be_checked()
    page.get_by_role("button", name="Created in the last hour").click()
    expect(page.locator("#filter-created_after")).to_have_value("1h")
    assert "created_after=1h" in page.url
    assert "state=SCHEDULED" in page.url
    expect(page.locator("#executions tr[data-id]")).to_have_count(4)  # the early one too
    assert sorted(shown_ids(page)) == sorted([*waiting, early])
    page.get_by_role("button", name="Reset").click()
    expect(page.locator("#executions-total")).to_have_text("534 matching")
    expect(page.locator("#filter-job")).to_have_value("")
    expect(page.locator("#filter-state-SCHEDULED")).not_to_be_checked()

    # (a) Replay all that match "job = report": 500 dead letters and 4 waiting ones.
    actions: list[dict[str, Any]] = []

    def record(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/executions/actions"):
            actions.append(request.post_data_json or {})

    page.on("request", record)
    page.fill("#filter-job", "report")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#executions-total")).to_have_text("504 matching")
    bar = page.locator("#executions-bulk")
    expect(bar).to_be_hidden()
    page.locator("#executions-select-page").check()
    expect(page.locator("#executions-selection")).to_have_text("50 selected.")
    page.get_by_role("button", name="Select all 504 matching this filter").click()
    expect(page.locator("#executions-selection")).to_have_text(
        "All 504 executions matching this filter are selected."
    )
    bar.get_by_role("button", name="Replay", exact=True).click()
    expect(bar.locator(".bulk-dry-run")).to_have_text("500 will be replayed, 4 skipped.")
    expect(bar.locator(".bulk-preview tbody tr")).to_have_count(20)
    assert store.count_by_state(job="report")[State.FAILED] == 500  # a dry run wrote nothing
    bar.get_by_role("button", name="Confirm replay of 500").click()
    expect(page.locator("#notice")).to_have_text("Replayed 500, skipped 4.")
    expect(bar).to_be_hidden()
    expect(page.locator('#executions-counts li[data-state="FAILED"] .count')).to_have_text("0")

    counts = store.count_by_state(job="report")
    assert (counts[State.SCHEDULED], counts[State.FAILED]) == (504, 0)
    assert store.count_by_state(job="email")[State.FAILED] == 30
    for execution_id in reports:
        last = store.transitions(execution_id)[-1]
        assert (last.event, last.actor) == (Event.REPLAYED, "ops")
    for execution_id in [*waiting, early, *emails]:
        assert Event.REPLAYED not in [t.event for t in store.transitions(execution_id)]
    # One dry run, then batches of 500 in id order, each after the previous one's cursor.
    dry, *batches = actions
    assert dry == {"action": "replay", "filter": {"job": "report"}, "dry_run": True, "limit": 500}
    assert batches
    assert all(b["limit"] == 500 and "dry_run" not in b for b in batches)
    assert batches[0]["cursor"] is None
    cursors = [b["cursor"] for b in batches[1:]]
    assert all(cursors)
    assert cursors == sorted(cursors)

    # More than a batch: cancel all 534 (504 waiting now); the second batch of 500 is
    # held back until the page has shown the first one's progress.
    actions.clear()
    held: list[Route] = []

    def hold_the_second_batch(route: Route) -> None:
        if (route.request.post_data_json or {}).get("cursor"):
            held.append(route)
        else:
            route.continue_()

    page.route("**/executions/actions", hold_the_second_batch)
    page.get_by_role("button", name="Reset").click()
    expect(page.locator("#executions-total")).to_have_text("534 matching")
    page.locator("#executions-select-page").check()
    page.get_by_role("button", name="Select all 534 matching this filter").click()
    bar.get_by_role("button", name="Cancel", exact=True).click()
    expect(bar.locator(".bulk-dry-run")).to_have_text("504 will be cancelled, 30 skipped.")
    bar.get_by_role("button", name="Confirm cancel of 504").click()
    expect(page.locator(".bulk-progress-text")).to_have_text("500 done, 0 skipped of 504")
    expect(page.locator("#executions-bulk-progress")).to_have_js_property("value", 500)
    assert len(held) == 1
    held[0].continue_()
    expect(page.locator("#notice")).to_have_text("Cancelled 504, skipped 30.")
    first, second = actions[1:]
    assert (first["cursor"], second["cursor"]) == (None, sorted([*reports, *waiting, early])[499])
    assert store.count_by_state(job="report")[State.CANCELLED] == 504
    assert store.count_by_state(job="email")[State.FAILED] == 30
    assert {store.transitions(i)[-1].actor for i in [*reports, *waiting, early]} == {"ops"}
    only_status_errors(trouble)


@pytest.mark.parametrize("backend", SQL_BACKENDS, indirect=True)
def test_a_read_only_token_sees_no_way_to_act_and_is_refused(
    tab: tuple[Page, PageTrouble], served: tuple[str, Store, ManualClock]
) -> None:
    page, trouble = tab
    _, store, _ = served
    dead = dead_letters(store, "email", 3, "SMTP 550")
    sign_in(page, READ_TOKEN, "viewer")
    page.goto("/#/executions")
    expect(page.locator("#executions tr[data-id]")).to_have_count(3)
    expect(page.locator("#executions-head th")).to_have_count(9)  # no checkbox column
    assert page.locator("input.pick").count() == 0
    expect(page.locator("#executions-bulk-toolbar")).to_be_hidden()
    expect(page.locator("#executions-bulk")).to_be_hidden()
    page.goto(f"/#/executions/{dead[0]}")
    expect(page.locator("#execution-outcome")).to_contain_text("Failed for good on attempt 1 of 1")
    expect(page.locator("#execution-timeline svg")).to_be_visible()
    assert page.locator("#view-execution button").count() == 0
    page.goto("/#/dead-letters")
    expect(page.locator("#dead-letters tr[data-id]")).to_have_count(3)
    expect(page.locator("#dead-letters-total")).to_have_text("3 dead letters match")
    assert page.locator("#dead-letters button").count() == 0
    assert page.locator("input.pick").count() == 0
    expect(page.locator("#dead-letters-replay-all")).to_be_hidden()
    expect(page.locator("#dead-letters-bulk")).to_be_hidden()

    # The page's own credentials (session cookie, CSRF header) cannot act either.
    statuses = page.evaluate(
        """async (ids) => {
            const csrf = document.cookie.split("; ").find((c) => c.startsWith("fencepost_csrf="));
            const post = (body) => fetch("/executions/actions", {
                method: "POST",
                headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf.split("=")[1]},
                body: JSON.stringify(body),
            }).then((r) => r.status);
            return [
                await post({action: "replay", filter: {state: ["FAILED"]}, dry_run: true}),
                await post({action: "replay", filter: {state: ["FAILED"]}}),
                await post({action: "delete", ids}),
            ];
        }""",
        dead,
    )
    assert statuses == [403, 403, 403]
    assert store.count_by_state(job="email")[State.FAILED] == 3
    assert all(Event.REPLAYED not in [t.event for t in store.transitions(i)] for i in dead)
    only_status_errors(trouble, 403)


def taken_over(store: Store, clock: ManualClock) -> str:
    """Claimed by a hostile owner whose lease expired; taken over by worker-b, which
    succeeded; the old owner's late completion refused."""
    execution = store.submit(
        "sync",
        max_attempts=5,
        inputs={"to": HOSTILE, "nested": {"deep": [1, {"leaf": "<b>x</b>"}]}},
    )
    (old,) = store.claim(HOSTILE, ids=[execution.id], ttl=5)
    clock.advance(6)
    (new,) = store.claim("worker-b", ids=[execution.id], ttl=60)
    clock.advance(1)
    with pytest.raises(StaleLease):
        store.complete(old, "stale output")
    store.complete(new, {"synced": 3})
    return execution.id


def succeeded_after_a_failure(store: Store, clock: ManualClock) -> str:
    """Failed once (a traceback), then succeeded on its second attempt."""
    execution = store.submit("nightly", max_attempts=5)
    (first,) = store.claim("worker-a", ids=[execution.id], ttl=60)
    store.fail(first, TRACEBACK, retry_in=1)
    clock.advance(2)
    (second,) = store.claim("worker-a", ids=[execution.id], ttl=60)
    store.complete(second, None)
    assert store.get(execution.id).error == TRACEBACK  # the row keeps its latest failure
    return execution.id


@pytest.mark.parametrize("backend", SQL_BACKENDS, indirect=True)
def test_one_execution_tells_its_story(
    tab: tuple[Page, PageTrouble], served: tuple[str, Store, ManualClock]
) -> None:
    page, trouble = tab
    _, store, clock = served
    over = taken_over(store, clock)
    recovered = succeeded_after_a_failure(store, clock)
    sign_in(page, ADMIN_TOKEN, "ops")

    page.goto(f"/#/executions/{over}")
    picture = page.locator("#execution-timeline svg.timeline")
    expect(picture).to_be_visible()
    expect(picture.locator("g.tl-lease")).to_have_count(2)
    expect(picture.locator("g.tl-lease rect.tl-bar")).to_have_count(2)
    expect(picture.locator('g.tl-lease[data-epoch="1"] g.tl-refused')).to_have_count(1)
    expect(page.locator("#execution-outcome")).to_have_text(
        re.compile(r"Succeeded on attempt 2 of 5 at \d{4}-")
    )
    attempts = page.locator("#attempts tr")
    expect(attempts).to_have_count(2)
    expect(attempts.nth(0)).to_contain_text(HOSTILE)
    expect(attempts.nth(0)).to_contain_text("TIMED_OUT")
    expect(attempts.nth(0).locator("td.error")).to_have_text("lease expired")
    expect(attempts.nth(1)).to_contain_text("SUCCEEDED")
    assert page.locator('#execution-fields dd[data-field="error"]').count() == 0
    refused = page.locator('#transitions tr[data-event="STALE_REFUSED"]')
    expect(refused.locator("td.actor")).to_have_text(HOSTILE)
    expect(refused.locator("td.reason-cell")).to_have_text("stale complete refused")
    # The inputs fold: the first level open, deeper levels closed until opened.
    inputs = page.locator("#execution-inputs")
    expect(inputs.locator('details[data-path="$"]')).to_have_attribute("open", "")
    expect(inputs.locator(".json-key").first).to_have_text('"to"')
    expect(inputs).to_contain_text(f'"{HOSTILE}"')
    nested = inputs.locator("details[data-path='$[\"nested\"]']")
    expect(nested).not_to_have_attribute("open", "")
    expect(nested.locator("summary")).to_have_text("{…} 1 key")
    assert inputs.locator(".json-string", has_text="<b>x</b>").count() == 0  # not built yet
    nested.locator("summary").click()
    nested.locator('details[data-path=\'$["nested"]["deep"]\'] summary').click()
    expect(inputs.locator('details[data-path=\'$["nested"]["deep"][1]\']')).to_be_visible()
    nested.locator('details[data-path=\'$["nested"]["deep"][1]\'] summary').click()
    expect(inputs.locator(".json-string", has_text="<b>x</b>")).to_have_text('"<b>x</b>"')
    expect(page.locator("#execution-result")).to_contain_text('"synced": 3')
    expect(page.locator("#execution-progress")).to_have_text("–")

    # Succeeded after a failure: its success is its outcome, the failure stays an attempt's.
    page.goto(f"/#/executions/{recovered}")
    expect(page.locator("#execution-outcome")).to_have_text(
        re.compile(r"Succeeded on attempt 2 of 5 at ")
    )
    expect(page.locator("#execution-timeline svg g.tl-lease")).to_have_count(2)
    expect(page.locator("#execution-fields")).not_to_contain_text("ValueError")
    expect(page.locator("#execution-outcome")).not_to_contain_text("ValueError")
    assert page.locator('#execution-fields dd[data-field="error"]').count() == 0
    expect(page.locator('#attempts tr[data-attempt="1"] td.error summary')).to_have_text(
        "ValueError: no rows for 100% of days"
    )
    # The audit trail's reason: the first line, the whole traceback on demand.
    failed = page.locator('#transitions tr[data-event="FAILED"] td.reason-cell details')
    expect(failed.locator("summary")).to_have_text("ValueError: no rows for 100% of days")
    expect(failed.locator("pre")).to_be_hidden()
    failed.locator("summary").click()
    expect(failed.locator("pre")).to_contain_text('File "jobs.py", line 12, in nightly_report')
    # A poll re-renders nothing that did not change: the opened traceback stays open.
    # (The page renders a poll's answers before it starts the next poll: after the
    # second timeline request of the two, the first has been rendered.)
    for _ in range(2):
        with page.expect_request(re.compile(f"/executions/{recovered}/timeline$")):
            pass
    expect(failed.locator("pre")).to_be_visible()
    # The list says so too: an earlier attempt's error, not the execution's own.
    page.goto("/#/executions?job=nightly")
    expect(page.locator(f'#executions tr[data-id="{recovered}"] td.error')).to_have_class(
        re.compile("earlier")
    )
    assert page.locator("img").count() == 0
    only_status_errors(trouble)


#: Filter values a page must survive: each an empty list, or the API's 422 naming the field.
HOSTILE_FILTERS: list[tuple[str, str, str | None]] = [
    ("job", "\x00", None),
    ("job", "' OR 1=1 --", None),
    ("job", "<script>alert(9)</script>", None),
    ("job", "x" * 5000, None),
    ("queue", "%", None),
    ("limit_key", "_", None),
    ("owner", "\\", None),
    ("error", "%_%", None),
    ("error", "e" * 201, "error"),
    ("bucket", "-1", "bucket"),
    ("bucket", "99999999999999999999", "bucket"),
    ("outcome", "bogus", "outcome"),
    ("created_after", "garbage", "created_after"),
    ("finished_before", "99999999d", "finished_before"),
    ("due_after", "2026-02-31", "due_after"),
    ("state", "BOGUS", "state"),
]


@pytest.mark.parametrize("backend", SQL_BACKENDS, indirect=True)
def test_no_overflow_at_either_width_and_hostile_filters_break_nothing(
    tab: tuple[Page, PageTrouble], served: tuple[str, Store, ManualClock], tmp_path: Path
) -> None:
    page, trouble = tab
    _, store, clock = served
    dead_letters(store, HOSTILE, 60, TRACEBACK + "x" * 400)
    store.submit("odd", inputs={"deep": [[[[{"k": "v" * 300}]]]]})
    odd = store.submit("percent", max_attempts=1).id
    (lease,) = store.claim("w", ids=[odd], ttl=60)
    store.fail(lease, "quota at 47%_used", retryable=False)
    story = succeeded_after_a_failure(store, clock)
    sign_in(page, ADMIN_TOKEN, "ops")

    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 900})
        views = {
            "executions": "/#/executions?"
            + urlencode({"state": "FAILED", "created_after": "1h", "job": HOSTILE}),
            "execution": f"/#/executions/{story}",
            "dead-letters": "/#/dead-letters",
        }
        for name, route in views.items():
            page.goto(route)
            if name == "executions":
                expect(page.locator("#executions tr[data-id]")).to_have_count(50)
                select_all_matching(page, "executions", 60, trouble)
                page.locator("#executions-bulk").get_by_role("button", name="Delete").click()
                expect(page.locator("#executions-bulk .bulk-dry-run")).to_have_text(
                    "60 will be deleted, 0 skipped."
                )
                page.locator("details.trace summary").first.click()
            elif name == "execution":
                expect(page.locator("#execution-timeline svg")).to_be_visible()
                page.locator("#transitions details summary").first.click()
            else:
                expect(page.locator("#dead-letters tr[data-id]")).to_have_count(50)
                page.get_by_role("button", name="Replay all 61 matching").click()
                expect(page.locator("#dead-letters-bulk .bulk-dry-run")).to_have_text(
                    "61 will be replayed, 0 skipped."
                )
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            page.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=True)
            assert overflow <= 0, f"{name} at {width} px is {overflow} px wider than the screen"
            # Nor does the view or its tables scroll sideways inside it: the rows stack on a
            # phone (only a traceback's own block may scroll).
            scrolling = page.evaluate(
                """(view) => [view, ...view.querySelectorAll(".table-box")]
                    .filter((box) => box.scrollWidth > box.clientWidth + 1)
                    .map((box) => box.className || box.id)""",
                page.locator(f"#view-{name}").element_handle(),
            )
            assert scrolling == [], f"{name} at {width} px scrolls sideways in {scrolling}"
    assert store.count_by_state()[State.FAILED] == 61  # only dry runs above

    # Hostile values through the URL: an empty list, or the 422's message in the banner;
    # and the next good filter brings the list back and takes the banner away.
    banner = page.locator("#banner-text")
    for name, value, refused_field in HOSTILE_FILTERS:
        page.goto("/#/executions?job=percent")
        expect(page.locator("#executions tr[data-id]")).to_have_count(1)
        expect(page.locator("#banner")).to_be_hidden()
        page.goto("/#/executions?" + urlencode({name: value}))
        if refused_field is None:
            expect(page.locator("#executions")).to_have_text("No executions match.")
            expect(page.locator("#executions-total")).to_have_text("0 matching")
        else:
            expect(banner).to_contain_text(refused_field)
            expect(page.locator("#executions")).to_contain_text("the filter was refused")
        assert page.locator("img").count() == 0
    # "%" and "_" are literal in the error text: only the execution whose error has them
    # (as wildcards, each would match every error of the 60 others too).
    for text in ("%_", "_u", "7%"):
        page.goto("/#/executions?" + urlencode({"error": text}))
        expect(page.locator("#executions tr[data-id]")).to_have_count(1)
        assert shown_ids(page) == [odd]
    expect(page.locator("#banner")).to_be_hidden()  # cleared by the next good refresh
    # A lone surrogate typed into the form reaches the API as U+FFFD: an empty list.
    page.goto("/#/executions")
    page.locator("#filter-job").evaluate("(input) => { input.value = 'a\\ud800b'; }")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#executions")).to_have_text("No executions match.")
    only_status_errors(trouble, 422)

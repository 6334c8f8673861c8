"""Take the console screenshots of ``docs/how-to/console.md`` (run by hand, not at build).

    .venv/bin/python docs/gen/console_screenshots.py [--out docs/images]

Starts the service (``create_app`` under uvicorn, auth off, on a free loopback port)
over a SQLite store in a temporary directory, seeded first: an hour of finished work
written through a second store whose clock walks through that hour (so the charts have
history), rolled up before the service starts; schedules, limits, a paused queue, live
nodes holding leases, dead letters and an execution whose lease was taken over. Then
Debian's chromium (Playwright, as the browser tests use it) opens every view and writes
``console-<view>.png`` at 1,400 px wide, and ``console-phone.png`` at 390 px. Re-running
replaces them; nothing else is written. Needs ``/usr/bin/chromium``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn
from playwright.sync_api import Page, expect, sync_playwright

import fencepost
from fencepost.api import create_app
from fencepost.domain.catalogue import JobDefaults, JobSource, job_entry
from fencepost.domain.errors import StaleLease
from fencepost.store.base import Store
from fencepost.testing import ManualClock

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
WIDE, PHONE = 1400, 390
#: The most of a view a screenshot shows, in CSS pixels.
MAX_HEIGHT = 1100
#: How long a view may take to show what a screenshot waits for.
PATIENCE_MS = 15_000

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "billing/jobs.py", line 41, in send_invoice\n'
    "    gateway.send(invoice)\n"
    '  File "billing/gateway.py", line 17, in send\n'
    '    raise GatewayError(f"550 mailbox unavailable: {invoice.to}")\n'
    "GatewayError: 550 mailbox unavailable: accounts@example.com\n"
)


def seed_catalogue(store: Store) -> None:
    invoice_inputs = {
        "type": "object",
        "properties": {"invoice": {"type": "string"}, "to": {"type": "string"}},
        "required": ["invoice"],
    }
    store.publish_jobs(
        [
            job_entry("send-invoice", 1, input_schema=invoice_inputs),
            job_entry(
                "send-invoice",
                2,
                input_schema=invoice_inputs,
                defaults=JobDefaults(max_attempts=5, timeout=30, queue="billing"),
                description="Render an invoice and mail it to the customer.",
                source=JobSource(kind="code", where="billing.jobs:send_invoice"),
            ),
            job_entry("sync-crm", 1, source=JobSource(kind="code", where="crm.jobs:sync")),
            job_entry("nightly-report", 1, defaults=JobDefaults(queue="reports")),
        ]
    )


def seed_history(url: str, start: datetime) -> str:
    """An hour of work from ``start`` on: invoices (a few dead, a few retried), CRM
    syncs, and reports a paused queue held for five minutes; then one execution whose
    lease expired and was taken over, its first owner's completion refused. Returns
    that execution's id."""
    clock = ManualClock(start)
    with fencepost.connect(url, clock=clock) as past:

        def at(minute: float) -> None:
            clock.set(start + timedelta(minutes=minute))

        for minute in range(50):
            at(minute)
            busy = 4 + (minute * 7) % 9
            past.submit_many(
                [
                    {
                        "job": "send-invoice",
                        "queue": "billing",
                        "inputs": {"invoice": f"INV-{minute}-{n}"},
                    }
                    for n in range(busy)
                ]
            )
            past.submit_many([{"job": "sync-crm"} for _ in range(2)])
            if minute == 20:
                past.pause_queue("reports", actor="ops")
            if minute in range(20, 25):
                past.submit("nightly-report", queue="reports")
            if minute == 25:
                past.resume_queue("reports", actor="ops")
            # Claims come later when the workers are busy: lateness follows the load.
            at(minute + 0.02 + busy * 0.01 + (0.3 if minute in range(30, 36) else 0))
            for n, lease in enumerate(past.claim("worker-a", limit=40, ttl=300)):
                if lease.job == "send-invoice" and (minute + n) % 17 == 0:
                    past.fail(lease, TRACEBACK, retryable=False)
                elif lease.job == "sync-crm" and minute % 6 == 0 and n % 2 == 0:
                    past.fail(lease, "CRM API answered 503", retry_in=10)
                else:
                    past.complete(lease, {"ok": True})
            at(minute + 0.5)
            for lease in past.claim("worker-b", limit=40, ttl=300):
                past.complete(lease, {"ok": True, "retried": True})
        at(52)
        taken = past.submit("send-invoice", queue="billing", inputs={"invoice": "INV-TAKEN"})
        (old,) = past.claim("worker-a", ids=[taken.id], ttl=30)
        at(53)
        (new,) = past.claim("worker-b", ids=[taken.id], ttl=60)
        with contextlib.suppress(StaleLease):  # refused: worker-b holds the lease now
            past.complete(old, {"ok": True})
        past.complete(new, {"ok": True})
        return taken.id


def seed_now(store: Store) -> None:
    """What is live now: schedules, limits, a paused queue, nodes holding leases."""
    store.add_schedule(
        "send-invoice",
        inputs={"invoice": "monthly-statement"},
        cron="0 2 1 * *",
        timezone="Europe/Berlin",
        id="invoices-monthly",
    )
    store.add_schedule("sync-crm", every=900, id="crm-every-15-min")
    store.add_schedule(
        "nightly-report", cron="30 23 * * *", timezone="America/New_York", id="nightly-report"
    )
    store.pause_schedule("nightly-report", actor="ops")
    store.set_limit("job:sync-crm", rate="50/s", burst=5, concurrency=3, actor="ops")
    store.pause_queue("exports", actor="ops")
    store.submit_many([{"job": "nightly-report", "queue": "exports"} for _ in range(3)])
    store.submit_many(
        [
            {"job": "send-invoice", "queue": "billing", "inputs": {"invoice": f"INV-N{n}"}}
            for n in range(6)
        ]
    )
    store.register_node(
        "worker-a", buckets=range(0, 40), ttl=3600, jobs=[("send-invoice", 2), ("sync-crm", 1)]
    )
    store.register_node(
        "worker-b",
        buckets=range(30, 64),
        ttl=3600,
        jobs=[("send-invoice", 2), ("nightly-report", 1)],
    )
    store.register_node("scheduler-1", kind="scheduler", ttl=3600)
    store.claim("worker-a", jobs=["send-invoice"], limit=3, ttl=3600)
    store.claim("worker-b", jobs=["send-invoice"], limit=1, ttl=3600)


@contextmanager
def service(store: Store) -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(create_app(store), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="screenshots", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("the service did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()


def shoot(
    page: Page, out: Path, name: str, route: str | None, ready: str, section: str | None
) -> None:
    """Open ``route`` (None: stay), wait for ``ready``, save the view (or the window)."""
    if route is not None:
        page.goto(route)
    expect(page.locator(ready).first).to_be_attached(timeout=PATIENCE_MS)
    page.evaluate("document.fonts.ready")
    path = str(out / f"console-{name}.png")
    if section is None:
        page.screenshot(path=path, animations="disabled")
    else:
        # A long list is cut: its first screenful says what the view is.
        box = page.locator(section).bounding_box()
        assert box is not None, section
        clip = {**box, "height": min(box["height"], MAX_HEIGHT)}
        page.screenshot(path=path, animations="disabled", full_page=True, clip=clip)
    print(f"wrote {out / f'console-{name}.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    out = parser.parse_args().out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install chromium")
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'console.db'}"
        start = (datetime.now(UTC) - timedelta(minutes=58)).replace(second=0, microsecond=0)
        with fencepost.connect(url) as store:
            seed_catalogue(store)
            taken = seed_history(url, start)
            seed_now(store)
            # The service rolls up by itself; done here so the first page has it all.
            while not store.roll_up_history().caught_up:
                pass
            with service(store) as base_url, sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=["--disable-gpu"]
                )
                page = browser.new_page(base_url=base_url, viewport={"width": WIDE, "height": 900})
                views = [
                    ("overview", "/#/executions", "#overview-chart canvas", None),
                    ("executions", "/#/executions", "#executions tr", "#view-executions"),
                    (
                        "execution",
                        f"/#/executions/{taken}",
                        "#view-execution svg",
                        "#view-execution",
                    ),
                    ("dead-letters", "/#/dead-letters", "#dead-letters tr", "#view-dead-letters"),
                    ("schedules", "/#/schedules", "#schedules tr", "#view-schedules"),
                    ("jobs", "/#/jobs", "#jobs tr", "#view-jobs"),
                    ("job", "/#/jobs/send-invoice?window=hour", "#job-history canvas", "#view-job"),
                    ("nodes", "/#/nodes", "#nodes tr", "#view-nodes"),
                    ("queues", "/#/queues", "#queues tr", "#view-queues"),
                    ("slo", "/#/slo", "#slo-objectives tr", "#view-slo"),
                    (
                        "history",
                        "/#/history?window=hour",
                        '#view-history figure[data-chart="burn"] canvas',
                        "#view-history",
                    ),
                ]
                for name, route, ready, section in views:
                    shoot(page, out, name, route, ready, section)
                # A schedule being edited: the new rule's fire times, before Save.
                page.goto("/#/schedules/invoices-monthly")
                page.get_by_role("button", name="Edit").click()
                page.fill("#edit-cron", "30 6 1 * *")
                expect(page.locator("#edit-preview li").first).to_contain_text(
                    "06:30", timeout=PATIENCE_MS
                )
                shoot(page, out, "schedule", None, "#edit-preview .dst-shift", "#view-schedule")
                phone = browser.new_page(
                    base_url=base_url, viewport={"width": PHONE, "height": 844}
                )
                shoot(
                    phone,
                    out,
                    "phone",
                    "/#/schedules/invoices-monthly",
                    "#schedule-upcoming .dst-shift",
                    "#view-schedule",
                )
                browser.close()


if __name__ == "__main__":
    main()

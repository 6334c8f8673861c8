"""Two materializer processes on one SQLite file, 1,000 schedules, three simulated hours.

Both processes read "now" from a file that the test moves forward a minute at a
time, across New York's spring-forward night. Afterwards every schedule's
executions must be exactly its slots (computed independently from its rule): no
slot twice, none missing, none SKIPPED — and both processes must have done work.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost.domain.schedules import slot_text
from fencepost.timing.rules import rule_of

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROCESS = Path(__file__).with_name("_materializer_process.py")
SCHEDULES = 1_000
START = datetime(2026, 3, 8, 5, 0, tzinfo=UTC)  # New York springs forward at 07:00 UTC
HOURS = 3
CRONS = ["*/5 * * * *", "*/10 * * * *", "7,37 * * * *", "0 * * * *", "*/15 1-3 * * *",
         "30 2 * * *", "*/20 * * * *"]  # fmt: skip
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe"]


class FileClock:
    def __init__(self, path: Path) -> None:
        self.path = path

    def now(self) -> datetime:
        return datetime.fromisoformat(self.path.read_text().strip())

    def now_or_none(self) -> datetime:
        return self.now()


def set_time(path: Path, instant: datetime) -> None:
    staging = path.with_suffix(".tmp")
    staging.write_text(instant.isoformat())
    os.replace(staging, path)  # atomic: a reader never sees a half-written time


@pytest.mark.timeout(600)
def test_two_materializers_store_every_slot_exactly_once(tmp_path: Path) -> None:
    clock_file, stop_file = tmp_path / "now", tmp_path / "stop"
    set_time(clock_file, START)
    url = f"sqlite:///{tmp_path / 'fencepost.db'}"
    store = fencepost.connect(url, clock=FileClock(clock_file))
    rng = random.Random(20261129)
    for n in range(SCHEDULES):
        options: dict[str, object] = (
            {"every": rng.choice([7 * 60, 13 * 60, 25 * 60])}
            if n % 7 == 0
            else {"cron": rng.choice(CRONS), "timezone": rng.choice(ZONES)}
        )
        store.add_schedule(
            f"job-{n % 10}",
            id=f"schedule-{n:04d}",
            misfire="catch_up",
            max_catch_up=10_000,
            dst_fold=rng.choice(["once", "twice"]),
            dst_gap=rng.choice(["shift", "skip"]),
            **options,  # type: ignore[arg-type]
        )
    initial = {s.id: s.watermark for s in all_schedules(store)}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(PROCESS),
                url,
                str(clock_file),
                f"materializer-{i}",
                str(stop_file),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for i in range(2)
    ]
    try:
        end = START + timedelta(hours=HOURS)
        now = START
        while now < end:
            now += timedelta(minutes=1)
            set_time(clock_file, now)
            time.sleep(0.05)
        deadline = time.monotonic() + 120
        # Caught up: no schedule is due any more at the final time.
        while any(s.next_due <= end for s in all_schedules(store)):
            assert time.monotonic() < deadline, "the materializers did not catch up"
            time.sleep(0.2)
        stop_file.touch()
        outputs = [int(p.communicate(timeout=60)[0] or 0) for p in procs]
    finally:
        stop_file.touch()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(stored > 0 for stored in outputs), f"both materializers work: {outputs}"

    stored: dict[str, Counter[str]] = {}
    states: Counter[str] = Counter()
    after = None
    while True:
        page = store.query(limit=1000, after=after)
        for e in page.items:
            assert e.schedule_id is not None
            assert e.slot is not None
            stored.setdefault(e.schedule_id, Counter())[e.slot] += 1
            states[e.state.value] += 1
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert states.keys() == {"SCHEDULED"}, f"nothing SKIPPED, nothing else: {states}"
    for schedule in all_schedules(store):
        expected = [
            slot_text(s) for s in rule_of(schedule).slots(initial[schedule.id], schedule.watermark)
        ]
        got = stored.get(schedule.id, Counter())
        assert len(expected) == len(set(expected))
        assert sorted(got) == sorted(expected), f"{schedule.id} ({schedule.cron or schedule.every})"
        assert max(got.values(), default=1) == 1, f"a slot stored twice for {schedule.id}"
    store.close()


def all_schedules(store: fencepost.Store) -> list[fencepost.Schedule]:
    found, after = [], None
    while True:
        page = store.schedules(limit=500, after=after)
        found.extend(page.items)
        if page.next_cursor is None:
            return found
        after = page.next_cursor

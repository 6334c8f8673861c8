"""A schedule stored before a rule tightened holds up no other schedule of its batch.

``localtime`` was accepted as a time zone before it was refused (materializers on hosts
in different zones disagreed about it). A row that still holds it fails to load its
rule; the materializer must leave that one out, log it once, and plan the rest.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

import fencepost
from fencepost.scheduler.materializer import Materializer, MaterializerOptions
from fencepost.testing import ManualClock


def test_a_schedule_whose_zone_is_now_refused_is_left_out_and_the_rest_fire(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "jobs.db"
    clock = ManualClock(datetime(2026, 12, 6, 10, 0, 30, tzinfo=UTC))
    store = fencepost.connect(f"sqlite:///{db}", clock=clock)
    for name in ("before", "stale", "after"):
        store.add_schedule(job="tick", cron="* * * * *", id=name)
    with closing(sqlite3.connect(db)) as conn, conn:  # as an earlier release stored it
        conn.execute("UPDATE schedules SET timezone = 'localtime' WHERE id = 'stale'")
    materializer = Materializer(store, MaterializerOptions(owner="m"))
    with caplog.at_level(logging.ERROR, logger="fencepost"):
        for _ in range(3):
            clock.advance(60)
            materializer.run_once()
    fired = {e.schedule_id for e in store.query(limit=100).items}
    assert fired == {"before", "after"}
    refusals = [r.getMessage() for r in caplog.records if "cannot be planned" in r.getMessage()]
    assert len(refusals) == 1, refusals  # once, however many passes meet it
    assert "stale" in refusals[0]
    assert "localtime" in refusals[0]
    store.close()

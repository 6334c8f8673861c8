"""``fencepost schedule run ID``: one run of a schedule now, on real databases."""

from __future__ import annotations

from fencepost import Event, State
from fencepost.cli.common import actor
from fencepost.testing import ManualClock
from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database


def test_schedule_run_prints_the_new_execution_s_id(database: Database) -> None:
    store = database.store()
    store.add_schedule("report", cron="0 2 * * *", id="nightly", inputs={"day": "x"}, paused=True)
    first = fencepost("schedule", "run", "nightly", db=database.url).ok()
    (execution_id,) = first.stdout.split()
    run = store.get(execution_id)
    assert (run.schedule_id, run.slot, run.job, run.inputs) == (
        "nightly",
        None,
        "report",
        {"day": "x"},
    )
    assert (run.state, run.idempotency_key) == (State.SCHEDULED, f"nightly:run:{execution_id}")
    (submitted,) = store.transitions(execution_id)
    assert (submitted.event, submitted.actor) == (Event.SUBMITTED, actor())
    assert actor().startswith("cli:")
    assert store.get_schedule("nightly").paused, "a paused schedule runs, and stays paused"
    shown = fencepost("show", execution_id, db=database.url).ok()
    assert shown.row("schedule") == ["schedule", "nightly (run now)"], "not shown as a slot"

    document = fencepost("schedule", "run", "nightly", "--json", db=database.url).json()
    assert document["id"] != execution_id
    assert (document["schedule_id"], document["slot"], document["state"]) == (
        "nightly",
        None,
        "SCHEDULED",
    )
    leases = store.claim("w", limit=10, ttl=60)
    assert sorted(lease.execution_id for lease in leases) == sorted([execution_id, document["id"]])


def test_schedule_run_of_an_unknown_schedule_writes_nothing(database: Database) -> None:
    store = database.store(ManualClock(0))
    store.add_schedule("report", every=60, id="s")
    unknown, blank, long = fencepost_all(
        ("schedule", "run", "nope"),
        ("schedule", "run", " "),
        ("schedule", "run", "x" * 5000),
        db=database.url,
    )
    assert (unknown.returncode, unknown.errors) == (
        3,
        ["fencepost schedule run: schedule nope not found"],
    )
    assert (blank.returncode, long.returncode) == (3, 3)
    assert store.query().items == []

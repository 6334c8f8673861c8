"""``fencepost schedule add|ls|show|pause|resume|rm|preview`` on real databases."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from fencepost import Event, State
from fencepost.domain.models import Occurrence
from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database
from tests.integration.test_worker_processes import APP, Workers, wait_until

BERLIN = ZoneInfo("Europe/Berlin")


def test_schedules_from_add_to_rm(database: Database) -> None:
    db = database.url
    add = (
        "schedule",
        "add",
        "lunch-report",
        "--cron",
        "30 12 * * *",
        "--timezone",
        "Europe/Berlin",
        "--id",
        "lunch",
        "--input",
        "day=today",
        "--misfire",
        "skip",
        "--overlap",
        "buffer_one",
        "--json",
    )
    lunch = fencepost(*add, db=db).json()
    assert {k: lunch[k] for k in ("id", "job", "cron", "every", "timezone", "inputs")} == {
        "id": "lunch",
        "job": "lunch-report",
        "cron": "30 12 * * *",
        "every": None,
        "timezone": "Europe/Berlin",
        "inputs": {"day": "today"},
    }
    assert (lunch["misfire"], lunch["overlap"], lunch["paused"]) == ("skip", "buffer_one", False)
    assert (lunch["misfire_grace"], lunch["dst_gap"], lunch["dst_fold"]) == (60.0, "shift", "once")
    fires = [datetime.fromisoformat(f) for f in lunch["next_fires"]]
    assert len(fires) == 5
    assert {f.astimezone(BERLIN).strftime("%H:%M") for f in fires} == {"12:30"}

    again, conflict, ticker = fencepost_all(
        add,
        ("schedule", "add", "other-job", "--cron", "0 * * * *", "--id", "lunch"),
        ("schedule", "add", "tick", "--every", "10m", "--id", "ticker", "--paused", "--json"),
        db=db,
    )
    assert again.json()["id"] == "lunch", "the same arguments return the stored schedule"
    assert conflict.returncode == 4  # a conflict with the stored schedule
    assert conflict.errors == [
        "fencepost schedule add: schedule id 'lunch' already names schedule lunch with a "
        "different request"
    ]
    tick = ticker.json()
    assert (tick["every"], tick["timezone"], tick["cron"], tick["paused"]) == (
        600.0,
        "UTC",
        None,
        True,
    )

    listing, paused, show, preview = fencepost_all(
        ("schedule", "ls"),
        ("schedule", "ls", "--paused", "--json"),
        ("schedule", "show", "lunch", "--count", "3", "--json"),
        ("schedule", "preview", "lunch", "--after", "2026-03-28T11:00:00Z", "--count", "2"),
        db=db,
    )
    assert listing.ok().row("lunch")[1:4] == [
        "lunch-report",
        "cron 30 12 * * * (Europe/Berlin)",
        "active",
    ]
    assert listing.row("ticker")[1:4] == ["tick", "every 10m", "paused"]
    assert [s["id"] for s in paused.json()] == ["ticker"]
    assert show.json()["next_fires"] == lunch["next_fires"][:3]
    # Across the spring-forward of 2026-03-29: 12:30 in Berlin is 11:30Z, then 10:30Z.
    assert preview.ok().row("1") == ["1", "2026-03-28 11:30:00Z", "2026-03-28T12:30:00+01:00"]
    assert preview.row("2") == ["2", "2026-03-29 10:30:00Z", "2026-03-29T12:30:00+02:00"]

    paused_lunch, resumed = fencepost_all(
        ("schedule", "pause", "lunch", "--json"), ("schedule", "resume", "ticker"), db=db
    )
    assert paused_lunch.json()["paused"] is True
    assert resumed.ok().row("state") == ["state", "active"]
    store = database.store()
    assert store.get_schedule("lunch").paused is True
    assert store.get_schedule("ticker").paused is False

    removed = fencepost("schedule", "rm", "ticker", "--json", db=db).json()
    assert removed == {"id": "ticker", "deleted": True}
    gone, unknown = fencepost_all(
        ("schedule", "show", "ticker"), ("schedule", "pause", "nope"), db=db
    )
    assert (gone.returncode, gone.errors) == (
        3,
        ["fencepost schedule show: schedule ticker not found"],
    )
    assert (unknown.returncode, unknown.errors) == (
        3,
        ["fencepost schedule pause: schedule nope not found"],
    )
    assert [s.id for s in store.schedules().items] == ["lunch"]


def test_preview_of_a_cron_without_a_stored_schedule_follows_dst() -> None:
    run = fencepost(
        "schedule",
        "preview",
        "--cron",
        "30 2 * * *",
        "--timezone",
        "Europe/Berlin",
        "--after",
        "2026-03-27T00:00:00Z",
        "--count",
        "3",
        "--json",
    )
    # 02:30 does not exist on 2026-03-29 in Berlin: shifted to the end of the gap, 03:00 CEST.
    assert run.json() == [
        {"slot": "2026-03-27T01:30:00Z", "local": "2026-03-27T02:30:00+01:00"},
        {"slot": "2026-03-28T01:30:00Z", "local": "2026-03-28T02:30:00+01:00"},
        {"slot": "2026-03-29T01:00:00Z", "local": "2026-03-29T03:00:00+02:00"},
    ]
    every = fencepost(
        "schedule", "preview", "--every", "90m", "--after", "2026-01-01T00:00:00Z", "--count", "2"
    ).ok()
    assert every.row("1")[1] == "2026-01-01 01:30:00Z"
    assert every.row("2")[1] == "2026-01-01 03:00:00Z"
    assert datetime(2026, 1, 1, 3, tzinfo=UTC).isoformat() in every.stdout


def test_schedule_add_without_id_twice_stores_one_schedule(database: Database) -> None:
    db = database.url
    add = ("schedule", "add", "nightly-report", "--cron", "@daily", "--input", "day=x", "--json")
    first = fencepost(*add, db=db)
    again = fencepost(*add, db=db)  # run again, as a deploy script would
    other_inputs, other_zone = fencepost_all(
        ("schedule", "add", "nightly-report", "--cron", "@daily", "--input", "day=y", "--json"),
        ("schedule", "add", "nightly-report", "--cron", "@daily", "--input", "day=x",
         "--timezone", "Europe/Berlin", "--json"),
        db=db,
    )  # fmt: skip
    assert first.json()["cron"] == "0 0 * * *"  # @daily, stored as what it stands for
    assert again.json()["id"] == first.json()["id"], "the same command names the same schedule"
    assert first.json()["id"].startswith("nightly-report-")
    assert len({first.json()["id"], other_inputs.json()["id"], other_zone.json()["id"]}) == 3
    listed = fencepost("schedule", "ls", "--json", db=db).json()
    assert sorted(s["id"] for s in listed) == sorted(
        {first.json()["id"], other_inputs.json()["id"], other_zone.json()["id"]}
    )
    given = fencepost(*add[:-1], "--id", "mine", "--json", db=db).json()
    assert given["id"] == "mine", "--id still wins"


def test_cron_aliases_are_accepted_and_reboot_is_refused(database: Database) -> None:
    db = database.url
    expected = {
        "@yearly": "0 0 1 1 *",
        "@annually": "0 0 1 1 *",
        "@monthly": "0 0 1 * *",
        "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *",
        "@midnight": "0 0 * * *",
        "@hourly": "0 * * * *",
        "@HOURLY": "0 * * * *",
    }
    runs = fencepost_all(
        *[("schedule", "add", "j", "--cron", alias, "--json") for alias in expected], db=db
    )
    assert [run.json()["cron"] for run in runs] == list(expected.values())
    reboot, unknown = fencepost_all(
        ("schedule", "add", "j", "--cron", "@reboot"),
        ("schedule", "add", "j", "--cron", "@fortnightly"),
        db=db,
    )
    assert reboot.returncode == 2
    assert reboot.errors == [
        "fencepost schedule add: --cron: '@reboot' is not a time: run the job from your "
        "process's start-up instead"
    ]
    assert unknown.returncode == 2
    assert unknown.errors[0].startswith(
        "fencepost schedule add: --cron: '@fortnightly' is not a cron alias (one of @yearly,"
    )


# -- nothing waits silently -----------------------------------------------------------------

WARNING = (
    "warning: no scheduler is running: schedules fire only while `fencepost serve` or "
    "`fencepost worker --with-scheduler` runs"
)


@pytest.mark.slow
def test_schedules_warn_while_no_scheduler_runs_and_paused_ones_have_no_next_fire(
    database: Database, tmp_path: Path
) -> None:
    db = database.url
    store = database.store()
    started = Workers(tmp_path)
    try:
        # Only a plain worker: it runs executions, and nothing materializes schedules.
        started.start(db, "plain", APP)
        wait_until(lambda: [n.id for n in store.nodes()] == ["plain"], 30, "the worker's node")
        added = fencepost("schedule", "add", "quick", "--every", "10m", "--id", "ten", db=db)
        assert added.ok().row("state") == ["state", "active"]
        assert added.errors == [f"fencepost schedule add: {WARNING}"]
        listing, as_json = fencepost_all(("schedule", "ls"), ("schedule", "ls", "--json"), db=db)
        assert listing.ok().row("ten")[3] == "active"
        assert listing.errors == [f"fencepost schedule ls: {WARNING}"]
        assert [s["id"] for s in as_json.json()] == ["ten"], "stdout stays one JSON document"
        assert as_json.errors == [f"fencepost schedule ls: {WARNING}"]

        # Paused: nothing would fire, so nothing to warn of; and no next fire.
        born_paused = fencepost(
            "schedule", "add", "quick", "--every", "1h", "--id", "hourly", "--paused", db=db
        )
        assert (born_paused.ok().errors, born_paused.row("next fires")) == (
            [],
            ["next fires", "none while paused"],
        )
        fencepost("schedule", "pause", "ten", db=db).ok()
        listing, shown, shown_json = fencepost_all(
            ("schedule", "ls"),
            ("schedule", "show", "ten"),
            ("schedule", "show", "ten", "--json"),
            db=db,
        )
        assert [row[3:] for row in (listing.row("hourly"), listing.row("ten"))] == [
            ["paused", "coalesce", "allow", "paused"],
            ["paused", "coalesce", "allow", "paused"],
        ]
        assert listing.errors == [], "every schedule is paused: none waits for a scheduler"
        assert shown.ok().row("next fires") == ["next fires", "none while paused"]
        assert shown_json.json()["next_fires"] == []
        resumed = fencepost("schedule", "resume", "ten", "--json", db=db)
        assert len(resumed.json()["next_fires"]) == 5, "it fires again"
        assert resumed.errors == [f"fencepost schedule resume: {WARNING}"]

        # A worker with a scheduler: the warnings stop, and come back when it stops.
        scheduling = started.start(db, "scheduling", APP, "--with-scheduler")
        wait_until(lambda: store.live_schedulers(), 30, "a live scheduler")
        added, listing = fencepost_all(
            ("schedule", "add", "quick", "--every", "5m", "--id", "five"), ("schedule", "ls"), db=db
        )
        assert (added.ok().errors, listing.ok().errors) == ([], [])
        # Listed with its kind among the live nodes; it claims from no bucket.
        buckets = fencepost("buckets", db=db).ok()
        assert buckets.row("scheduling:scheduler")[1:3] == ["scheduler", "-"]
        assert buckets.row("scheduling")[1:3] == ["worker", "any"]
        scheduling.send_signal(signal.SIGTERM)
        assert scheduling.wait(30) == 0
        assert store.live_schedulers() == [], "its clean stop deregistered it"
        assert fencepost("schedule", "ls", db=db).ok().errors == [
            f"fencepost schedule ls: {WARNING}"
        ]
    finally:
        started.close()


def test_schedule_pause_skips_what_was_stored_ahead_and_names_who_paused(
    database: Database,
) -> None:
    db = database.url
    store = database.store()
    store.add_schedule("quick", every=60, id="minutely")
    now = store.clock.now()
    ahead = store.add_occurrences(
        "minutely", [Occurrence(slot=now + timedelta(minutes=n), due_at=now) for n in (1, 2)]
    )
    paused = fencepost("schedule", "pause", "minutely", db=db)
    assert paused.ok().row("state") == ["state", "paused"]
    for e in ahead:
        assert store.get(e.id).state is State.SKIPPED
        last = store.transitions(e.id)[-1]
        assert (last.event, last.reason) == (Event.SKIPPED, "paused")
        assert last.actor is not None
        assert last.actor.startswith("cli:")
    fencepost("schedule", "resume", "minutely", db=db).ok()
    assert {store.get(e.id).state for e in ahead} == {State.SKIPPED}, "resuming revives none"

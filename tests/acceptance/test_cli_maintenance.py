"""``fencepost reconcile`` and ``fencepost prune`` on databases left behind by an outage."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fencepost.domain.errors import NotFound
from fencepost.domain.schedules import slot_text
from fencepost.domain.states import State
from fencepost.store import connect
from fencepost.testing import ManualClock
from fencepost.testing.factory import ExecutionFactory
from tests.acceptance.cli import fencepost, fencepost_on_terminal
from tests.acceptance.conftest import Database

COALESCED = "misfire: missed, coalesced into a later run"


def test_reconcile_plans_missed_slots_and_expired_leases_then_does_it(database: Database) -> None:
    # Everything stopped 65 minutes ago: two 10-minute schedules missed six slots each,
    # and two RUNNING executions outlived their 30 s leases.
    base = (datetime.now(UTC) - timedelta(minutes=65)).replace(microsecond=0)
    past = database.store(ManualClock(base))
    past.add_schedule("tick", every=600, id="tick", misfire="coalesce")
    past.add_schedule("quiet", every=600, id="quiet", paused=True)
    make = ExecutionFactory(past)
    retried = make.running("crunch", owner="node-a", ttl=30)
    dead = make.running("fragile", owner="node-b", ttl=30, max_attempts=1)
    slots = [slot_text(base + timedelta(minutes=10 * k)) for k in range(1, 7)]

    dry = fencepost("reconcile", "--dry-run", "--json", db=database.url).json()
    assert dry["dry_run"] is True
    assert (dry["schedules_planned"], dry["stored"], dry["reaped"]) == (None, None, None)
    plans = {p["id"]: p for p in dry["schedules"]}
    assert sorted(plans) == ["quiet", "tick"]
    tick = plans["tick"]
    assert tick["run"] == [slots[-1]], "coalesce: the latest missed slot runs once"
    assert tick["skipped"] == [{"slot": s, "reason": COALESCED} for s in slots[:-1]]
    assert (tick["held"], tick["watermark"]) == ([], slot_text(base))
    assert plans["quiet"]["run"] == []
    assert plans["quiet"]["skipped"] == [{"slot": s, "reason": "paused"} for s in slots]
    expired = {e["execution_id"]: e for e in dry["expired_leases"]}
    assert expired[retried.execution_id] == {
        "execution_id": retried.execution_id,
        "job": "crunch",
        "owner": "node-a",
        "epoch": 1,
        "attempt": 1,
        "max_attempts": 3,
        "lease_until": slot_text(base + timedelta(seconds=30)),
        "action": "retry",
    }
    assert expired[dead.execution_id]["action"] == "dead-letter"
    store = database.store()
    assert store.query(schedule="tick").items == [], "a dry run stores nothing"
    assert store.get(dead.execution_id).state is State.RUNNING

    table = fencepost("reconcile", "--dry-run", db=database.url).ok()
    # schedule, job, run, slots, held, skipped, next due, notes
    last = datetime.fromisoformat(slots[-1]).strftime("%Y-%m-%d %H:%M:%SZ")
    assert table.row("tick")[1:6] == ["tick", "1", f"{last} .. {last}", "0", "5"]
    assert table.row("tick")[-1] == "-"
    assert table.row("quiet")[1:6] == ["quiet", "0", "-", "0", "6"]
    assert table.row("quiet")[-1] == "paused"
    assert table.rows("tick")[1][1:3] == [COALESCED, "5"]
    assert table.rows("quiet")[1][1:3] == ["paused", "6"]
    assert table.row(retried.execution_id)[-1] == "retry"
    assert table.row(dead.execution_id)[-1] == "dead-letter"
    assert "dry run: nothing was stored or timed out" in table.stdout

    done = fencepost(
        "reconcile", "--json", "--log-format", "json", "--log-level", "info", db=database.url
    )
    report = done.json()
    assert (report["dry_run"], report["stored"], report["reaped"]) == (False, 12, 2)
    # Counted as the listing counts them: tick's 1 run + 5 skipped, quiet's 6 skipped.
    assert report["stored_by"] == {"run": 1, "held": 0, "skipped": 11}
    assert report["schedules_planned"] >= 2
    states = {e.slot: e.state for e in store.query(schedule="tick").items}
    assert states == {**dict.fromkeys(slots[:-1], State.SKIPPED), slots[-1]: State.SCHEDULED}
    assert store.get(retried.execution_id).state is State.RETRY_WAIT
    assert store.get(dead.execution_id).state is State.FAILED
    again = fencepost("reconcile", db=database.url).ok()  # nothing left: the same words
    assert "storing 0 occurrence(s) (0 to run, 0 held, 0 skipped)" in again.stdout
    lines = [json.loads(line) for line in done.errors]
    about = [line for line in lines if line.get("execution_id") == retried.execution_id]
    assert about
    assert {(line["epoch"], line["owner"], line["job"]) for line in about} == {
        (1, "node-a", "crunch")
    }
    assert any(line.get("schedule_id") == "tick" for line in lines)


def test_prune_deletes_old_finished_executions_in_batches(database: Database) -> None:
    old = ExecutionFactory(database.store(ManualClock(datetime.now(UTC) - timedelta(days=20))))
    pruned = [old.succeeded(), old.succeeded(), old.dead()]
    unfinished = old.scheduled()
    store = database.store()
    cancelled_now = store.cancel(old.scheduled().id)
    recent = ExecutionFactory(store).succeeded()

    dry = fencepost("prune", "--older-than", "14d", "--dry-run", "--json", db=database.url)
    assert dry.json() == {"dry_run": True, "older_than": 1209600.0, "executions": 3}
    assert store.get(pruned[0].id).state is State.SUCCEEDED, "a dry run deletes nothing"

    run = fencepost(
        "prune",
        "--older-than",
        "14d",
        "--batch",
        "2",
        "--log-level",
        "INFO",
        "--log-format",
        "json",
        db=database.url,
    ).ok()
    assert run.stdout.strip() == (
        "pruned 3 finished execution(s) last changed over 14d ago, with their attempts and "
        "transitions"
    )
    assert "\x1b" not in run.stdout, "no progress bar (nor colour) when piped"
    assert "\r" not in run.stdout
    assert [json.loads(line)["message"] for line in run.errors] == [
        "pruned 2 finished executions so far",
        "pruned 3 finished executions so far",
    ]
    for execution in pruned:
        with pytest.raises(NotFound):
            store.get(execution.id)
        with pytest.raises(NotFound):
            store.transitions(execution.id)
    assert store.get(unfinished.id).state is State.SCHEDULED
    assert store.get(recent.id).state is State.SUCCEEDED
    assert store.get(cancelled_now.id).state is State.CANCELLED
    again = fencepost("prune", "--older-than", "0s", "--dry-run", db=database.url).ok()
    assert again.stdout.startswith("would prune 2 finished execution(s)")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_prune_draws_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fencepost.db'}"
    with connect(url, clock=ManualClock(datetime.now(UTC) - timedelta(days=30))) as old:
        for _ in range(5):
            old.cancel(old.submit("mail").id)
    drawn, _ = fencepost_on_terminal("prune", "--older-than", "1d", "--batch", "2", db=url)
    assert "pruning finished executions" in drawn
    assert "5/5" in drawn, "the bar counts up to the total"
    assert "pruned 5 finished execution(s)" in drawn


def test_the_progress_bar_is_drawn_on_stderr_and_json_stays_one_document(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'fencepost.db'}"
    with connect(url, clock=ManualClock(datetime.now(UTC) - timedelta(days=30))) as old:
        for _ in range(5):
            old.cancel(old.submit("mail").id)
    drawn, stdout = fencepost_on_terminal(
        "prune", "--older-than", "1d", "--batch", "2", "--json", db=url, only="stderr"
    )
    assert "pruning finished executions" in drawn  # the bar, on the terminal (stderr)
    assert json.loads(stdout)["executions"] == 5  # stdout: the document alone

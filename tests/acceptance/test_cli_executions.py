"""``fencepost submit``, ``ps``, ``cancel``, ``replay`` and ``dead-letters`` on real databases."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta

from fencepost.domain.buckets import bucket_for
from fencepost.domain.states import CommandState, State
from fencepost.testing.factory import ExecutionFactory
from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database


def key_in_bucket(bucket: int, num_buckets: int = 64) -> str:
    """A bucket key that lands in ``bucket``."""
    return next(
        f"tenant-{i}" for i in itertools.count() if bucket_for(f"tenant-{i}", num_buckets) == bucket
    )


def test_submit_prints_the_execution_and_a_repeat_with_its_key_returns_it(
    database: Database,
) -> None:
    args = (
        "submit",
        "nightly-report",
        "--input",
        "day=monday",
        "--input",
        "n=5",
        "--input",
        "flag=true",
        "--at",
        "2030-01-01T10:00:00+02:00",
        "--key",
        "report-2030-01-01",
        "--max-attempts",
        "5",
        "--bucket-key",
        "tenant-a",
        "--priority",
        "7",
        "--json",
    )
    first = fencepost(*args, db=database.url).json()
    assert {k: first[k] for k in first if k not in ("id", "created_at", "updated_at")} == {
        "job": "nightly-report",
        "job_version": None,
        "state": "SCHEDULED",
        "attempt": 0,
        "max_attempts": 5,
        "epoch": 0,
        "owner": None,
        "lease_until": None,
        "lease_remaining": None,
        "planned_at": "2030-01-01T08:00:00Z",
        "due_at": "2030-01-01T08:00:00Z",
        "held": False,
        "lateness": None,
        "priority": 7,
        "queue": "default",
        "limit_key": None,
        "bucket": bucket_for("tenant-a"),
        "bucket_key": "tenant-a",
        "idempotency_key": "report-2030-01-01",
        "schedule_id": None,
        "slot": None,
        "timeout": None,
        "inputs": {"day": "monday", "n": 5, "flag": True},
        "result": None,
        "error": None,
        "progress": None,
    }
    again, table = fencepost_all(
        args,
        ("submit", "mail", "--input-json", '{"to": ["a@example.com"]}', "--in", "10m"),
        db=database.url,
    )
    assert again.json()["id"] == first["id"]
    stored = database.store().get(first["id"])
    assert stored.inputs == {"day": "monday", "n": 5, "flag": True}

    assert table.ok().row("job") == ["job", "mail"]
    assert table.row("state") == ["state", "SCHEDULED"]
    (mail,) = database.store().query(job="mail").items
    assert mail.inputs == {"to": ["a@example.com"]}
    assert table.row("id") == ["id", mail.id]
    assert timedelta(minutes=9) < mail.due_at - datetime.now(UTC) <= timedelta(minutes=10)


def test_submit_and_schedule_inputs_are_an_object_or_null(database: Database) -> None:
    nested = {"a": {"b": [1, {"c": None}]}, "é": ""}
    runs = fencepost_all(
        ("submit", "null", "--input-json", "null", "--input", "n=1", "--json"),
        ("submit", "empty", "--input-json", "{}", "--json"),
        ("submit", "nested", "--input-json", json.dumps(nested), "--json"),
        ("submit", "refused", "--input-json", '["a", "b"]'),
        ("schedule", "add", "nested", "--every", "1h", "--input-json", json.dumps(nested)),
        ("schedule", "add", "refused", "--every", "1h", "--input-json", "7"),
        db=database.url,
    )
    null, empty, nested_run, refused, scheduled, refused_schedule = runs
    store = database.store()
    assert store.get(null.json()["id"]).inputs == {"n": 1}
    assert store.get(empty.json()["id"]).inputs == {}
    assert store.get(nested_run.json()["id"]).inputs == nested
    assert scheduled.ok()
    [schedule] = store.schedules(job="nested").items
    assert schedule.inputs == nested
    message = "must be a JSON object (a mapping of input names to values), got"
    assert (refused.returncode, refused.errors) == (
        2,
        [f"fencepost submit: --input-json: {message} list"],
    )
    assert (refused_schedule.returncode, refused_schedule.errors) == (
        2,
        [f"fencepost schedule add: --input-json: {message} int"],
    )
    assert store.query(job="refused").items == []
    assert store.schedules(job="refused").items == []


def test_ps_lists_unfinished_executions_with_lease_and_lateness(database: Database) -> None:
    store = database.store()
    make = ExecutionFactory(store)
    elsewhere = key_in_bucket(20)
    later = make.scheduled("mail", delay=3600, bucket_key=elsewhere)
    late = make.scheduled(
        "mail", execute_at=datetime.now(UTC) - timedelta(minutes=2), bucket_key=elsewhere
    )
    running = make.running("crunch", owner="node-a", ttl=300, bucket_key=key_in_bucket(5))
    waiting = make.retry_waiting("flaky", retry_in=600, bucket_key=elsewhere)
    dead = make.dead("report", bucket_key=elsewhere)
    done = make.succeeded("report", bucket_key=elsewhere)

    listed_run, table, everything_run, finished_run, mine_run, limited = fencepost_all(
        ("ps", "--json"),
        ("ps", "--owned-buckets", "5"),
        ("ps", "--all", "--json"),
        ("ps", "--state", "failed,SUCCEEDED", "--job", "report", "--json"),
        ("ps", "--mine", "--owned-buckets", "4-6", "--json"),
        ("ps", "--limit", "1"),
        db=database.url,
    )
    listed = listed_run.json()
    assert [e["id"] for e in listed] == [later.id, late.id, running.execution_id, waiting.id]
    by_id = {e["id"]: e for e in listed}
    run = by_id[running.execution_id]
    assert (run["state"], run["attempt"], run["epoch"], run["owner"]) == ("RUNNING", 1, 1, "node-a")
    assert 200 < run["lease_remaining"] <= 300
    assert run["lateness"] is None
    assert run["bucket"] == 5
    assert 120 <= by_id[late.id]["lateness"] < 180
    assert by_id[later.id]["lateness"] is None
    assert by_id[waiting.id]["state"] == "RETRY_WAIT"

    cells = table.ok().row(running.execution_id)
    assert cells[1:7] == ["crunch", "default", "RUNNING", "1/3", "1", "node-a"]
    assert cells[-2:] == ["5", "*"], "the node's own bucket is marked"
    assert table.row(late.id)[3] == "SCHEDULED"
    assert "4 executions" in table.stdout

    everything = everything_run.json()
    assert {e["id"] for e in everything} >= {dead.id, done.id}
    assert len(everything) == 6
    finished = finished_run.json()
    assert [(e["id"], e["state"]) for e in finished] == [
        (dead.id, "FAILED"),
        (done.id, "SUCCEEDED"),
    ]
    mine = mine_run.json()
    assert [(e["id"], e["mine"]) for e in mine] == [(running.execution_id, True)]
    assert "first 1 execution; more match" in limited.stdout


def test_cancel_replay_and_dead_letters(database: Database) -> None:
    store = database.store()
    make = ExecutionFactory(store)
    waiting = make.scheduled("mail", delay=3600)
    running = make.running("crunch", owner="node-a", ttl=300)
    dead_report = make.dead("report")
    dead_other = make.dead("other")
    done = make.succeeded("report")

    letters, docs_run = fencepost_all(
        ("dead-letters",), ("dead-letters", "--job", "other", "--json"), db=database.url
    )
    assert letters.ok().row(dead_report.id)[1:3] == ["report", "1/3"]
    assert letters.row(dead_other.id)[-1] == "fatal"
    docs = docs_run.json()
    assert [(d["id"], d["state"], d["error"]) for d in docs] == [(dead_other.id, "FAILED", "fatal")]

    cancelled = fencepost(
        "cancel", waiting.id, running.execution_id, "--json", db=database.url
    ).json()
    assert [(c["id"], c["state"], c["outcome"]) for c in cancelled] == [
        (waiting.id, "CANCELLED", "cancelled"),
        (running.execution_id, "RUNNING", "cancel requested: the worker holding it stops it"),
    ]
    (command,) = store.commands(running.execution_id)
    assert command.state is CommandState.PENDING
    assert command.requested_by.startswith("cli:")
    assert store.transitions(waiting.id)[-1].actor.startswith("cli:")

    # Independent of each other: a finished execution, a dead letter, another job's.
    finished, replayed, everything = fencepost_all(
        ("cancel", done.id),
        ("replay", dead_report.id),
        ("replay", "--all-dead", "--job", "other", "--json"),
        db=database.url,
    )
    assert finished.returncode == 4  # a conflict with the stored state
    assert finished.errors == [
        f"fencepost cancel: execution {done.id} is SUCCEEDED, not RUNNING: cannot deliver a "
        "cancel command"
    ]

    assert replayed.ok().row(dead_report.id)[1:3] == ["report", "SCHEDULED"]
    assert "1 replayed" in replayed.stdout
    assert store.get(dead_report.id).state is State.SCHEDULED
    assert store.transitions(dead_report.id)[-1].actor.startswith("cli:")

    assert everything.json() == {"action": "replay", "dry_run": False, "done": 1, "skipped": 0}
    assert store.get(dead_other.id).state is State.SCHEDULED
    assert fencepost("dead-letters", "--json", db=database.url).json() == []

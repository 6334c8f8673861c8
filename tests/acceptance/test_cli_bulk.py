"""``fencepost replay``, ``cancel``, ``retry-now`` and ``delete`` by id or by filter flags.

By filter: counted first (``--dry-run`` stops there), confirmed on a terminal, refused
when piped and more than one matches without ``--yes``, then acted on in batches.
"""

from __future__ import annotations

import os
import pty
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from fencepost.domain.states import CommandState, Event, State
from fencepost.testing import ManualClock
from fencepost.testing.factory import ExecutionFactory
from tests.acceptance.cli import FENCEPOST, Run, fencepost, fencepost_all
from tests.acceptance.conftest import Database

UNKNOWN = "0190b1e0-0000-7000-8000-000000000000"


def fencepost_answering(answer: str, *args: str, db: str) -> Run:
    """Run ``fencepost ARGS --db DB`` with stdin on a terminal that types ``answer``."""
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "FENCEPOST_DB"}
    try:
        os.write(controller, answer.encode() + b"\n")  # waits in the terminal's line buffer
        done = subprocess.run(
            [FENCEPOST, *args, "--db", db],
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    return Run(list(args), done.returncode, done.stdout, done.stderr)


def test_replay_by_filter_counts_confirms_then_replays_in_batches(database: Database) -> None:
    two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
    old = ExecutionFactory(database.store(ManualClock(two_hours_ago))).dead("report").id
    store = database.store()
    make = ExecutionFactory(store)
    recent = sorted(make.dead("report").id for _ in range(5))
    other = make.dead("mail").id

    refused, dry = fencepost_all(
        ("replay", "--job", "report", "--since", "1h"),
        ("replay", "--job", "report", "--since", "1h", "--dry-run", "--json"),
        db=database.url,
    )
    assert refused.returncode == 2
    assert refused.errors == [
        "fencepost replay: 5 executions match; add --yes to replay them all "
        "(--dry-run lists them first)"
    ]
    preview = dry.json()
    assert (preview["action"], preview["dry_run"], preview["matched"]) == ("replay", True, 5)
    assert [e["id"] for e in preview["preview"]] == recent
    assert {store.get(i).state for i in [*recent, old, other]} == {State.FAILED}

    argv = ("replay", "--job", "report", "--since", "1h", "--yes", "--batch", "2", "--json")
    done = fencepost(*argv, db=database.url).json()
    assert done == {"action": "replay", "dry_run": False, "done": 5, "skipped": 0}
    for execution_id in recent:
        last = store.transitions(execution_id)[-1]
        assert last.event is Event.REPLAYED
        assert last.actor is not None
        assert last.actor.startswith("cli:")
    assert store.get(old).state is State.FAILED, "finished two hours ago: not --since 1h"
    assert store.get(other).state is State.FAILED
    again = fencepost("replay", "--job", "report", "--since", "1h", db=database.url).ok()
    assert "0 would be replayed" in again.stdout, "nothing left: nothing asked, nothing done"


def test_cancel_retry_now_and_delete_by_filter_and_by_id(database: Database) -> None:
    store = database.store()
    make = ExecutionFactory(store)
    slow = sorted(make.scheduled("mail", queue="slow", delay=3600).id for _ in range(3))
    running = make.running("crunch", queue="slow").execution_id
    later = make.scheduled("report", delay=3600).id
    done = make.succeeded("report").id

    dry, cancelled, moved, refused, missing = fencepost_all(
        ("cancel", "--queue", "slow", "--state", "SCHEDULED", "--dry-run"),
        ("cancel", "--queue", "slow", "--yes", "--json"),
        ("retry-now", later, "--json"),
        ("retry-now", done),
        ("delete", UNKNOWN),
        db=database.url,
    )
    # The dry run and the cancel ran side by side: the dry run may have seen 3 or none.
    assert "would be cancelled" in dry.ok().stdout
    assert cancelled.json() == {"action": "cancel", "dry_run": False, "done": 4, "skipped": 0}
    assert {store.get(i).state for i in slow} == {State.CANCELLED}
    (command,) = store.commands(running)
    assert (command.state, command.requested_by[:4]) == (CommandState.PENDING, "cli:")
    [row] = moved.json()
    assert (row["id"], row["state"], row["outcome"]) == (later, "SCHEDULED", "due now")
    assert store.get(later).due_at <= datetime.now(UTC)
    assert store.transitions(later)[-1].reason == "retry now"
    assert refused.returncode == 4
    assert refused.errors[0].startswith(f"fencepost retry-now: execution {done} is SUCCEEDED")
    assert (missing.returncode, missing.errors) == (
        3,
        [f"fencepost delete: execution {UNKNOWN} not found"],
    )

    unfinished, one = fencepost_all(
        ("delete", running),
        ("delete", "--job", "report", "--state", "SUCCEEDED"),  # one match: no --yes needed
        db=database.url,
    )
    assert unfinished.returncode == 4
    assert "only a finished execution" in unfinished.errors[0]
    assert "1 deleted" in one.ok().stdout
    everything = fencepost("delete", "--all", "--yes", "--json", db=database.url).json()
    assert everything == {"action": "delete", "dry_run": False, "done": 3, "skipped": 0}
    assert {e.id for e in store.query(limit=100).items} == {running, later}
    deleted = store.deletions().items
    assert sorted(d.execution_id for d in deleted) == sorted([done, *slow])
    assert all(d.actor.startswith("cli:") for d in deleted)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_a_terminal_is_asked_before_anything_changes(database: Database) -> None:
    store = database.store()
    dead = [ExecutionFactory(store).dead("report").id for _ in range(2)]
    declined = fencepost_answering("n", "replay", "--job", "report", db=database.url)
    assert declined.returncode == 1
    assert "replay 2 executions? [y/N]" in declined.stderr
    assert declined.errors[-1].endswith("fencepost replay: not confirmed; nothing was changed")
    assert {store.get(i).state for i in dead} == {State.FAILED}
    accepted = fencepost_answering("y", "replay", "--job", "report", db=database.url)
    assert accepted.returncode == 0, accepted.stderr
    assert "2 replayed" in accepted.stdout
    assert {store.get(i).state for i in dead} == {State.SCHEDULED}


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
def test_bad_selections_are_usage_errors_and_odd_text_matches_nothing(database: Database) -> None:
    store = database.store()
    dead = ExecutionFactory(store).dead("report").id
    runs = fencepost_all(
        ("replay",),
        ("replay", dead, "--job", "report"),
        ("delete", "--all", "--batch", "0"),
        ("delete", "--all", "--batch", "10001"),
        ("replay", "--job", "report", "--since", "5"),
        ("replay", "--since", "1h", "--finished-after", "2h"),
        ("cancel", "not-an-id"),
        ("retry-now", "--state", "NOPE"),
        ("delete", "--job", ""),
        db=database.url,
    )
    fields = ["ID", "ID", "--batch", "--batch", "--since", "--since", "ID", "--state", "--job"]
    for run, field in zip(runs, fields, strict=True):
        assert run.returncode == 2, run
        assert run.errors[0].startswith(f"fencepost {run.argv[1]}: {field}: "), run.errors
    odd = fencepost_all(
        *(("delete", "--job", text, "--yes") for text in ("' OR 1=1 --", "%", "_", "x" * 5000)),
        db=database.url,
    )
    for run in odd:
        assert "0 would be deleted" in run.ok().stdout
    assert store.get(dead).state is State.FAILED

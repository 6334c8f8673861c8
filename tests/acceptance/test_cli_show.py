"""``fencepost show ID`` (and ``ps ID``): one execution, whole, on real databases."""

from __future__ import annotations

import json

from fencepost.domain.states import CommandKind, State
from tests.acceptance.cli import fencepost_all
from tests.acceptance.conftest import Database

TRACEBACK = "ValueError: the ledger is closed\nTraceback (most recent call last):\n  line 3"


def block(lines: list[str], label: str) -> object:
    """The indented JSON printed under ``label``."""
    start = lines.index(label) + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("  "))
    return json.loads("\n".join(lines[start:end]))


def test_a_succeeded_execution_shows_its_attempts_trail_commands_and_no_old_error(
    database: Database,
) -> None:
    store = database.store()
    execution = store.submit("ledger", {"day": "monday", "n": 5}, idempotency_key="ledger-mon")
    (first,) = store.claim("worker-a", jobs=["ledger"])
    store.heartbeat(first, progress={"rows": 40})
    store.fail(first, TRACEBACK, retry_in=0)
    (second,) = store.claim("worker-b", jobs=["ledger"])
    store.request(execution.id, CommandKind.PAUSE, actor="cli:alice@host")
    store.complete(second, {"rows": 80})
    assert store.get(execution.id).error == TRACEBACK, "the store keeps the old error"

    shown, as_ps, document = fencepost_all(
        ("show", execution.id),
        ("ps", execution.id),
        ("show", execution.id.upper(), "--json"),  # ids are UUIDs: any case names it
        db=database.url,
    )

    shown.ok()
    assert as_ps.ok().stdout == shown.stdout, "ps ID prints what show ID prints"
    assert shown.row("job") == ["job", "ledger (any version)"]
    assert shown.row("state") == ["state", "SUCCEEDED"]
    assert shown.row("attempt") == ["attempt", "2/3"]
    assert shown.row("idempotency key") == ["idempotency key", "ledger-mon"]
    assert shown.row("progress") == ["progress", '{"rows":40}']
    assert shown.row("outcome")[1].startswith("SUCCEEDED at ")
    lines = shown.stdout.splitlines()
    assert block(lines, "inputs:") == {"day": "monday", "n": 5}
    assert block(lines, "result:") == {"rows": 80}

    assert "error:" not in shown.stdout.split("attempts")[0], "no error of its own"
    assert [r[:3] + r[5:] for r in shown.rows("1") + shown.rows("2")] == [
        ["1", "1", "worker-a", "FAILED", "ValueError: the ledger is closed …"],
        ["2", "2", "worker-b", "SUCCEEDED", "-"],
    ]
    trail = [line.split()[2:] for line in lines if "Z  " in line and "→" in line]
    assert [t[:2] for t in trail] == [
        ["SUBMITTED", "-→SCHEDULED"],
        ["CLAIMED", "SCHEDULED→RUNNING"],
        ["FAILED", "RUNNING→RETRY_WAIT"],
        ["CLAIMED", "RETRY_WAIT→RUNNING"],
        ["COMPLETED", "RUNNING→SUCCEEDED"],
    ]
    assert trail[2][2:5] == ["1", "worker-a", "ValueError:"], "epoch, actor, reason's first line"
    (command,) = store.commands(execution.id)
    assert shown.row(command.id)[1:4] == ["pause", command.state.value, "cli:alice@host"]

    doc = document.json()
    assert doc["id"] == execution.id
    assert (doc["state"], doc["error"], doc["result"]) == ("SUCCEEDED", None, {"rows": 80})
    assert doc["outcome"]["state"] == "SUCCEEDED"
    assert (doc["outcome"]["result"], doc["outcome"]["error"]) == ({"rows": 80}, None)
    assert doc["outcome"]["actor"] == "worker-b"
    assert [
        (a["attempt"], a["epoch"], a["owner"], a["outcome"], a["error"]) for a in doc["attempts"]
    ] == [(1, 1, "worker-a", "FAILED", TRACEBACK), (2, 2, "worker-b", "SUCCEEDED", None)]
    assert [(t["event"], t["from_state"], t["to_state"]) for t in doc["transitions"]] == [
        ("SUBMITTED", None, "SCHEDULED"),
        ("CLAIMED", "SCHEDULED", "RUNNING"),
        ("FAILED", "RUNNING", "RETRY_WAIT"),
        ("CLAIMED", "RETRY_WAIT", "RUNNING"),
        ("COMPLETED", "RUNNING", "SUCCEEDED"),
    ]
    assert doc["transitions"][2]["reason"] == TRACEBACK
    assert [(c["id"], c["kind"], c["requested_by"]) for c in doc["commands"]] == [
        (command.id, "pause", "cli:alice@host")
    ]
    assert doc["inputs"] == {"day": "monday", "n": 5}
    assert doc["progress"] == {"rows": 40}


def test_a_dead_letter_shows_its_whole_error_and_a_waiting_retry_the_one_it_retries(
    database: Database,
) -> None:
    store = database.store()
    dead = store.submit("ledger", {}, max_attempts=1)
    (lease,) = store.claim("worker-a", ids=[dead.id])
    store.fail(lease, TRACEBACK)
    retrying = store.submit("ledger", {}, max_attempts=3)
    (lease,) = store.claim("worker-a", ids=[retrying.id])
    store.fail(lease, "timeout talking to the bank", retry_in=3600)
    cancelled = store.submit("ledger", {})
    store.request(cancelled.id, CommandKind.CANCEL, actor="cli:bob@host")

    failed, waiting, gone, failed_doc = fencepost_all(
        ("show", dead.id),
        ("show", retrying.id),
        ("show", cancelled.id),
        ("show", dead.id, "--json"),
        db=database.url,
    )

    assert failed.ok().row("state") == ["state", "FAILED"]
    lines = failed.stdout.splitlines()
    at = lines.index("error:")
    assert lines[at + 1 : at + 4] == [f"  {line}" for line in TRACEBACK.splitlines()]
    doc = failed_doc.json()
    assert doc["error"] == doc["outcome"]["error"] == TRACEBACK
    assert doc["outcome"]["state"] == State.FAILED.value

    assert waiting.ok().row("state") == ["state", "RETRY_WAIT"]
    assert "error (being retried):" in waiting.stdout
    assert "  timeout talking to the bank" in waiting.stdout.splitlines()
    assert waiting.row("outcome") == ["outcome", "-"]

    assert gone.ok().row("state") == ["state", "CANCELLED"]
    assert gone.row("by") == ["by", "cli:bob@host"]
    assert "none yet" in gone.stdout, "no attempt ever started"


def test_an_unknown_or_malformed_id_is_one_line_with_its_code(database: Database) -> None:
    store = database.store()
    known = store.submit("ledger", {})
    unknown = "01a249ec-09e1-736f-8880-c59f061db07f"
    missing, malformed, long_one, filtered, as_ps = fencepost_all(
        ("show", unknown),
        ("show", "nope"),
        ("show", "x" * 5000),
        ("ps", known.id, "--state", "RUNNING"),
        ("ps", "nope"),
        db=database.url,
    )
    assert (missing.returncode, missing.errors) == (
        3,
        [f"fencepost show: execution {unknown} not found"],
    )
    assert missing.stdout == ""
    assert malformed.returncode == 2
    assert malformed.errors == [
        "fencepost show: ID: 'nope' is not an execution id "
        "(a UUID like 01a249ec-09e1-736f-8880-...)"
    ]
    assert long_one.returncode == 2
    assert len(long_one.errors) == 1
    assert len(long_one.errors[0]) < 200
    assert filtered.returncode == 2
    assert filtered.errors == [
        "fencepost ps: --state: lists executions; with an ID, ps shows that one in full "
        "(as show ID does)"
    ]
    assert (as_ps.returncode, as_ps.errors[0].startswith("fencepost ps: ID: 'nope'")) == (2, True)

"""``fencepost ps`` by limit key, owner, creation and finish time and error text, and
``ps --counts``, as real processes on SQLite and PostgreSQL.

The executions are made through a store on a pinned clock, two hours before the
command runs on the real one, so "in the last D" is decided with an hour to spare. A
bad value is one line naming the option (exit 2); values no process argument can
carry go through :func:`main` in process.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from fencepost.cli.main import main
from fencepost.testing import ManualClock
from tests.acceptance.cli import Run, fencepost, fencepost_all
from tests.acceptance.conftest import Database

USAGE = 2


def _scene(database: Database) -> tuple[dict[str, str], datetime]:
    """Executions by name and the instant between the two groups they were made in:
    ``keyed`` (SCHEDULED, key k), ``running`` (under w1), ``dead`` (FAILED: "Disk 100%
    full") three hours ago; ``done`` (SUCCEEDED) and ``retry`` (RETRY_WAIT: "Timeout")
    two hours ago, finished then too."""
    now = datetime.now(UTC)
    clock = ManualClock(now - timedelta(hours=3))
    store = database.store(clock)
    made = {"keyed": store.submit("mail", limit_key="k").id}
    running = store.submit("crunch")
    store.claim("w1", ids=[running.id], ttl=7 * 3600)
    made["running"] = running.id
    dead = store.submit("mail", max_attempts=1)
    store.fail(store.claim("w2", ids=[dead.id])[0], "Disk 100% full")
    made["dead"] = dead.id
    clock.set(now - timedelta(hours=2))
    done = store.submit("report")
    store.complete(store.claim("w2", ids=[done.id])[0], "ok")
    made["done"] = done.id
    retry = store.submit("flaky", max_attempts=3)
    store.fail(store.claim("w2", ids=[retry.id])[0], "Timeout", retry_in=7200)
    made["retry"] = retry.id
    return made, now - timedelta(hours=2, minutes=30)


def listed(run: Run) -> list[str]:
    """The ids a ``--json`` run listed, in its order."""
    return [e["id"] for e in run.json()]


def test_ps_finds_by_every_new_filter(
    database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    made, between = _scene(database)
    cases: list[tuple[tuple[str, ...], list[str]]] = [
        (("--key", "k"), ["keyed"]),
        (("--owner", "w1"), ["running"]),
        (("--owner", "w2"), []),  # what w2 ran has finished or waits for a retry
        (("--error", "100%"), ["dead"]),
        (("--error", "timeout"), ["retry"]),  # in any case, in every state
        (("--error", "timeout", "--state", "failed"), []),
        (("--since", "150m"), ["done", "retry"]),  # looking back: every state
        (("--since", "150m", "--state", "retry_wait"), ["retry"]),
        (("--since", "1h"), []),
        (("--created-before", between.isoformat()), ["keyed", "running", "dead"]),
        (("--created-after", between.isoformat(), "--created-before", "1m"), ["done", "retry"]),
        (("--finished-after", "150m"), ["done"]),
        (("--finished-before", "150m"), ["dead"]),
        (("--finished-after", "1d", "--job", "mail"), ["dead"]),
        (("--created-after", "1d"), ["keyed", "running", "dead", "done", "retry"]),
        ((), ["keyed", "running", "retry"]),  # without a filter: the unfinished ones
        (("--all", "--key", "k"), ["keyed"]),
    ]
    # In process (a process each would add a second of start-up per case), then a few
    # of them as real processes: the same answers.
    for args, names in cases:
        assert main(["ps", *args, "--json", "--db", database.url]) == 0, args
        found = [e["id"] for e in json.loads(capsys.readouterr().out)]
        assert found == sorted(made[n] for n in names), args
    processes = [cases[0], cases[3], cases[6], cases[11]]
    runs = fencepost_all(*(("ps", *args, "--json") for args, _ in processes), db=database.url)
    for (args, names), run in zip(processes, runs, strict=True):
        assert listed(run) == sorted(made[n] for n in names), args
    recent = fencepost("ps", "--since", "1d", "--recent", "--limit", "2", "--json", db=database.url)
    assert listed(recent) == sorted(made.values(), reverse=True)[:2]


def test_ps_counts_by_state(database: Database) -> None:
    made, _ = _scene(database)
    every, failed, table, looking_back = fencepost_all(
        ("ps", "--counts", "--json"),
        ("ps", "--counts", "--state", "failed,succeeded", "--json"),
        ("ps", "--counts", "--job", "mail"),
        ("ps", "--counts", "--since", "150m", "--json"),
        db=database.url,
    )
    assert every.json() == {
        "counts": {
            "SCHEDULED": 1,
            "RUNNING": 1,
            "RETRY_WAIT": 1,
            "SUCCEEDED": 1,
            "FAILED": 1,
            "CANCELLED": 0,
            "SKIPPED": 0,
        },
        "total": 5,
    }, "--counts counts every state unless --state narrows it"
    assert failed.json()["total"] == 2
    assert failed.json()["counts"]["FAILED"] == failed.json()["counts"]["SUCCEEDED"] == 1
    assert table.ok().row("SCHEDULED") == ["SCHEDULED", "1"]
    assert table.row("FAILED") == ["FAILED", "1"]
    assert "2 executions match" in table.stdout
    assert looking_back.json()["total"] == 2
    assert len(made) == 5


LONG = "x" * 10_000

#: (arguments, the option the refusal names).
HOSTILE: list[tuple[tuple[str, ...], str]] = [
    (("--error", ""), "--error"),
    (("--error", "x" * 201), "--error"),
    (("--error", LONG), "--error"),
    (("--key", ""), "--key"),
    (("--owner", " "), "--owner"),
    (("--since", "5"), "--since"),
    (("--since", "0s"), "--since"),
    (("--since", "999999999d"), "--since"),
    (("--since", "soon"), "--since"),
    (("--since", "1h", "--created-after", "2h"), "--since"),
    (("--created-after", "yesterday"), "--created-after"),
    (("--created-after", "2026-01-01T00:00"), "--created-after"),
    (("--created-before", "14"), "--created-before"),
    (("--created-before=-1h",), "--created-before"),
    (("--finished-after", LONG), "--finished-after"),
    (("--finished-before", "0001-01-01T00:00:00+05:00"), "--finished-before"),
    (("--finished-after", "1e400d"), "--finished-after"),
    (("--due-before", "1h", "--overdue"), "--due-before"),
    (("--bucket", "-1"), "--bucket"),
    (("--bucket", "9" * 5000), "--bucket"),
    (("--counts", "--limit", "5"), "--limit"),
    (("--mine", "--owned-buckets", "1", "--bucket", "1"), "--mine"),
]


def test_bad_values_are_one_line_naming_the_option(
    database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process (argument checks open no store; one process each would add a second
    of start-up per case): what the command prints, and its exit code."""
    store = database.store()
    store.submit("kept")
    for args, option in HOSTILE:
        assert main(["ps", *args, "--db", database.url]) == USAGE, args
        errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(errors) == 1, errors
        assert errors[0].startswith(f"fencepost ps: {option}: "), errors
        assert len(errors[0]) < 300, "a refusal quotes a long value only in part"
    # And one as a real process: a refusal there is the same one line.
    run = fencepost("ps", "--error", "", db=database.url)
    assert (run.returncode, run.errors) == (USAGE, ["fencepost ps: --error: must not be empty"])
    assert len(store.query(limit=10).items) == 1


def test_a_filter_with_an_id_is_refused(
    database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    database.store().submit("kept")
    for flag, value in (("--error", "x"), ("--since", "1h"), ("--key", "k"), ("--counts", None)):
        args = ["ps", "01a249ec-09e1-736f-8880-000000000000", flag, *([value] if value else [])]
        assert main([*args, "--db", database.url]) == USAGE
        error = capsys.readouterr().err.splitlines()[-1]
        assert error.startswith(f"fencepost ps: {flag}: lists executions"), error


def test_text_no_store_holds_lists_nothing(
    database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """U+0000 cannot be a process argument (main is called in process), a lone surrogate
    comes from undecodable bytes (a real process): each lists nothing, exit 0, and so
    does SQL-ish text."""
    made = database.store().submit("kept", limit_key="k")
    flags = ("--error", "--key", "--owner")
    for flag in flags:
        for value in ("\x00", "k\x00", "\ud800", "' OR 1=1 --", "%", "_", "\\", "K"):
            assert main(["ps", "--all", flag, value, "--db", database.url, "--json"]) == 0
            assert capsys.readouterr().out.strip() == "[]", (flag, value)
    calls = [("ps", "--all", flag, "\udced\udca0\udc80", "--json") for flag in flags]
    for call, run in zip(calls, fencepost_all(*calls, db=database.url), strict=True):
        assert listed(run) == [], call
    assert listed(fencepost("ps", "--all", "--key", "k", "--json", db=database.url)) == [made.id]

"""``fencepost ps --overdue [SECONDS]`` and ``ps --outcome OUTCOME`` as real processes on
SQLite and PostgreSQL: the executions an operator most needs to see.

The executions are made in the past through a store on a pinned clock, an hour before
the command runs on the real one, so "due more than SECONDS ago" is decided with
minutes to spare. A bad value is one line naming the option (exit 2); values no
process argument can carry go through :func:`main` in process.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fencepost.cli.main import main
from fencepost.testing import ManualClock
from tests.acceptance.cli import Run, fencepost, fencepost_all
from tests.acceptance.conftest import Database

USAGE = 2


def _scene(database: Database) -> dict[str, str]:
    """Executions by name, made an hour ago (see each comment for its state now)."""
    now = datetime.now(UTC)
    clock = ManualClock(now - timedelta(hours=1))
    store = database.store(clock)
    made: dict[str, str] = {}
    # Waiting and due an hour ago: overdue at any SECONDS below 3600.
    made["late"] = store.submit("mail").id
    # Failed, its retry due 59 minutes ago: overdue too.
    retry = store.submit("flaky", max_attempts=3)
    store.fail(store.claim("w", ids=[retry.id])[0], "boom", retry_in=60)
    made["retry"] = retry.id
    # Due two minutes ago: overdue at 10 s, not at 300 s.
    made["recent"] = store.submit("mail", execute_at=now - timedelta(minutes=2)).id
    # Due in an hour: never overdue.
    made["future"] = store.submit("mail", execute_at=now + timedelta(hours=1)).id
    # Running (due an hour ago): not waiting, so not overdue.
    running = store.submit("crunch")
    store.claim("w", ids=[running.id], ttl=7200)
    made["running"] = running.id
    # Timed out, its retry due in an hour.
    timed = store.submit("slow", max_attempts=3)
    store.fail(store.claim("w", ids=[timed.id])[0], "ran past 10s", timed_out=True, retry_in=7200)
    made["timed-out"] = timed.id
    # Timed out on its last attempt: a dead letter.
    dead = store.submit("slow", max_attempts=1)
    store.fail(store.claim("w", ids=[dead.id])[0], "ran past 10s", timed_out=True)
    made["timed-out-dead"] = dead.id
    done = store.submit("report")
    store.complete(store.claim("w", ids=[done.id])[0], "ok")
    made["done"] = done.id
    return made


def listed(run: Run) -> list[str]:
    """The ids a ``--json`` run listed, in its order."""
    return [e["id"] for e in run.json()]


def test_ps_overdue_lists_waiting_work_due_more_than_seconds_ago(database: Database) -> None:
    made = _scene(database)
    default, at_300, at_0, table, with_outcome, recent_first = fencepost_all(
        ("ps", "--overdue", "--json"),
        ("ps", "--overdue", "300", "--json"),
        ("ps", "--overdue", "0", "--json"),
        ("ps", "--overdue"),
        ("ps", "--overdue", "0", "--outcome", "failed", "--json"),
        ("ps", "--overdue", "--recent", "--limit", "2", "--json"),
        db=database.url,
    )

    def named(*names: str) -> list[str]:
        return sorted(made[n] for n in names)

    assert listed(default) == named("late", "retry", "recent")
    assert {e["state"] for e in default.json()} == {"SCHEDULED", "RETRY_WAIT"}
    assert all(e["lateness"] > 60 for e in default.json()), "each is late, and says by how much"
    assert listed(at_300) == named("late", "retry")
    assert listed(at_0) == named("late", "retry", "recent")
    assert "3 executions waiting, due more than 10s ago" in table.ok().stdout
    assert table.row(made["retry"])[3] == "RETRY_WAIT"
    assert listed(with_outcome) == named("retry"), "--outcome narrows --overdue"
    assert listed(recent_first) == named("late", "retry", "recent")[::-1][:2]


def test_ps_outcome_lists_executions_whose_attempt_ended_so(database: Database) -> None:
    made = _scene(database)
    lower, upper, failed_only, succeeded, table = fencepost_all(
        ("ps", "--outcome", "timed_out", "--json"),
        ("ps", "--outcome", "TIMED_OUT", "--state", "failed", "--json"),
        ("ps", "--outcome", "Failed", "--json"),
        ("ps", "--outcome", "succeeded", "--json"),
        ("ps", "--outcome", "timed_out"),
        db=database.url,
    )
    # Every state unless --state narrows it: the dead letter is listed.
    assert listed(lower) == sorted([made["timed-out"], made["timed-out-dead"]])
    assert listed(upper) == [made["timed-out-dead"]]
    assert listed(failed_only) == [made["retry"]]
    assert listed(succeeded) == [made["done"]]
    assert table.ok().row(made["timed-out-dead"])[3] == "FAILED"


LONG = "x" * 10_000

HOSTILE = [
    pytest.param(("--outcome", ""), "--outcome", id="outcome-empty"),
    pytest.param(("--outcome", " "), "--outcome", id="outcome-blank"),
    pytest.param(("--outcome", "nope"), "--outcome", id="outcome-unknown"),
    pytest.param(("--outcome", "timed out"), "--outcome", id="outcome-space"),
    pytest.param(("--outcome", LONG), "--outcome", id="outcome-10k"),
    pytest.param(("--outcome", "\udced\udca0\udc80"), "--outcome", id="outcome-surrogate"),
    pytest.param(("--overdue", "-1"), "--overdue", id="overdue-negative"),
    pytest.param(("--overdue", "nan"), "--overdue", id="overdue-nan"),
    pytest.param(("--overdue", "inf"), "--overdue", id="overdue-inf"),
    pytest.param(("--overdue", "1e400"), "--overdue", id="overdue-overflow"),
    pytest.param(("--overdue", "9" * 5000), "--overdue", id="overdue-5000-digits"),
    pytest.param(("--overdue", "4e9"), "--overdue", id="overdue-past-100-years"),
    pytest.param(("--overdue", "ten"), "--overdue", id="overdue-words"),
    pytest.param(("--overdue", "10s"), "--overdue", id="overdue-unit"),
    pytest.param(("--overdue", ""), "--overdue", id="overdue-empty"),
    pytest.param(("--overdue", LONG), "--overdue", id="overdue-10k"),
]


@pytest.mark.parametrize(("args", "option"), HOSTILE)
def test_bad_values_are_one_line_naming_the_option(
    database: Database, args: tuple[str, ...], option: str
) -> None:
    store = database.store()
    store.submit("kept")
    before = store.query(limit=10)
    run = fencepost("ps", *args, db=database.url)
    assert run.returncode == USAGE, run.stderr
    assert len(run.errors) == 1, run.stderr
    assert run.errors[0].startswith(f"fencepost ps: {option}: "), run.errors
    assert len(run.errors[0]) < 300, "a refusal quotes a long value only in part"
    assert "Traceback" not in run.stderr
    assert store.query(limit=10) == before


def test_overdue_takes_no_other_state_choice_and_no_id(database: Database) -> None:
    database.store().submit("kept")
    with_state, with_all, with_id = fencepost_all(
        ("ps", "--overdue", "--state", "running"),
        ("ps", "--all", "--overdue", "5"),
        ("ps", "01a249ec-09e1-736f-8880-000000000000", "--outcome", "timed_out"),
        db=database.url,
    )
    for run in (with_state, with_all):
        assert run.returncode == USAGE, run.stderr
        assert "not allowed with argument" in run.stderr
    assert with_id.returncode == USAGE
    assert with_id.errors[-1].startswith("fencepost ps: --outcome: lists executions"), (
        with_id.errors
    )


@pytest.mark.parametrize(
    "value", ["\x00", "timed_out\x00", "\ud800"], ids=["nul", "nul-tail", "lone"]
)
def test_values_no_process_argument_can_carry_are_refused_in_process(
    database: Database, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    database.store().submit("kept")
    assert main(["ps", "--outcome", value, "--db", database.url]) == USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("fencepost ps: --outcome: unknown attempt outcome "), err
    err[0].encode()  # the line itself is printable text

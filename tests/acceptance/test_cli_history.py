"""``fencepost history``: the charts as a table or one JSON document, from a real process.

The executions are prepared with a ManualClock twenty minutes behind real time (the
command reads at the real now, and rolls up what finished first).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fencepost.testing import ManualClock
from tests.acceptance.cli import fencepost
from tests.acceptance.conftest import Database
from tests.acceptance.test_cli_hostile_inputs import LONE_SURROGATE

VALIDATION_EXIT = 2


def prepare(database: Database) -> datetime:
    """Two executions planned at the start of a minute twenty minutes ago: ``a`` (queue
    ``q``) claimed 2 s late and SUCCEEDED, ``b`` claimed 4 s late and dead-lettered.
    Returns that minute."""
    now = datetime.now(UTC)
    minute = now.replace(second=0, microsecond=0) - timedelta(minutes=20)
    clock = ManualClock(minute)
    store = database.store(clock)
    store.submit("a", queue="q")
    store.submit("b")
    clock.set(minute + timedelta(seconds=2))
    (a,) = store.claim("w", jobs=["a"])
    store.complete(a, "ok")
    clock.set(minute + timedelta(seconds=4))
    (b,) = store.claim("w", jobs=["b"])
    store.fail(b, "fatal", retryable=False)
    return minute


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def test_history_prints_the_chart_as_json_and_as_a_table(database: Database) -> None:
    minute = prepare(database)
    body = fencepost("history", "--json", db=database.url).json()
    assert (body["window"], body["step_seconds"], len(body["points"])) == ("hour", 60, 60)
    assert body["rolled_up_to"] is not None, "the command rolled up first"
    (point,) = [p for p in body["points"] if p["at"] == iso(minute)]
    assert (point["succeeded"], point["dead"], point["claims"]) == (1, 1, 2)
    assert (point["lateness_p50"], point["lateness_p99"]) == (2.5, 5.0)
    assert (point["claim_counted"], point["finish_counted"]) == (2, 2)
    week = fencepost("history", "--window", "week", "--queue", "q", "--json", db=database.url)
    assert (week.json()["queue"], len(week.json()["points"])) == ("q", 168)
    assert sum(p["succeeded"] for p in week.json()["points"]) == 1
    table = fencepost("history", "--job", "b", db=database.url).ok()
    assert table.row("job") == ["job", "b"]
    shown = minute.strftime("%Y-%m-%d %H:%M:%SZ")
    cells = table.row(shown)
    assert cells[1:4] == ["0", "1", "0"], "succeeded, dead, retried"
    assert cells[8:10] == ["5s", "5s"], "late p50 and p99: the 5 s bucket"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            ("--window", "month"),
            "fencepost history: argument --window: invalid choice: 'month' "
            "(choose from 'hour', 'day', 'week')",
            id="window",
        ),
        pytest.param(
            ("--job", LONE_SURROGATE),
            "fencepost history: --job: must be text without U+0000 or lone surrogates",
            id="job-lone-surrogate",
        ),
        pytest.param(
            ("--queue", LONE_SURROGATE),
            "fencepost history: --queue: must be text without U+0000 or lone surrogates",
            id="queue-lone-surrogate",
        ),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    database: Database, args: tuple[str, ...], line: str
) -> None:
    database.store()
    run = fencepost("history", *args, db=database.url)
    assert (run.returncode, run.errors) == (VALIDATION_EXIT, [line]), run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize(
    "name", ["", "%", "_", "'; DROP TABLE history_minutes; --", "x" * 10_000, "-"]
)
def test_names_no_execution_has_print_an_empty_chart(database: Database, name: str) -> None:
    prepare(database)
    body = fencepost("history", f"--job={name}", "--json", db=database.url).json()
    assert body["job"] == name
    assert all(p["claims"] == p["succeeded"] == p["dead"] == 0 for p in body["points"])

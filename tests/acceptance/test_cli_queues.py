"""Named queues on the command line: submit, schedule add, ps and stats, on real databases."""

from __future__ import annotations

import pytest

from tests.acceptance.cli import fencepost
from tests.acceptance.conftest import Database


def test_submit_and_schedule_name_a_queue_ps_filters_and_stats_count_it(
    database: Database,
) -> None:
    db = database.url
    mail = fencepost("submit", "send", "--queue", "emails", "--json", db=db).json()
    plain = fencepost("submit", "send", "--json", db=db).json()
    assert (mail["queue"], plain["queue"]) == ("emails", "default")
    schedule = fencepost(
        "schedule", "add", "report", "--every", "1h", "--queue", "reports", "--json", db=db
    ).json()
    assert schedule["queue"] == "reports"
    table = fencepost("ps", db=db).ok()
    assert "queue" in table.stdout.splitlines()[0]
    assert table.row(mail["id"])[2] == "emails"
    assert table.row(plain["id"])[2] == "default"
    only = fencepost("ps", "--queue", "emails", "--json", db=db).json()
    assert [e["id"] for e in only] == [mail["id"]]
    assert fencepost("ps", "--queue", "nowhere", "--json", db=db).json() == []
    stats = fencepost("stats", "--json", db=db).json()
    assert stats["by_queue"]["emails"]["SCHEDULED"] == 1
    assert stats["by_queue"]["default"]["SCHEDULED"] == 1
    assert "executions by queue" in fencepost("stats", db=db).ok().stdout


@pytest.mark.parametrize(
    ("queue", "says"),
    [
        ("", "must be a non-empty string"),
        ("   ", "must be a non-empty string"),
        ("q" * 101, "must be at most 100 characters"),
        ("q" * 10_000, "must be at most 100 characters"),
        ("\udcff", "must be text without U+0000 or lone surrogates"),
    ],
    ids=["empty", "blank", "101", "10k", "surrogate"],
)
def test_a_bad_queue_exits_2_naming_the_option_and_stores_nothing(
    database: Database, queue: str, says: str
) -> None:
    for args in (
        ("submit", "send", "--queue", queue),
        ("schedule", "add", "report", "--every", "1h", "--queue", queue),
    ):
        run = fencepost(*args, db=database.url)
        assert run.returncode == 2, run.stderr
        assert len(run.errors) == 1, run.stderr
        assert "--queue" in run.errors[0], run.errors
        assert says in run.errors[0], run.errors
    with database.store() as store:
        assert store.query().items == []
        assert store.schedules().items == []

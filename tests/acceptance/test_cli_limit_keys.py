"""``--limit-key`` on the command line: submit and schedule add store it, show prints it;
a bad key exits 2 naming the option and stores nothing. On real databases."""

from __future__ import annotations

import pytest

from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database

#: Odd but valid: printed as given (brackets are not console markup).
ODD_KEY = "tenant [bold]7[/bold] '; DROP TABLE x; -- 🙂"


def test_submit_and_schedule_add_store_a_limit_key_and_show_prints_it(
    database: Database,
) -> None:
    db = database.url
    made = fencepost("submit", "send", "--limit-key", ODD_KEY, "--json", db=db).json()
    plain = fencepost("submit", "send", "--json", db=db).json()
    assert (made["limit_key"], plain["limit_key"]) == (ODD_KEY, None)
    long_key = "k" * 200
    schedule = fencepost(
        "schedule", "add", "report", "--every", "1h", "--limit-key", long_key, "--json", db=db
    ).json()
    assert schedule["limit_key"] == long_key
    # Another key names another schedule (the id derived from the command differs).
    other = fencepost(
        "schedule", "add", "report", "--every", "1h", "--limit-key", "b", "--json", db=db
    ).json()
    assert other["id"] != schedule["id"]
    shown, submitted, schedule_shown, as_json = fencepost_all(
        ("show", made["id"]),
        ("submit", "send", "--limit-key", "tenant-9"),
        ("schedule", "show", other["id"]),
        ("show", made["id"], "--json"),
        db=db,
    )
    assert shown.ok().row("limit key")[1] == ODD_KEY
    assert submitted.ok().row("limit key")[1] == "tenant-9"
    assert schedule_shown.ok().row("limit key")[1] == "b"
    assert as_json.json()["limit_key"] == ODD_KEY
    with database.store() as store:
        assert store.get(made["id"]).limit_key == ODD_KEY
        assert store.get_schedule(schedule["id"]).limit_key == long_key


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("", "must be a non-empty string"),
        ("   ", "must be a non-empty string"),
        ("tab\there", "must not hold control characters"),
        ("\x1b[31mred", "must not hold control characters"),
        ("k" * 201, "must be at most 200 characters"),
        ("k" * 10_000, "must be at most 200 characters"),
        ("\udcff", "must be text without U+0000 or lone surrogates"),
    ],
    ids=["empty", "blank", "tab", "escape", "201", "10k", "surrogate"],
)
def test_a_bad_limit_key_exits_2_naming_the_option_and_stores_nothing(
    database: Database, key: str, says: str
) -> None:
    for args in (
        ("submit", "send", "--limit-key", key),
        ("schedule", "add", "report", "--every", "1h", "--limit-key", key),
    ):
        run = fencepost(*args, db=database.url)
        assert run.returncode == 2, run.stderr
        assert len(run.errors) == 1, run.stderr
        assert "--limit-key" in run.errors[0], run.errors
        assert says in run.errors[0], run.errors
    with database.store() as store:
        assert store.query().items == []
        assert store.schedules().items == []

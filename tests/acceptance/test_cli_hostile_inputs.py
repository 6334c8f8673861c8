"""Hostile inputs and zones on the command line: one line naming the field, exit code 2.

Each command runs as a real process. Integers past 4,300 digits and JSON nested thousands
deep used to end in a Python traceback (exit 1): the decoder's own ``ValueError`` and
``RecursionError``. A zone that is the host's own setting (``localtime``) used to be
accepted, so materializers on hosts in different zones disagreed. Nothing is stored
when a command is refused.
"""

from __future__ import annotations

import pytest

from tests.acceptance.cli import fencepost
from tests.acceptance.conftest import Database

#: The most digits an integer in a payload may have (stated, not imported: see hostile.py).
MAX_INT_DIGITS = 4300
DIGITS = "7" * 5000
DEEP = "[" * 3000 + "]" * 3000
TOO_MANY_DIGITS = f"is an integer of more than {MAX_INT_DIGITS} digits (the most allowed)"
TOO_DEEP = "is nested more than 64 levels deep"
VALIDATION_EXIT = 2

HOSTILE = [
    pytest.param(
        ("submit", "job", "--input", f"n={DIGITS}"),
        f"fencepost submit: --input: inputs.n {TOO_MANY_DIGITS}",
        id="submit-input-digits",
    ),
    pytest.param(
        ("submit", "job", "--input", f"n=-{DIGITS}"),
        f"fencepost submit: --input: inputs.n {TOO_MANY_DIGITS}",
        id="submit-input-negative-digits",
    ),
    pytest.param(
        ("submit", "job", "--input-json", '{"a": {"b": [1, ' + DIGITS + "]}}"),
        f"fencepost submit: --input-json: inputs.a.b.1 {TOO_MANY_DIGITS}",
        id="submit-input-json-digits",
    ),
    pytest.param(
        ("submit", "job", "--input", f"n={DEEP}"),
        f"fencepost submit: --input: inputs.n {TOO_DEEP}",
        id="submit-input-deep",
    ),
    pytest.param(
        ("submit", "job", "--input-json", '{"a": ' + DEEP + "}"),
        f"fencepost submit: --input-json: inputs {TOO_DEEP}",
        id="submit-input-json-deep",
    ),
    pytest.param(
        ("submit", "job", "--input-json", '{"a": ' + "[" * 70 + "]" * 70 + "}"),
        f"fencepost submit: --input-json: inputs {TOO_DEEP}",
        id="submit-input-json-just-too-deep",
    ),
    pytest.param(
        ("schedule", "add", "job", "--every", "1h", "--input-json", '{"a": ' + DEEP + "}"),
        f"fencepost schedule add: --input-json: inputs {TOO_DEEP}",
        id="schedule-add-input-json-deep",
    ),
    pytest.param(
        ("schedule", "add", "job", "--every", "1h", "--input", f"n={DIGITS}"),
        f"fencepost schedule add: --input: inputs.n {TOO_MANY_DIGITS}",
        id="schedule-add-input-digits",
    ),
]


@pytest.mark.parametrize(("args", "line"), HOSTILE)
def test_hostile_inputs_are_one_line_and_nothing_is_stored(
    database: Database, args: tuple[str, ...], line: str
) -> None:
    store = database.store()  # the schema exists: a refusal must still write nothing
    run = fencepost(*args, db=database.url)
    assert (run.returncode, run.errors) == (VALIDATION_EXIT, [line]), run.stderr
    assert "Traceback" not in run.stderr
    assert store.query(job="job").items == []
    assert store.schedules(job="job").items == []


def test_the_most_digits_allowed_are_stored(database: Database) -> None:
    most = "9" * MAX_INT_DIGITS
    run = fencepost("submit", "job", "--input", f"n=-{most}", "--json", db=database.url)
    stored = database.store().get(run.json()["id"])
    assert stored.inputs == {"n": -int(most)}


ZONES = [
    pytest.param(
        "localtime",
        "'localtime' is this host's own zone, which can differ from host to host: "
        "name the zone itself, an IANA name such as Europe/Paris, America/New_York or UTC",
        id="localtime",
    ),
    pytest.param(
        "/etc/localtime",
        "'/etc/localtime' is this host's own zone, which can differ from host to host: "
        "name the zone itself, an IANA name such as Europe/Paris, America/New_York or UTC",
        id="etc-localtime",
    ),
    pytest.param(
        "right/UTC",
        "unknown time zone 'right/UTC'",
        id="right-utc",
    ),
    pytest.param(
        "posixrules",
        "unknown time zone 'posixrules'",
        id="posixrules",
    ),
]


@pytest.mark.parametrize(("zone", "message"), ZONES)
def test_schedule_add_refuses_zones_that_are_not_iana_names(
    database: Database, zone: str, message: str
) -> None:
    store = database.store()
    run = fencepost(
        "schedule", "add", "job", "--cron", "0 9 * * *", "--timezone", zone, db=database.url
    )
    assert (run.returncode, run.errors) == (
        VALIDATION_EXIT,
        [f"fencepost schedule add: --timezone: {message}"],
    )
    assert store.schedules(job="job").items == []


@pytest.mark.parametrize(("zone", "message"), ZONES)
def test_schedule_preview_refuses_zones_that_are_not_iana_names(zone: str, message: str) -> None:
    run = fencepost("schedule", "preview", "--cron", "0 9 * * *", "--timezone", zone)
    assert (run.returncode, run.errors) == (
        VALIDATION_EXIT,
        [f"fencepost schedule preview: --timezone: {message}"],
    )


@pytest.mark.parametrize("zone", ["EST5EDT", "Etc/GMT+5", "US/Eastern", "UTC"])
def test_iana_names_of_every_kind_are_accepted(zone: str) -> None:
    run = fencepost("schedule", "preview", "--cron", "0 9 * * *", "--timezone", zone)
    assert run.returncode == 0, run.stderr

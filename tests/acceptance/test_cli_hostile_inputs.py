"""Hostile inputs and zones on the command line: one line naming the field, exit code 2.

Each command runs as a real process. Integers past 4,300 digits and JSON nested thousands
deep used to end in a Python traceback (exit 1): the decoder's own ``ValueError`` and
``RecursionError``. A zone that is the host's own setting (``localtime``) used to be
accepted, so materializers on hosts in different zones disagreed. Nothing is stored
when a command is refused.
"""

from __future__ import annotations

from pathlib import Path

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


# -- fencepost slo: targets and windows --------------------------------------------------

NOT_A_SHARE = "must be a number between 0 and 1 (exclusive) like 0.99, got"
OUT_OF_RANGE = "must be between 0 and 1 (exclusive), got"
#: A lone surrogate as a command line carries it: its UTF-8 bytes (ED A0 80), which are
#: not valid UTF-8 and reach Python as three escaped bytes.
LONE_SURROGATE = "\udced\udca0\udc80"

SLO_TARGETS = [
    pytest.param("nan", f"{OUT_OF_RANGE} nan", id="nan"),
    pytest.param("NaN", f"{OUT_OF_RANGE} nan", id="NaN"),
    pytest.param("inf", f"{OUT_OF_RANGE} inf", id="inf"),
    pytest.param("-inf", f"{OUT_OF_RANGE} -inf", id="minus-inf"),
    pytest.param("Infinity", f"{OUT_OF_RANGE} inf", id="Infinity"),
    pytest.param("-1", f"{OUT_OF_RANGE} -1.0", id="minus-one"),
    pytest.param("0", f"{OUT_OF_RANGE} 0.0", id="zero"),
    pytest.param("1", f"{OUT_OF_RANGE} 1.0", id="one"),
    pytest.param("1e308", f"{OUT_OF_RANGE} 1e+308", id="1e308"),
    pytest.param("99.9", f"{OUT_OF_RANGE} 99.9", id="a-percentage-number"),
    pytest.param("abc", f"{NOT_A_SHARE} 'abc'", id="text"),
    pytest.param("", f"{NOT_A_SHARE} ''", id="empty"),
    pytest.param("99%", f"{NOT_A_SHARE} '99%'", id="percent"),
    pytest.param(LONE_SURROGATE, f"{NOT_A_SHARE} '\\udced\\udca0\\udc80'", id="lone-surrogate"),
]


@pytest.mark.parametrize("option", ["--claim-target", "--finish-target"])
@pytest.mark.parametrize(("value", "message"), SLO_TARGETS)
def test_slo_refuses_a_target_that_is_not_a_share_in_one_line(
    database: Database, option: str, value: str, message: str
) -> None:
    """Refused before the store is read, exit 2 (not the 1 of a missed objective)."""
    database.store().submit("job")
    for run in (
        fencepost("slo", f"{option}={value}", db=database.url),
        fencepost("slo", f"{option}={value}", "--json", db=database.url),
    ):
        assert (run.returncode, run.errors) == (
            VALIDATION_EXIT,
            [f"fencepost slo: {option}: {message}"],
        ), run.stderr
        assert run.stdout == ""
    assert [e.job for e in database.store().query().items] == ["job"]


@pytest.mark.parametrize(
    ("window", "message"),
    [
        pytest.param("0s", "must be > 0 seconds, got 0", id="zero"),
        pytest.param(
            "-1d",
            "must be a duration like '30s', '10m', '1h', '500ms', got '-1d'",
            id="negative",
        ),
        pytest.param(
            "99999999999d",
            "is too long: at most 100 years, got 8.64e+15 seconds",
            id="huge",
        ),
        pytest.param(
            "1e308d",
            "must be a duration like '30s', '10m', '1h', '500ms', got '1e308d'",
            id="exponent",
        ),
        pytest.param("30", "'30' has no unit; write e.g. 30s, 30m, 30h or 30d", id="no-unit"),
    ],
)
def test_slo_refuses_a_window_it_cannot_report_on(
    database: Database, window: str, message: str
) -> None:
    run = fencepost("slo", f"--window={window}", "--json", db=database.url)
    assert (run.returncode, run.errors) == (
        VALIDATION_EXIT,
        [f"fencepost slo: --window: {message}"],
    )
    assert run.stdout == ""


def test_slo_refuses_a_nul_in_a_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """No process can be given a NUL in its arguments (execve ends the string there), so
    this one is the command line run in process: the same one line, the same code."""
    from fencepost.cli.main import main

    code = main(["slo", "--claim-target", "0.9\x00", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (VALIDATION_EXIT, "")
    assert captured.err.splitlines() == [f"fencepost slo: --claim-target: {NOT_A_SHARE} '0.9\\x00'"]
    assert not list(tmp_path.iterdir()), "refused before the store is opened"

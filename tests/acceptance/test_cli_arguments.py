"""Every bad argument: exit code 2, one line on stderr naming it, nothing opened or created.

Arguments are checked before a store is opened, so a refused command leaves no
SQLite file behind and no table in a PostgreSQL schema. An unknown id is found
out by the store: exit code 1, one line naming the id.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests import postgres
from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database

#: How inputs that are not a JSON object are refused (the type named after it).
NOT_AN_OBJECT = "must be a JSON object (a mapping of input names to values), got"

STATES = "SCHEDULED, RUNNING, RETRY_WAIT, SUCCEEDED, FAILED, CANCELLED, SKIPPED"

#: (arguments, the one line on stderr)
BAD = [
    pytest.param(
        ["ps", "--state", "NOPE"],
        f"fencepost ps: --state: unknown state 'NOPE' (one of {STATES})",
        id="unknown-state",
    ),
    pytest.param(
        ["ps", "--state", "running,done"],
        f"fencepost ps: --state: unknown state 'done' (one of {STATES})",
        id="unknown-state-in-list",
    ),
    pytest.param(
        ["ps", "--owned-buckets", "64", "--mine"],
        "fencepost ps: --owned-buckets: '64' is outside 0-63 (64 buckets)",
        id="ps-bucket-out-of-range",
    ),
    pytest.param(
        ["ps", "--mine"],
        "fencepost ps: --mine: needs --owned-buckets SPEC (which buckets are mine?)",
        id="mine-without-buckets",
    ),
    pytest.param(
        ["buckets", "--num-buckets", "8", "--owned-buckets", "0-3,9"],
        "fencepost buckets: --owned-buckets: '9' is outside 0-7 (8 buckets)",
        id="bucket-out-of-range",
    ),
    pytest.param(
        ["buckets", "--owned-buckets", "5-2"],
        "fencepost buckets: --owned-buckets: range '5-2' runs backwards",
        id="bucket-range-backwards",
    ),
    pytest.param(
        ["buckets", "--owned-buckets", "one"],
        "fencepost buckets: --owned-buckets: 'one' is not a bucket or a range like 0-15",
        id="bucket-not-a-number",
    ),
    pytest.param(
        ["prune", "--older-than", "14x"],
        "fencepost prune: --older-than: must be a duration like '30s', '10m', '1h', '500ms', "
        "got '14x'",
        id="malformed-duration",
    ),
    pytest.param(
        ["prune", "--older-than", "14"],
        "fencepost prune: --older-than: '14' has no unit; write e.g. 14s, 14m, 14h or 14d",
        id="duration-without-unit",
    ),
    pytest.param(
        ["slo", "--window", "0s"],
        "fencepost slo: --window: must be > 0 seconds, got 0",
        id="zero-window",
    ),
    pytest.param(
        ["stats", "--window", "an hour"],
        "fencepost stats: --window: must be a duration like '30s', '10m', '1h', '500ms', "
        "got 'an hour'",
        id="stats-window",
    ),
    pytest.param(
        ["submit", "report", "--at", "2026-05-01T10:00"],
        "fencepost submit: --at: '2026-05-01T10:00' has no UTC offset; add Z or +HH:MM "
        "(a time is never guessed)",
        id="naive-at",
    ),
    pytest.param(
        ["submit", "report", "--at", "tomorrow"],
        "fencepost submit: --at: 'tomorrow' is not an ISO 8601 time like 2026-05-01T10:00:00Z",
        id="unparseable-at",
    ),
    pytest.param(
        ["submit", "report", "--in", "soon"],
        "fencepost submit: --in: must be a duration like '30s', '10m', '1h', '500ms', got 'soon'",
        id="malformed-in",
    ),
    pytest.param(
        ["submit", "report", "--at", "2026-05-01T10:00:00Z", "--in", "5m"],
        "fencepost submit: argument --in: not allowed with argument --at",
        id="at-and-in",
    ),
    pytest.param(
        ["submit", "report", "--input", "day"],
        "fencepost submit: --input: 'day' is not KEY=VALUE",
        id="input-without-value",
    ),
    pytest.param(
        ["submit", "report", "--input", "n=1", "--input", "n=2"],
        "fencepost submit: --input: 'n' is given twice",
        id="input-twice",
    ),
    pytest.param(
        ["submit", "report", "--input-json", "{day: 1}"],
        "fencepost submit: --input-json: is not JSON: Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1)",
        id="input-json-not-json",
    ),
    pytest.param(
        ["submit", "report", "--input-json", "[1]", "--input", "n=1"],
        f"fencepost submit: --input-json: {NOT_AN_OBJECT} list",
        id="input-json-not-object",
    ),
    pytest.param(
        ["submit", "report", "--input-json", "[1]"],
        f"fencepost submit: --input-json: {NOT_AN_OBJECT} list",
        id="input-json-list",
    ),
    pytest.param(
        ["submit", "report", "--input-json", '"not-an-object"'],
        f"fencepost submit: --input-json: {NOT_AN_OBJECT} str",
        id="input-json-string",
    ),
    pytest.param(
        ["submit", "report", "--input-json", "-1.5"],
        f"fencepost submit: --input-json: {NOT_AN_OBJECT} float",
        id="input-json-number",
    ),
    pytest.param(
        ["submit", "report", "--input-json", "true"],
        f"fencepost submit: --input-json: {NOT_AN_OBJECT} bool",
        id="input-json-true",
    ),
    pytest.param(
        ["schedule", "add", "report", "--every", "10m", "--input-json", "[1, 2]"],
        f"fencepost schedule add: --input-json: {NOT_AN_OBJECT} list",
        id="schedule-input-json-list",
    ),
    pytest.param(
        ["submit", "report", "--max-attempts", "0"],
        "fencepost submit: --max-attempts: must be >= 1, got 0",
        id="max-attempts",
    ),
    pytest.param(
        ["schedule", "add", "report", "--cron", "61 * * * *"],
        "fencepost schedule add: --cron: '61 * * * *': Bad minute",
        id="bad-cron",
    ),
    pytest.param(
        ["schedule", "add", "report", "--cron", "0 2 * * *", "--timezone", "Mars/Base"],
        "fencepost schedule add: --timezone: unknown time zone 'Mars/Base'",
        id="unknown-zone",
    ),
    pytest.param(
        ["schedule", "add", "report", "--every", "10m", "--start-at", "2026-01-01T00:00"],
        "fencepost schedule add: --start-at: '2026-01-01T00:00' has no UTC offset; add Z or "
        "+HH:MM (a time is never guessed)",
        id="naive-start-at",
    ),
    pytest.param(
        ["schedule", "add", "report", "--every", "10m", "--misfire", "later"],
        "fencepost schedule add: argument --misfire: invalid choice: 'later' (choose from "
        "'catch_up', 'coalesce', 'skip')",
        id="unknown-policy",
    ),
    pytest.param(
        ["schedule", "preview", "--cron", "0 2 * * *", "--count", "0"],
        "fencepost schedule preview: --count: must be between 1 and 10000, got 0",
        id="preview-count",
    ),
    pytest.param(
        ["replay"],
        "fencepost replay: ID: give execution ids, or filter flags (--job J, --since 1h, ...), "
        "or --all for every execution replay applies to",
        id="replay-nothing",
    ),
    pytest.param(
        ["ps", "--limit", "many"],
        "fencepost ps: argument --limit: invalid int value: 'many'",
        id="limit-not-int",
    ),
    pytest.param(
        ["reconcile", "--log-format", "xml"],
        "fencepost reconcile: argument --log-format: invalid choice: 'xml' (choose from "
        "'text', 'json')",
        id="log-format",
    ),
]


@pytest.mark.parametrize(("args", "line"), BAD)
def test_a_bad_argument_is_refused_before_anything_is_opened(
    tmp_path: Path, args: list[str], line: str
) -> None:
    path = tmp_path / "never.db"
    run = fencepost(*args, db=f"sqlite:///{path}")
    assert run.returncode == 2
    assert run.errors == [line]
    assert run.stdout == ""
    assert not path.exists(), "a refused command must not create the database"


def test_no_table_is_created_in_postgres_by_a_refused_command() -> None:
    postgres.require_postgres()
    schema = postgres.new_schema()
    try:
        cases = [tuple(case.values[0]) for case in BAD[::3]]
        runs = fencepost_all(*cases, db=postgres.store_url(schema))
        assert [(r.returncode, len(r.errors)) for r in runs] == [(2, 1)] * len(runs)
        with psycopg.connect(postgres.dsn()) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            ).fetchone()
        assert tables == (0,)
    finally:
        postgres.drop_schema(schema)


def test_without_a_database_the_commands_say_so(tmp_path: Path) -> None:
    scheme, absent = fencepost_all(
        ("stats", "--db", "mysql://localhost/x"),
        ("dead-letters", "--db", f"sqlite:///{tmp_path / 'typo.db'}"),
    )
    # Without --db or $FENCEPOST_DB every command uses ./fencepost.db; a reader never
    # creates it.
    missing = fencepost("ps", cwd=tmp_path)
    assert missing.errors == [
        "fencepost ps: --db: no SQLite database at fencepost.db (fencepost db migrate creates one)"
    ]
    assert not (tmp_path / "fencepost.db").exists()
    submitted = fencepost("submit", "noop", "--json", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    listed = fencepost("ps", "--json", cwd=tmp_path).json()
    assert [e["id"] for e in listed] == [submitted.json()["id"]]
    assert scheme.errors == [
        "fencepost stats: --db: expected sqlite:///path.db or postgresql://..., got "
        "'mysql://localhost/x'"
    ]
    assert absent.errors == [
        f"fencepost dead-letters: --db: no SQLite database at {tmp_path / 'typo.db'} "
        "(fencepost db migrate creates one)"
    ]
    assert {r.returncode for r in (missing, scheme, absent)} == {2}
    assert not (tmp_path / "typo.db").exists()


def test_an_unknown_id_exits_3_naming_it_and_a_malformed_one_2(database: Database) -> None:
    database.store()  # the database exists, the ids do not
    cancel, replay, show, rm = fencepost_all(
        ("cancel", "0190b1e0-0000-7000-8000-000000000000"),
        ("replay", "nope"),
        ("schedule", "show", "nightly"),
        ("schedule", "rm", "nightly"),
        db=database.url,
    )
    assert [(r.returncode, r.errors, r.stdout) for r in (cancel, replay, show, rm)] == [
        (3, ["fencepost cancel: execution 0190b1e0-0000-7000-8000-000000000000 not found"], ""),
        (
            2,
            [
                "fencepost replay: ID: 'nope' is not an execution id "
                "(a UUID like 01a249ec-09e1-736f-8880-...)"
            ],
            "",
        ),
        (3, ["fencepost schedule show: schedule nightly not found"], ""),
        (3, ["fencepost schedule rm: schedule nightly not found"], ""),
    ]

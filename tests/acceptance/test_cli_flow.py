"""``fencepost limits ls|set|rm`` and ``fencepost queues ls|pause|resume``, run as real
processes against SQLite and PostgreSQL.

A refused argument is one line on stderr naming the option (exit 2) and stores
nothing: the limits read the same afterwards, and what was stored still lists and
claims. A value no process argument can carry (U+0000; a lone surrogate other than
the ones ``surrogateescape`` maps bytes to) goes through :func:`main` in process.
"""

from __future__ import annotations

import pytest

from fencepost.cli.main import main
from fencepost.domain.limits import Limit, parse_rate
from fencepost.store import Store
from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database

USAGE, NOT_FOUND = 2, 3


def test_limits_are_set_listed_and_removed(database: Database) -> None:
    db = database.url
    stored = fencepost(
        "limits", "set", "queue:emails", "--rate", "100/s", "--concurrency", "20", "--json", db=db
    ).json()
    assert {k: stored[k] for k in ("scope", "rate", "burst", "concurrency", "per_key")} == {
        "scope": "queue:emails",
        "rate": "100/s",
        "burst": 10,
        "concurrency": 20,
        "per_key": False,
    }
    assert stored["updated_by"].startswith("cli:")
    keyed = fencepost(
        "limits", "set", "job:send", "--rate", "3000/min", "--burst", "7", "--per-key", db=db
    ).ok()
    assert "limit set" in keyed.stdout
    listed = fencepost("limits", "ls", "--json", db=db).json()
    assert [(x["scope"], x["rate"], x["burst"], x["per_key"]) for x in listed] == [
        ("job:send", "3000/min", 7, True),
        ("queue:emails", "100/s", 10, False),
    ]
    table = fencepost("limits", "ls", db=db).ok()
    assert table.row("job:send")[1:3] == ["3000/min", "7"]
    assert "2 limits" in table.stdout

    with database.store() as store:
        assert [lim.scope for lim in store.limits()] == ["job:send", "queue:emails"]
        assert store.limits()[0].rate == parse_rate("3000/min")

    removed = fencepost("limits", "rm", "job:send", db=db).ok()
    assert "limit of job:send removed" in removed.stdout
    missing = fencepost("limits", "rm", "job:send", db=db)
    assert (missing.returncode, missing.errors) == (
        NOT_FOUND,
        ["fencepost limits rm: limit job:send not found"],
    )
    assert [x["scope"] for x in fencepost("limits", "ls", "--json", db=db).json()] == [
        "queue:emails"
    ]


def test_queues_are_listed_paused_and_resumed(database: Database) -> None:
    db = database.url
    store = database.store()
    store.submit("send", queue="emails")
    store.submit("report")
    paused = fencepost("queues", "pause", "emails", "--json", db=db).json()
    assert (paused["name"], paused["paused"], paused["counts"]) == ("emails", True, None)
    assert paused["paused_by"].startswith("cli:")
    assert store.paused_queues()[0].scope == "queue:emails"
    # Paused: nothing in it is claimed; the other queue still is.
    assert [lease.execution_id for lease in store.claim("w", limit=5)] == [
        store.query(job="report").items[0].id
    ]

    listed = {q["name"]: q for q in fencepost("queues", "ls", "--json", db=db).json()}
    assert list(listed) == ["default", "emails"]
    assert listed["emails"]["paused"] is True
    assert listed["emails"]["counts"]["SCHEDULED"] == 1
    assert listed["default"]["counts"]["RUNNING"] == 1
    table = fencepost("queues", "ls", db=db).ok()
    assert table.row("emails")[1] == "paused"
    assert table.row("default")[1:3] == ["active", "-"]

    resumed = fencepost("queues", "resume", "emails", db=db).ok()
    assert "resumed" in resumed.stdout
    assert store.paused_queues() == []
    # A fresh store: the first one may trust its view of the limits for a second.
    assert len(database.store().claim("w", limit=5)) == 1
    # Resuming a queue that is not paused changes nothing.
    assert fencepost("queues", "resume", "emails", "--json", db=db).json()["paused"] is False


def test_odd_but_valid_names_are_stored_as_typed(database: Database) -> None:
    db = database.url
    names = ["a/b:c", "..", " padded ", "x\ny", "é漢🙂"]
    runs = fencepost_all(
        *(("limits", "set", f"job:{name}", "--concurrency", "1") for name in names),
        *(("queues", "pause", name) for name in names),
        db=db,
    )
    for run in runs:
        run.ok()
    with database.store() as store:
        scopes = {lim.scope for lim in store.limits()}
    assert scopes == {f"job:{n}" for n in names} | {f"queue:{n}" for n in names}


# -- hostile values ------------------------------------------------------------------------

LONG = "x" * 10_000

HOSTILE_LIMITS = [
    pytest.param(("job:x", "--rate", "0/s"), "--rate", id="rate-zero"),
    pytest.param(("job:x", "--rate=-1/s"), "--rate", id="rate-negative"),
    pytest.param(("job:x", "--rate", "1e400/s"), "--rate", id="rate-1e400"),
    pytest.param(("job:x", "--rate", "5/fortnight"), "--rate", id="rate-fortnight"),
    pytest.param(("job:x", "--rate", ""), "--rate", id="rate-empty"),
    pytest.param(("job:x", "--rate", LONG), "--rate", id="rate-10k"),
    pytest.param(("job:x", "--rate", "9999999/s"), "--rate", id="rate-too-fast"),
    pytest.param(("job:x",), "--rate", id="neither"),
    pytest.param(("job:x", "--concurrency", "1", "--burst", "5"), "--burst", id="burst-no-rate"),
    *(
        pytest.param(("job:x", "--rate", "5/s", option, value), option, id=f"{option}={label}")
        for option in ("--burst", "--concurrency")
        for value, label in (
            ("0", "0"),
            ("-1", "-1"),
            (str(2**63), "2**63"),
            ("1e400", "1e400"),
            ("true", "true"),
            ("5.5", "5.5"),
            (LONG, "10k"),
        )
    ),
    pytest.param(("job:\udcff", "--concurrency", "1"), "SCOPE", id="scope-surrogate"),
    pytest.param(("nokind:x", "--concurrency", "1"), "SCOPE", id="scope-no-kind"),
    pytest.param(("job:", "--concurrency", "1"), "SCOPE", id="scope-empty-name"),
    pytest.param(("queue:  ", "--concurrency", "1"), "SCOPE", id="scope-blank-name"),
    pytest.param((f"job:{LONG}", "--concurrency", "1"), "SCOPE", id="scope-10k"),
    pytest.param(("queue:" + "q" * 101, "--concurrency", "1"), "SCOPE", id="scope-queue-101"),
]


def kept(database: Database) -> tuple[Store, list[Limit], str]:
    """A store holding a limit, a paused queue and an execution a refusal must leave."""
    store = database.store()
    store.set_limit("job:keep", rate="1000/s", concurrency=5, actor="ops")
    store.pause_queue("held", actor="ops")
    return store, store.limits(), store.submit("keep").id


def assert_nothing_changed(
    database: Database, store: Store, limits: list[Limit], kept: str
) -> None:
    assert store.limits() == limits
    listed = fencepost("limits", "ls", "--json", db=database.url).json()
    assert [x["scope"] for x in listed] == ["job:keep", "queue:held"]
    [lease] = store.claim("w", limit=5)
    assert lease.execution_id == kept


@pytest.mark.parametrize(("args", "option"), HOSTILE_LIMITS)
def test_a_hostile_limit_is_one_line_naming_the_option_and_stores_nothing(
    database: Database, args: tuple[str, ...], option: str
) -> None:
    store, limits, execution = kept(database)
    run = fencepost("limits", "set", *args, db=database.url)
    assert run.returncode == USAGE, run.stderr
    assert len(run.errors) == 1, run.stderr
    assert run.errors[0].startswith("fencepost limits set: "), run.errors
    assert option in run.errors[0], run.errors
    assert len(run.errors[0]) < 300, "a refusal quotes a long value only in part"
    assert "Traceback" not in run.stderr
    assert_nothing_changed(database, store, limits, execution)


HOSTILE_NAMES = [
    pytest.param("\udcff", id="surrogate"),
    pytest.param("", id="empty"),
    pytest.param("   ", id="blank"),
    pytest.param("q" * 101, id="101"),
    pytest.param(LONG, id="10k"),
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_queue_name_or_scope_is_refused_naming_it(database: Database, name: str) -> None:
    store, limits, execution = kept(database)
    runs = fencepost_all(
        ("queues", "pause", name),
        ("queues", "resume", name),
        ("limits", "rm", f"queue:{name}"),
        db=database.url,
    )
    for run, (command, field) in zip(
        runs,
        [("queues pause", "NAME"), ("queues resume", "NAME"), ("limits rm", "SCOPE")],
        strict=True,
    ):
        assert run.returncode == USAGE, run.stderr
        assert run.errors == [run.errors[0]], run.stderr
        assert run.errors[0].startswith(f"fencepost {command}: {field}: "), run.errors
    assert_nothing_changed(database, store, limits, execution)


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["limits", "set", "job:a\x00b", "--concurrency", "1"],
            "fencepost limits set: SCOPE: must be text without U+0000 or lone surrogates",
        ),
        (
            ["limits", "set", "job:\ud800", "--concurrency", "1"],
            "fencepost limits set: SCOPE: must be text without U+0000 or lone surrogates",
        ),
        (
            ["limits", "set", "job:x", "--rate", "5/s\x00"],
            "fencepost limits set: --rate: must be a rate like",
        ),
        (
            ["queues", "pause", "\x00"],
            "fencepost queues pause: NAME: must be text without U+0000 or lone surrogates",
        ),
        (
            ["queues", "resume", "q\ud800"],
            "fencepost queues resume: NAME: must be text without U+0000 or lone surrogates",
        ),
        (
            ["limits", "rm", "queue:\x00"],
            "fencepost limits rm: SCOPE: must be text without U+0000 or lone surrogates",
        ),
    ],
    ids=["scope-nul", "scope-surrogate", "rate-nul", "pause-nul", "resume-surrogate", "rm-nul"],
)
def test_values_no_process_argument_can_carry_are_refused_in_process(
    database: Database, capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    store, limits, execution = kept(database)
    assert main([*argv, "--db", database.url]) == USAGE
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(line), err
    assert_nothing_changed(database, store, limits, execution)

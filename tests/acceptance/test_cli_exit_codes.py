"""One exit code per cause, the same in every command (``fencepost.cli.common.Exit``).

Each cause is met by every command that can meet it, as a real process, and each
refusal must be exactly one line on stderr. ``fencepost worker`` is held to the
same table by its own tests.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from fencepost.cli.common import EXIT_CAUSES, Exit
from fencepost.cli.main import build_parser
from fencepost.domain.catalogue import job_entry
from tests.acceptance.cli import Run, fencepost, fencepost_all
from tests.acceptance.conftest import Database

UNKNOWN = "01a249ec-09e1-736f-8880-c59f061db07f"

#: Commands that run until stopped: refused here only for what stops them at start.
LONG_RUNNING = ("serve", "worker")


def free_port() -> int:
    """A port nothing listens on (nothing answers a connection to it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def refused(run: Run, code: Exit) -> None:
    """``run`` exited with ``code`` and said why in one line naming its command."""
    assert run.returncode == code, f"{run.argv}: exit {run.returncode}\n{run.stderr}"
    assert len(run.errors) == 1, f"{run.argv}:\n{run.stderr}"
    name = " ".join(run.argv[1:3]) if run.argv[1] in ("db", "schedule") else run.argv[1]
    assert run.errors[0].startswith(f"fencepost {name}: "), run.errors


def every_command() -> list[tuple[str, ...]]:
    """Every command and subcommand the parser has, as argv prefixes."""
    import argparse

    found: list[tuple[str, ...]] = []

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and prefix:
            found.append(prefix)
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, (*prefix, name))

    walk(build_parser(), ())
    return found


def test_the_table_has_one_meaning_per_code() -> None:
    assert list(EXIT_CAUSES) == list(Exit)
    assert [int(code) for code in Exit] == [0, 1, 2, 3, 4, 5, 130]


def test_an_unknown_option_is_a_usage_error_in_every_command(tmp_path: Path) -> None:
    commands = every_command()
    assert ("show",) in commands
    assert ("schedule", "add") in commands
    runs = fencepost_all(*[(*command, "--no-such-option") for command in commands])
    for run in runs:
        assert run.returncode == Exit.USAGE, f"{run.argv}: {run.stderr}"
        assert len(run.errors) == 1, run.stderr


def test_a_bad_value_or_a_missing_database_is_a_usage_error(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'typo.db'}"
    runs = fencepost_all(
        ("show", "not-an-id"),
        ("ps", "not-an-id"),
        ("cancel", "not-an-id"),
        ("replay", "not-an-id"),
        ("ps", "--state", "NOPE"),
        ("submit", "job", "--in", "ten"),
        ("prune", "--older-than", "14"),
        ("schedule", "add", "job", "--cron", "@reboot"),
        ("stats", "--window", "soon"),
        db=missing,
    )
    more = fencepost_all(
        ("show", UNKNOWN),
        ("jobs",),
        ("buckets",),
        ("dead-letters",),
        ("schedule", "ls"),
        db=missing,
    )
    migrate = fencepost("db", "migrate", "--db", "nosuch://x")
    serve = fencepost("serve", "--db", f"sqlite:///{tmp_path / 'never.db'}", "--port", "0")
    for run in [*runs, *more, migrate, serve]:
        refused(run, Exit.USAGE)
    assert more[0].errors == [
        f"fencepost show: --db: no SQLite database at {tmp_path / 'typo.db'} "
        "(fencepost db migrate creates one)"
    ]
    assert migrate.errors[0].startswith("fencepost db migrate: --db: unsupported store URL")
    assert not list(tmp_path.iterdir()), "a refused command creates nothing"


def test_not_found_is_3_in_every_command(database: Database) -> None:
    database.store().submit("ledger", {})
    runs = fencepost_all(
        ("show", UNKNOWN),
        ("ps", UNKNOWN),
        ("cancel", UNKNOWN),
        ("replay", UNKNOWN),
        ("jobs", "no-such-job"),
        ("schedule", "show", "no-such-schedule"),
        ("schedule", "pause", "no-such-schedule"),
        ("schedule", "resume", "no-such-schedule"),
        ("schedule", "rm", "no-such-schedule"),
        ("schedule", "preview", "no-such-schedule"),
        db=database.url,
    )
    for run in runs:
        refused(run, Exit.NOT_FOUND)


def test_a_conflict_with_the_stored_state_is_4_in_every_command(
    database: Database, tmp_path: Path
) -> None:
    store = database.store()
    done = store.submit("ledger", {}, idempotency_key="ledger-1")
    (lease,) = store.claim("worker-a", ids=[done.id])
    store.complete(lease, None)
    store.add_schedule("ledger", every=600, id="hourly")
    store.publish_jobs(
        [job_entry("ledger", 1), job_entry("greet", 1, description="published first")]
    )
    definitions = tmp_path / "defs"
    definitions.mkdir()
    (definitions / "greet.yaml").write_text(
        "name: greet\nversion: 1\nrun:\n  command: [echo, hi]\n"
    )
    runs = fencepost_all(
        ("cancel", done.id),
        ("replay", done.id),
        ("submit", "ledger", "--key", "ledger-1", "--input", "n=2"),
        ("schedule", "add", "ledger", "--every", "5m", "--id", "hourly"),
        db=database.url,
    )
    serve = fencepost(
        "serve", "--definitions", str(definitions), "--port", str(free_port()), db=database.url
    )
    for run in [*runs, serve]:
        refused(run, Exit.CONFLICT)
    assert "digest" in serve.errors[0]


def test_a_store_that_cannot_be_used_is_5_in_every_command(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.db"
    with sqlite3.connect(theirs) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.close()
    not_fencepost = f"sqlite:///{theirs}"
    readers = fencepost_all(
        ("ps",),
        ("show", UNKNOWN),
        ("stats",),
        ("slo",),
        ("jobs",),
        ("buckets",),
        ("dead-letters",),
        ("schedule", "ls"),
        ("reconcile", "--dry-run"),
        ("prune", "--older-than", "1d", "--dry-run"),
        db=not_fencepost,
    )
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    writers = fencepost_all(
        ("submit", "ledger"),
        ("cancel", UNKNOWN),
        ("replay", UNKNOWN),
        ("reconcile",),
        ("prune", "--older-than", "1d"),
        ("schedule", "add", "ledger", "--every", "5m"),
        ("db", "migrate"),
        db=down,
    )
    serve = fencepost("serve", "--port", str(free_port()), db=down)
    for run in [*readers, *writers, serve]:
        refused(run, Exit.UNAVAILABLE)
    assert "no fencepost schema" in readers[0].errors[0]
    assert "connection refused" in writers[0].errors[0]


@pytest.mark.parametrize(
    ("command", "bad"), [("serve", ("--port", "0")), ("worker", ("--concurrency", "0"))]
)
def test_a_long_running_command_refuses_a_bad_argument_with_2(
    command: str, bad: tuple[str, str]
) -> None:
    assert command in LONG_RUNNING
    refused(fencepost(command, *bad), Exit.USAGE)

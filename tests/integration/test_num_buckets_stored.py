"""The bucket count is recorded in the database, on SQLite and PostgreSQL, by real processes.

The first process that migrates a database records its count (64 unless it gives
one); a process asking for another is refused in one line naming ``num_buckets``
and stores nothing, one asking for none adopts the recorded count, and ``fencepost
db set-buckets N`` changes the record and moves the waiting work, so that a worker
of the new buckets runs it. The issue this answers: a submitter started with 128
buckets put an execution in bucket 115, which the owner of buckets 0-63 never
claimed, while the bucket report showed nothing unowned.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import fencepost
from fencepost import State
from fencepost.domain.buckets import bucket_for
from fencepost.domain.errors import NotMigrated, ValidationError
from fencepost.store.postgres.connection import MIGRATIONS_PACKAGE as PG_MIGRATIONS
from fencepost.store.sql import migration_files
from fencepost.store.sqlite.connection import MIGRATIONS_PACKAGE as SQLITE_MIGRATIONS
from tests import postgres
from tests.acceptance.cli import Run
from tests.acceptance.cli import fencepost as run_fencepost
from tests.integration._tools import Procs
from tests.integration.test_worker_processes import wait_until

pytestmark = pytest.mark.slow

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._worker_app:app"


def with_option(url: str, option: str) -> str:
    """``url`` with ``option`` (``name=value``) added to its query string."""
    return f"{url}{'&' if '?' in url else '?'}{option}"


def keys_in(buckets: range, num_buckets: int, count: int) -> list[str]:
    """``count`` bucket keys whose bucket under ``num_buckets`` is in ``buckets``."""
    found = []
    n = 0
    while len(found) < count:
        key = f"tenant-{n}"
        if bucket_for(key, num_buckets) in buckets:
            found.append(key)
        n += 1
    return found


def one_line(run: Run) -> str:
    """The one line a refused command printed (exit code 2: a bad argument)."""
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert len(run.errors) == 1, run.stderr
    assert run.stdout == ""
    return run.errors[0]


def test_a_submitter_with_another_count_is_refused_and_stores_nothing(shared_db: str) -> None:
    migrated = subprocess.run(
        [FENCEPOST, "db", "migrate", "--db", shared_db], capture_output=True, text=True
    )
    assert migrated.returncode == 0, migrated.stderr
    with fencepost.connect(shared_db, migrate=False) as store:
        assert store.config.num_buckets == 64  # the first process gave none: the default

    in_url = run_fencepost("submit", "mail", db=with_option(shared_db, "num_buckets=128"))
    by_flag = run_fencepost("submit", "mail", "--num-buckets", "128", db=shared_db)
    line = one_line(in_url)
    assert line.startswith("fencepost submit: --db: ")
    assert "records num_buckets=64, this process asked for 128" in line
    assert "fencepost db set-buckets 128 --db URL" in line
    assert one_line(by_flag).startswith("fencepost submit: --num-buckets: ")
    assert "records num_buckets=64, this process asked for 128" in by_flag.errors[0]
    with fencepost.connect(shared_db) as store:
        assert store.query(state=list(State)).items == [], "a refused submitter stores nothing"
        assert store.bucket_report().unowned == list(range(64))

    # Without a count, and with the recorded one, submitters are welcome.
    for args in ((), ("--num-buckets", "64")):
        done = run_fencepost("submit", "mail", "--json", *args, db=shared_db)
        assert 0 <= done.json()["bucket"] < 64
    # In a program too: the same refusal, and the recorded count adopted.
    with pytest.raises(ValidationError) as refused:
        fencepost.connect(shared_db, num_buckets=128)
    assert refused.value.field == "num_buckets"
    with fencepost.connect(shared_db) as store:
        assert store.config.num_buckets == 64


def test_the_first_process_decides_and_the_others_adopt_its_count(shared_db: str) -> None:
    [high] = keys_in(range(64, 128), 128, 1)  # bucket >= 64 under 128: 115 in the issue
    first = run_fencepost(
        "submit",
        "mail",
        "--bucket-key",
        high,
        "--json",
        db=with_option(shared_db, "num_buckets=128"),
    )
    assert first.json()["bucket"] == bucket_for(high, 128)
    adopting = run_fencepost("submit", "mail", "--bucket-key", high, "--json", db=shared_db)
    assert adopting.json()["bucket"] == bucket_for(high, 128), "no count given: the store's"
    report = run_fencepost("buckets", "--json", db=shared_db).json()
    assert report["num_buckets"] == 128
    assert report["unowned"] == list(range(128))
    assert {b["bucket"]: b["executions"] for b in report["buckets"] if b["executions"]} == {
        bucket_for(high, 128): 2
    }
    refused = run_fencepost("submit", "mail", "--num-buckets", "64", db=shared_db)
    assert "records num_buckets=128, this process asked for 64" in one_line(refused)


def _forget_the_record(url: str) -> None:
    """Take ``url``'s database back to before counts were recorded: no settings table,
    and its migration not applied."""
    backend = SQLITE_MIGRATIONS if url.startswith("sqlite") else PG_MIGRATIONS
    [version] = [v for v, name, _ in migration_files(backend) if name.endswith("_settings.sql")]
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute("DROP TABLE fencepost_settings")
            conn.execute("DELETE FROM fencepost_migrations WHERE version = ?", (version,))
        return
    schema = url.rpartition("schema=")[2]
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP TABLE {schema}.fencepost_settings")
        conn.execute(f"DELETE FROM {schema}.fencepost_migrations WHERE version = %s", (version,))


def test_an_upgraded_database_records_the_count_of_the_process_that_migrates_it(
    shared_db: str,
) -> None:
    with fencepost.connect(shared_db) as store:
        waiting = store.submit("mail", bucket_key="tenant-a")
    _forget_the_record(shared_db)
    with pytest.raises(NotMigrated):  # a reader waits for the migration
        fencepost.connect(shared_db, migrate=False)

    migrating = run_fencepost("submit", "mail", "--num-buckets", "128", "--json", db=shared_db)
    assert migrating.json()["bucket"] == bucket_for(migrating.json()["id"], 128)
    refused = run_fencepost("submit", "mail", db=with_option(shared_db, "num_buckets=64"))
    assert "records num_buckets=128, this process asked for 64" in one_line(refused)
    # What waited from before keeps its bucket until a resize moves it (here: to 128's).
    moved = run_fencepost("db", "set-buckets", "128", "--json", db=shared_db).json()
    assert (moved["previous"], moved["num_buckets"], moved["unfinished"]) == (128, 128, 2)
    with fencepost.connect(shared_db) as store:
        assert store.get(waiting.id).bucket == bucket_for("tenant-a", 128)


def test_set_buckets_moves_waiting_work_to_the_worker_of_the_new_buckets(
    shared_db: str, procs: Procs
) -> None:
    high = keys_in(range(64, 128), 128, 6)
    low = keys_in(range(0, 64), 128, 3)
    observer = fencepost.connect(shared_db)  # opened before the resize, open through it
    try:
        submitted = observer.submit_many(
            [{"job": "quick", "bucket_key": key} for key in high + low]
        )
        before = {e.id: e.bucket for e in submitted}
        assert all(b == bucket_for(k, 64) for b, k in zip(before.values(), high + low, strict=True))

        # A worker asking for buckets the store does not have is refused at start.
        early = subprocess.run(
            [FENCEPOST, "worker", APP, "--db", shared_db, "--buckets", "64-127"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert early.returncode == 2, early.stderr
        assert early.stderr.strip().splitlines()[-1] == (
            "fencepost worker: buckets: '64-127' is outside 0-63 (64 buckets)"
        )

        # While a worker is live, the count does not change under it.
        procs.start(
            "idle",
            [FENCEPOST, "worker", APP, "--db", shared_db, "--owner", "idle", "--jobs", "spin"],
        )
        wait_until(lambda: [n.id for n in observer.nodes()] == ["idle"], 30, "the idle worker")
        refused = run_fencepost("db", "set-buckets", "128", db=shared_db)
        line = one_line(refused)
        assert line.startswith("fencepost db set-buckets: num_buckets: 1 live node(s)")
        assert "(idle)" in line
        assert "nothing was changed" in line
        assert {e.id: observer.get(e.id).bucket for e in submitted} == before
        assert observer.bucket_report().num_buckets == 64
        idle = procs.procs[-1]
        idle.send_signal(signal.SIGTERM)
        assert idle.wait(30) == 0, procs.log("idle")
        assert observer.nodes() == [], "a clean stop deregisters"

        resized = run_fencepost("db", "set-buckets", "128", "--json", db=shared_db).json()
        assert (resized["previous"], resized["num_buckets"]) == (64, 128)
        assert resized["unfinished"] == len(submitted)
        assert resized["moved"] == sum(
            before[e.id] != bucket_for(k, 128) for e, k in zip(submitted, high + low, strict=True)
        )
        for e, key in zip(submitted, high + low, strict=True):
            assert observer.get(e.id).bucket == bucket_for(key, 128)

        # The worker of the new buckets runs what moved there, and only that.
        procs.start(
            "upper",
            [
                FENCEPOST,
                "worker",
                APP,
                "--db",
                shared_db,
                "--owner",
                "upper",
                "--buckets",
                "64-127",
                "--jobs",
                "quick",
            ],
        )
        ran = submitted[: len(high)]
        wait_until(
            lambda: all(observer.get(e.id).state is State.SUCCEEDED for e in ran),
            60,
            "the worker of buckets 64-127 to run the executions moved there",
        )
        assert all(observer.get(e.id).state is State.SCHEDULED for e in submitted[len(high) :])
        # The report of a store opened before the resize reads the recorded count.
        report = observer.bucket_report()
        assert report.num_buckets == 128
        assert report.unowned == list(range(64))
        assert "ERROR" not in procs.log("upper")
    finally:
        observer.close()

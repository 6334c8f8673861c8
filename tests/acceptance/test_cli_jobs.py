"""``fencepost jobs``: the job catalogue as a table and as JSON, on SQLite and PostgreSQL.

The history is prepared two hours in the past (the command runs on the real clock):
``report`` published at versions 1 and 2 and ``<b>nightly</b>`` at version 1; one
``report`` execution created two hours ago (outside a 1 h window), one created just
now and completed, one waiting; a live node serving ``report`` 2 and ``<b>nightly</b>``,
another serving ``report`` 1.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from fencepost.domain.catalogue import JobDefaults, JobSource, job_entry
from fencepost.testing import ManualClock
from tests.acceptance.cli import fencepost, fencepost_all
from tests.acceptance.conftest import Database

NIGHTLY = "<b>nightly</b>"
REPORT_V2 = {
    "type": "object",
    "properties": {"day": {"type": "string"}, "region": {"type": "string"}},
    "required": ["day"],
}
ZEROS = {
    "SCHEDULED": 0,
    "RUNNING": 0,
    "RETRY_WAIT": 0,
    "SUCCEEDED": 0,
    "FAILED": 0,
    "CANCELLED": 0,
    "SKIPPED": 0,
}


def prepare(database: Database) -> None:
    now = datetime.now(UTC)
    clock = ManualClock(now - timedelta(hours=2))
    store = database.store(clock)
    store.publish_jobs(
        [
            job_entry("report", 1),
            job_entry(
                "report",
                2,
                input_schema=REPORT_V2,
                defaults=JobDefaults(max_attempts=5, timeout=90, queue="reports"),
                description="daily figures",
                source=JobSource(kind="file", where="jobs/report.yaml"),
            ),
            job_entry(NIGHTLY, 1, description="<script>alert(1)</script>"),
        ]
    )
    store.submit("report", inputs={"day": "old"})
    clock.set(now)
    done = store.submit("report", inputs={"day": "today"})
    [lease] = store.claim("w1", ids=[done.id])
    store.complete(lease, None)
    store.submit("report", inputs={"day": "tomorrow"}, delay=3600)
    store.register_node("w1", jobs=[("report", 2), (NIGHTLY, 1)], ttl=3600)
    store.register_node("w2", jobs=[("report", 1)], ttl=3600)


def test_jobs_lists_the_catalogue(database: Database) -> None:
    prepare(database)
    listing, table, day = fencepost_all(
        ("jobs", "--window", "1h", "--json"),
        ("jobs", "--window", "1h"),
        ("jobs", "--json"),
        db=database.url,
    )
    body = listing.json()
    assert body["window"] == 3600.0
    assert [job["name"] for job in body["jobs"]] == [NIGHTLY, "report"]
    nightly, report = body["jobs"]
    assert report == {
        "name": "report",
        "latest_version": 2,
        "versions": [1, 2],
        "defaults": {"max_attempts": 5, "timeout": 90.0, "queue": "reports"},
        "inputs": ["day", "region"],
        "description": "daily figures",
        "nodes": ["w1", "w2"],
        "workers": 2,
        "due": 1,  # "old"; "tomorrow" is not due yet
        "unserved": 0,
        "counts": ZEROS | {"SCHEDULED": 1, "SUCCEEDED": 1},
    }
    assert nightly["nodes"] == ["w1"]
    assert nightly["counts"] == ZEROS
    assert day.json()["jobs"][1]["counts"] == ZEROS | {"SCHEDULED": 2, "SUCCEEDED": 1}
    table.ok()
    assert table.row("report") == [
        "report",
        "2 (of 2)",
        "max_attempts=5 timeout=1m30s queue=reports",
        "day, region",
        "w1, w2",
        "2",
        "1",
        *("1", "0", "0", "1", "0", "0", "0"),
    ]
    assert table.row(NIGHTLY)[1:5] == ["1 (of 1)", "-", "-", "w1"]
    assert "executions created in the last 1h" in table.stdout


def test_one_job_in_full(database: Database) -> None:
    prepare(database)
    document, shown = fencepost_all(
        ("jobs", "report", "--json", "--window", "1h"), ("jobs", "report"), db=database.url
    )
    body = document.json()
    assert body["name"] == "report"
    assert body["counts"] == ZEROS | {"SCHEDULED": 1, "SUCCEEDED": 1}
    assert body["nodes"] == ["w1", "w2"]
    first, second = body["versions"]
    assert (first["version"], first["served_by"], first["input_schema"]) == (
        1,
        ["w2"],
        {"type": "object"},
    )
    assert second["input_schema"] == REPORT_V2
    assert second["output_schema"] is None
    assert second["source"] == {"kind": "file", "where": "jobs/report.yaml"}
    assert second["digest"].startswith("sha256:")
    assert second["published_at"].endswith("Z")
    assert second["served_by"] == ["w1"]
    shown.ok()
    assert shown.row("digest")[1] == second["digest"]
    assert shown.row("source") == ["source", "file jobs/report.yaml"]
    assert '"required": [' in shown.stdout, "the schema, pretty-printed"
    nightly = fencepost("jobs", NIGHTLY, db=database.url).ok()
    assert nightly.row("description") == ["description", "<script>alert(1)</script>"]


def test_an_unknown_job_exits_3_naming_it(database: Database) -> None:
    prepare(database)
    missing = fencepost("jobs", "nope", db=database.url)
    assert missing.returncode == 3  # not found
    assert missing.errors == ["fencepost jobs: job nope not found"]
    assert missing.stdout == ""


def test_bad_arguments_exit_2_with_one_line(database: Database) -> None:
    prepare(database)
    for args, field in (
        (("--window", "0s"), "--window"),
        (("--window", "24"), "--window"),
        (("--window=-1h",), "--window"),
        (("x" * 5000,), "NAME"),
        (("\udced\udca0\udc80",), "NAME"),  # the bytes ED A0 80: a lone surrogate
    ):
        refused = fencepost("jobs", *args, db=database.url)
        assert refused.returncode == 2, refused.stderr
        assert len(refused.errors) == 1
        assert refused.errors[0].startswith(f"fencepost jobs: {field}"), refused.errors


def test_an_empty_catalogue(database: Database) -> None:
    database.store().submit("unpublished")
    listing, table = fencepost_all(("jobs", "--json"), ("jobs",), db=database.url)
    assert listing.json()["jobs"] == []
    assert "no job published" in table.ok().stdout


def test_a_missing_database_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    for args in (("jobs",), ("jobs", "report"), ("jobs", "--json")):
        refused = fencepost(*args, db=f"sqlite:///{path}")
        assert refused.returncode == 2
        assert refused.errors == [
            f"fencepost jobs: --db: no SQLite database at {path} (fencepost db migrate creates one)"
        ]
    assert not path.exists()

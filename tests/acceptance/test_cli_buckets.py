"""``fencepost buckets``: executions per bucket, owners, buckets owned twice or by none, orphans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fencepost.testing import ManualClock
from fencepost.testing.factory import ExecutionFactory
from tests.acceptance.cli import fencepost_all
from tests.acceptance.conftest import Database
from tests.acceptance.test_cli_executions import key_in_bucket


def test_buckets_show_owners_gaps_and_orphans(database: Database) -> None:
    store = database.store()
    store.register_node("node-a", buckets=[0, 1, 2, 3], ttl=300)
    store.register_node("node-b", buckets=[3, 4], ttl=300)
    for _ in range(2):
        store.submit("mail", bucket_key=key_in_bucket(3))
    ExecutionFactory(store).succeeded(bucket_key=key_in_bucket(0))  # finished: not counted
    # Untouched for an hour in bucket 9, which no live node claims from: an orphan.
    past = database.store(ManualClock(datetime.now(UTC) - timedelta(hours=1)))
    orphan = past.submit("mail", bucket_key=key_in_bucket(9))

    as_json, table, mine = fencepost_all(
        ("buckets", "--json"),
        ("buckets", "--owned-buckets", "3-4"),
        ("buckets", "--owned-buckets", "3-4", "--orphaned-after", "2h", "--json"),
        db=database.url,
    )
    report = as_json.json()
    assert report["num_buckets"] == 64
    assert report["owned"] is None
    counts = {b["bucket"]: b["executions"] for b in report["buckets"] if b["executions"]}
    assert counts == {3: 2, 9: 1}
    assert report["buckets"][3] == {
        "bucket": 3,
        "executions": 2,
        "owners": ["node-a", "node-b"],
        "duplicated": True,
        "unowned": False,
        "mine": None,
    }
    assert [n["id"] for n in report["nodes"]] == ["node-a", "node-b"]
    assert report["nodes"][1]["buckets"] == [3, 4]
    assert report["duplicated"] == [{"bucket": 3, "owners": ["node-a", "node-b"]}]
    assert report["unowned"] == list(range(5, 64))
    assert report["floating"] == []
    assert [(o["id"], o["bucket"]) for o in report["orphans"]] == [(orphan.id, 9)]

    shown = table.ok()
    assert shown.row("3") == ["3", "2", "node-a, node-b", "owned twice", "*"]
    assert shown.row("4") == ["4", "0", "node-b", "*"]
    assert shown.row("9") == ["9", "1", "-", "unowned"]
    assert shown.row("node-b")[1:3] == ["worker", "3-4"]
    assert shown.row("owned twice") == ["owned twice", "3: node-a, node-b"]
    assert shown.row("unowned") == ["unowned", "5-63"]
    assert shown.row("mine") == ["mine", "3-4"]
    assert shown.row(orphan.id)[1:4] == ["mail", "SCHEDULED", "9"]

    marked = mine.json()
    assert marked["owned"] == [3, 4]
    assert [b["bucket"] for b in marked["buckets"] if b["mine"]] == [3, 4]
    assert marked["orphans"] == [], "not unchanged for 2 hours"

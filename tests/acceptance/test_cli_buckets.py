"""``fencepost buckets``: executions per bucket, owners, buckets owned twice or by none, orphans."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import quote

from fencepost.domain.buckets import bucket_for
from fencepost.testing import ManualClock
from fencepost.testing.factory import ExecutionFactory
from tests.acceptance.cli import fencepost, fencepost_all
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


#: NUM_BUCKETS values `fencepost db set-buckets` refuses, and how each is shown.
HOSTILE_COUNTS = [
    ("0", "0"),
    ("-1", "'-1'"),
    ("65537", "65537"),
    ("1" + "0" * 30, "'1000000000000000000000000000000'"),
    ("9" * 5000, f"{'9' * 37!r}..."),
    ("1.5", "'1.5'"),
    ("eight", "'eight'"),
    ("8\x01", "'8\\x01'"),
    ("", "''"),
]


def test_set_buckets_refuses_a_bad_count_and_changes_nothing(database: Database) -> None:
    store = database.store()
    executions = [store.submit("mail", bucket_key=key_in_bucket(b)) for b in (0, 9, 63)]
    runs = fencepost_all(
        *(("db", "set-buckets", "--db", database.url, "--", count) for count, _ in HOSTILE_COUNTS)
    )
    for run, (_, shown) in zip(runs, HOSTILE_COUNTS, strict=True):
        assert run.returncode == 2, run.stderr
        assert run.errors == [
            "fencepost db set-buckets: NUM_BUCKETS: must be a whole number from 1 to 65536, "
            f"got {shown}"
        ]
    # Nor through the count a submitter asks for: in the URL, or with --num-buckets.
    in_url = [
        fencepost(
            "submit",
            "mail",
            db=f"{database.url}{'&' if '?' in database.url else '?'}num_buckets={quote(count)}",
        )
        for count in ("0", "-1", "x\x00", "9" * 50)
    ]
    for run in in_url:
        assert run.returncode == 2, run.stderr
        [line] = run.errors
        assert line.startswith("fencepost submit: --db: url.num_buckets: "), line
    by_flag = fencepost("submit", "mail", "--num-buckets", "9" * 5000, db=database.url)
    assert by_flag.errors == [
        f"fencepost submit: argument --num-buckets: must be a whole number, got {'9' * 37!r}..."
    ]
    zero = fencepost("submit", "mail", "--num-buckets", "0", db=database.url)
    assert zero.errors == ["fencepost submit: --num-buckets: must be between 1 and 65536, got 0"]
    with database.store() as after:
        assert after.config.num_buckets == 64
        assert [after.get(e.id).bucket for e in executions] == [0, 9, 63]
        assert len(after.query().items) == len(executions), "no refused submit stored anything"


def test_set_buckets_waits_for_live_nodes_unless_forced(database: Database) -> None:
    store = database.store()
    moved = store.submit("mail", bucket_key=key_in_bucket(100, 128))
    store.register_node("node-a", buckets=[0, 1], ttl=300)

    refused = fencepost("db", "set-buckets", "128", db=database.url)
    assert refused.returncode == 2
    [line] = refused.errors
    assert line.startswith("fencepost db set-buckets: num_buckets: 1 live node(s) still run")
    assert "(node-a)" in line
    assert store.get(moved.id).bucket == bucket_for(key_in_bucket(100, 128), 64)

    forced = fencepost("db", "set-buckets", "128", "--force", "--json", db=database.url)
    assert forced.json() == {
        "previous": 64,
        "num_buckets": 128,
        "unfinished": 1,
        "moved": 1,
        "live_nodes": ["node-a"],
    }
    assert forced.errors == [
        "fencepost db set-buckets: warning: 1 live node(s) still run with 64 buckets until "
        "restarted: node-a"
    ]
    assert store.get(moved.id).bucket == 100
    # The report reads the recorded count, and --owned-buckets is checked against it.
    report = fencepost("buckets", "--owned-buckets", "100-127", "--json", db=database.url).json()
    assert report["num_buckets"] == 128
    assert report["owned"] == list(range(100, 128))
    assert report["unowned"] == list(range(2, 128))
    assert [b["bucket"] for b in report["buckets"] if b["executions"]] == [100]
    out_of_range = fencepost("buckets", "--owned-buckets", "128", db=database.url)
    assert out_of_range.errors == [
        "fencepost buckets: --owned-buckets: '128' is outside 0-127 (128 buckets)"
    ]
    table = fencepost("db", "set-buckets", "128", db=database.url).ok()
    assert table.row("num_buckets") == ["num_buckets", "128 -> 128"]
    assert table.row("moved to another bucket") == ["moved to another bucket", "0"]

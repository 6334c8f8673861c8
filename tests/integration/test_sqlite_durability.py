"""SQLite syncs every commit by default: counted with strace, not taken on trust.

In WAL mode, ``PRAGMA synchronous = NORMAL`` syncs the WAL only at checkpoints, so a
transaction it committed may roll back after a power loss or an OS crash; ``FULL``
(fencepost's default) syncs the WAL in every COMMIT. Neither is visible to a test
that only reads the data back, so these tests count the process's ``fsync`` and
``fdatasync`` calls under ``strace -f -c``: a subprocess opens a fresh file and does
its writes, and the open alone (migrations, the final checkpoint) is counted
separately and subtracted.

* 100 single ``submit`` calls cost at least 100 syncs with the default URL (one per
  commit) and next to none with ``?synchronous=normal``.
* The batch paths — ``submit_many``, ``claim``, ``complete_many`` of 100 each — are one
  transaction each, so under FULL they cost one sync per call, not one per row.

Locally the tests are skipped when the ``strace`` binary is missing; ``.ci/run`` and
``make system-deps`` install it, and in CI (``FENCEPOST_REQUIRE_POSTGRES`` set) a
missing one fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration._tools import require_tool

#: What the subprocess does on a fresh file: open it only, or open it and write.
CHILD = """
import sys

import fencepost

url, scenario = sys.argv[1], sys.argv[2]
with fencepost.connect(url) as store:
    if scenario == "single":
        for n in range(100):
            store.submit("durable", inputs={"n": n})
    elif scenario == "batch":
        store.submit_many([{"job": "durable", "inputs": {"n": n}} for n in range(100)])
        leases = store.claim("tester", limit=100, ttl=60)
        assert len(leases) == 100, len(leases)
        assert store.complete_many([(lease, {"ok": True}) for lease in leases]) == [None] * 100
    else:
        assert scenario == "open", scenario
"""
SYNC_CALLS = ("fsync", "fdatasync")


def parse_summary(text: str) -> dict[str, int]:
    """Calls per syscall from ``strace -c``'s table (``% time seconds usecs/call calls
    errors syscall``; the errors column is blank when there were none)."""
    calls: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) in (5, 6) and fields[-1] != "total" and fields[3].isdigit():
            calls[fields[-1]] = int(fields[3])
    return calls


def count_syncs(tmp_path: Path, query: str, scenario: str) -> int:
    """fsync + fdatasync calls of a subprocess running ``scenario`` on a fresh file."""
    strace = require_tool("strace")
    run = tmp_path / f"{scenario}{query.replace('?', '-').replace('=', '-')}"
    run.mkdir()
    summary = run / "strace.txt"
    url = f"sqlite:///{run / 'jobs.db'}{query}"  # an absolute path: sqlite:////...
    command = [strace, "-f", "-c", "-e", "trace=" + ",".join(SYNC_CALLS), "-o", str(summary)]
    done = subprocess.run(
        [*command, sys.executable, "-c", CHILD, url, scenario],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{scenario} on {url} failed:\n{done.stdout}{done.stderr}"
    table = summary.read_text()
    calls = parse_summary(table)
    # Whatever ran, the open alone syncs (migrations): an empty table means strace
    # counted nothing, which would make every comparison below pass or fail for nothing.
    assert calls, f"no fsync/fdatasync counted; strace said:\n{table}"
    return sum(calls.get(name, 0) for name in SYNC_CALLS)


def test_the_summary_table_is_parsed() -> None:
    table = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 91.00    0.019000         190       100           fdatasync
  9.00    0.002000         200        10         1 fsync
------ ----------- ----------- --------- --------- ----------------
100.00    0.021000         190       110         1 total
"""
    assert parse_summary(table) == {"fdatasync": 100, "fsync": 10}


def test_each_single_submit_is_synced_by_default_and_not_with_normal(tmp_path: Path) -> None:
    full = count_syncs(tmp_path, "", "single") - count_syncs(tmp_path, "", "open")
    normal_open = count_syncs(tmp_path, "?synchronous=normal", "open")
    normal = count_syncs(tmp_path, "?synchronous=normal", "single") - normal_open
    # One sync per commit: a default that went back to NORMAL fails here.
    assert full >= 100, f"100 submits under the default made {full} syncs (FULL makes one each)"
    # NORMAL syncs at checkpoints only; 100 small commits reach at most one or two.
    assert normal <= 10, f"100 submits under synchronous=normal made {normal} syncs"
    assert normal < full / 5


def test_batch_paths_sync_once_per_call_not_per_row(tmp_path: Path) -> None:
    extra = count_syncs(tmp_path, "", "batch") - count_syncs(tmp_path, "", "open")
    # submit_many, claim and complete_many of 100 rows: three transactions, three syncs
    # (room left for one checkpoint, which syncs the WAL and the database file).
    assert 3 <= extra <= 5, f"submit_many + claim + complete_many of 100 made {extra} syncs"

"""``fencepost stats`` and ``fencepost slo`` over a history prepared ten minutes in the past.

Timeline (seconds after ``base``, which is ten minutes before real time; every
execution is due at ``base``):

* ``a``: claimed at 2 (2 s late), completed at 3.
* ``b``: claimed at 30 by w1 with a 5 s lease (30 s late); taken over at 36 by w2
  (a lease expiry, 36 s late); w1's completion at 37 is refused (stale); w2
  completes at 40.
* ``c``: never claimed (due backlog; misses both objectives).
* ``e``: one attempt allowed; claimed at 1 with a 5 s lease, reaped at 10: FAILED
  (a lease expiry; finished, in time).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fencepost.domain.errors import StaleLease
from fencepost.testing import ManualClock
from tests.acceptance.cli import fencepost_all
from tests.acceptance.conftest import Database


def prepare(database: Database) -> tuple[datetime, dict[str, str]]:
    base = (datetime.now(UTC) - timedelta(minutes=10)).replace(microsecond=0)
    clock = ManualClock(base)
    store = database.store(clock)
    ids = {job: store.submit(job).id for job in ("a", "b", "c")}
    ids["e"] = store.submit("e", max_attempts=1).id

    def at(seconds: float) -> None:
        clock.set(base + timedelta(seconds=seconds))

    at(1)
    store.claim("w1", jobs=["e"], ttl=5)
    at(2)
    (a,) = store.claim("w1", jobs=["a"], ttl=60)
    at(3)
    store.complete(a, "ok")
    at(10)
    assert store.reap_expired() == 1
    at(30)
    (stale,) = store.claim("w1", jobs=["b"], ttl=5)
    at(36)
    (b,) = store.claim("w2", jobs=["b"], ttl=60)
    at(37)
    with pytest.raises(StaleLease):
        store.complete(stale, "late")
    at(40)
    store.complete(b, "ok")
    return base, ids


def test_stats_and_slo_report_the_prepared_history(database: Database) -> None:
    base, ids = prepare(database)
    stats_json, stats_table, slo_json, slo_table = fencepost_all(
        ("stats", "--window", "1h", "--json"),
        ("stats", "--window", "1h"),
        ("slo", "--window", "1d", "--worst", "2", "--json"),
        ("slo", "--window", "1d"),
        db=database.url,
    )
    stats = stats_json.json()
    assert stats["window"] == 3600.0
    assert stats["by_state"] == {
        "SCHEDULED": 1,
        "RUNNING": 0,
        "RETRY_WAIT": 0,
        "SUCCEEDED": 2,
        "FAILED": 1,
        "CANCELLED": 0,
        "SKIPPED": 0,
    }
    assert stats["by_job"]["b"]["SUCCEEDED"] == 1
    assert stats["by_job"]["e"]["FAILED"] == 1
    assert sorted(stats["by_job"]) == ["a", "b", "c", "e"]
    assert stats["due_backlog"] == 1
    # Claims 1, 2, 30 and the takeover at 36; nearest rank: p50 is the 2nd, p90 the 4th.
    assert stats["claim_lateness"] == {
        "count": 4,
        "p50": 2.0,
        "p90": 36.0,
        "p99": 36.0,
        "max": 36.0,
    }
    assert (stats["stale_refused"], stats["lease_expiries"]) == (1, 2)

    table = stats_table.ok()
    assert table.row("due backlog") == ["due backlog", "1"]
    assert table.row("stale completions refused") == ["stale completions refused", "1"]
    assert table.row("lease expiries") == ["lease expiries", "2"]
    assert table.row("4") == ["4", "2s", "36s", "36s", "36s"]
    assert table.row("(all)") == ["(all)", "1", "0", "0", "2", "1", "0", "0", "4"]

    slo = slo_json.json()
    assert (slo["window"], slo["claim_within"], slo["finish_within"]) == (86400.0, 10.0, 300.0)
    assert slo["claimed"] == {"met": 2, "total": 4, "share": 0.5, "target": 0.99, "ok": False}
    assert slo["finished"] == {"met": 3, "total": 4, "share": 0.75, "target": 0.999, "ok": False}
    never, late = slo["worst"]
    assert (never["execution_id"], never["state"], never["claimed_at"]) == (
        ids["c"],
        "SCHEDULED",
        None,
    )
    assert never["lateness"] >= 600
    assert late == {
        "execution_id": ids["b"],
        "job": "b",
        "state": "SUCCEEDED",
        "due_at": f"{base.isoformat().removesuffix('+00:00')}Z",
        "claimed_at": f"{(base + timedelta(seconds=30)).isoformat().removesuffix('+00:00')}Z",
        "lateness": 30.0,
    }

    report = slo_table.ok()
    assert report.row("claimed within 10s of due")[1:] == ["2", "4", "50.00%", "99.00%", "MISSED"]
    assert report.row("SUCCEEDED or FAILED within 5m of due")[1:] == [
        "3",
        "4",
        "75.00%",
        "99.90%",
        "MISSED",
    ]
    assert report.row(ids["b"])[1:] == [
        "b",
        "SUCCEEDED",
        base.strftime("%Y-%m-%d %H:%M:%SZ"),
        (base + timedelta(seconds=30)).strftime("%Y-%m-%d %H:%M:%SZ"),
        "30s",
    ]
    assert report.row(ids["a"])[-1] == "2s"


def test_stats_print_throttled_claims_per_scope(database: Database) -> None:
    """A rate held one ``mail`` 4 s and a paused queue held two ``slow`` ones 20 s each:
    each scope's records on a ``throttled`` line, none of them in the claim lateness."""
    base = (datetime.now(UTC) - timedelta(minutes=10)).replace(microsecond=0)
    clock = ManualClock(base)
    store = database.store(clock)
    store.set_limit("job:mail", rate="1/min", burst=1)
    store.pause_queue("slow", actor="ops")
    store.submit_many([{"job": "mail"}, {"job": "mail"}])
    store.submit_many([{"job": "report", "queue": "slow"} for _ in range(2)])
    assert len(store.claim("w", limit=10, ttl=3600)) == 1  # a mail: the burst
    clock.set(base + timedelta(seconds=20))
    store.resume_queue("slow", actor="ops")
    assert len(store.claim("w", limit=10, ttl=3600)) == 2  # the resumed queue's, not the mail
    clock.set(base + timedelta(seconds=64))
    assert len(store.claim("w", limit=10, ttl=3600)) == 1  # the second mail, a minute later
    as_json, table = fencepost_all(
        ("stats", "--window", "1h", "--json"), ("stats", "--window", "1h"), db=database.url
    )
    stats = as_json.json()
    assert stats["throttled"] == [
        {"scope": "job:mail", "count": 1, "held": 64.0},
        {"scope": "queue:slow", "count": 2, "held": 40.0},
    ]
    assert stats["claim_lateness"]["count"] == 1, "the first mail's claim only"
    rows = table.ok().rows("throttled")
    assert rows == [
        ["throttled", "job:mail: 1 claim held 1m04s"],
        ["throttled", "queue:slow: 2 claims held 40s"],
    ]

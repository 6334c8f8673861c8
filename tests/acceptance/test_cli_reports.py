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

import json
from datetime import UTC, datetime, time, timedelta

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
    assert stats["errors"] == {
        "late_claim": 1,  # b, first claimed 30 s after its planned time
        "renewal_failed": 2,  # e reaped, b taken over
        "timed_out": 0,
        "handler_failed": 0,
        "stale_completion_refused": 1,  # w1's completion of b
        "throttled": 0,
    }

    table = stats_table.ok()
    assert table.row("due backlog") == ["due backlog", "1"]
    # Each error class by its name; the old "stale completions refused" line (which
    # counted refused heartbeats too) is gone.
    assert table.row("late_claim")[:2] == ["late_claim", "1"]
    assert table.row("renewal_failed")[:2] == ["renewal_failed", "2"]
    assert table.row("stale_completion_refused")[:2] == ["stale_completion_refused", "1"]
    assert table.row("timed_out")[:2] == ["timed_out", "0"]
    assert "stale completions refused" not in table.stdout
    assert table.row("4") == ["4", "2s", "36s", "36s", "36s"]
    assert table.row("(all)") == ["(all)", "1", "0", "0", "2", "1", "0", "0", "4"]

    # Both objectives are missed: exit 1, with --json as without (it used to be 0).
    assert (slo_json.returncode, slo_table.returncode) == (1, 1), slo_json.stderr
    assert slo_json.stderr == slo_table.stderr == ""
    slo = json.loads(slo_json.stdout)
    assert (slo["window"], slo["claim_within"], slo["finish_within"]) == (86400.0, 10.0, 300.0)
    assert (slo["rolled_up"], slo["missed"]) == (0, True)
    # A window of a day or more starts at the UTC midnight at or before at - window.
    at, start = datetime.fromisoformat(slo["at"]), datetime.fromisoformat(slo["start"])
    assert start.time() == time(0)
    assert start <= at - timedelta(days=1) < start + timedelta(days=1)
    claimed, finished = slo["claimed"], slo["finished"]
    assert claimed == {
        "met": 2,
        "total": 4,
        "share": 0.5,
        "target": 0.99,
        "ok": False,
        "within": 10.0,
        "missed": True,
        "misses": {"late_claim": 2},
        "excluded": {"backfill": 0, "replay": 0, "throttled": 0},
        "budget": pytest.approx(0.04),
        "consumed": 2,
        "remaining": pytest.approx(-1.96),
        "burn": [
            {"window": 3600.0, "met": 2, "total": 4, "rate": pytest.approx(50)},
            {"window": 21600.0, "met": 2, "total": 4, "rate": pytest.approx(50)},
        ],
    }
    assert {k: finished[k] for k in ("met", "total", "share", "target", "ok", "missed")} == {
        "met": 3,
        "total": 4,
        "share": 0.75,
        "target": 0.999,
        "ok": False,
        "missed": True,
    }
    # c, never claimed, misses the finish by its late claim; b, taken over and its
    # stale completion refused, still finished in time.
    assert finished["misses"] == {
        "late_claim": 1,
        "renewal_failed": 0,
        "timed_out": 0,
        "handler_failed": 0,
        "stale_completion_refused": 0,
        "ran_long": 0,
    }
    never, late = slo["worst"]
    assert (never["execution_id"], never["state"], never["claimed_at"]) == (
        ids["c"],
        "SCHEDULED",
        None,
    )
    assert never["lateness"] >= 600
    assert never["verdict"] == "late_claim"
    assert late == {
        "execution_id": ids["b"],
        "job": "b",
        "state": "SUCCEEDED",
        "planned_at": iso(base),
        "claimed_at": iso(base + timedelta(seconds=30)),
        "lateness": 30.0,
        "verdict": "late_claim",
    }

    report = slo_table
    assert report.row("claimed within 10s of planned")[1:] == [
        "2",
        "4",
        "50.00%",
        "99.00%",
        "MISSED",
    ]
    assert report.row("SUCCEEDED or FAILED within 5m of planned")[1:] == [
        "3",
        "4",
        "75.00%",
        "99.90%",
        "MISSED",
    ]
    assert report.row("claim")[1:] == ["0.04", "2", "-1.96", "50.00", "50.00"]
    assert report.row("finish")[1:] == ["0.004", "1", "-0.996", "250.00", "250.00"]
    assert report.row("late_claim")[1:] == ["2", "1"]
    assert report.row("renewal_failed")[1:] == ["-", "0"]
    assert report.row("backfill")[1:] == ["0", "0"]
    assert report.row("rolled up")[1] == "0 pruned executions, counted from prune's daily rollups"
    assert report.row(ids["b"])[1:] == [
        "b",
        "SUCCEEDED",
        base.strftime("%Y-%m-%d %H:%M:%SZ"),
        (base + timedelta(seconds=30)).strftime("%Y-%m-%d %H:%M:%SZ"),
        "30s",
        "late_claim",
    ]
    assert report.row(ids["a"])[-2:] == ["2s", "met"]


def iso(instant: datetime) -> str:
    """An instant as ``--json`` writes it."""
    return f"{instant.isoformat().removesuffix('+00:00')}Z"


def test_slo_exits_0_when_both_objectives_are_met_and_takes_targets(database: Database) -> None:
    """Exit 1 only when an objective is below its target: at 40% and 70% the prepared
    history meets both (50%, 75%), at the defaults it misses both."""
    prepare(database)
    lowered = ("--claim-target", "0.4", "--finish-target", "0.7")
    as_json, table, raised = fencepost_all(
        ("slo", "--window", "1d", *lowered, "--json"),
        ("slo", "--window", "1d", *lowered),
        ("slo", "--window", "1d", "--finish-target", "0.75", "--claim-target", "0.51"),
        db=database.url,
    )
    report = as_json.json()  # exit 0
    assert (report["missed"], report["claimed"]["ok"], report["finished"]["ok"]) == (
        False,
        True,
        True,
    )
    assert (report["claimed"]["target"], report["finished"]["target"]) == (0.4, 0.7)
    assert report["claimed"]["budget"] == pytest.approx(0.6 * 4)
    assert table.ok().row("claimed within 10s of planned")[-2:] == ["40.00%", "MET"]
    assert raised.returncode == 1, "the claim objective, at 50%, misses 51%"
    assert raised.row("SUCCEEDED or FAILED within 5m of planned")[-1] == "MET"
    assert raised.row("claimed within 10s of planned")[-1] == "MISSED"


def test_slo_with_nothing_in_the_window_exits_0(database: Database) -> None:
    database.store()  # the schema, nothing in it
    as_json, table = fencepost_all(("slo", "--json"), ("slo",), db=database.url)
    report = as_json.json()
    assert (report["claimed"]["share"], report["claimed"]["ok"], report["missed"]) == (
        None,
        None,
        False,
    )
    assert table.ok().row("claimed within 10s of planned")[-1] == "no data"
    assert "no executions planned in the window" in table.stdout


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
        # The error classes' table: the three records, by the class's name.
        ["throttled", "3", "claims a limit or a paused queue held back"],
    ]
    assert stats["errors"]["throttled"] == 3

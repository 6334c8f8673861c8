"""A worker whose clock runs an hour fast cannot steal or extend a lease on PostgreSQL.

The worker process runs under libfaketime (``faketime -f +1h``), so every clock it
reads, ``time.time()`` and ``datetime.now()`` alike, is an hour ahead of the server's
(it measures that itself). The lease that this test's own process holds looks long
expired to it. Still it finds nothing to claim, cannot heartbeat or complete that
execution under a lease it does not hold (another owner or another epoch), and its
own submissions, claims and heartbeats get times from the server's clock: ``due_at``
is the server's now (plus the delay), and ``lease_until`` the server's now plus the
ttl, not an hour later.

Locally the test is skipped when the ``faketime`` binary is missing; ``.ci/run``
installs it, and in CI (``FENCEPOST_REQUIRE_POSTGRES`` set) a missing one fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost import Event, State
from fencepost.domain.machine import stale_reason
from tests import postgres
from tests.integration import _audit, _pg
from tests.integration._tools import require_tool

WORKER = Path(__file__).with_name("_pg_fast_clock_worker.py")
HOUR = 3600.0
HOLDER_TTL = 30.0
FAST_TTL = 30.0  # the fast worker's TTL, RENEWED_TTL and DELAY (see the worker)
RENEWED_TTL = 60.0
DELAY = 60.0


def _within(value: str, low: str, high: str, plus: float) -> bool:
    """``low + plus <= value <= high + plus`` for ISO 8601 instants (``plus`` seconds)."""
    shift = timedelta(seconds=plus)
    at = datetime.fromisoformat(value)
    return datetime.fromisoformat(low) + shift <= at <= datetime.fromisoformat(high) + shift


@pytest.mark.timeout(60)
def test_a_worker_an_hour_fast_can_neither_steal_nor_extend_a_lease() -> None:
    postgres.require_postgres()
    faketime = require_tool("faketime")
    with _pg.fresh_schema() as schema, fencepost.connect(_pg.url(schema, pool_max=2)) as store:
        held_id = store.submit("held").id
        (held,) = store.claim("holder", ttl=HOLDER_TTL)
        more = [postgres.dsn(), json.dumps(_lease_json(held))]
        run = subprocess.run(
            [faketime, "-f", "+1h", sys.executable, str(WORKER), _pg.url(schema), *more],
            capture_output=True,
            text=True,
            timeout=45,
            check=False,
        )
        assert run.returncode == 0, f"fast worker failed:\n{run.stdout}\n{run.stderr}"
        assert not run.stderr, run.stderr
        report = json.loads(run.stdout)

        # The worker's clock really ran an hour ahead of the server's.
        skew = report["skew"]
        ahead = (
            skew["local"]
            - datetime.fromisoformat(skew["after"]).timestamp() / 2
            - datetime.fromisoformat(skew["before"]).timestamp() / 2
        )
        assert HOUR - 5 < ahead < HOUR + 5, f"the worker's clock ran {ahead:.1f} s ahead"
        assert report["held_expired_by_my_clock"]

        # No steal: nothing was claimable while the lease was live by the server's clock.
        assert report["claimed_while_held"] == []
        # No extension or completion under a lease it does not hold.
        for name, outcomes in report["forged"].items():
            assert outcomes == {"heartbeat": "StaleLease", "complete": "StaleLease"}, name

        # Its own submissions are due by the server's clock ...
        submitted = report["submitted"]
        low, high = submitted["before"], submitted["after"]
        assert _within(submitted["now_due_at"], low, high, 0), submitted
        assert _within(submitted["later_due_at"], low, high, DELAY), submitted
        # ... its lease ends at the server's now plus the ttl, although its own clock
        # has that moment an hour in the past ...
        claimed = report["claimed"]
        (mine,) = claimed["leases"]
        until = mine["lease_until"]
        assert _within(until, claimed["before"], claimed["after"], FAST_TTL), claimed
        assert datetime.fromisoformat(until).timestamp() < claimed["local_after"] - HOUR / 2
        # ... a heartbeat renews it to the server's now plus the ttl ...
        renewed = report["renewed"]
        assert _within(renewed["lease_until"], renewed["before"], renewed["after"], RENEWED_TTL)
        # ... and the store, not its clock, judged its lease live at completion.
        assert report["completed"] == "accepted"

        # The holder's lease is untouched: same owner, epoch and end; it still holds.
        assert store.get(held_id).lease_until == held.lease_until
        renewed_held = store.heartbeat(held, ttl=HOLDER_TTL)
        assert renewed_held.lease_until > held.lease_until
        assert store.complete(renewed_held, "held done").state == State.SUCCEEDED
        held_trail = store.transitions(held_id)
        mine_trail = store.transitions(mine["id"])

    context = _audit.show(held_trail)
    assert [t.event for t in held_trail] == [
        Event.SUBMITTED,
        Event.CLAIMED,
        *[Event.STALE_REFUSED] * 6,
        Event.COMPLETED,
    ], context
    assert [(t.actor, t.epoch) for t in held_trail[1:2] + held_trail[-1:]] == [
        ("holder", 1),
        ("holder", 1),
    ], context
    refused = sorted((t.actor or "", t.epoch, t.reason or "") for t in held_trail[2:-1])
    assert refused == sorted(
        (owner, epoch, stale_reason(verb))
        for owner, epoch in [("fast", 1), ("holder", 2), ("holder", 0)]
        for verb in ("heartbeat", "complete")
    ), context
    # The fast worker's own lease, as the audit has it: claimed at the server's now,
    # ending exactly FAST_TTL later; completed by it under that lease.
    claim = next(t for t in mine_trail if t.event == Event.CLAIMED)
    assert claim.actor == "fast", _audit.show(mine_trail)
    assert datetime.fromisoformat(until) == claim.at + timedelta(seconds=FAST_TTL)
    assert [t.event for t in mine_trail][-1] == Event.COMPLETED, _audit.show(mine_trail)


def _lease_json(lease: fencepost.Lease) -> dict[str, object]:
    return {
        "id": lease.execution_id,
        "owner": lease.owner,
        "epoch": lease.epoch,
        "lease_until": lease.lease_until.isoformat(),
    }

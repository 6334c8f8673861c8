"""A worker process whose clock runs fast, for ``test_postgres_clock_skew.py``.

Run under libfaketime (``faketime -f +1h python _pg_fast_clock_worker.py STORE_URL DSN
HELD``) where HELD is the JSON of a lease another process holds: ``id``, ``owner``,
``epoch``, ``lease_until``. The worker acts as owner ``fast`` and prints one JSON
report on stdout; it judges nothing, the test does. Each step that asks the store
something also reads the server's clock just before and just after, so the test can
bound the store's now from both sides.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from typing import Any

import psycopg

import fencepost
from fencepost import Lease, StaleLease

OWNER = "fast"
TTL = 30.0
RENEWED_TTL = 60.0
DELAY = 60.0


def main(url: str, dsn: str, held_json: str) -> None:
    held = json.loads(held_json)
    report: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn, fencepost.connect(url) as store:

        def server_now() -> str:
            row = conn.execute("SELECT clock_timestamp()").fetchone()
            assert row is not None
            now: datetime = row[0]
            return now.isoformat()

        # How far ahead this process's clock runs: measured, not assumed.
        before = server_now()
        local = time.time()
        after = server_now()
        report["skew"] = {"before": before, "local": local, "after": after}

        # The held lease looks expired by this process's clock; the store must not agree.
        report["held_expired_by_my_clock"] = (
            datetime.fromisoformat(held["lease_until"]).timestamp() <= time.time()
        )
        report["claimed_while_held"] = [
            lease.execution_id for lease in store.claim(OWNER, limit=10, ttl=TTL)
        ]

        # Forged leases: the holder's execution under another owner or another epoch.
        template = store.get(held["id"])
        forged = {
            "my owner, holder's epoch": (OWNER, held["epoch"]),
            "holder's owner, next epoch": (held["owner"], held["epoch"] + 1),
            "holder's owner, previous epoch": (held["owner"], held["epoch"] - 1),
        }
        report["forged"] = {}
        for name, (owner, epoch) in forged.items():
            lease = Lease(
                execution_id=held["id"],
                owner=owner,
                epoch=epoch,
                lease_until=datetime.fromtimestamp(time.time() + 3600).astimezone(),
                due_at=template.due_at,
                attempt=template.attempt,
                max_attempts=template.max_attempts,
                job=template.job,
                job_version=template.job_version,
                inputs=template.inputs,
                timeout=template.timeout,
                schedule_id=template.schedule_id,
                slot=template.slot,
            )
            report["forged"][name] = {
                "heartbeat": _outcome(lambda lease=lease: store.heartbeat(lease, ttl=3600)),
                "complete": _outcome(lambda lease=lease: store.complete(lease, "forged")),
            }

        # Its own work: due_at, lease_until and renewals come from the server's clock.
        before = server_now()
        now_job = store.submit("mine")
        later_job = store.submit("later", delay=DELAY)
        after = server_now()
        report["submitted"] = {
            "before": before,
            "after": after,
            "now_due_at": now_job.due_at.isoformat(),
            "later_due_at": later_job.due_at.isoformat(),
        }
        before = server_now()
        mine = store.claim(OWNER, limit=10, ttl=TTL)
        after = server_now()
        report["claimed"] = {
            "before": before,
            "after": after,
            "leases": [
                {"id": lease.execution_id, "lease_until": lease.lease_until.isoformat()}
                for lease in mine
            ],
            "local_after": time.time(),
        }
        assert len(mine) == 1, mine  # the test reads the details from the report
        lease = mine[0]
        before = server_now()
        renewed = store.heartbeat(lease, ttl=RENEWED_TTL)
        after = server_now()
        report["renewed"] = {
            "before": before,
            "after": after,
            "lease_until": renewed.lease_until.isoformat(),
        }
        # By this process's clock the lease ended an hour ago; the store's clock decides.
        report["completed"] = _outcome(lambda: store.complete(renewed, "done"))
        report["own_lease"] = {"id": lease.execution_id, "epoch": lease.epoch}
    print(json.dumps(report))


def _outcome(call: Any) -> str:
    try:
        call()
    except StaleLease:
        return "StaleLease"
    return "accepted"


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])

"""A worker whose connections the test kills, for ``test_postgres_faults.py``.

Run as ``python _pg_victim_worker.py STORE_URL COUNT TTL``; the URL carries a distinct
``application_name``. It talks with the test over stdin/stdout, one JSON line each
way: it claims COUNT executions as owner ``victim`` with TTL and prints its leases;
on ``{"step": "killed"}`` it makes its next calls through the same store (never
renewing its leases) and prints what each did; on ``{"step": "complete"}`` it
completes its old leases and prints the outcomes. It judges nothing.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import fencepost
from fencepost import StaleLease, StoreUnavailable

OWNER = "victim"
CALLS_AFTER_KILL = 5


def main(url: str, count: int, ttl: float) -> None:
    with fencepost.connect(url) as store:
        leases = store.claim(OWNER, limit=count, ttl=ttl)
        _say({"leases": [{"id": x.execution_id, "epoch": x.epoch} for x in leases]})

        _expect("killed")
        calls = []
        for _ in range(CALLS_AFTER_KILL):
            try:
                store.get(leases[0].execution_id)
            except StoreUnavailable as exc:
                calls.append(f"StoreUnavailable: {exc}")
            else:
                calls.append("ok")
        _say({"calls": calls})

        _expect("complete")
        outcomes = store.complete_many(
            [(lease, {"owner": lease.owner, "epoch": lease.epoch}) for lease in leases]
        )
        _say({"completed": [_name(o) for o in outcomes]})


def _name(outcome: StaleLease | None) -> str:
    return "accepted" if outcome is None else type(outcome).__name__


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _expect(step: str) -> None:
    line = sys.stdin.readline()
    if json.loads(line) != {"step": step}:
        raise SystemExit(f"expected step {step!r}, got {line!r}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))

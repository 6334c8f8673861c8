"""The lease timeline: why a worker that lost its lease cannot overwrite the result.

Two executions, job:10 (due t=10) and job:20 (due t=20), leases of 5 s, and a
ManualClock so that every step happens at an exact instant. Worker A claims
job:10, stalls past its lease, and comes back after worker B took over.

Run it with ``make demo`` or ``python examples/lease_timeline.py [path.db]``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import fencepost
from fencepost import StaleLease
from fencepost.testing import MANUAL_EPOCH, ManualClock

TTL = 5


def main(db_path: Path) -> None:
    clock = ManualClock(0)
    store = fencepost.connect(f"sqlite:///{db_path}", clock=clock)

    def step(t: float, text: str, action: Callable[[], Any]) -> Any:
        clock.set(t)
        try:
            outcome = action()
        except StaleLease as exc:
            print(f"t={t:>4g}  {text:<44} -> StaleLease: {exc}")
            return None
        print(f"t={t:>4g}  {text:<44} -> {describe(outcome)}")
        return outcome

    job10 = store.submit("job", execute_at=at(10), idempotency_key="job:10")
    job20 = store.submit("job", execute_at=at(20), idempotency_key="job:20")
    print(f"store: {db_path}")
    print(f"job:10 = {job10.id} (due t=10)\njob:20 = {job20.id} (due t=20)\n")

    step(9, "worker-a claims", lambda: store.claim("worker-a", ttl=TTL))
    (lease_a,) = step(10, "worker-a claims", lambda: store.claim("worker-a", ttl=TTL))
    step(14, "worker-b claims (a's lease is live)", lambda: store.claim("worker-b", ttl=TTL))
    (lease_b,) = step(
        15, "worker-b claims (a's lease expired)", lambda: store.claim("worker-b", ttl=TTL)
    )
    step(16, "worker-a completes with epoch 1", lambda: store.complete(lease_a, "stale output"))
    step(16, "worker-b completes with epoch 2", lambda: store.complete(lease_b, "output"))
    step(16, "worker-b completes again", lambda: store.complete(lease_b, "output"))
    results = (store.get(job10.id).result, store.get(job20.id).result)
    print(f"\nresults: job:10 = {results[0]!r}, job:20 = {results[1]!r}\n")
    step(19, "worker-c claims (job:20 not due)", lambda: store.claim("worker-c", ttl=TTL))
    step(20, "worker-c claims", lambda: store.claim("worker-c", ttl=TTL))

    print("\naudit trail of job:10:")
    for t in store.transitions(job10.id):
        frm = t.from_state or "-"
        print(
            f"  t={clock_t(t.at):>4g}  {t.event:<14} {frm:>10} -> {t.to_state:<10}"
            f" epoch={t.epoch} actor={t.actor or '-'}{'  (' + t.reason + ')' if t.reason else ''}"
        )
    print("attempts of job:10:")
    for a in store.attempts(job10.id):
        print(f"  #{a.attempt} epoch={a.epoch} {a.owner:<9} {a.outcome}")
    store.close()


def at(t: float) -> datetime:
    """The instant "t" of the timeline."""
    return MANUAL_EPOCH + timedelta(seconds=t)


def clock_t(instant: datetime) -> float:
    """The "t" of an instant."""
    return (instant - MANUAL_EPOCH).total_seconds()


def describe(outcome: Any) -> str:
    if isinstance(outcome, list):
        if not outcome:
            return "nothing"
        return ", ".join(
            f"lease on {lease.execution_id[-6:]} epoch {lease.epoch} until "
            f"t={clock_t(lease.lease_until):g}"
            for lease in outcome
        )
    return f"accepted: {outcome.state}, result {outcome.result!r}"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "timeline.db")

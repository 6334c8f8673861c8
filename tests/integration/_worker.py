"""A worker process for the multi-process tests: claims and completes until nothing is left.

Run as ``python _worker.py STORE_URL LOG_PATH OWNER SEED DRILL_SIZE MAX_BATCH``. It writes one JSON
object per line to ``LOG_PATH``:

* ``{"kind": "lease", ...}`` for every lease it obtained (id, epoch, owner, ttl, the
  wall time taken just before the claim call, and the lease's ``lease_until``);
* ``{"kind": "complete", ...}`` for every completion it attempted, accepted or refused.

It first runs a drill on the executions of job ``drill-OWNER``, which only this
process claims, so that every fence predicate is exercised whatever the timing:
it claims them all, lets the leases expire, completes half (refused: expired, not
yet re-claimed), claims them all again (epoch + 1), completes the other half with
the old leases (refused: this very owner holds a newer, live lease, so only the
epoch tells them apart), and completes the new leases.

Then it claims from job ``work`` (and any leftovers of its drill) in random batches.
Most batches are completed at once. A few stall, so that other processes (or this
one) take the executions over and the stalled completion must be refused:

* ``sleep``: the process sleeps past the batch's lease before completing (a GC pause);
* ``defer``: the handler outlives its lease while the process keeps claiming; the
  batch is completed after its lease ended, *before* any batch claimed since.

The worker judges nothing; the test reads the logs and the store's audit trail
(``_audit.py``). It never compares its wall clock with a lease: the store's clock may
be another machine's (PostgreSQL). A lease ends at the store's now at the claim plus
the ttl, and that now is no later than the moment the claim returned, so the worker
waits out a lease on its monotonic clock, counting the ttl from the claim's return.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import fencepost
from fencepost import Lease

NON_TERMINAL = ["SCHEDULED", "RUNNING", "RETRY_WAIT"]
SLEEP_STALL = 0.03  #: fraction of batches whose process sleeps past the lease
DEFER_STALL = 0.05  #: fraction of batches completed only after their lease ended
IDLE_POLL = 0.02  #: seconds between claims when nothing was claimable
MARGIN = 0.01  #: seconds waited beyond a lease's end, for clocks that tick at slightly other rates


def main(url: str, log_path: str, owner: str, seed: int, drill_size: int, max_batch: int) -> None:
    rng = random.Random(seed)
    ttl = round(rng.uniform(0.5, 1.0), 3)
    jobs = ["work", f"drill-{owner}"]
    with fencepost.connect(url) as store, open(log_path, "w") as log:
        worker = Worker(store, log, owner, ttl)
        worker.drill(drill_size)
        deferred: list[Batch] = []
        while True:
            batch = worker.claim(jobs, limit=rng.randint(1, max_batch))
            # Deferred batches whose lease has ended go before the fresh batch: a lease
            # this process just re-claimed on one of them is live until that is done.
            now = time.monotonic()
            for old in [b for b in deferred if now >= b.ended]:
                deferred.remove(old)
                worker.complete(old.leases, "defer")
            if batch.leases:
                roll = rng.random()
                if roll < SLEEP_STALL:
                    _sleep_until(batch.ended)
                    worker.complete(batch.leases, "sleep")
                elif roll < SLEEP_STALL + DEFER_STALL:
                    deferred.append(batch)
                else:
                    worker.complete(batch.leases, "normal")
            elif deferred or store.query(state=NON_TERMINAL, limit=1).items:
                time.sleep(IDLE_POLL)
            else:
                return


@dataclass(frozen=True)
class Batch:
    leases: list[Lease]
    ended: float  #: a monotonic time by which the leases have ended by the store's clock


class Worker:
    """Claims and completes as one owner, logging every lease and completion."""

    def __init__(self, store: fencepost.Store, log: IO[str], owner: str, ttl: float) -> None:
        self.store = store
        self.log = log
        self.owner = owner
        self.ttl = ttl

    def drill(self, size: int) -> None:
        jobs = [f"drill-{self.owner}"]
        first = self.claim(jobs, limit=size)
        half = len(first.leases) // 2
        _sleep_until(first.ended)
        self.complete(first.leases[:half], "drill-expired")
        second = self.claim(jobs, limit=size)
        self.complete(first.leases[half:], "drill-same-owner")
        self.complete(second.leases, "normal")

    def claim(self, jobs: Sequence[str], *, limit: int) -> Batch:
        claim_start = time.time()
        leases = self.store.claim(self.owner, limit=limit, ttl=self.ttl, jobs=jobs)
        ended = time.monotonic() + self.ttl + MARGIN
        self._write(
            {
                "kind": "lease",
                "id": lease.execution_id,
                "epoch": lease.epoch,
                "owner": lease.owner,
                "ttl": self.ttl,
                "claim_start": claim_start,
                "lease_until": lease.lease_until.isoformat(),
            }
            for lease in leases
        )
        return Batch(leases, ended)

    def complete(self, leases: list[Lease], mode: str) -> None:
        started = time.time()
        outcomes = self.store.complete_many(
            [(lease, {"owner": lease.owner, "epoch": lease.epoch}) for lease in leases]
        )
        for outcome in outcomes:
            if outcome is not None and not isinstance(outcome, fencepost.StaleLease):
                raise AssertionError(f"unexpected complete_many outcome {outcome!r}")
        self._write(
            {
                "kind": "complete",
                "id": lease.execution_id,
                "epoch": lease.epoch,
                "owner": lease.owner,
                "mode": mode,
                "started": started,
                "accepted": outcome is None,
            }
            for lease, outcome in zip(leases, outcomes, strict=True)
        )

    def _write(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.log.write(json.dumps(record) + "\n")
        self.log.flush()


def _sleep_until(moment: float) -> None:
    """Sleep until the monotonic clock reaches ``moment``."""
    while (left := moment - time.monotonic()) > 0:
        time.sleep(left)


if __name__ == "__main__":
    main(
        sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    )

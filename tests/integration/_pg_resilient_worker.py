"""A worker that rides out database outages, for ``test_postgres_restart.py``.

Run as ``python _pg_resilient_worker.py STORE_URL LOG_PATH OWNER TTL MAX_BATCH``. It
claims and completes until nothing is left. When the store is unavailable it sleeps
briefly and tries again; a batch it has claimed keeps its outcome and is written
again until the store accepts or refuses it (StaleLease: the lease ended meanwhile,
or a completion whose answer was lost had in fact been committed). It never claims
more before that. It completes with ``{"owner": OWNER, "epoch": EPOCH}`` and writes
one JSON object per line to ``LOG_PATH``:

* ``{"kind": "unavailable", "t": ..., "call": ..., "error": ...}`` for every failed call;
* ``{"kind": "resumed", "t": ...}`` for the first successful call after failures;
* ``{"kind": "complete", "id": ..., "epoch": ..., "accepted": ...}`` for every
  completion that got an answer.

Times are this machine's wall clock (``time.time()``), to compare with the test's.
The connection pool's own warnings go to ``LOG_PATH.pool.log``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar

import fencepost
from fencepost import Lease, StoreUnavailable

T = TypeVar("T")
NON_TERMINAL = ["SCHEDULED", "RUNNING", "RETRY_WAIT"]
RETRY_PAUSE = 0.1  #: seconds between attempts while the store is unavailable
IDLE_POLL = 0.05  #: seconds between claims when nothing was claimable


def main(url: str, log_path: str, owner: str, ttl: float, max_batch: int) -> None:
    # The pool logs its lost connections and failed reconnections as warnings; keep
    # them next to the log rather than on stderr (which the test wants empty).
    logging.basicConfig(filename=log_path + ".pool.log", level=logging.WARNING)
    with open(log_path, "w") as log:
        worker = Resilient(log)
        # Opening the store needs the server too (it checks migrations).
        store = worker.call("connect", lambda: fencepost.connect(url))
        with store:
            while True:
                leases = worker.call("claim", lambda: store.claim(owner, limit=max_batch, ttl=ttl))
                if leases:
                    worker.complete(store, leases)
                elif worker.call("query", lambda: store.query(state=NON_TERMINAL, limit=1).items):
                    time.sleep(IDLE_POLL)
                else:
                    return


class Resilient:
    def __init__(self, log: IO[str]) -> None:
        self.log = log
        self.failing = False

    def call(self, name: str, fn: Callable[[], T]) -> T:
        """Call ``fn`` until the store is available; log outages and the resumption."""
        while True:
            try:
                result = fn()
            except StoreUnavailable as exc:
                self.failing = True
                self._write(
                    {"kind": "unavailable", "t": time.time(), "call": name, "error": str(exc)}
                )
                time.sleep(RETRY_PAUSE)
                continue
            if self.failing:
                self.failing = False
                self._write({"kind": "resumed", "t": time.time(), "call": name})
            return result

    def complete(self, store: fencepost.Store, leases: list[Lease]) -> None:
        results = [(lease, {"owner": lease.owner, "epoch": lease.epoch}) for lease in leases]
        outcomes = self.call("complete", lambda: store.complete_many(results))
        for lease, outcome in zip(leases, outcomes, strict=True):
            self._write(
                {
                    "kind": "complete",
                    "id": lease.execution_id,
                    "epoch": lease.epoch,
                    "owner": lease.owner,
                    "accepted": outcome is None,
                }
            )

    def _write(self, record: dict[str, Any]) -> None:
        self.log.write(json.dumps(record) + "\n")
        self.log.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))

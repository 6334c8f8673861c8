"""A process that stalls inside a transaction of its store, holding the flow limits.

Run as ``python _pg_stalled_claimer.py URL``: it opens the store at URL, begins a
transaction on one of the store's own pooled connections (configured as every other:
the idle-in-transaction timeout its URL gives), locks every limit as a limited claim
does first, prints ``held`` and stops itself (SIGSTOP), as a worker paused by its
machine mid-claim would. Continued (SIGCONT), it tries the transaction's next
statement and prints what became of its session.
"""

from __future__ import annotations

import os
import signal
import sys

import psycopg

import fencepost
from fencepost.store.postgres.connection import QUERIES


def main(url: str) -> None:
    store = fencepost.connect(url)
    with store._db.pool.connection() as conn:  # one of the store's own sessions
        conn.execute("BEGIN")
        conn.execute(QUERIES["flow_limits_locked"]).fetchall()
        print("held", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        try:
            conn.execute("SELECT 1")
            print("still in its transaction", flush=True)
        except psycopg.Error as exc:  # the server ended the session
            print(f"ended by the server: {type(exc).__name__}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

"""Two processes rolling up the history charts at once never count a row twice.

Each runs tests/integration/_history_roller.py on the same database (a SQLite file:
BEGIN IMMEDIATE serializes them; PostgreSQL: the watermark's row lock), in small
batches, started together; between them they read every finished execution once.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fencepost
from fencepost.testing import ManualClock

ROLLER = Path(__file__).with_name("_history_roller.py")
FINISHED = 300


def test_two_processes_rolling_up_at_once_count_each_row_once(shared_db: str) -> None:
    clock = ManualClock(0)
    with fencepost.connect(shared_db, clock=clock) as store:
        for n in range(FINISHED):
            store.submit("job", queue=f"q{n % 3}")
        for n in range(FINISHED):
            clock.set(1 + n)  # one finish a second, over five minutes
            (lease,) = store.claim("w")
            store.complete(lease, "ok")
        rollers = [
            subprocess.Popen(
                [sys.executable, str(ROLLER), shared_db, str(FINISHED + 600), "7"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            for roller in rollers:
                assert roller.stdout is not None
                assert roller.stdout.readline().strip() == "ready"
            for roller in rollers:  # both connected: go
                assert roller.stdin is not None
                roller.stdin.write("go\n")
                roller.stdin.flush()
            read = [int(roller.communicate(timeout=120)[0]) for roller in rollers]
            assert [roller.returncode for roller in rollers] == [0, 0]
        finally:
            for roller in rollers:
                roller.kill()
                roller.wait()
        assert sum(read) == FINISHED, read
        clock.set(FINISHED + 600)
        assert store.roll_up_history().executions == 0
        day = store.history(window="day")
        assert sum(p.succeeded for p in day.points) == FINISHED
        assert sum(p.claims for p in day.points) == FINISHED
        by_queue = {r.name: r.succeeded for r in store.history_summary(by="queue").rows}
        assert by_queue == {"q0": 100, "q1": 100, "q2": 100}

"""One roll-up process for test_history_processes.py, on a pinned clock.

    python _history_roller.py DB_URL SECONDS MAX_ROWS

Opens the store with a ManualClock at ``SECONDS`` (after its epoch), prints
``ready``, waits for a line on stdin (the test starts every process at once that
way), rolls up in batches of ``MAX_ROWS`` until caught up, and prints how many
executions it read.
"""

from __future__ import annotations

import sys

import fencepost
from fencepost.testing import ManualClock


def main() -> None:
    url, seconds, max_rows = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    with fencepost.connect(url, clock=ManualClock(seconds)) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        read = 0
        while True:
            done = store.roll_up_history(max_rows=max_rows)
            read += done.executions
            if done.caught_up:
                break
        print(read, flush=True)


if __name__ == "__main__":
    main()

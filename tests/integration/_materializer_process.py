"""One materializer process for test_schedule_materializers.py, on a simulated clock.

    python _materializer_process.py DB_URL CLOCK_FILE OWNER STOP_FILE

The store's clock reads the instant written in CLOCK_FILE (ISO 8601), which the
test moves forward; the process runs materializer passes until STOP_FILE exists.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path

import fencepost
from fencepost.scheduler.materializer import Materializer, MaterializerOptions


class FileClock:
    """Now is whatever instant the test last wrote to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def now(self) -> datetime:
        while True:
            text = self.path.read_text().strip()
            if text:  # the test replaces the file atomically, but be safe
                return datetime.fromisoformat(text)
            time.sleep(0.001)

    def now_or_none(self) -> datetime:
        return self.now()


def main() -> None:
    url, clock_file, owner, stop_file = sys.argv[1:5]
    store = fencepost.connect(url, clock=FileClock(Path(clock_file)))
    materializer = Materializer(
        store, MaterializerOptions(owner=owner, lookahead=60, batch=100, ttl=30)
    )
    while not Path(stop_file).exists():
        if materializer.run_once() == 0:
            time.sleep(0.01)
    store.close()
    print(materializer.stored, flush=True)


if __name__ == "__main__":
    main()

"""`make demo` runs examples/lease_timeline.py; it must tell the story the issue names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fencepost
from fencepost import AttemptOutcome, State

EXAMPLE = Path(__file__).parents[2] / "examples" / "lease_timeline.py"


def test_example_prints_each_step_and_leaves_the_file_consistent(tmp_path: Path) -> None:
    db = tmp_path / "timeline.db"
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), str(db)], capture_output=True, text=True, check=True
    )
    lines = [line for line in run.stdout.splitlines() if line.startswith("t=")]
    verdicts = [line.split("->", 1)[1].strip() for line in lines[:9]]
    assert verdicts[0] == "nothing"
    assert verdicts[1].endswith("epoch 1 until t=15")
    assert verdicts[2] == "nothing"
    assert verdicts[3].endswith("epoch 2 until t=20")
    assert verdicts[4].startswith("StaleLease")
    assert verdicts[5] == "accepted: SUCCEEDED, result 'output'"
    assert verdicts[6].startswith("StaleLease")
    assert verdicts[7] == "nothing"
    assert verdicts[8].endswith("epoch 1 until t=25")
    assert "results: job:10 = 'output', job:20 = None" in run.stdout

    with fencepost.connect(f"sqlite:///{db}") as store:
        by_key = {e.idempotency_key: e for e in store.query().items}
        job10 = by_key["job:10"]
        assert (job10.state, job10.result, job10.epoch) == (State.SUCCEEDED, "output", 2)
        assert [a.outcome for a in store.attempts(job10.id)] == [
            AttemptOutcome.TIMED_OUT,
            AttemptOutcome.SUCCEEDED,
        ]
        assert by_key["job:20"].state is State.RUNNING

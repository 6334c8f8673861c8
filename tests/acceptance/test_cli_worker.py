"""``fencepost worker``'s refusals: every bad argument exits 2 with one line naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples" / "definitions")


def worker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FENCEPOST, "worker", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_bad_definition_file_is_refused_with_file_field_and_reason(tmp_path: Path) -> None:
    definitions = tmp_path / "defs"
    definitions.mkdir()
    (definitions / "report.yaml").write_text(
        "name: report\nversion: 1\ntimout: 5\nrun: {command: [echo, hi]}\n"
    )
    run = worker("--definitions", str(definitions), "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"fencepost worker: {definitions / 'report.yaml'}: timout: is not a known key "
        "(did you mean 'timeout'?)"
    ]
    assert not (tmp_path / "x.db").exists(), "nothing is opened before the arguments are valid"


def test_a_definition_with_an_invalid_output_schema_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    definitions = tmp_path / "defs"
    definitions.mkdir()
    (definitions / "report.yaml").write_text(
        "name: report\noutput: {type: banana}\nrun: {command: [echo, hi]}\n"
    )
    run = worker("--definitions", str(definitions), "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(
        f"fencepost worker: {definitions / 'report.yaml'}: output.type: is not a valid JSON Schema"
    )
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        pytest.param([], "app", id="no-jobs"),
        pytest.param(["examples.nope:app"], "no module 'examples.nope' in ", id="bad-module"),
        pytest.param(["fencepost:connect"], "app", id="not-an-app"),
        pytest.param(
            ["--definitions", EXAMPLES, "--buckets", "70"],
            "buckets",
            id="bucket-out-of-range",
        ),
        pytest.param(["--definitions", EXAMPLES, "--jobs", "nope"], "job", id="unknown-job"),
        pytest.param(
            ["--definitions", EXAMPLES, "--concurrency", "0"],
            "concurrency",
            id="zero-concurrency",
        ),
        pytest.param(
            ["--definitions", EXAMPLES, "--prefetch", "-1"],
            "prefetch",
            id="negative-prefetch",
        ),
        *(
            pytest.param(["--definitions", EXAMPLES, *extra], named, id=f"queues-{name}")
            for name, extra, named in [
                (
                    "limit-outside-queues",
                    ["--queues", "a", "--queue-concurrency", "b=2"],
                    "queue-concurrency: limits 'b'",
                ),
                (
                    "limit-without-queues",
                    ["--queue-concurrency", "a=2"],
                    "queue-concurrency: limits 'a'",
                ),
                (
                    "zero-limit",
                    ["--queues", "a", "--queue-concurrency", "a=0"],
                    "queue-concurrency: must be >= 1",
                ),
                (
                    "not-a-number",
                    ["--queues", "a", "--queue-concurrency", "a=two"],
                    "queue-concurrency: must look like QUEUE=N",
                ),
                (
                    "no-equals",
                    ["--queues", "a", "--queue-concurrency", "a"],
                    "queue-concurrency: must look like QUEUE=N",
                ),
                (
                    "twice",
                    ["--queues", "a", "--queue-concurrency", "a=1,a=2"],
                    "queue-concurrency: gives 'a' twice",
                ),
                ("empty-name", ["--queues", "a,,b"], "queues: must be a non-empty string"),
                ("too-long", ["--queues", "a," + "x" * 101], "queues: must be at most 100"),
                ("surrogate", ["--queues", "\udcff"], "queues: must be text"),
            ]
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path: Path, args: list[str], named: str) -> None:
    run = worker(*args, "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert named in lines[0]

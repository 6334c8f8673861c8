"""``fencepost serve`` refuses bad limits in one line, before it opens any database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--body-timeout", "-1", "body_timeout: must be > 0 seconds"),
        ("--body-timeout", "1e400", "body_timeout: must be finite"),  # would switch it off
        ("--header-timeout", "nan", "header_timeout: must be finite"),
        ("--header-timeout", "0", "header_timeout: must be > 0 seconds"),
        ("--header-timeout", "1e12", "header_timeout: is too long"),
        ("--body-budget", "-5", "body_budget: must be >= 1 byte"),
        ("--max-wait", "-1", "max_wait: must be >= 0 seconds"),
        ("--max-wait", "nan", "max_wait: must be finite"),
        ("--max-wait", "inf", "max_wait: must be finite"),
        ("--max-wait", "1e309", "max_wait: must be finite"),
        ("--max-wait", "1e11", "max_wait: is too long"),
        ("--max-wait", "", "argument --max-wait: invalid float value: ''"),
        ("--max-wait", "thirty", "argument --max-wait: invalid float value: 'thirty'"),
    ],
)
def test_bad_limits_are_one_line_and_create_nothing(
    tmp_path: Path, flag: str, value: str, says: str
) -> None:
    db = tmp_path / "never.db"
    run = subprocess.run(
        [FENCEPOST, "serve", "--db", f"sqlite:///{db}", "--port", "1", flag, value],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert says in lines[0]
    assert not db.exists()

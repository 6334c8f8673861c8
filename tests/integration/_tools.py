"""The Debian tools some integration tests drive (libfaketime, strace), and their processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest


def require_tool(name: str, package: str | None = None) -> str:
    """The path of the ``name`` binary; skip locally, fail in CI, when it is missing.

    CI (``FENCEPOST_REQUIRE_POSTGRES`` set by ``.ci/run``) installs these packages, so
    a missing one there is a broken setup, not a reason to skip.
    """
    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"the {name} binary is missing: apt-get install {package or name}"
    if os.environ.get("FENCEPOST_REQUIRE_POSTGRES"):
        pytest.fail(f"FENCEPOST_REQUIRE_POSTGRES is set but {reason}", pytrace=False)
    pytest.skip(reason)


_ROOT = Path(__file__).resolve().parents[2]


class Procs:
    """Processes started by a test, each in its own group; none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, argv: list[str]) -> None:
        with (self.tmp_path / f"{name}.log").open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    argv,
                    cwd=_ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(_ROOT)},
                    start_new_session=True,
                )
            )

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text()

    def close(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

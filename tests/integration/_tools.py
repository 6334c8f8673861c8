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


#: The library the ``faketime`` wrapper preloads (ld.so reads ``$LIB`` as the platform's
#: library directory: lib/x86_64-linux-gnu on Debian amd64).
LIBFAKETIME = "/usr/$LIB/faketime/libfaketime.so.1"


def under_faketime(shift: str | None = None, *, timestamp_file: Path | None = None) -> list[str]:
    """An argv prefix running a Python program under libfaketime, its wall clock shifted.

    ``shift`` (``"+1h"``) fixes the shift; ``timestamp_file`` instead names a file that
    libfaketime reads at every clock call (``FAKETIME_NO_CACHE``: about 4 us a call),
    so a test steps the program's clock by rewriting it (``"+0"``, then ``"+1h"``).

    Only the wall clock is faked (``FAKETIME_DONT_FAKE_MONOTONIC``): Python 3.11 waits
    with a timeout (``Event.wait``, ``Lock.acquire``) in ``sem_clockwait`` on the
    monotonic clock, which libfaketime 0.9.10 does not intercept, so under a faked
    monotonic clock (the ``faketime`` wrapper's default) every such wait lasts for
    ever: a reaper thread never makes its second pass, a worker's loop stops after
    its first look. The price: that libfaketime fails ``time.sleep`` with EINVAL in
    the program, so it must be one that does not sleep that way (``fencepost serve``
    without embedded workers, a worker whose handlers do not sleep).
    """
    require_tool("faketime")
    env = ["env", f"LD_PRELOAD={LIBFAKETIME}", "FAKETIME_DONT_FAKE_MONOTONIC=1"]
    if timestamp_file is not None:
        return [*env, f"FAKETIME_TIMESTAMP_FILE={timestamp_file}", "FAKETIME_NO_CACHE=1"]
    assert shift is not None, "a shift or a timestamp file"
    return [*env, f"FAKETIME={shift}"]


def set_faketime(timestamp_file: Path, shift: str) -> None:
    """Step the clock of the programs reading ``timestamp_file`` (see under_faketime) to
    ``shift``: the file is replaced whole, so no reader sees it half written."""
    fresh = timestamp_file.with_name(timestamp_file.name + ".new")
    fresh.write_text(shift + "\n")
    os.replace(fresh, timestamp_file)


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

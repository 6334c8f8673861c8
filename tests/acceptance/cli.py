"""Run the installed ``fencepost`` command and read what it printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))


@dataclass(frozen=True)
class Run:
    """One finished ``fencepost`` process."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as the one JSON document it must be."""
        assert self.returncode == 0, self.stderr
        return json.loads(self.stdout)

    @property
    def errors(self) -> list[str]:
        """The non-blank lines on stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]

    def rows(self, first: str) -> list[list[str]]:
        """The cells of every table row whose first cell is ``first`` (split on 2+ spaces)."""
        found = []
        for line in self.stdout.splitlines():
            cells = re.split(r"\s{2,}", line.strip())
            if cells and cells[0] == first:
                found.append(cells)
        return found

    def row(self, first: str) -> list[str]:
        """The cells of the first table row whose first cell is ``first``."""
        found = self.rows(first)
        assert found, f"no row starting with {first!r} in:\n{self.stdout}"
        return found[0]

    def ok(self) -> Run:
        """Itself, after checking that it succeeded."""
        assert self.returncode == 0, f"{self.argv}: {self.stderr}"
        return self


def fencepost(
    *args: str, db: str | None = None, timeout: float = 60, cwd: Path | None = None
) -> Run:
    """Run ``fencepost ARGS [--db DB]`` (in ``cwd``) with stdout and stderr piped."""
    argv = [FENCEPOST, *args, *(["--db", db] if db is not None else [])]
    env = {k: v for k, v in os.environ.items() if k != "FENCEPOST_DB"}
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=cwd
    )
    return Run(argv, done.returncode, done.stdout, done.stderr)


def fencepost_all(*calls: tuple[str, ...], db: str | None = None) -> list[Run]:
    """Run several independent ``fencepost`` commands at once; their runs, in order.

    Only for commands that do not depend on each other's effects: a subprocess
    spends most of its time starting Python, which overlaps well.
    """
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: fencepost(*args, db=db), calls))


def fencepost_on_terminal(
    *args: str, db: str, timeout: float = 60, only: str = "both"
) -> tuple[str, str]:
    """Run ``fencepost ARGS --db DB`` on a pseudo-terminal: (what it drew there, the piped rest).

    ``only``: which of stdout and stderr go to the terminal (``both``, ``stdout``,
    ``stderr``); the other, if any, is piped and returned second.
    """
    import pty  # POSIX only, like the tests that use it

    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "FENCEPOST_DB"}
    env.update(TERM="xterm-256color", COLUMNS="120")
    stdout = terminal if only in ("both", "stdout") else subprocess.PIPE
    stderr = terminal if only in ("both", "stderr") else subprocess.PIPE
    with subprocess.Popen(
        [FENCEPOST, *args, "--db", db], stdout=stdout, stderr=stderr, env=env
    ) as process:
        os.close(terminal)
        piped = process.stdout if only == "stderr" else process.stderr
        drawn = bytearray()
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            drawn += chunk
        rest = piped.read().decode(errors="replace") if piped is not None else ""
        process.wait(timeout)
    os.close(controller)
    assert process.returncode == 0, drawn.decode(errors="replace") + rest
    return drawn.decode(errors="replace"), rest

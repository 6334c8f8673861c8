"""The environment of a benchmark's child processes (workers, services)."""

from __future__ import annotations

import os
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def child_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with ``bench/`` first on ``PYTHONPATH``, the caller's entries after it.

    ``bench/`` holds the apps the children import (``noop_app``, ``load_app``). The
    caller's entries are kept, so that ``PYTHONPATH=WORKTREE/src`` runs that worktree's
    fencepost in the children as in the benchmark itself.
    """
    path = os.pathsep.join(p for p in (str(BENCH), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}

"""The Debian tools some integration tests drive (libfaketime, strace)."""

from __future__ import annotations

import os
import shutil

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

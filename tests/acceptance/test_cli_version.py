"""``fencepost --version``: the installed distribution's version, on stdout, exit code 0."""

from __future__ import annotations

from importlib.metadata import version

import fencepost
from tests.acceptance.cli import fencepost as run_fencepost


def test_version_prints_the_installed_version(tmp_path):
    run = run_fencepost("--version", cwd=tmp_path)

    assert run.returncode == 0, run.stderr
    assert run.stdout == f"fencepost {fencepost.__version__}\n"
    assert fencepost.__version__ == version("fencepost")  # the package says what pip says
    assert run.stderr == ""
    assert list(tmp_path.iterdir()) == []  # no store opened, no fencepost.db created


def test_version_is_listed_in_the_help():
    run = run_fencepost("--help")

    assert run.returncode == 0, run.stderr
    assert "--version" in run.stdout

"""The released package, as a user gets it: built from the checkout, installed, run elsewhere.

The sdist is built from the checkout and the wheel from the sdist (``python -m build``), so
a file the sdist leaves out is missing from the wheel too. The wheel is installed into a
fresh virtualenv outside the checkout, with its dependencies from the package index (pip's
cache makes that quick): no site packages, user site or ``PYTHONPATH`` can supply a
dependency ``pyproject.toml`` forgot. Then, from a fresh directory, the installed
``fencepost`` prints its version, the README's quick start runs its job to success, and
``fencepost serve`` serves the dashboard's page and assets from the installed files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import fencepost
from fencepost.api.dashboard import ASSETS
from tests.integration.test_service_processes import free_port, wait_ready

# One build and one install serve every test here: run them on one xdist worker, and give
# the first test room for the build and the install (about 30 s with pip's cache).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel"), pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "fencepost"
#: The line just before the README's quick start (the marker tests/test_docs_blocks.py reads).
QUICK_START_MARKER = "<!-- run: worker -->"

#: Run by the virtualenv's interpreter beside the quick start: waits, with the installed
#: fencepost, until the database holds an execution and every one that is due (not a
#: schedule's next slot more than a minute ahead) is finished; prints their states.
WAIT_FOR_WORK = """\
import json, sys, time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import fencepost

db, deadline = Path(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    if db.exists():
        try:
            with fencepost.connect(f"sqlite:///{db}") as store:
                due = store.query(due_before=datetime.now(UTC) + timedelta(minutes=1)).items
        except fencepost.StoreUnavailable:  # busy past the busy timeout: look again
            due = []
        if due and all(e.state.is_terminal for e in due):
            print(json.dumps(sorted(e.state.value for e in due)))
            sys.exit(0)
    time.sleep(0.1)
sys.exit(f"{db}: the executions did not finish in time")
"""


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Installed:
    """The fresh virtualenv the wheel is installed in, and how to run its programs."""

    venv: Path
    python: Path
    fencepost: Path
    env: dict[str, str]

    def workdir(self, base: Path) -> Path:
        """A fresh, empty directory outside the checkout to run a program in."""
        base.mkdir()
        assert ROOT not in base.resolve().parents, f"{base} is inside the checkout"
        return base


def isolated_env(venv: Path | None = None) -> dict[str, str]:
    """The environment without anything that could put the checkout on ``sys.path``
    (``PYTHONPATH``, user site packages) or point fencepost at another store or service."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "FENCEPOST_", "VIRTUAL_ENV"))
    }
    env["PYTHONNOUSERSITE"] = "1"
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(
    argv: list[str | Path], *, timeout: float, cwd: Path, env: dict[str, str] | None = None
) -> str:
    """Run ``argv`` to the end; returns its output, and fails with it on an exit code."""
    done = subprocess.run(
        [str(arg) for arg in argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The sdist built from the checkout, and the wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    run(
        [sys.executable, "-m", "build", "--outdir", out, ROOT],
        timeout=180,
        cwd=out,
        env=isolated_env(),
    )
    (sdist,) = out.glob("fencepost-*.tar.gz")
    (wheel,) = out.glob("fencepost-*.whl")
    return Dists(sdist=sdist, wheel=wheel)


@pytest.fixture(scope="module")
def installed(dists: Dists, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel installed into a new virtualenv, its dependencies resolved from the index."""
    venv = tmp_path_factory.mktemp("venv")
    assert ROOT not in venv.resolve().parents
    # No pip inside (bootstrapping one costs seconds): this interpreter's pip installs into
    # it (``pip --python``). Not --system-site-packages: nothing but the wheel's declared
    # dependencies may be importable there.
    run([sys.executable, "-m", "venv", "--without-pip", venv], timeout=60, cwd=venv)
    python = venv / "bin" / "python"
    run(
        [
            *(sys.executable, "-m", "pip", "--python", python, "install"),
            *("--disable-pip-version-check", "--no-input", "--progress-bar", "off"),
            dists.wheel,
        ],
        timeout=180,
        cwd=venv,
        env=isolated_env(venv),
    )
    return Installed(
        venv=venv, python=python, fencepost=venv / "bin" / "fencepost", env=isolated_env(venv)
    )


def package_files() -> set[str]:
    """Every file of the package in the checkout, as the wheel names it (bytecode aside)."""
    return {
        path.relative_to(PACKAGE.parent).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix not in {".pyc", ".pyo"}
    }


def test_the_wheel_holds_every_file_of_the_package(dists: Dists) -> None:
    """Every module and every data file the package reads at run time (the dashboard's
    static files, the SQL and migrations, py.typed) is in the wheel, and nothing else."""
    expected = package_files()
    data = {name for name in expected if not name.endswith(".py")}
    # What the package loads with importlib.resources; listed so that the comparison
    # below cannot pass by both sides missing a directory.
    assert {
        "fencepost/py.typed",
        "fencepost/api/static/index.html",
        *(f"fencepost/api/static/{name}" for name in ASSETS),
        "fencepost/store/shared.sql",
        "fencepost/store/sqlite/queries.sql",
        "fencepost/store/sqlite/schema.sql",
        "fencepost/store/sqlite/migrations/0001_initial.sql",
        "fencepost/store/postgres/queries.sql",
        "fencepost/store/postgres/schema.sql",
        "fencepost/store/postgres/migrations/0001_initial.sql",
    } <= data
    for dialect in ("sqlite", "postgres"):
        migrations = sorted((PACKAGE / "store" / dialect / "migrations").glob("*.sql"))
        assert len(migrations) > 1, dialect
        assert {m.relative_to(PACKAGE.parent).as_posix() for m in migrations} <= data

    with zipfile.ZipFile(dists.wheel) as wheel:
        names = wheel.namelist()
        dist_info = f"fencepost-{fencepost.__version__}.dist-info"
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
        entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
    in_package = {name for name in names if not name.startswith(f"{dist_info}/")}
    assert not expected - in_package, f"missing from the wheel: {sorted(expected - in_package)}"
    assert not in_package - expected, f"not in the package: {sorted(in_package - expected)}"
    assert dists.wheel.name == f"fencepost-{fencepost.__version__}-py3-none-any.whl"
    assert f"\nVersion: {fencepost.__version__}\n" in metadata
    assert "fencepost = fencepost.cli.main:main" in entry_points


def test_the_sdist_holds_the_sources_and_no_local_state(dists: Dists) -> None:
    """The source release: the package, tests and docs; no virtualenv, database or cache."""
    top = f"fencepost-{fencepost.__version__}/"
    with tarfile.open(dists.sdist) as sdist:
        names = [member.name for member in sdist.getmembers() if member.isfile()]
    assert all(name.startswith(top) for name in names), "one top directory"
    files = {name.removeprefix(top) for name in names}
    assert {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO"} <= files
    missing = {f"src/{name}" for name in package_files()} - files
    assert not missing, f"missing from the sdist: {sorted(missing)}"
    assert any(name.startswith("tests/") for name in files)
    unwanted = sorted(
        name
        for name in files
        if {".venv", ".venvs", "__pycache__", ".git", ".pytest_cache"} & set(name.split("/"))
        or name.endswith((".pyc", ".db", ".db-wal", ".db-shm"))
    )
    assert not unwanted, f"local state in the sdist: {unwanted[:20]}"


def test_the_installed_command_prints_the_version(installed: Installed, tmp_path: Path) -> None:
    """``fencepost --version`` says the version written in ``fencepost/__init__.py``, which
    is also the installed distribution's; the module imported is the installed one."""
    cwd = installed.workdir(tmp_path / "run")
    out = run([installed.fencepost, "--version"], timeout=60, cwd=cwd, env=installed.env)
    assert out == f"fencepost {fencepost.__version__}\n"
    probe = (
        "import importlib.metadata, importlib.util, json, sys, fencepost; "
        "print(json.dumps({'version': fencepost.__version__, "
        "'metadata': importlib.metadata.version('fencepost'), "
        "'file': fencepost.__file__, 'prefix': sys.prefix, "
        "'pytest': importlib.util.find_spec('pytest') is not None}))"
    )
    found = json.loads(run([installed.python, "-c", probe], timeout=60, cwd=cwd, env=installed.env))
    written = re.search(
        r'^__version__ = "([^"]+)"$', (PACKAGE / "__init__.py").read_text(), re.MULTILINE
    )
    assert written is not None
    assert found["version"] == found["metadata"] == written.group(1) == fencepost.__version__
    assert Path(found["prefix"]).resolve() == installed.venv.resolve()
    assert Path(found["file"]).resolve().is_relative_to(installed.venv.resolve() / "lib")
    assert not found["pytest"], "the virtualenv holds more than the wheel's dependencies"
    assert list(cwd.iterdir()) == []


def quick_start(readme: Path) -> str:
    """The README's quick start: the first ```python block right after the worker marker."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.strip() == QUICK_START_MARKER and lines[index + 1].strip() == "```python":
            end = next(n for n in range(index + 2, len(lines)) if lines[n].strip() == "```")
            return "\n".join(lines[index + 2 : end]) + "\n"
    pytest.fail(
        f"{readme.name} has no quick start: a ```python block on the line right after "
        f"{QUICK_START_MARKER} (a script that ends in app.run_worker(...))"
    )


def test_the_readme_quick_start_runs_on_the_installed_package(
    installed: Installed, tmp_path: Path
) -> None:
    """The quick start, pasted into a file and run by the virtualenv's interpreter: its
    work finishes and succeeds, and the worker stops cleanly on SIGTERM."""
    run_worker_block(quick_start(ROOT / "README.md"), installed, tmp_path)


def run_worker_block(block: str, installed: Installed, tmp_path: Path) -> None:
    """Run ``block`` (a script ending in a worker) until its work is finished, then stop it."""
    cwd = installed.workdir(tmp_path / "quick-start")
    assert "app.run_worker(" in block, "the quick start runs a worker"
    named = re.search(r"sqlite:///([\w./-]+)", block)
    assert named, "the quick start names its SQLite database (sqlite:///FILE)"
    assert not named.group(1).startswith("/"), "a database beside the script, not elsewhere"
    (cwd / "tasks.py").write_text(block, encoding="utf-8")
    (tmp_path / "wait_for_work.py").write_text(WAIT_FOR_WORK, encoding="utf-8")
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [installed.python, "tasks.py"], cwd=cwd, env=installed.env, stdout=log, stderr=log
        )

    def log() -> str:
        return log_path.read_text(errors="replace")

    try:
        waiter = subprocess.Popen(
            [installed.python, tmp_path / "wait_for_work.py", cwd / named.group(1), "60"],
            cwd=cwd,
            env=installed.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            while waiter.poll() is None:
                assert worker.poll() is None, f"the quick start exited early:\n{log()}"
                time.sleep(0.1)
            out, err = waiter.communicate()
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.communicate()
        assert waiter.returncode == 0, f"{err}\nthe quick start's output:\n{log()}"
        states = json.loads(out)
        assert states, "no execution finished"
        assert set(states) == {"SUCCEEDED"}, f"{states}:\n{log()}"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(60) == 0, f"exit code {worker.returncode} after SIGTERM:\n{log()}"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


@pytest.fixture
def service(installed: Installed, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``fencepost serve`` from the virtualenv, on a fresh SQLite file in a fresh directory."""
    cwd = installed.workdir(tmp_path / "serve")
    port = free_port()
    with (tmp_path / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            [installed.fencepost, "serve", "--db", "sqlite:///svc.db", "--port", str(port)],
            cwd=cwd,
            env=installed.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_the_installed_service_serves_the_dashboard(
    service: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """The page and every asset come from the installed files, byte for byte the
    checkout's; the store was created from the packaged migrations; SIGTERM stops it."""
    url, proc = service
    log = tmp_path / "serve.log"
    try:
        wait_ready(url, proc, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{log.read_text(errors='replace')}") from None
    with httpx.Client(base_url=url, timeout=10) as client:
        page = client.get("/")
        assert page.status_code == 200, page.text
        assert page.content == (PACKAGE / "api" / "static" / "index.html").read_bytes()
        for name, media_type in ASSETS.items():
            asset = client.get(f"/static/{name}")
            assert asset.status_code == 200, (name, asset.text)
            assert asset.headers["content-type"] == media_type
            assert asset.content == (PACKAGE / "api" / "static" / name).read_bytes(), name
    assert (tmp_path / "serve" / "svc.db").is_file()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(60)
    assert code == 0, f"exit code {code} after SIGTERM:\n{log.read_text(errors='replace')}"

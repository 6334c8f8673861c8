"""Every Python block in the README runs as pasted.

Each block is written to a file of its own in a fresh directory and run by a fresh
interpreter, as a reader would after pasting it: a plain script must exit 0; the
quick start (it ends in ``app.run_worker``) must run its job to success and stop on
SIGTERM; the client example runs against a real ``fencepost serve`` (its URL and
token come from the environment, as the block reads them); the contract-suite
example runs under pytest.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

import fencepost
from fencepost import State
from tests.integration.test_service_processes import free_port, wait_ready

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TOKEN = "readme-admin-token-0123456789"


def blocks() -> list[str]:
    """The README's ```python blocks, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def run_python(path: Path, *args: str, env: dict[str, str] | None = None) -> None:
    run = subprocess.run(
        [sys.executable, *args, path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert run.returncode == 0, f"{path.name}:\n{run.stdout}\n{run.stderr}"


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    kinds = [_kind(block) for block in blocks()]
    assert kinds == [
        *("worker", "script", "script", "script", "client", "script", "script"),
        *["django"] * 5,
        "pytest",
    ]


def _kind(block: str) -> str:
    if re.match(r"# (mysite|shop)/\w+\.py\n", block):
        return "django"  # a file of the Django project: test_the_django_project_runs
    if "app.run_worker(" in block:
        return "worker"
    if "StoreContract" in block:
        return "pytest"
    if "Client(" in block:
        return "client"
    return "script"


@pytest.mark.parametrize("index", range(len(blocks())))
def test_each_block_runs_as_pasted(index: int, tmp_path: Path) -> None:
    block = blocks()[index]
    path = tmp_path / ("test_block.py" if _kind(block) == "pytest" else "block.py")
    path.write_text(block, encoding="utf-8")
    if _kind(block) == "worker":
        _run_quick_start(path)
    elif _kind(block) == "client":
        _run_against_a_service(path, tmp_path)
    elif _kind(block) == "django":  # run together, as a project, by the test below
        compile(block, block.splitlines()[0].removeprefix("# "), "exec")
    elif _kind(block) == "pytest":
        run_python(path, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider")
    else:
        run_python(path)


def _run_quick_start(path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, path.name],
        cwd=path.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        db = path.parent / "jobs.db"
        deadline = time.monotonic() + 60
        done = None
        while time.monotonic() < deadline and done is None:
            assert proc.poll() is None, proc.communicate()[0]
            if db.exists():
                with fencepost.connect(f"sqlite:///{db}") as store:
                    found = store.query(job="nightly-report").items
                    if found and found[0].state is State.SUCCEEDED:
                        done = found[0]
            time.sleep(0.1)
        assert done is not None, "the quick start's job did not succeed within 60 s"
        assert done.result == {"rows": 3}
        assert done.progress == {"rows": 3}
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "2026-11-28:0" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _run_against_a_service(path: Path, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = subprocess.Popen(
        [FENCEPOST, "serve", "--db", f"sqlite:///{tmp_path / 'svc.db'}", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "FENCEPOST_TOKENS": f"{TOKEN}=admin"},
    )
    try:
        wait_ready(url, service)
        run_python(path, env={"FENCEPOST_URL": url, "FENCEPOST_TOKEN": TOKEN})
        with fencepost.connect(f"sqlite:///{tmp_path / 'svc.db'}") as store:
            assert sorted(e.job for e in store.query().items) == [
                "email",
                "email",
                "nightly-report",
            ]
            assert store.get_schedule("cleanup").cron == "0 3 * * *"
    finally:
        service.terminate()
        service.wait(30)


def test_the_django_project_runs(tmp_path: Path) -> None:
    """The Django section's project, built as its commands say, serves an order and runs
    its job: the view's order and execution commit together, the worker ships it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Django\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^```sh\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)[0]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "DJANGO_SETTINGS_MODULE": "mysite.settings"}
    env.pop("FENCEPOST_DB", None)
    bin_dir = Path(sys.executable).parent

    def run(line: str) -> str:
        """One command of the section (``python`` is this interpreter)."""
        argv = line.split("#", 1)[0].split()
        argv[0] = str(bin_dir / argv[0]) if argv[0] == "django-admin" else sys.executable
        return run_argv(argv)

    def run_argv(argv: list[str]) -> str:
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    lines = [line for line in commands.splitlines() if line.strip()]
    for part in lines[0].split("#", 1)[0].split("&&"):  # startproject, startapp
        run(part)
    for block in blocks():
        if _kind(block) == "django":
            (tmp_path / block.splitlines()[0].removeprefix("# ")).write_text(block)
    for part in lines[1].split("&&"):  # makemigrations, migrate
        run(part)
    assert "migrated to version" in run(lines[2])  # fencepost_migrate
    posted = run_argv(  # the view, through Django's test client
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.test import Client; "
            "r = Client().post('/orders/', {'item': 'book'}, HTTP_HOST='localhost'); "
            "print(r.status_code, r.content.decode())",
        ]
    )
    status, _, body = posted.strip().partition(" ")
    assert status == "201", posted
    placed = json.loads(body)
    worker_argv = lines[3].split("#", 1)[0].split()
    worker = subprocess.Popen(
        [sys.executable, *worker_argv[1:]],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with fencepost.connect(f"sqlite:///{tmp_path / 'db.sqlite3'}") as store:
            deadline = time.monotonic() + 30
            while store.get(placed["execution"]).state is not State.SUCCEEDED:
                assert worker.poll() is None, worker.communicate()[0]
                assert time.monotonic() < deadline, "the job did not succeed in 30 s"
                time.sleep(0.1)
        with closing(sqlite3.connect(tmp_path / "db.sqlite3")) as conn:
            shipped = conn.execute(
                "SELECT shipped FROM shop_order WHERE id = ?", (placed["order"],)
            ).fetchone()
        assert shipped == (1,)
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
        assert worker.returncode == 0, output
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.communicate()

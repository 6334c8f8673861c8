"""Every Python block in the README runs as pasted.

Each block is written to a file of its own in a fresh directory and run by a fresh
interpreter, as a reader would after pasting it: a plain script must exit 0; the
quick start (it ends in ``app.run_worker``) must run its job to success and stop on
SIGTERM; the client example runs against a real ``fencepost serve`` (its URL and
token come from the environment, as the block reads them); the contract-suite
example runs under pytest.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
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
    assert kinds == ["worker", "script", "script", "script", "client", "pytest"], kinds


def _kind(block: str) -> str:
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

"""Everyday edges of the command: a bare ``fencepost``, ``ps --recent``, and the one rule
by which every command finds its store (--db, $FENCEPOST_DB, the App's, the default)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from fencepost.domain.states import State
from tests.acceptance.cli import FENCEPOST, fencepost, fencepost_all
from tests.acceptance.conftest import Database


def test_a_bare_fencepost_prints_the_help_and_exits_0(tmp_path: Path) -> None:
    bare = fencepost(cwd=tmp_path)
    helped = fencepost("--help", cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert bare.stderr == ""
    assert bare.stdout == helped.stdout
    assert "COMMAND" in bare.stdout
    assert "one execution in full" in bare.stdout, "show is listed"
    assert list(tmp_path.iterdir()) == [], "no store opened"


def test_ps_recent_lists_newest_first_with_the_filters_and_the_limit(database: Database) -> None:
    store = database.store()
    ids = [store.submit("ledger" if n % 2 else "mail", {"n": n}).id for n in range(6)]
    (lease,) = store.claim("worker-a", ids=[ids[5]])
    store.complete(lease, None)

    oldest, recent, ledger, top2, done_only = fencepost_all(
        ("ps", "--all", "--json"),
        ("ps", "--all", "--recent", "--json"),
        ("ps", "--recent", "--job", "ledger", "--json"),
        ("ps", "--all", "--recent", "--limit", "2"),
        ("ps", "--recent", "--state", "SUCCEEDED", "--json"),
        db=database.url,
    )
    assert [e["id"] for e in oldest.json()] == ids
    assert [e["id"] for e in recent.json()] == ids[::-1]
    assert [e["id"] for e in ledger.json()] == [ids[3], ids[1]], "unfinished ledger, newest first"
    assert [row[0] for row in top2.ok().rows(ids[5]) + top2.rows(ids[4])] == [ids[5], ids[4]]
    assert top2.stdout.index(ids[5]) < top2.stdout.index(ids[4])
    assert "first 2 executions, newest first; more match (raise --limit)" in top2.stdout
    assert [(e["id"], e["state"]) for e in done_only.json()] == [(ids[5], State.SUCCEEDED.value)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_serve_without_db_serves_the_store_the_app_names(tmp_path: Path) -> None:
    """As ``worker APP`` does: never a fresh, empty fencepost.db beside it."""
    (tmp_path / "tasks.py").write_text(
        textwrap.dedent(
            """
            import fencepost

            app = fencepost.App("sqlite:///app.db")

            @app.job()
            def ledger(n: int) -> int:
                return n
            """
        )
    )
    submit = "import tasks; print(tasks.app.store.submit('ledger', {'n': 1}).id)"
    submitted = subprocess.run(
        [sys.executable, "-c", submit],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "FENCEPOST_DB"}
    with subprocess.Popen(
        [FENCEPOST, "serve", "tasks:app", "--port", str(port), "--workers", "0"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as service:
        try:
            assert service.stdout is not None
            start = service.stdout.readline()  # printed once the store is open
            assert f"serving sqlite:///{tmp_path / 'app.db'}" in start or "app.db" in start, start
            deadline = time.monotonic() + 30
            found: object = None
            while time.monotonic() < deadline:
                assert service.poll() is None, service.stderr.read() if service.stderr else ""
                try:
                    found = _get(f"http://127.0.0.1:{port}/executions/{submitted}")
                    break
                except OSError:
                    time.sleep(0.1)  # not listening yet
            assert isinstance(found, dict), found
            assert found["id"] == submitted
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(30)
    assert not (tmp_path / "fencepost.db").exists(), "no empty default store beside the app's"

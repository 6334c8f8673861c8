"""The Django guide's project, built from docs/how-to/django.md as a reader would, runs.

The page's shell commands create the project (``django-admin startproject``,
``startapp``), its ``<!-- run: file PATH -->`` blocks are written over the generated
files, the remaining ``python manage.py`` commands make the tables, Django's test client
posts an order to the view, and the guide's own worker command ships it: the view's
order and its execution commit together, and the worker runs the job on the project's
store.
"""

from __future__ import annotations

import json
import os
import re
import shlex
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

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "how-to" / "django.md"

#: A fenced block with the run marker (if any) on the line just before it.
_BLOCK = re.compile(
    r"^(?:<!-- run: (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    flags=re.DOTALL | re.MULTILINE,
)
#: The files the guide's project is made of (checked, so a dropped block fails here).
FILES = ["mysite/settings.py", "mysite/urls.py", "shop/models.py", "shop/views.py", "shop/jobs.py"]


def guide_files() -> dict[str, str]:
    """The guide's ``file PATH`` blocks: path -> text, in page order."""
    files: dict[str, str] = {}
    for block in _BLOCK.finditer(GUIDE.read_text(encoding="utf-8")):
        marker = (block["marker"] or "").split()
        if marker[:1] == ["file"]:
            files[marker[1]] = block["body"]
    return files


def guide_commands() -> list[list[str]]:
    """The project's commands of the guide's shell blocks (``django-admin``, ``python
    manage.py``), in page order; other lines (pip, curl) are not the project's."""
    commands = []
    for block in _BLOCK.finditer(GUIDE.read_text(encoding="utf-8")):
        if block["lang"] not in ("sh", "console"):
            continue
        for line in block["body"].splitlines():
            argv = shlex.split(line.strip().removeprefix("$ "), comments=True)
            if argv[:1] == ["django-admin"] or argv[:2] == ["python", "manage.py"]:
                commands.append(argv)
    return commands


def test_the_guide_has_the_project_this_test_builds() -> None:
    assert list(guide_files()) == FILES
    names = [argv[1] if argv[0] == "django-admin" else argv[2] for argv in guide_commands()]
    assert names == [
        "startproject",
        "startapp",
        "makemigrations",
        "migrate",
        "fencepost_migrate",
        "fencepost_worker",
    ]


def test_the_django_project_runs(tmp_path: Path) -> None:
    """Built as the guide says, the project serves an order and its worker ships it."""
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "DJANGO_SETTINGS_MODULE": "mysite.settings"}
    env.pop("FENCEPOST_DB", None)
    bin_dir = Path(sys.executable).parent

    def local(argv: list[str]) -> list[str]:
        """A guide command with this virtualenv's ``django-admin`` and interpreter."""
        if argv[0] == "django-admin":
            return [str(bin_dir / "django-admin"), *argv[1:]]
        return [sys.executable, *argv[1:]]

    def run(argv: list[str]) -> str:
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    commands = guide_commands()
    *setup, worker_command = commands
    assert worker_command[2] == "fencepost_worker"
    created = [argv for argv in setup if argv[0] == "django-admin"]
    project = [argv for argv in setup if argv[0] != "django-admin"]
    for argv in created:  # startproject, startapp
        run(local(argv))
    for path, text in guide_files().items():  # the guide's files over the generated ones
        (tmp_path / path).write_text(text, encoding="utf-8")
    outputs = {argv[2]: run(local(argv)) for argv in project}  # makemigrations, migrate, ...
    assert "migrated to version" in outputs["fencepost_migrate"]

    posted = run(  # the view, through Django's test client
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

    db = tmp_path / "db.sqlite3"
    with fencepost.connect(f"sqlite:///{db}") as store:
        waiting = store.get(placed["execution"])
    assert (waiting.state, waiting.inputs) == (State.SCHEDULED, {"order_id": placed["order"]})

    worker = subprocess.Popen(
        local(worker_command),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with fencepost.connect(f"sqlite:///{db}") as store:
            deadline = time.monotonic() + 30
            while (done := store.get(placed["execution"])).state is not State.SUCCEEDED:
                assert worker.poll() is None, worker.communicate()[0]
                assert done.state in (State.SCHEDULED, State.RUNNING), done
                assert time.monotonic() < deadline, "the job did not succeed in 30 s"
                time.sleep(0.1)
        assert done.result == {"order_id": placed["order"], "execution": placed["execution"]}
        with closing(sqlite3.connect(db)) as conn:
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

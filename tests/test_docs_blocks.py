"""Every code block of the README and the docs site runs as a reader would paste it.

Each ```python block is written to a file of its own in a fresh directory and run by a
fresh interpreter. How it runs is said by an HTML comment on the line just before its
fence (``<!-- run: KIND [ARGUMENT] -->``); without one it is a script:

``script``
    runs to the end and exits 0.
``worker [STATES]``
    ends in ``app.run_worker(...)``: it runs until the first SQLite database the block
    names holds an execution and every one not scheduled ahead is finished, in one of
    ``STATES`` (default ``SUCCEEDED``), then stops on SIGTERM with exit 0.
``client``
    runs against a real ``fencepost serve`` on a fresh SQLite file, with its URL and an
    admin token in ``FENCEPOST_URL`` and ``FENCEPOST_TOKEN``.
``postgres``
    runs with ``DATABASE_URL`` naming a fresh schema of the tests' PostgreSQL.
``pytest``
    runs under pytest.
``import``
    runs as a module named ``block``: its definitions execute, its
    ``if __name__ == "__main__":`` part (a server that runs forever) does not.
``file PATH``
    one file of a multi-file example: compiled here, assembled and run by the page's
    own test (``tests/docs/test_django_guide.py``).

Every ``fencepost …`` line of a ```sh or ```console block is parsed by the real CLI
parser, so a renamed command or option fails here; ```yaml blocks marked
``definition`` are loaded as job definition files. A block whose marker this module
does not know fails, so nothing is skipped silently.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import fencepost
from fencepost.cli.main import build_parser
from fencepost.jobs.definitions import load_definition
from tests import postgres
from tests.integration.test_service_processes import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[1]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TOKEN = "docs-admin-token-0123456789"
#: The pages whose blocks are tested: what a user and a contributor read.
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
    key=lambda path: path.relative_to(ROOT).as_posix(),
)
PAGES = [page for page in PAGES if page.exists()]  # test_the_pages_hold_blocks checks them
KINDS = {"script", "worker", "client", "postgres", "pytest", "import", "file", "definition"}
#: States an execution no longer leaves by itself.
FINISHED = ("SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*run:\s*(?P<kind>[\w-]+)(?:\s+(?P<argument>\S+))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  #: the fence's line number, 1-based
    language: str
    kind: str
    argument: str | None
    text: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    """``page``'s fenced blocks, each with the run marker just before it (if any).

    A block indented inside a list or an admonition is dedented by its fence's indent.
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None or not opening["info"].strip():
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        language = opening["info"].split()[0].split("{")[0].strip().lower()
        marker = _MARKER.match(lines[index - 1]) if index else None
        body: list[str] = []
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            body.append(lines[end][len(indent) :] if lines[end].startswith(indent) else lines[end])
            end += 1
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=language,
                kind=marker["kind"] if marker else "script",
                argument=marker["argument"] if marker else None,
                text="\n".join(body) + "\n",
            )
        )
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in page_blocks(page)]


PYTHON = [block for block in all_blocks() if block.language in ("python", "py")]
SHELL = [block for block in all_blocks() if block.language in ("sh", "bash", "console", "shell")]
DEFINITIONS = [block for block in all_blocks() if block.kind == "definition"]


def test_every_marker_names_a_kind_this_module_runs() -> None:
    unknown = [f"{b.name}: {b.kind}" for b in all_blocks() if b.kind not in KINDS]
    assert not unknown, "unknown run markers (nothing may be skipped silently):\n" + "\n".join(
        unknown
    )
    misplaced = [
        b.name
        for b in all_blocks()
        if b.kind != "script" and b.language not in ("python", "py", "yaml", "json")
    ]
    assert not misplaced, f"run markers on blocks that are not Python or YAML: {misplaced}"


def test_the_pages_hold_blocks() -> None:
    """The collection itself works: the README's quick start is found as a worker."""
    assert {"README.md", "CONTRIBUTING.md", "index.md", "tutorial.md"} <= {p.name for p in PAGES}
    readme = [b for b in PYTHON if b.page.name == "README.md"]
    assert readme
    assert readme[0].kind == "worker", "the README's first Python block is its quick start"
    assert len(PYTHON) >= 40, f"only {len(PYTHON)} Python blocks found in {len(PAGES)} pages"


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON, ids=lambda block: block.name)
def test_each_python_block_runs(block: Block, tmp_path: Path) -> None:
    path = tmp_path / ("test_block.py" if block.kind == "pytest" else "block.py")
    path.write_text(block.text, encoding="utf-8")
    if block.kind == "script":
        run_python(path)
    elif block.kind == "worker":
        run_worker(path, block)
    elif block.kind == "client":
        run_against_a_service(path, tmp_path)
    elif block.kind == "postgres":
        run_on_postgres(path)
    elif block.kind == "pytest":
        run_python(path, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider")
    elif block.kind == "import":
        run_python(path, "-c", "import runpy; runpy.run_path('block.py', run_name='block')")
    elif block.kind == "file":
        assert block.argument, f"{block.name}: a file block names its path"
        compile(block.text, block.argument, "exec")
    else:
        pytest.fail(f"{block.name}: a Python block cannot be of kind {block.kind!r}")


@pytest.mark.parametrize("block", SHELL, ids=lambda block: block.name)
def test_each_fencepost_command_parses(block: Block) -> None:
    """Each ``fencepost`` line of a shell block is a command the real parser accepts."""
    for argv in fencepost_commands(block.text):
        errors = io.StringIO()
        code = _parse(argv[1:], errors)
        assert code == 0, f"{block.name}: `{shlex.join(argv)}`:\n{errors.getvalue()}"


def _parse(args: list[str], errors: io.StringIO) -> object:
    """The exit code the real parser gives ``args`` (0 when it parses; --help exits 0)."""
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as exc:
        return exc.code
    return 0


@pytest.mark.parametrize("block", DEFINITIONS, ids=lambda block: block.name)
def test_each_definition_block_loads(block: Block, tmp_path: Path) -> None:
    suffix = ".json" if block.language == "json" else ".yaml"
    path = tmp_path / f"job{suffix}"
    path.write_text(block.text, encoding="utf-8")
    spec = load_definition(path)
    assert spec.name


def fencepost_commands(text: str) -> Iterator[list[str]]:
    """The ``fencepost`` command lines of a shell block, continuations joined."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    for line in logical:
        line = line.strip().removeprefix("$ ")
        if not line.startswith("fencepost "):
            continue
        argv = shlex.split(line, comments=True)
        # A pipe or a chained command ends the fencepost part of the line.
        for stop in ("|", "&&", ";", ">", "2>&1"):
            if stop in argv:
                argv = argv[: argv.index(stop)]
        yield argv


def run_python(path: Path, *args: str, env: dict[str, str] | None = None) -> None:
    argv = (
        [sys.executable, *args] if args and args[0] == "-c" else [sys.executable, *args, path.name]
    )
    run = subprocess.run(
        argv,
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert run.returncode == 0, f"{path.name}:\n{run.stdout}\n{run.stderr}"


def run_worker(path: Path, block: Block) -> None:
    """Run a block that ends in a worker until its database's work is finished.

    Finished means: the database holds an execution, and every execution that is not
    scheduled more than a minute ahead (a schedule's next slot, a delayed submit) is in
    a finished state; each must be one of the states the marker names (by default
    ``SUCCEEDED``: ``<!-- run: worker SUCCEEDED,FAILED -->`` for a page that shows a
    dead letter).
    """
    named = re.search(r"sqlite:///([\w./-]+)", block.text)
    assert named, "a worker block names its SQLite database (sqlite:///FILE)"
    expected = set((block.argument or "SUCCEEDED").split(","))
    assert expected <= set(FINISHED), f"{block.name}: {expected} are not all finished states"
    db = path.parent / named.group(1)
    proc = subprocess.Popen(
        [sys.executable, path.name],
        cwd=path.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while (states := _finished_states(db)) is None:
            assert proc.poll() is None, f"the worker exited early:\n{proc.communicate()[0]}"
            assert time.monotonic() < deadline, "the block's executions did not finish in 90 s"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert states <= expected, (
            f"{block.name}: executions ended {states}, not {expected}:\n{out}"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _finished_states(db: Path) -> set[str] | None:
    """The states ``db``'s executions ended in, or None while one is still to finish."""
    if not db.exists():
        return None
    with fencepost.connect(f"sqlite:///{db}") as store:
        executions = store.query(limit=1000).items
    ahead = datetime.now(UTC) + timedelta(minutes=1)
    pending = [
        e
        for e in executions
        if e.state.name not in FINISHED and not (e.state.name == "SCHEDULED" and e.due_at > ahead)
    ]
    if not executions or pending:
        return None
    return {e.state.name for e in executions if e.state.name in FINISHED}


def run_against_a_service(path: Path, tmp_path: Path) -> None:
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
    finally:
        service.terminate()
        service.wait(30)


def run_on_postgres(path: Path) -> None:
    postgres.require_postgres()
    schema = postgres.new_schema()
    try:
        run_python(path, env={"DATABASE_URL": postgres.store_url(schema)})
    finally:
        postgres.drop_schema(schema)

"""A PostgreSQL URL that cannot work is named, with its cause, in one line within 3 s.

Each failure kind on the commands a user runs first (``ps``, ``submit``, ``worker``,
``serve``), as real processes. The refused port is a free port on 127.0.0.1; the
unknown host is looked up inside a network namespace this test creates (only
loopback in it), so no address outside the machine is ever asked.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests import postgres
from tests.integration.test_service_processes import free_port
from tests.integration.test_worker_processes import APP, FENCEPOST, ROOT

pytestmark = pytest.mark.slow

PASSWORD = "s3cret-never-shown"


@pytest.fixture(scope="module")
def server() -> tuple[str, int, str]:
    postgres.require_postgres()
    parts = urlsplit(postgres.dsn())
    return parts.hostname or "127.0.0.1", parts.port or 5432, parts.username or "postgres"


@pytest.fixture(scope="module")
def netns() -> Iterator[str]:
    """A network namespace with loopback only: name lookups there reach no resolver."""
    name = f"fp-connect-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def kinds(server: tuple[str, int, str]) -> dict[str, tuple[str, str]]:
    """Failure kind -> (URL, what the message must say)."""
    host, port, user = server
    refused = free_port()
    return {
        "refused": (
            f"postgresql://{user}@127.0.0.1:{refused}/test",
            f"cannot connect to PostgreSQL at {user}@127.0.0.1:{refused}/test: connection refused",
        ),
        "unknown-database": (
            f"postgresql://{user}@{host}:{port}/fencepost_no_such_db",
            'database "fencepost_no_such_db" does not exist',
        ),
        "unknown-user": (
            f"postgresql://fencepost_nobody:{PASSWORD}@{host}:{port}/test",
            f"cannot connect to PostgreSQL at fencepost_nobody@{host}:{port}/test: "
            'role "fencepost_nobody"',
        ),
        "unknown-host": (
            f"postgresql://{user}@no-such-host.invalid:{port}/test",
            "unknown host 'no-such-host.invalid'",
        ),
        "tls-required": (
            f"postgresql://{user}@{host}:{port}/test?sslmode=require",
            "server does not support SSL, but SSL was required",
        ),
        # A libpq option the probe itself overrides (its own short timeout) must still
        # be named, not met by the pool alone after its timeout.
        "bad-connect-timeout": (
            f"postgresql://{user}@{host}:{port}/test?connect_timeout=abc",
            "bad value for connect_timeout: 'abc'",
        ),
    }


COMMANDS = {
    "ps": ["ps"],
    "submit": ["submit", "noop"],
    "worker": ["worker", APP],
    "serve": ["serve", APP, "--workers", "0"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    "kind",
    [
        "refused",
        "unknown-database",
        "unknown-user",
        "unknown-host",
        "tls-required",
        "bad-connect-timeout",
    ],
)
def test_the_cause_is_one_line_within_three_seconds(
    server: tuple[str, int, str], netns: str, kind: str, command: str
) -> None:
    url, says = kinds(server)[kind]
    argv = [FENCEPOST, *COMMANDS[command], "--db", url]
    if command == "serve":
        argv += ["--port", str(free_port())]
    if kind == "unknown-host":
        argv = ["ip", "netns", "exec", netns, *argv]

    def timed(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.monotonic()
        run = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
        return run, time.monotonic() - started

    # The same command refused before it connects (a bad pool size): its start-up, which
    # a machine busy with other tests stretches, is not the store's time to tell. A wait
    # of the store's own (a retry, the pool's timeout) shows in every pair of runs; a
    # burst of load elsewhere stretches one run of a pair and not the next, so the
    # store's time is the least over up to three pairs, the next taken only while it
    # is over.
    refused_early = "postgresql://nobody@127.0.0.1:1/test?pool_max=x"
    pairs: list[tuple[float, float]] = []
    for _ in range(3):
        run, elapsed = timed(argv)
        _, startup = timed([refused_early if arg == url else arg for arg in argv])
        pairs.append((elapsed, startup))
        if elapsed - startup < 3.0:
            break
    elapsed, startup = min(pairs, key=lambda pair: pair[0] - pair[1])
    assert run.returncode != 0
    assert elapsed - startup < 3.0, f"took {elapsed:.1f}s, {startup:.1f}s of it start-up"
    assert elapsed < 10.0, f"took {elapsed:.1f}s: as long as the pool's timeout"
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr  # no pool warnings, no traceback
    name = COMMANDS[command][0]
    assert lines[0].startswith(f"fencepost {name}: cannot connect to PostgreSQL at "), lines[0]
    assert says in lines[0]
    assert PASSWORD not in run.stderr + run.stdout

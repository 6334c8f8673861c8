"""A private PgBouncer in transaction pooling mode, in front of the tests' server.

Most production PostgreSQL sits behind PgBouncer with ``pool_mode = transaction``:
each transaction of a client runs on whichever server connection is free, so
session state (SET, LISTEN, prepared statements, session advisory locks) does not
follow the client. The tests that show the store works there start Debian's
``pgbouncer`` (1.18: no support for prepared statements) on a free loopback port,
in front of the server ``FENCEPOST_TEST_POSTGRES_DSN`` names (trust
authentication: the user only has to be listed in its ``auth_file``), with its
files in a temporary directory, and stop it afterwards. PgBouncer refuses to run
as root, so when the tests run as root it runs as the ``postgres`` OS user.

Without the ``pgbouncer`` program the calling test fails, naming the package.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests import postgres
from tests.integration._pg_instance import _free_port, _server_user

#: Enough server connections for a contract test's stores, few enough that clients
#: share them (as in production, where that is the point of a pooler).
POOL_SIZE = 10


class PgBouncer:
    """A running PgBouncer: the DSN of the database ``test`` through it."""

    def __init__(self, directory: Path, port: int, user: str, database: str) -> None:
        self.directory = directory
        self.port = port
        self.log = directory / "pgbouncer.log"
        #: The upstream database, through the pooler (as ``FENCEPOST_TEST_POSTGRES_DSN``).
        self.dsn = f"postgresql://{user}@127.0.0.1:{port}/{database}"

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\n-- pgbouncer log --\n" + "\n".join(text)


def _config(directory: Path, port: int, upstream: str) -> str:
    parts = urlsplit(upstream)
    host = parts.hostname or "127.0.0.1"
    database = parts.path.lstrip("/") or "test"
    return (
        "[databases]\n"
        f"{database} = host={host} port={parts.port or 5432} dbname={database}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {directory / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {POOL_SIZE}\n"
        "max_client_conn = 500\n"
        # After a failed server login PgBouncer refuses its clients until it tries again,
        # by default 15 s later, and a store's start waits 10 s for its first connection:
        # 1 s keeps a momentary refusal by the shared server (all its connections taken
        # by other tests' processes) a short wait.
        "server_login_retry = 1\n"
        f"logfile = {directory / 'pgbouncer.log'}\n"
        # Only what is worth reading afterwards: no line per connection.
        "log_connections = 0\n"
        "log_disconnections = 0\n"
    )


@contextlib.contextmanager
def pgbouncer(keep_log_in: Path | None = None) -> Iterator[PgBouncer]:
    """Start PgBouncer in front of the tests' server, yield it, stop it afterwards.

    Its log is copied to ``keep_log_in / "pgbouncer.log"`` at the end, when given.
    """
    program = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(program).exists():
        pytest.fail(
            "pgbouncer is not installed: apt-get install pgbouncer (make system-deps)",
            pytrace=False,
        )
    upstream = postgres.dsn()
    parts = urlsplit(upstream)
    user = parts.username or "postgres"
    run_as = _server_user()
    directory = Path(tempfile.mkdtemp(prefix="fencepost-pgbouncer-"))
    process = None
    try:
        port = _free_port()
        (directory / "userlist.txt").write_text(f'"{user}" ""\n')
        (directory / "pgbouncer.ini").write_text(_config(directory, port, upstream))
        if run_as is not None:
            for path in (directory, *directory.iterdir()):
                shutil.chown(path, run_as, run_as)
        command = [program, str(directory / "pgbouncer.ini")]
        if run_as is not None:
            command[1:1] = ["-u", run_as]  # PgBouncer drops root itself
        # Its stderr to a file, never a pipe nobody reads (a full one would stall it).
        with (directory / "pgbouncer.out").open("wb") as out:
            process = subprocess.Popen(command, cwd=directory, stdout=out, stderr=out)
        bouncer = PgBouncer(directory, port, user, parts.path.lstrip("/") or "test")
        _wait_until_ready(bouncer, process)
        yield bouncer
    finally:
        if process is not None:
            process.send_signal(signal.SIGTERM)  # immediate shutdown
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log = directory / "pgbouncer.log"
        if keep_log_in is not None and log.exists():
            shutil.copyfile(log, keep_log_in / "pgbouncer.log")
        shutil.rmtree(directory, ignore_errors=True)


def _wait_until_ready(bouncer: PgBouncer, process: subprocess.Popen[bytes]) -> None:
    """Until a query through the pooler is answered (it listens within milliseconds)."""
    end = time.monotonic() + 15
    while True:
        status = process.poll()
        if status is not None:
            output = (bouncer.directory / "pgbouncer.out").read_text(errors="replace")
            pytest.fail(f"pgbouncer exited {status}:\n{output}{bouncer.log_tail()}")
        try:
            with psycopg.connect(bouncer.dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > end:
                raise AssertionError(
                    f"pgbouncer did not answer within 15 s{bouncer.log_tail()}"
                ) from None
            time.sleep(0.05)

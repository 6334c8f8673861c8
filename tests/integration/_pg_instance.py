"""A private PostgreSQL server for one test, for the tests that stop and start it.

The machine's shared server (port 5432) serves every PostgreSQL test running at
the same time, so a test that needs to kill its server starts its own instead:
``initdb`` into a temporary directory (trust authentication, the database
``test``), listening on a free loopback port with its Unix socket in that
directory, and stopped whatever happens. PostgreSQL refuses to run as root, so
when the tests run as root the server runs as the ``postgres`` OS user.

A test host in a network namespace (``_netns.py``) runs one too: the server is
then started inside that namespace and listens on the host's address there; the
test itself reaches it through its Unix socket (:attr:`PrivatePostgres.socket_dsn`),
which no network namespace hides.

Without ``initdb`` and ``pg_ctl`` (the PostgreSQL server package) the calling
test is skipped, or failed when ``FENCEPOST_REQUIRE_POSTGRES`` is set, as in CI.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import psycopg
import pytest

#: Small, but with ``fsync`` on: the restart tests are about what survives a shutdown.
SETTINGS = {
    "shared_buffers": "'32MB'",
    "max_connections": "100",
    "fsync": "on",
}


class PrivatePostgres:
    """A running private server: its DSN, and verbs to stop and start it again."""

    def __init__(
        self,
        bindir: Path,
        directory: Path,
        port: int,
        user: str | None,
        *,
        host: str = "127.0.0.1",
        namespace: str | None = None,
    ) -> None:
        self.bindir = bindir
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.port = port
        self.user = user  # the OS user to run it as, when not the current one
        self.host = host  # the one address it listens on
        self.namespace = namespace  # the network namespace it runs in (None: ours)
        #: The database ``test`` on this server, as ``FENCEPOST_TEST_POSTGRES_DSN`` names one.
        self.dsn = f"postgresql://postgres@{host}:{port}/test"
        #: The same database through the server's Unix socket, reachable from any namespace.
        self.socket_dsn = f"postgresql://postgres@/test?host={directory}&port={port}"

    def run(self, tool: str, *args: str, timeout: float = 60) -> None:
        """Run one of the server's programs (as the server's OS user); fail on an error."""
        command = self.command(tool, *args)
        done = subprocess.run(
            command,
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
            f"{self.log_tail()}"
        )

    def command(self, tool: str, *args: str) -> list[str]:
        program = [str(self.bindir / tool), *args]
        if self.user is not None:
            program = ["runuser", "-u", self.user, "--", *program]
        if self.namespace is not None:
            program = ["ip", "netns", "exec", self.namespace, *program]
        return program

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; a fast shutdown cuts sessions and rolls transactions back."""
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def start(self) -> float:
        """Start the server; return the wall time of the first ``pg_isready`` poll that
        found it accepting connections.

        ``pg_ctl -w`` itself notices readiness up to a tenth of a second late, and
        the restart test measures how soon workers resume from the earliest moment
        the server can be said to be back.
        """
        starter = subprocess.Popen(
            self.command("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start"),
            cwd=self.directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            end = time.monotonic() + 60
            while True:
                polled_at = time.time()
                if self.ready():
                    break
                status = starter.poll()
                assert status in (None, 0), f"pg_ctl start exited {status}{self.log_tail()}"
                assert time.monotonic() < end, f"the server was not up within 60 s{self.log_tail()}"
                time.sleep(0.05)
        except BaseException:
            starter.kill()  # pg_ctl only; a postmaster it started is stopped at teardown
            starter.wait()
            raise
        output, _ = starter.communicate(timeout=60)
        assert starter.returncode == 0, f"pg_ctl start failed:\n{output}{self.log_tail()}"
        return polled_at

    def ready(self) -> bool:
        """Whether the server accepts connections on its TCP port (``pg_isready``)."""
        poll = self.command("pg_isready", "-q", "-h", self.host, "-p", str(self.port))
        return subprocess.run(poll, check=False, timeout=10).returncode == 0

    def running(self) -> bool:
        """Whether a postmaster runs on the data directory (up, starting or stopping)."""
        status = self.command("pg_ctl", "-D", str(self.data), "status")
        done = subprocess.run(
            status, cwd=self.directory, capture_output=True, check=False, timeout=30
        )
        return done.returncode == 0

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\n-- server log --\n" + "\n".join(text)


@contextlib.contextmanager
def private_postgres(
    keep_log_in: Path,
    *,
    host: str = "127.0.0.1",
    namespace: str | None = None,
    clients: str | None = None,
) -> Iterator[PrivatePostgres]:
    """Start a private server, yield it, and stop and remove it afterwards.

    It listens on ``host`` only, inside the network namespace ``namespace`` when
    one is given (a test host of ``_netns.py``), and trusts connections from the
    loopback and from the network ``clients`` (CIDR), if given. Its log is copied to
    ``keep_log_in / "postgres.log"`` at the end, for whoever looks into a run: the
    server's own directory is removed, and lies outside the test's ``tmp_path``
    because a Unix socket path is limited to about 100 bytes.
    """
    bindir = _bindir()
    user = _server_user()
    directory = Path(tempfile.mkdtemp(prefix="fencepost-pg-"))
    server = None
    try:
        if user is not None:
            shutil.chown(directory, user, user)
        server = PrivatePostgres(
            bindir, directory, _free_port(), user, host=host, namespace=namespace
        )
        server.run(
            "initdb", "-D", str(server.data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C.UTF-8", "--no-instructions",
        )  # fmt: skip
        settings = {
            **SETTINGS,
            "listen_addresses": f"'{host}'",
            "port": str(server.port),
            "unix_socket_directories": f"'{directory}'",
        }
        with (server.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        if clients is not None:
            with (server.data / "pg_hba.conf").open("a") as hba:
                hba.write(f"host all all {clients} trust\n")
        server.start()
        admin = server.socket_dsn.replace("/test?", "/postgres?")
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute("CREATE DATABASE test")
        yield server
    finally:
        try:
            if server is not None and server.running():
                try:
                    server.stop()
                except BaseException:
                    server.stop("immediate")
                    raise
        finally:
            if server is not None and server.log.exists():
                shutil.copyfile(server.log, keep_log_in / "postgres.log")
            shutil.rmtree(directory, ignore_errors=True)


def _bindir() -> Path:
    """The newest installed PostgreSQL's programs (Debian keeps them off the PATH)."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda bindir: int(bindir.parent.name) if bindir.parent.name.isdigit() else 0,
    )
    initdb = shutil.which("initdb")
    bindir = found[-1] if found else Path(initdb).parent if initdb else None
    if bindir is None or not all((bindir / tool).exists() for tool in ("pg_ctl", "pg_isready")):
        _unavailable(
            "initdb, pg_ctl and pg_isready (the PostgreSQL server package) are needed"
            " to start a private server"
        )
    return bindir


def _server_user() -> str | None:
    """The OS user to run the server as: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        _unavailable("running as root, and there is no postgres user to run a server as")
    if shutil.which("runuser") is None:
        _unavailable("running as root, and runuser is needed to run a server as postgres")
    return "postgres"


def _free_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("FENCEPOST_REQUIRE_POSTGRES"):
        pytest.fail(f"FENCEPOST_REQUIRE_POSTGRES is set but {reason}", pytrace=False)
    pytest.skip(reason)

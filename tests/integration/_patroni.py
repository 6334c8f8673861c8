"""A highly available PostgreSQL for the failover tests: three servers under Patroni.

:func:`patroni_cluster` starts, from Debian's packages, one etcd (the v3 API, which
Patroni's ``etcd3`` store speaks to etcd 3.4) and three PostgreSQL servers managed by
Patroni, all on free loopback ports with their data under one temporary directory,
in ``synchronous_mode``: a commit returns only once one standby has it, and Patroni
promotes only that standby, so an acknowledged write survives the primary's loss.

Patroni is told to fail over rather than restart a primary whose postmaster died
(``primary_start_timeout: 0``), so that killing the leader's postmaster really moves
the primary to another server; the old one comes back as a standby (``pg_rewind``).
Patroni checks its servers every second (``loop_wait``), which bounds how long a
failover takes.

PostgreSQL refuses to run as root, so when the tests run as root Patroni (and the
servers it starts) runs as the ``postgres`` OS user, as ``_pg_instance`` does.
Everything started here is killed, and the directory removed, whatever happens; the
logs are copied to the test's directory first. Without the Debian packages
``patroni`` and ``etcd-server`` the calling test fails with a message naming them
(``make system-deps`` installs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration._pg_instance import _bindir, _free_port, _server_user

SCOPE = "fencepost"
NODES = 3

#: Patroni's timing: its loop runs every second; a leader that stops renewing its key
#: loses it after ``ttl`` seconds (only when its Patroni dies: a live Patroni whose
#: postmaster died gives the key up itself at the next loop).
DCS = {
    "ttl": 10,
    "loop_wait": 1,
    "retry_timeout": 3,
    "maximum_lag_on_failover": 16 * 1024 * 1024,
    "synchronous_mode": True,
    "primary_start_timeout": 0,
    "postgresql": {
        "use_pg_rewind": True,
        "use_slots": True,
        "parameters": {
            # pg_rewind needs hint bits logged; the rest keeps three servers small.
            "wal_log_hints": "on",
            "max_connections": 100,
            "shared_buffers": "32MB",
            "max_wal_senders": 10,
            "max_replication_slots": 10,
            "wal_keep_size": "128MB",
            "checkpoint_timeout": "5min",
        },
    },
}

#: Trust on loopback: the servers are private and short-lived, like ``_pg_instance``'s.
PG_HBA = [
    "local all all trust",
    "local replication all trust",
    "host all all 127.0.0.1/32 trust",
    "host replication all 127.0.0.1/32 trust",
]


@dataclass(frozen=True)
class Node:
    """One Patroni member: its name, its ports and its directory."""

    name: str
    pg_port: int
    api_port: int
    directory: Path

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def config(self) -> Path:
        return self.directory / "patroni.yml"

    @property
    def log(self) -> Path:
        return self.directory / "patroni.log"

    @property
    def admin_dsn(self) -> str:
        """This server alone (whatever its role), database ``postgres``."""
        return f"postgresql://postgres@127.0.0.1:{self.pg_port}/postgres"


class PatroniCluster:
    """A running cluster: its multi-host DSN, its leader, and ways to lose the leader."""

    def __init__(self, directory: Path, etcd_port: int, nodes: list[Node]) -> None:
        self.directory = directory
        self.etcd_port = etcd_port
        self.nodes = nodes
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in nodes)
        #: Every server, connecting to whichever is the primary now.
        self.dsn = f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"
        self.processes: list[subprocess.Popen[bytes]] = []

    # -- what the cluster says --------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """The members as Patroni's REST API lists them (from the first node that answers)."""
        for node in self.nodes:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{node.api_port}/cluster", timeout=2
                ) as answer:
                    members: list[dict[str, Any]] = json.load(answer)["members"]
                    return members
            except (OSError, ValueError):
                continue
        return []

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def writable(self, node: Node) -> bool:
        """Whether ``node``'s server accepts connections and is a primary (not in recovery)."""
        try:
            with psycopg.connect(node.admin_dsn, connect_timeout=2, autocommit=True) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.Error:
            return False
        return row is not None and not row[0]

    def wait_for_leader(
        self, *, timeout: float = 60, not_: str | None = None, standbys: int = 1
    ) -> Node:
        """The leader once it is a writable primary with ``standbys`` streaming standbys,
        one of them synchronous.

        ``not_`` names a node that must no longer lead (the one just killed or
        switched over from).
        """
        end = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while time.monotonic() < end:
            seen = self.members()
            leaders = [m for m in seen if m["role"] == "leader" and m["state"] == "running"]
            running = [m for m in seen if m["role"] != "leader" and m["state"] == "running"]
            has_sync = any(m["role"] == "sync_standby" for m in running)
            if len(leaders) == 1 and leaders[0]["name"] != not_ and has_sync:
                leader = self.node(leaders[0]["name"])
                if len(running) >= standbys and self.writable(leader):
                    return leader
            time.sleep(0.2)
        pytest.fail(
            f"no leader{f' other than {not_}' if not_ else ''} with {standbys} standbys"
            f" within {timeout} s: {seen}{self.log_tails()}",
            pytrace=False,
        )

    def postmaster_pid(self, node: Node) -> int:
        """The pid of ``node``'s postmaster (the first line of ``postmaster.pid``)."""
        return int((node.data / "postmaster.pid").read_text().split()[0])

    # -- losing the leader --------------------------------------------------------

    def kill_postmaster(self, node: Node) -> None:
        """SIGKILL ``node``'s postmaster: its backends end as they notice it, and Patroni
        fails over."""
        os.kill(self.postmaster_pid(node), signal.SIGKILL)

    def switchover(self, leader: Node) -> None:
        """``patronictl switchover --force`` away from ``leader`` (to the synchronous standby)."""
        self.patronictl("switchover", "--force", "--leader", leader.name)

    def patronictl(self, *args: str) -> str:
        command = ["patronictl", "-c", str(self.nodes[0].config), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, (
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
        return done.stdout

    # -- logs ---------------------------------------------------------------------

    def log_tails(self, lines: int = 15) -> str:
        tails = []
        for node in self.nodes:
            with contextlib.suppress(OSError):
                text = node.log.read_text(errors="replace").splitlines()[-lines:]
                tails.append(f"\n-- {node.name} --\n" + "\n".join(text))
        return "".join(tails)


@contextlib.contextmanager
def patroni_cluster(keep_logs_in: Path, *, start_timeout: float = 60) -> Iterator[PatroniCluster]:
    """Start etcd and three Patroni-managed servers; yield the cluster once it has a
    primary and two streaming standbys; kill everything and remove it afterwards."""
    for program, package in (("patroni", "patroni"), ("etcd", "etcd-server")):
        if shutil.which(program) is None:
            pytest.fail(
                f"{program} is missing: install the Debian package {package}"
                " (`make system-deps` does)",
                pytrace=False,
            )
    bindir = _bindir()
    user = _server_user()
    # Outside the test's tmp_path: a Unix socket path is limited to about 100 bytes.
    directory = Path(tempfile.mkdtemp(prefix="fencepost-patroni-"))
    cluster = None
    try:
        nodes = [
            Node(f"pg{n}", _free_port(), _free_port(), directory / f"pg{n}") for n in range(NODES)
        ]
        cluster = PatroniCluster(directory, _free_port(), nodes)
        cluster.processes.append(_start_etcd(directory, cluster.etcd_port))
        _wait_for_etcd(cluster)
        for node in nodes:
            node.directory.mkdir()
            node.config.write_text(json.dumps(_config(node, bindir, cluster.etcd_port), indent=1))
            if user is not None:
                shutil.chown(directory, user, user)
                shutil.chown(node.directory, user, user)
                shutil.chown(node.config, user, user)
            program = ["patroni", str(node.config)]
            with node.log.open("wb") as log:
                cluster.processes.append(
                    subprocess.Popen(
                        program if user is None else ["runuser", "-u", user, "--", *program],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        cluster.wait_for_leader(timeout=start_timeout, standbys=NODES - 1)
        yield cluster
    finally:
        _kill_everything(directory, cluster)
        for path in directory.glob("*/*.log"):
            with contextlib.suppress(OSError):
                shutil.copyfile(path, keep_logs_in / f"{path.parent.name}-{path.name}")
        shutil.rmtree(directory, ignore_errors=True)


def _config(node: Node, bindir: Path, etcd_port: int) -> dict[str, Any]:
    """One member's Patroni configuration (JSON is YAML, which Patroni reads)."""
    return {
        "scope": SCOPE,
        "name": node.name,
        "log": {"level": "INFO"},
        "restapi": {
            "listen": f"127.0.0.1:{node.api_port}",
            "connect_address": f"127.0.0.1:{node.api_port}",
        },
        "etcd3": {"hosts": [f"127.0.0.1:{etcd_port}"]},
        "bootstrap": {
            "dcs": DCS,
            "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}, "data-checksums"],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{node.pg_port}",
            "connect_address": f"127.0.0.1:{node.pg_port}",
            "data_dir": str(node.data),
            "bin_dir": str(bindir),
            "pgpass": str(node.directory / "pgpass"),
            "authentication": {
                "superuser": {"username": "postgres"},
                "replication": {"username": "postgres"},
                "rewind": {"username": "postgres"},
            },
            "parameters": {"unix_socket_directories": str(node.directory)},
            "pg_hba": PG_HBA,
            # A server whose rewind fails is copied afresh rather than left out.
            "remove_data_directory_on_rewind_failure": True,
            "remove_data_directory_on_diverged_timelines": True,
        },
        "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False},
    }


def _start_etcd(directory: Path, client_port: int) -> subprocess.Popen[bytes]:
    peer = f"http://127.0.0.1:{_free_port()}"
    client = f"http://127.0.0.1:{client_port}"
    command = [
        "etcd",
        *("--name", "etcd0", "--data-dir", str(directory / "etcd" / "data")),
        *("--listen-client-urls", client, "--advertise-client-urls", client),
        *("--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer),
        *("--initial-cluster", f"etcd0={peer}", "--logger", "zap"),
    ]
    (directory / "etcd").mkdir()
    with (directory / "etcd" / "etcd.log").open("wb") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_for_etcd(cluster: PatroniCluster, timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert cluster.processes[0].poll() is None, (
            f"etcd exited {cluster.processes[0].returncode}:\n"
            + (cluster.directory / "etcd" / "etcd.log").read_text(errors="replace")[-2000:]
        )
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{cluster.etcd_port}/health", timeout=1
            ) as answer:
                if json.load(answer).get("health") == "true":
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    pytest.fail(f"etcd was not healthy within {timeout} s", pytrace=False)


def _kill_everything(directory: Path, cluster: PatroniCluster | None) -> None:
    """SIGKILL what this cluster started: Patroni and etcd (each in its own session),
    then every process whose command line names the cluster's directory — the
    postmasters, which Patroni starts detached from itself — and their children."""
    if cluster is not None:
        for proc in cluster.processes:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in cluster.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
    for _ in range(50):
        left = _processes_naming(directory)
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _processes_naming(directory: Path) -> list[int]:
    """Processes whose command line mentions ``directory``, and their children."""
    mark = str(directory).encode()
    named: set[int] = set()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if mark in (entry / "cmdline").read_bytes():
                named.add(int(entry.name))
            stat = (entry / "stat").read_text()
            parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    children = {pid for pid, parent in parents.items() if parent in named}
    return sorted(named | children)

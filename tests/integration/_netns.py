"""Test hosts in network namespaces, on one private switch, and partitions between them.

:func:`private_network` creates a namespace per host plus one for the switch (a
Linux bridge), joins each host to the switch with a veth pair and gives it an
address in :data:`SUBNET` (``10.231.0.0/24``). Nothing is added to the test's own
namespace: no route leads out of the private network, and the hosts reach no
address but each other's. A program runs on a host through ``ip netns exec``
(:meth:`Host.command`); the test itself reaches a host's PostgreSQL through its
Unix socket, which network namespaces do not hide.

A partition disables the host's port on the switch. The host keeps its link and
its addresses, its packets simply vanish, both ways: a TCP connection in use hangs
and retransmits, as across a real partition, instead of being reset. The hosts'
neighbours are permanent entries, so that no failed ARP lookup turns the silence
into a quick "no route to host" either. Healing enables the port again.

Namespaces are named ``fpnet-<pid>-<n>-<role>`` after the test process that made
them. They are removed at the end whatever happens (with every process still
inside), and :func:`remove_leftovers` removes those a crashed run left behind (its
pid is gone) before a new network is made. Everything needs root and iproute2's
``ip`` and ``bridge``: without them the calling test is skipped, or failed when
``FENCEPOST_REQUIRE_POSTGRES`` is set, as in CI.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

#: The private network's prefix (a /24): the switch has no address, hosts .2, .3, ...
SUBNET = "10.231.0"
#: Every namespace these tests make starts so; the rest of the name says whose it is.
PREFIX = "fpnet-"
#: A bridge port's STP states, as ``bridge link set ... state`` takes them.
PORT_DISABLED, PORT_FORWARDING = 0, 3

_networks = itertools.count(1)


@dataclass(frozen=True)
class Host:
    """One test host: a network namespace with one interface (``eth0``) on the switch."""

    role: str  #: what it is in the test, e.g. ``db`` or ``worker-a``
    namespace: str
    address: str  #: its IPv4 address in :data:`SUBNET`
    port: str  #: the switch's end of its veth pair (in the switch's namespace)

    def command(self, *argv: str) -> list[str]:
        """``argv`` as run on this host (inside its namespace)."""
        return ["ip", "netns", "exec", self.namespace, *argv]


class Network:
    """The hosts of one test and the switch between them."""

    def __init__(self, switch: str) -> None:
        self.switch = switch  #: the switch's namespace
        self.hosts: dict[str, Host] = {}
        self.namespaces: list[str] = []  #: every namespace made, switch first

    def __getitem__(self, role: str) -> Host:
        return self.hosts[role]

    def partition(self, host: Host) -> None:
        """Cut ``host`` off from every other host (its packets vanish both ways)."""
        self._set_port(host, PORT_DISABLED)

    def heal(self, host: Host) -> None:
        """Join ``host`` to the network again."""
        self._set_port(host, PORT_FORWARDING)

    def _set_port(self, host: Host, state: int) -> None:
        _run("bridge", "-n", self.switch, "link", "set", "dev", host.port, "state", str(state))

    def tcp_probe(self, source: Host, target: Host, port: int, timeout: float = 1.0) -> str:
        """Try a TCP connection from ``source`` to ``target:port``: what happened.

        ``connected``, ``refused``, ``unreachable`` or ``timeout`` (no answer at
        all within ``timeout`` seconds, as across a partition).
        """
        probe = (
            f"import socket\naddress = ({target.address!r}, {port})\n"
            "try:\n"
            f"    socket.create_connection(address, timeout={timeout}).close()\n"
            "except TimeoutError: print('timeout')\n"
            "except ConnectionRefusedError: print('refused')\n"
            "except OSError: print('unreachable')\n"
            "else: print('connected')\n"
        )
        done = subprocess.run(
            source.command(sys.executable, "-c", probe),
            capture_output=True,
            text=True,
            timeout=timeout + 30,
            check=True,
        )
        return done.stdout.strip()

    def wait_listening(self, source: Host, target: Host, port: int, timeout: float) -> bool:
        """Whether ``target:port`` takes a TCP connection from ``source`` within ``timeout`` s."""
        probe = (
            f"import socket, time\naddress = ({target.address!r}, {port})\n"
            f"deadline = time.monotonic() + {timeout}\n"
            "while time.monotonic() < deadline:\n"
            "    try:\n"
            "        socket.create_connection(address, timeout=1).close()\n"
            "    except OSError: time.sleep(0.05)\n"
            "    else: raise SystemExit(0)\n"
            "raise SystemExit(1)\n"
        )
        command = source.command(sys.executable, "-c", probe)
        return subprocess.run(command, timeout=timeout + 30, check=False).returncode == 0

    def close(self) -> None:
        """Kill whatever still runs on the hosts and delete every namespace."""
        for namespace in reversed(self.namespaces):
            _delete_namespace(namespace)
        self.namespaces.clear()


@contextlib.contextmanager
def private_network(roles: Sequence[str]) -> Iterator[Network]:
    """Hosts named by ``roles`` on one switch (addresses .2, .3, ... in that order).

    Removed at the end, whatever happens: every process still running on one of
    the hosts is killed, then the namespaces are deleted.
    """
    require_netns()
    remove_leftovers()
    tag = f"{PREFIX}{os.getpid()}-{next(_networks)}"
    network = Network(f"{tag}-switch")
    try:
        _add_namespace(network, network.switch)
        _run("ip", "-n", network.switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", network.switch, "link", "set", "br0", "up")
        for index, role in enumerate(roles):
            host = Host(role, f"{tag}-{role}", f"{SUBNET}.{index + 2}", f"port{index}")
            _add_namespace(network, host.namespace)
            _run(
                "ip", "-n", network.switch, "link", "add", host.port, "type", "veth",
                "peer", "name", "eth0", "netns", host.namespace,
            )  # fmt: skip
            _run("ip", "-n", network.switch, "link", "set", host.port, "master", "br0", "up")
            _run("ip", "-n", host.namespace, "link", "set", "lo", "up")
            _run("ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _run("ip", "-n", host.namespace, "link", "set", "eth0", "up")
            network.hosts[role] = host
        _pin_neighbours(list(network.hosts.values()))
        yield network
    finally:
        network.close()


def _pin_neighbours(hosts: Sequence[Host]) -> None:
    """Give every host a permanent neighbour entry for every other one.

    Across a partition ARP goes unanswered, the entry fails and the kernel then
    reports "no route to host" to new connections at once; a partition is silence.
    """
    macs = {}
    for host in hosts:
        shown = _run("ip", "-n", host.namespace, "-j", "link", "show", "eth0")
        macs[host.role] = json.loads(shown)[0]["address"]
    for host, other in itertools.permutations(hosts, 2):
        _run(
            "ip", "-n", host.namespace, "neigh", "replace", other.address,
            "lladdr", macs[other.role], "dev", "eth0", "nud", "permanent",
        )  # fmt: skip


def _add_namespace(network: Network, namespace: str) -> None:
    _run("ip", "netns", "add", namespace)
    network.namespaces.append(namespace)


def remove_leftovers() -> None:
    """Delete the namespaces (and kill the processes) of test runs that died before cleaning up.

    Only namespaces named after a process that no longer exists: another test
    process's network, in use, is left alone.
    """
    for namespace in _namespaces():
        owner = namespace.removeprefix(PREFIX).split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            _delete_namespace(namespace)


def _namespaces() -> list[str]:
    listed = _run("ip", "-j", "netns", "list") or "[]"
    return [n["name"] for n in json.loads(listed) if n["name"].startswith(PREFIX)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(namespace: str) -> None:
    """Kill every process inside ``namespace`` (ours: started there by a test), then delete it.

    A namespace lives on while a process is inside it, so a postmaster that would
    not stop or a worker that hung would otherwise keep its address in use.
    """
    pids = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
    ).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def require_netns() -> None:
    """Skip (locally) or fail (CI) the calling test unless it can make network namespaces."""
    missing = [tool for tool in ("ip", "bridge") if shutil.which(tool) is None]
    if missing:
        reason = f"{' and '.join(missing)} missing: apt-get install iproute2"
    elif os.geteuid() != 0:
        reason = "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    else:
        return
    if os.environ.get("FENCEPOST_REQUIRE_POSTGRES"):
        pytest.fail(f"FENCEPOST_REQUIRE_POSTGRES is set but {reason}", pytrace=False)
    pytest.skip(reason)

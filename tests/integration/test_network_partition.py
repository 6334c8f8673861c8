"""A worker host cut off by a network partition loses its leases, and only its leases.

Five test hosts in network namespaces on one switch (``_netns.py``): ``db`` runs a
private PostgreSQL on its address, ``service`` a ``fencepost serve`` for the remote
workers, and ``worker-a``, ``-b`` and ``-c`` real ``fencepost worker`` processes —
``--db`` workers talking to PostgreSQL across the switch in one test, ``--server``
workers talking to the service in the other.

The scenario (:func:`partition_worker_a`): worker-a claims every execution and
its handlers keep running; then worker-a is partitioned for two lease lengths.
Its leases expire and worker-b and worker-c take the executions over (epoch + 1)
while worker-a is cut off; they complete half of them at once and hold the other
half running. After healing, worker-a learns its leases are lost and its handlers
finish: every one of its completions is refused and audited STALE_REFUSED, both
those of finished executions and those meeting another host's live lease, and no
execution has two accepted results.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import Event, State, Transition
from fencepost.domain.machine import stale_reason
from tests.integration._audit import show
from tests.integration._netns import SUBNET, Host, Network, private_network
from tests.integration._partition_app import LEASE_TTL
from tests.integration._pg_instance import PrivatePostgres, private_postgres

#: One worker runs the module's tests in turn (make test runs pytest-xdist): they share
#: tight timing margins (a takeover within the cut), kept free of each other.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("netns")]

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
APP = "tests.integration._partition_app:app"
JOB = "gated-echo"
TOKEN = "partition-test-token-0123456789"
SERVICE_PORT = 8080
EXECUTIONS = 6
#: How long worker-a is cut off: two lease lengths, so every lease it held expires.
PARTITION = 2 * LEASE_TTL
CUT_OFF = "worker-a"
OTHERS = ("worker-b", "worker-c")


class Workers:
    """``fencepost`` processes on the test hosts, each with its own log; none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self, host: Host, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Run ``fencepost ARGS`` on ``host``; its output goes to ``<role>.log``."""
        with (self.tmp_path / f"{host.role}.log").open("wb") as log:
            proc = subprocess.Popen(
                host.command(FENCEPOST, *args),
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            )
        self.procs[host.role] = proc
        return proc

    def log(self, role: str) -> str:
        return (self.tmp_path / f"{role}.log").read_text(errors="replace")

    def records(self, role: str) -> list[dict[str, Any]]:
        """The JSON log lines of ``role`` (other lines, e.g. a traceback, are skipped)."""
        records = []
        for line in self.log(role).splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records

    def logs(self) -> str:
        return "".join(f"\n-- {role} --\n{self.log(role)}" for role in self.procs)

    def stop(self, *roles: str) -> None:
        """SIGTERM ``roles`` and require a clean exit from each."""
        for role in roles:
            self.procs[role].send_signal(signal.SIGTERM)
        for role in roles:
            assert self.procs[role].wait(30) == 0, f"{role} exited badly{self.logs()}"

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def network() -> Iterator[Network]:
    with private_network(("db", "service", CUT_OFF, *OTHERS)) as network:
        yield network


@pytest.fixture
def postgres(network: Network, tmp_path: Path) -> Iterator[PrivatePostgres]:
    db = network["db"]
    with private_postgres(
        tmp_path, host=db.address, namespace=db.namespace, clients=f"{SUBNET}.0/24"
    ) as server:
        yield server


@pytest.fixture
def workers(network: Network, tmp_path: Path) -> Iterator[Workers]:
    procs = Workers(tmp_path)
    try:
        yield procs
    finally:
        procs.close()


@pytest.fixture
def store(postgres: PrivatePostgres) -> Iterator[fencepost.Store]:
    """The test's own view of the database, through the server's Unix socket."""
    with fencepost.connect(postgres.socket_dsn) as store:
        yield store


@dataclass
class Partition:
    """What happened around the partition, on the test's wall clock (as the store's)."""

    ids: list[str]
    cut_at: datetime
    healed_at: datetime
    taken_over_after: float  #: seconds from the cut until every execution was taken over
    lost_after: float  #: seconds from the heal until worker-a knew all its leases lost


def test_a_db_worker_cut_off_from_postgresql_loses_its_leases_to_the_other_hosts(
    network: Network, postgres: PrivatePostgres, workers: Workers, store: fencepost.Store
) -> None:
    """``fencepost worker --db`` on worker-a, partitioned from the database host."""

    def start(host: Host) -> None:
        # postgres.dsn names the db host's address: this traffic crosses the switch.
        workers.start(host, "worker", APP, "--db", postgres.dsn, *worker_options(host))

    outcome = partition_worker_a(network, workers, store, start, network["db"], postgres.port)
    check_takeover(store, outcome, workers)


def test_a_remote_worker_cut_off_from_the_service_loses_its_leases_to_the_other_hosts(
    network: Network, postgres: PrivatePostgres, workers: Workers, store: fencepost.Store
) -> None:
    """``fencepost worker --server`` on worker-a, partitioned from the service host."""
    service = network["service"]
    workers.start(
        service, "serve", APP, "--db", postgres.dsn, "--host", service.address,
        "--port", str(SERVICE_PORT), "--workers", "0", "--log-format", "json",
        env={"FENCEPOST_TOKENS": f"{TOKEN}=work,submit,read"},
    )  # fmt: skip
    assert network.wait_listening(network[CUT_OFF], service, SERVICE_PORT, timeout=30), (
        f"the service did not listen within 30 s{workers.logs()}"
    )
    url = f"http://{service.address}:{SERVICE_PORT}"

    def start(host: Host) -> None:
        workers.start(
            host, "worker", APP, "--server", url, *worker_options(host),
            env={"FENCEPOST_TOKEN": TOKEN},
        )  # fmt: skip

    outcome = partition_worker_a(network, workers, store, start, service, SERVICE_PORT)
    check_takeover(store, outcome, workers)
    workers.stop("service")


def worker_options(host: Host) -> list[str]:
    # Concurrency for every execution at once: worker-a runs all of them, none buffered.
    options = ["--owner", host.role, "--concurrency", str(EXECUTIONS), "--log-format", "json"]
    return [*options, "--jobs", JOB]


def partition_worker_a(
    network: Network,
    workers: Workers,
    store: fencepost.Store,
    start: Callable[[Host], None],
    upstream: Host,
    upstream_port: int,
) -> Partition:
    """Run the scenario; ``start`` starts a worker on a host, ``upstream`` is what it talks to.

    Half the executions are completed by the other hosts during the partition; the
    takeovers of the other half keep running until worker-a's completions have been
    refused, so that those meet a live lease of another owner (the fence proper, not
    merely a finished execution).
    """
    cut_off = network[CUT_OFF]
    gate_a, gate_takeover = workers.tmp_path / "gate-a", workers.tmp_path / "gate-takeover"
    start(cut_off)
    wait_for(lambda: started(workers, CUT_OFF), 30, "worker-a to start", workers)
    half = EXECUTIONS // 2
    early = {"job": JOB, "inputs": {"gates": {"1": str(gate_a)}}}
    late = {"job": JOB, "inputs": {"gates": {"1": str(gate_a), "2": str(gate_takeover)}}}
    ids = [e.id for e in store.submit_many([early] * half + [late] * (EXECUTIONS - half))]
    done_early, held = ids[:half], ids[half:]

    def held_by_a() -> bool:
        return all(lease_of(store, i) == (CUT_OFF, 1) for i in ids)

    wait_for(held_by_a, 20, "worker-a to hold every execution", workers)
    for role in OTHERS:
        start(network[role])
    for role in OTHERS:
        wait_for(partial(started, workers, role), 30, f"{role} to start", workers)
    time.sleep(1.0)  # worker-a renews its leases at least once before the cut

    cut_at = datetime.now(UTC)
    cut = time.monotonic()
    network.partition(cut_off)
    # The cut is silence, not a refusal: a new connection gets no answer at all.
    assert network.tcp_probe(cut_off, upstream, upstream_port) == "timeout"

    def taken_over() -> bool:
        return all(store.get(i).state is State.SUCCEEDED for i in done_early) and all(
            lease_of(store, i) in {(o, 2) for o in OTHERS} for i in held
        )

    wait_for(taken_over, PARTITION - (time.monotonic() - cut), "the takeover", workers)
    taken_over_after = time.monotonic() - cut

    time.sleep(max(0.0, cut + PARTITION - time.monotonic()))
    network.heal(cut_off)
    healed_at = datetime.now(UTC)
    healed = time.monotonic()
    assert network.tcp_probe(cut_off, upstream, upstream_port) == "connected"

    # worker-a's calls that hung through the partition get their answers: its leases
    # are gone. Only then do its handlers finish, so its completions reach the store.
    def leases_lost() -> bool:
        return lost_leases(workers.records(CUT_OFF)) >= set(ids)

    wait_for(leases_lost, 30, "worker-a to learn that its leases are lost", workers)
    lost_after = time.monotonic() - healed
    gate_a.touch()

    def refused() -> bool:
        return all(any(is_refused_completion(t) for t in store.transitions(i)) for i in ids)

    wait_for(refused, 20, "worker-a's completions to be refused", workers)
    # The held takeovers were live all along: worker-a's completions met their fence.
    assert all(lease_of(store, i) in {(o, 2) for o in OTHERS} for i in held), workers.logs()
    gate_takeover.touch()
    wait_for(
        lambda: all(store.get(i).state is State.SUCCEEDED for i in held),
        20,
        "the held takeovers to complete",
        workers,
    )
    workers.stop(CUT_OFF, *OTHERS)
    return Partition(ids, cut_at, healed_at, taken_over_after, lost_after)


def check_takeover(store: fencepost.Store, outcome: Partition, workers: Workers) -> None:
    """Every execution: taken over at epoch 2 during the partition, one accepted result
    (the takeover's), worker-a's late completion refused and audited; worker-a's log
    says so too."""
    for id_ in outcome.ids:
        execution = store.get(id_)
        trail = store.transitions(id_)
        context = f"execution {id_}\naudit: {show(trail)}{workers.logs()}"
        assert execution.state is State.SUCCEEDED, context

        claims = [t for t in trail if t.event is Event.CLAIMED]
        assert [(t.epoch, t.actor) for t in claims[:1]] == [(1, CUT_OFF)], context
        # Taken over: the next lease (epoch + 1) went to another host while worker-a
        # was cut off, and was the last one.
        assert len(claims) == 2, context
        takeover = claims[1]
        assert takeover.epoch == 2, context
        assert takeover.actor in OTHERS, context
        assert outcome.cut_at < takeover.at < outcome.healed_at, context

        # Exactly one accepted result: the takeover's.
        completions = [t for t in trail if t.event is Event.COMPLETED]
        assert len(completions) == 1, context
        done = completions[0]
        assert (done.epoch, done.actor) == (2, takeover.actor), context
        assert execution.epoch == 2, context
        assert execution.result == {"owner": takeover.actor, "epoch": 2}, context

        # worker-a's late completion: refused after the heal, and audited.
        late = [t for t in trail if is_refused_completion(t)]
        assert len(late) == 1, context
        assert late[0].epoch == 1, context
        assert late[0].seq > takeover.seq, context
        assert late[0].at > outcome.healed_at, context

    # worker-a's own account: each completion refused, the lease lost.
    records = workers.records(CUT_OFF)
    refusals = {
        r["execution_id"]
        for r in records
        if "complete refused, the lease was lost" in r["message"] and r.get("epoch") == 1
    }
    assert refusals == set(outcome.ids), workers.log(CUT_OFF)
    print(
        f"\ntakeover {outcome.taken_over_after:.1f} s after the cut; worker-a knew its "
        f"leases lost {outcome.lost_after:.1f} s after the heal\n"
        f"audit of one: {show(store.transitions(outcome.ids[-1]))}\n"
        f"-- {CUT_OFF} log --\n"
        + "\n".join(f"{r['ts']} {r['level']} {r['message']}" for r in records)
    )


def started(workers: Workers, role: str) -> bool:
    return f'"worker {role} started' in workers.log(role)


def lease_of(store: fencepost.Store, execution_id: str) -> tuple[str | None, int] | None:
    """Who holds ``execution_id`` at which epoch, if it is RUNNING."""
    execution = store.get(execution_id)
    if execution.state is not State.RUNNING:
        return None
    return execution.lease_owner, execution.epoch


def lost_leases(records: list[dict[str, Any]]) -> set[str]:
    """The executions whose lease worker-a's log says it lost (a refused heartbeat)."""
    return {r["execution_id"] for r in records if "heartbeat refused" in r["message"]}


def is_refused_completion(t: Transition) -> bool:
    return (
        t.event is Event.STALE_REFUSED
        and t.actor == CUT_OFF
        and t.reason == stale_reason("complete")
    )


def wait_for(predicate: Callable[[], object], timeout: float, what: str, workers: Workers) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.1f} s waiting for {what}{workers.logs()}")
        for role, proc in workers.procs.items():
            assert proc.poll() is None, f"{role} exited {proc.returncode}{workers.logs()}"
        time.sleep(0.05)

"""fencepost on a highly available PostgreSQL: the primary moves, nothing is lost.

A Patroni cluster of three servers in synchronous mode (``_patroni``, shared by the
tests of this module) serves one schema through a multi-host URL with
``target_session_attrs=read-write``, so that every connection fencepost opens goes
to whichever server is the primary. Three ``fencepost worker`` processes (the
README's command) drain executions that a submitter keeps adding at a steady pace,
while the primary is lost: its postmaster SIGKILLed twice (Patroni promotes the
synchronous standby), or switched over with ``patronictl``. Nothing in fencepost
is told: its pools, its listening connections and its workers find the new primary
by themselves.

Checked afterwards, from the new primary:

* every id a submit returned exists (the submitter retries a batch that raised
  ``StoreUnavailable`` with the same idempotency keys; only what was returned
  counts as acknowledged);
* every execution SUCCEEDED, through exactly one accepted completion in its audit
  trail, whose result names that completion's lease (no execution has two accepted
  results, whatever else the audit holds: expired leases, refused completions);
* the worst gap between consecutive accepted completions, printed, stays within
  ``WORST_GAP`` seconds;
* what else holds a connection found the new primary too: each worker's LISTEN
  session (its wake-ups) is on it; a ``Store.wait`` begun before the first
  disruption returns its execution, its watcher having listened again after each
  disruption; and a schedule added after the last disruption is materialized (by
  the worker started ``--with-scheduler``) and run.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

import fencepost
from fencepost import Event, State, StoreUnavailable
from tests.integration import _audit, _patroni, _pg

#: One worker runs the module's tests in turn (make test runs pytest-xdist): they share
#: one cluster.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("patroni")]

ROOT = Path(__file__).resolve().parents[2]
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
WORKERS = 3
SUBMIT_BATCH = 100
#: The target for the longest pause in completions while the primary moves.
WORST_GAP = 15.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_patroni.PatroniCluster]:
    with _patroni.patroni_cluster(tmp_path_factory.mktemp("patroni")) as running:
        yield running


@dataclass
class Submitter:
    """Submits ``total`` executions in batches at a steady pace, from a thread; a batch
    that raised ``StoreUnavailable`` is sent again with the same idempotency keys."""

    url: str
    total: int
    seconds: float
    acknowledged: set[str] = field(default_factory=set)
    retries: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="submitter", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the submitter did not finish within {timeout} s"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            with fencepost.connect(self.url) as store:
                began = time.monotonic()
                for start in range(0, self.total, SUBMIT_BATCH):
                    # Steady pace: batch k leaves at k/batches of the submitting time.
                    time.sleep(
                        max(0.0, began + self.seconds * start / self.total - time.monotonic())
                    )
                    batch = [
                        {"job": "lease-echo", "idempotency_key": f"load-{n}", "max_attempts": 50}
                        for n in range(start, min(self.total, start + SUBMIT_BATCH))
                    ]
                    self.acknowledged.update(e.id for e in self._submit(store, batch))
        except BaseException as exc:
            self.error = exc

    def _submit(
        self, store: fencepost.Store, batch: list[dict[str, object]]
    ) -> list[fencepost.Execution]:
        deadline = time.monotonic() + 60
        while True:
            try:
                return store.submit_many(batch)
            except StoreUnavailable:
                if time.monotonic() > deadline:
                    raise
                self.retries += 1
                time.sleep(0.2)


@dataclass
class Waiter:
    """Waits, from a thread and through its own store, for one execution due at ``due_in``
    seconds: a wait that lasts through every disruption."""

    url: str
    due_in: float
    result: fencepost.Execution | None = None
    listened: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.store = fencepost.connect(self.url)
        self.id = self.store.submit("lease-echo", delay=self.due_in, max_attempts=50).id
        self.thread = threading.Thread(target=self._run, name="waiter", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self.store.wait(self.id, timeout=300)
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float) -> fencepost.Execution:
        self.thread.join(timeout)
        self.listened = self.store._watcher.connections_opened  # type: ignore[attr-defined]
        self.store.close()
        assert not self.thread.is_alive(), f"Store.wait did not return within {timeout} s"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


def listening_sessions(dsn: str) -> dict[str, int]:
    """LISTEN sessions on the primary, counted by application name."""
    with _pg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity"
            " WHERE query LIKE '%LISTEN %' AND pid <> pg_backend_pid() GROUP BY 1"
        ).fetchall()
    return dict(rows)


def succeeded(schema: str, dsn: str) -> int:
    """How many executions SUCCEEDED; -1 while no primary answers."""
    try:
        return _pg.count_succeeded(schema, dsn=dsn)
    except psycopg.Error:
        return -1


def drain_under_disruption(
    cluster: _patroni.PatroniCluster,
    tmp_path: Path,
    *,
    executions: int,
    submit_seconds: float,
    disruptions: list[tuple[float, Callable[[], None]]],
    deadline: float,
) -> None:
    """Drain ``executions`` submitted over ``submit_seconds`` with three worker
    processes, running each disruption at its second since the start; check the
    outcome (see the module's docstring)."""
    dsn = cluster.dsn
    with _pg.fresh_schema(dsn) as schema:
        url = _pg.url(schema, dsn=dsn)
        fencepost.connect(url).close()  # creates the schema's tables
        where = f"(schema {schema}, logs in {tmp_path})"
        submitter = Submitter(url, executions, submit_seconds)
        # Due once every disruption has been; waited for from the start.
        waiter = Waiter(url, due_in=disruptions[-1][0] + 5)
        workers: list[subprocess.Popen[bytes]] = []
        began = time.monotonic()
        try:
            for n in range(WORKERS):
                # Named sessions, to find each worker's LISTEN session on the primary.
                named = f"{url}&application_name=worker-{n}"
                scheduler = ["--with-scheduler"] if n == 0 else []
                with (tmp_path / f"worker-{n}.log").open("wb") as log:
                    workers.append(
                        subprocess.Popen(
                            [
                                *(FENCEPOST, "worker", "tests.integration._worker_app:app"),
                                *("--jobs", "lease-echo", "--db", named, "--owner", f"worker-{n}"),
                                *scheduler,
                            ],
                            cwd=ROOT,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                        )
                    )
            submitter.start()
            for at, disrupt in disruptions:
                time.sleep(max(0.0, began + at - time.monotonic()))
                disrupt()
            submitter.join(deadline)
            with fencepost.connect(url) as store:
                # A schedule of three slots, added once every disruption has been.
                start = datetime.now(UTC) + timedelta(seconds=3)  # every slot in the future
                schedule = store.add_schedule(
                    "lease-echo", every=1, start_at=start, end_at=start + timedelta(seconds=2.5)
                )
            # The submits, the waiter's execution and the schedule's three.
            total = executions + 1 + 3
            end = began + deadline
            while (done := succeeded(schema, dsn)) < total:
                assert all(w.poll() is None for w in workers), f"a worker exited {where}"
                assert time.monotonic() < end, f"{done} of {total} SUCCEEDED {where}"
                time.sleep(0.5)
            took = time.monotonic() - began
            waited = waiter.join(30)
            listening = listening_sessions(dsn)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()

        loaded = _pg.load_executions(schema, dsn=dsn)
        audit = _pg.load_audit(schema, dsn=dsn)

    lost = submitter.acknowledged - loaded.keys()
    assert not lost, f"{len(lost)} acknowledged submits lost, e.g. {sorted(lost)[:3]} {where}"
    assert len(loaded) == total, f"{len(loaded)} executions, not {total} {where}"
    states = Counter(e.state for e in loaded.values())
    assert states == {State.SUCCEEDED: total}, f"{states} {where}"
    # Each worker listens for wake-ups on the primary that is now.
    assert all(listening.get(f"worker-{n}") == 1 for n in range(WORKERS)), (
        f"LISTEN sessions on the primary: {listening} {where}"
    )
    assert waited.state == State.SUCCEEDED, f"{waited} {where}"
    assert waiter.listened >= 1 + len(disruptions), (
        f"the waiting store listened {waiter.listened} times over"
        f" {len(disruptions)} disruptions {where}"
    )
    scheduled = [e for e in loaded.values() if e.schedule_id == schedule.id]
    assert len(scheduled) == 3, f"{len(scheduled)} of the schedule's 3 slots {where}"
    completions = []
    for id_, execution in loaded.items():
        accepted = [t for t in audit[id_] if t.event == Event.COMPLETED]
        assert len(accepted) == 1, (
            f"{len(accepted)} accepted results of {id_} {where}: {_audit.show(audit[id_])}"
        )
        assert execution.result == {"owner": accepted[0].actor, "epoch": accepted[0].epoch}, (
            f"{id_}'s result is not its accepted completion's {where}"
        )
        completions.append(accepted[0].at)
    completions.sort()
    gap = max(((b - a).total_seconds(), a) for a, b in itertools.pairwise(completions))
    events = Counter(t.event for trail in audit.values() for t in trail)
    print(
        f"\n{executions} executions in {took:.1f} s; worst gap in completions {gap[0]:.2f} s"
        f" (from {gap[1].time()}); submit retries {submitter.retries}; audit {dict(events)}"
    )
    assert gap[0] <= WORST_GAP, f"completions paused {gap[0]:.1f} s from {gap[1]} {where}"


def kill_leader(cluster: _patroni.PatroniCluster) -> Callable[[], None]:
    """A disruption: SIGKILL the leader's postmaster, then wait for the next leader to
    be a writable primary with a synchronous standby (so a later kill fails over too)."""

    def disrupt() -> None:
        leader = cluster.wait_for_leader()
        cluster.kill_postmaster(leader)
        print(f"\nkilled {leader.name}'s postmaster at {time.strftime('%H:%M:%S')}")
        print(f"new leader {cluster.wait_for_leader(not_=leader.name).name}")

    return disrupt


@pytest.mark.timeout(300)
def test_killing_the_primary_twice_under_load_loses_no_submit_and_accepts_one_result_each(
    cluster: _patroni.PatroniCluster, tmp_path: Path
) -> None:
    disrupt = kill_leader(cluster)
    drain_under_disruption(
        cluster,
        tmp_path,
        executions=20_000,
        submit_seconds=40,
        disruptions=[(10, disrupt), (25, disrupt)],
        deadline=150,
    )


@pytest.mark.timeout(200)
def test_a_switchover_under_load_loses_no_submit_and_accepts_one_result_each(
    cluster: _patroni.PatroniCluster, tmp_path: Path
) -> None:
    def disrupt() -> None:
        leader = cluster.wait_for_leader(standbys=2)
        cluster.switchover(leader)
        print(f"\nswitched over from {leader.name} at {time.strftime('%H:%M:%S')}")
        print(f"new leader {cluster.wait_for_leader(not_=leader.name).name}")

    drain_under_disruption(
        cluster,
        tmp_path,
        executions=5_000,
        submit_seconds=15,
        disruptions=[(5, disrupt)],
        deadline=90,
    )

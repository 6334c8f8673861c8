"""The claim buffer: leases a worker holds ahead of its free handlers.

Its rules (worker/prefetch.py): the buffer is bounded, sized by the rate handlers finish
(so a worker of slow jobs holds nothing ahead), its leases are renewed like
running ones, handed back when they wait too long, and released at shutdown;
a second worker gets work while the first one's handlers are all busy.
In process, on the memory store with the real clock; the signal path is in
tests/integration/test_worker_prefetch_processes.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from fencepost.app import App
from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Lease
from fencepost.domain.states import AttemptOutcome, State
from fencepost.jobs.context import Context
from fencepost.store.base import Store
from fencepost.worker.prefetch import (
    DEFAULT_PREFETCH,
    HORIZON,
    MAX_CLAIM,
    ClaimBuffer,
    FinishRate,
)
from fencepost.worker.runtime import Worker, WorkerOptions
from tests.unit.test_worker import running, wait_until


class Ledger:
    """A store in front of the real one that counts the leases its worker holds.

    A lease is held from the claim that returned it until an outcome for it
    (complete, fail, release, abort) was accepted. ``ahead`` records, per claim,
    its ``limit`` plus the held leases whose handlers (which add to ``started``)
    have not started.
    """

    def __init__(self, store: Store, started: set[str]) -> None:
        self._store = store
        self._started = started
        self.held: set[str] = set()
        self.ahead: list[int] = []
        self.limits: list[int] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def claim(self, owner: str, *, limit: int = 1, **kwargs: Any) -> list[Lease]:
        with self._lock:
            self.limits.append(limit)
            self.ahead.append(limit + len(self.held - self._started))
        leases = self._store.claim(owner, limit=limit, **kwargs)
        with self._lock:
            self.held.update(lease.execution_id for lease in leases)
        return leases

    def complete_many(self, outcomes: Any) -> list[Any]:
        outcomes = list(outcomes)
        verdicts = self._store.complete_many(outcomes)
        self._done(lease for (lease, _), v in zip(outcomes, verdicts, strict=True) if v is None)
        return verdicts

    def fail(self, lease: Lease, *args: Any, **kwargs: Any) -> Any:
        return self._after(lease, self._store.fail(lease, *args, **kwargs))

    def release(self, lease: Lease, **kwargs: Any) -> Any:
        return self._after(lease, self._store.release(lease, **kwargs))

    def abort(self, lease: Lease, **kwargs: Any) -> Any:
        return self._after(lease, self._store.abort(lease, **kwargs))

    def _after(self, lease: Lease, value: Any) -> Any:
        self._done([lease])
        return value

    def _done(self, leases: Any) -> None:
        with self._lock:
            self.held.difference_update(lease.execution_id for lease in leases)


@pytest.fixture
def app() -> Iterator[App]:
    app = App("memory://")
    yield app
    app.close()


def buffered(store: Store, ids: list[str], owner: str, started: set[str]) -> list[str]:
    """The executions leased to ``owner`` whose handlers have not started."""
    return [
        i
        for i in ids
        if i not in started
        and (e := store.get(i)).state is State.RUNNING
        and e.lease_owner == owner
    ]


@dataclass
class Stranded:
    """A run of quick executions, then one that holds its handler, then a tail.

    Claim order is priority first: the quick ones raise the worker's finish rate,
    so its claims reach ahead; the blocker then holds the worker's only handler
    until ``gate`` opens, and the tail it claimed ahead waits in its buffer.
    ``ran`` lists every handler start, in order.
    """

    gate: threading.Event
    ran: list[str]
    blocker: str
    tail: list[str]


def stranded(app: App, *, lease_ttl: float, tail: int) -> Stranded:
    gate = threading.Event()
    ran: list[str] = []

    @app.job("step", lease_ttl=lease_ttl)
    def step(ctx: Context, block: bool = False) -> None:
        ran.append(ctx.execution_id)
        if block:
            gate.wait(20)

    app.store.submit_many([{"job": "step", "priority": 2} for _ in range(300)])
    blocker = app.store.submit("step", inputs={"block": True}, priority=1).id
    ids = [e.id for e in app.store.submit_many([{"job": "step"} for _ in range(tail)])]
    return Stranded(gate, ran, blocker, ids)


def claims_ahead(app: App, *, concurrency: int, prefetch: int) -> list[int]:
    """Drain 600 quick executions; per claim, its limit plus the leases not yet started.

    No claim may bring the leases waiting for a handler beyond ``concurrency`` (the
    free handlers' share at most) plus ``prefetch``.
    """
    started: set[str] = set()

    @app.job("tick")
    def tick(ctx: Context) -> None:
        started.add(ctx.execution_id)
        time.sleep(0.0005)

    ids = [e.id for e in app.store.submit_many([{"job": "tick"} for _ in range(600)])]
    ledger = Ledger(app.store, started)
    worker = Worker(ledger, app.registry, WorkerOptions(concurrency=concurrency, prefetch=prefetch))
    with running(worker):
        wait_until(lambda: worker.counters.succeeded == 600, timeout=30)
    assert all(app.store.get(i).state is State.SUCCEEDED for i in ids)
    assert not ledger.held  # every lease it took came back with an outcome
    return ledger.ahead


def test_a_claim_takes_more_than_the_free_handlers_yet_never_beyond_the_bound(
    app: App,
) -> None:
    ahead = claims_ahead(app, concurrency=2, prefetch=5)
    assert max(ahead) > 2, "no claim reached beyond the free handlers"
    assert max(ahead) <= 2 + 5


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"prefetch": -1}, "prefetch"),
        ({"prefetch": True}, "prefetch"),
        ({"prefetch": "8"}, "prefetch"),
        ({"prefetch": 2.5}, "prefetch"),
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": -(10**30)}, "concurrency"),
    ],
)
def test_bad_sizes_are_refused_naming_the_field(
    app: App, options: dict[str, Any], named: str
) -> None:
    @app.job("tick")
    def tick() -> None:
        return None

    with pytest.raises(ValidationError) as refused:
        Worker(app.store, app.registry, WorkerOptions(**options))
    assert refused.value.field == named


def test_a_huge_prefetch_still_claims_at_most_the_protocol_s_batch(app: App) -> None:
    started: set[str] = set()

    @app.job("tick")
    def tick(ctx: Context) -> None:
        started.add(ctx.execution_id)

    app.store.submit_many([{"job": "tick"} for _ in range(3000)])
    ledger = Ledger(app.store, started)
    worker = Worker(ledger, app.registry, WorkerOptions(prefetch=10**30))
    with running(worker):
        wait_until(lambda: worker.counters.succeeded == 3000, timeout=60)
    assert max(ledger.limits) <= MAX_CLAIM
    assert not ledger.held


def test_prefetch_zero_claims_only_for_free_handlers(app: App) -> None:
    ahead = claims_ahead(app, concurrency=3, prefetch=0)
    assert max(ahead) <= 3


def test_buffered_leases_are_renewed_handed_back_and_a_second_worker_runs_them(
    app: App,
) -> None:
    """One handler, busy: what it buffered is renewed, then goes back for worker B.

    Lease 2 s: beats every 2/3 s, and a buffered lease that has not started
    within 1 s (half its lease) is handed back.
    """
    case = stranded(app, lease_ttl=2, tail=10)
    first = app.worker(concurrency=1, prefetch=4, owner="worker-a")
    second = app.worker(concurrency=1, owner="worker-b")
    try:
        with running(first):
            wait_until(lambda: case.blocker in case.ran, timeout=20)
            waiting = wait_until(lambda: buffered(app.store, case.tail, "worker-a", set(case.ran)))
            assert 1 <= len(waiting) <= 4
            held = waiting[0]
            claimed_until = app.store.get(held).lease_until
            assert claimed_until is not None
            # Renewed while it waits (a heartbeat a third of the lease after the claim) ...
            wait_until(
                lambda: (
                    (until := app.store.get(held).lease_until) is not None and until > claimed_until
                ),
                message="a buffered lease renewed",
            )
            assert held not in case.ran
            # ... and handed back unstarted once it has waited half its lease.
            wait_until(lambda: app.store.get(held).state is State.SCHEDULED, timeout=5)
            assert [a.outcome for a in app.store.attempts(held)] == [AttemptOutcome.ABANDONED]
            assert app.store.get(held).attempt == 0
            assert app.store.get(case.blocker).state is State.RUNNING  # still busy
            with running(second):
                wait_until(
                    lambda: all(app.store.get(i).state is State.SUCCEEDED for i in case.tail),
                    timeout=20,
                    message="worker B ran the tail while A's only handler was busy",
                )
            tail_owners = {i: app.store.get(i).lease_owner for i in case.tail}
            case.gate.set()
            wait_until(lambda: app.store.get(case.blocker).state is State.SUCCEEDED)
    finally:
        case.gate.set()
    assert all(case.ran.count(i) == 1 for i in case.tail)  # each ran once: on worker B
    assert all(a.owner == "worker-b" for i in case.tail for a in app.store.attempts(i)[-1:])
    assert tail_owners == dict.fromkeys(case.tail)  # finished, no lease left


def test_a_worker_of_slow_jobs_holds_nothing_ahead(app: App) -> None:
    """At a low start rate the lead is zero: waiting work stays in the store."""
    gate = threading.Event()

    @app.job("slow")
    def slow(ctx: Context) -> None:
        gate.wait(20)

    ids = [e.id for e in app.store.submit_many([{"job": "slow"} for _ in range(6)])]
    worker = app.worker(concurrency=2, owner="worker-a")
    try:
        with running(worker):
            wait_until(lambda: len(worker.running) == 2)
            time.sleep(0.5)  # many claim passes: none may take more
            states = [app.store.get(i).state for i in ids]
            assert states.count(State.RUNNING) == 2
            assert states.count(State.SCHEDULED) == 4
            gate.set()
            wait_until(lambda: worker.counters.succeeded == 6)
    finally:
        gate.set()


def test_a_cancel_for_a_buffered_execution_aborts_it_without_running_it(app: App) -> None:
    case = stranded(app, lease_ttl=30, tail=5)
    worker = app.worker(concurrency=1, prefetch=4, owner="worker-a")
    try:
        with running(worker):
            wait_until(lambda: case.blocker in case.ran, timeout=20)
            [victim, *_] = wait_until(
                lambda: buffered(app.store, case.tail, "worker-a", set(case.ran))
            )
            app.store.request(victim, "cancel", actor="operator")
            wait_until(lambda: app.store.get(victim).state is State.CANCELLED)
            assert victim not in case.ran
            case.gate.set()
            wait_until(lambda: app.store.get(case.blocker).state is State.SUCCEEDED)
    finally:
        case.gate.set()


def test_stop_releases_buffered_leases_at_once_while_running_ones_get_the_grace(
    app: App,
) -> None:
    case = stranded(app, lease_ttl=30, tail=5)
    worker = app.worker(concurrency=1, prefetch=4, owner="worker-a", grace=10.0)
    worker.start()
    try:
        wait_until(lambda: case.blocker in case.ran, timeout=20)
        waiting = wait_until(lambda: buffered(app.store, case.tail, "worker-a", set(case.ran)))
        worker.stop()  # graceful: the blocker may finish within the grace
        for eid in waiting:
            wait_until(lambda eid=eid: app.store.get(eid).state is State.SCHEDULED, timeout=2)
            assert [a.outcome for a in app.store.attempts(eid)] == [AttemptOutcome.ABANDONED]
            assert app.store.get(eid).attempt == 0
        assert app.store.get(case.blocker).state is State.RUNNING  # still in its grace
        case.gate.set()
        assert worker.join(10)
    finally:
        case.gate.set()
        worker.stop(immediate=True)
    assert app.store.get(case.blocker).state is State.SUCCEEDED
    assert not set(waiting) & set(case.ran)


class _Waiting:
    def __init__(self, claimed_at: float, is_async: bool = False) -> None:
        self.is_async = is_async
        self.claimed_at = claimed_at
        self.started_at: float | None = None
        self.holds_slot = False


def test_the_lead_follows_the_finish_rate_within_its_bound() -> None:
    rate = FinishRate(bound=DEFAULT_PREFETCH)
    rate.observe(0.0, 0)
    assert rate.lead(30.0) == 0  # nothing measured yet: claim for free handlers only
    rate.observe(1.0, 100)  # 100 finished/s
    assert rate.lead(30.0) == int(rate.per_second * HORIZON) > 0
    for second in range(2, 10):
        rate.observe(float(second), 100 + 100_000 * (second - 1))
    assert rate.lead(30.0) == DEFAULT_PREFETCH  # bounded
    assert (
        rate.lead(0.02) == int(rate.per_second * 0.02 * 0.5 / 8) < DEFAULT_PREFETCH
    )  # short lease
    for second in range(10, 30):
        rate.observe(float(second), 100 + 100_000 * 8)  # none finishes any more
    assert rate.lead(30.0) == 0


def test_the_buffer_starts_at_most_its_slots_and_hands_back_the_old() -> None:
    clock = [0.0]
    buffer: ClaimBuffer[_Waiting] = ClaimBuffer(2, lambda: clock[0])
    runs = [_Waiting(claimed_at=float(i)) for i in range(4)]
    buffer.add(runs)
    first, second = buffer.take(), buffer.take()
    assert (first, second) == (runs[0], runs[1])
    assert buffer.busy == 2
    assert len(buffer) == 2
    assert first is not None
    assert first.started_at == 0.0
    assert first.holds_slot
    taker: list[_Waiting | None] = []
    thread = threading.Thread(target=lambda: taker.append(buffer.take()))
    thread.start()
    thread.join(0.2)
    assert thread.is_alive(), "a third handler started with both slots taken"
    buffer.free(first)
    buffer.free(first)  # idempotent
    thread.join(2)
    assert taker == [runs[2]]
    assert buffer.busy == 2
    assert buffer.stale(10.0, lambda r: 5.0) == [runs[3]]  # waited 7 s > 5 s
    assert len(buffer) == 0
    buffer.close()
    assert buffer.take() is None

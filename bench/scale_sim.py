"""A simulation of fencepost at scale: where each stage saturates as load grows.

Run by hand (plain Python, a few seconds; no database)::

    .venv/bin/python bench/scale_sim.py            # every table of the scale model
    .venv/bin/python bench/scale_sim.py --pg-scale 2 --handler-ms 50

It measures nothing itself. Its inputs are the single-node figures of
docs/performance.md, each with the command that measured it (:data:`MEASURED`), and it
extrapolates from them to the reference workloads: 1,000,000 hourly schedules (278 due/s
on average, peaks of 10x and 100x at the top of the hour) and 100,000 due/s over 500
million future executions.

The model, per PostgreSQL cluster, stepped every ``dt`` seconds (a fluid model:
executions are counts, not objects, so an hour at 100,000/s costs no more than at 1/s):

* **Inserts.** An execution is inserted ``lookahead`` seconds before it is due (a
  materializer stores occurrences a lookahead ahead; a submitter is assumed to submit at
  least that early). Inserting is limited by the materializers' rate and costs the
  database ``1 / pg_submit`` seconds each.
* **Claims.** An inserted execution whose due time has passed is claimable, oldest first
  (the claim order). Claiming and completing it costs the database ``1 / pg_claim_complete``
  seconds and a worker's share of its capacity: ``min(worker, concurrency / handler)``
  jobs/s per worker process.
* **The database is one budget.** Each step it has ``dt x pg_scale`` seconds of work to
  give; when inserts and claims together want more, it is split max-min fairly (each
  gets up to half, and what one leaves the other may use), as a database shares its
  time among busy clients. Shard-ownership renewals are taken first.
* **Shards.** ``shards`` fixed logical shards are dealt round-robin over ``clusters``;
  a cluster carries the load of the shards it holds, so the busiest one holds
  ``ceil(shards / clusters) / shards`` of it. Each cluster is simulated on its own (there
  is no cross-cluster work in this design), and the system's figures are their sum.

What it reports per run: each stage's capacity and how busy it was at the peak, the
first stage to saturate (the bottleneck), the claim rate reached, and the claim lateness
(claimed minus due) as a share within the 10 s SLO, p99 and the maximum. Whatever is
still waiting when the run ends is counted with the lateness it has so far (a lower
bound), so an overloaded run never looks better than it is.

What it does not model (docs/explanation/scale.md says what is planned for each):
contention among many claimers on one index (measured here only up to two workers), the
cost of a table of hundreds of millions of rows (measured up to 5,000,000 finished rows:
-8.6%), network latency between workers and a database on another machine, and
failovers.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace

#: The claim SLO: 99% of due executions claimed within this many seconds of due_at.
SLO_SECONDS = 10.0
SLO_SHARE = 0.99


@dataclass(frozen=True)
class Figure:
    """One measured figure: its value, what it is, and the command that measured it."""

    value: float
    what: str
    source: str


#: The single-node figures this simulation extrapolates from (docs/performance.md;
#: source 3dba146 on a 2-core machine where PostgreSQL shares the cores with its clients).
MEASURED = {
    "pg_submit": Figure(
        26_234,
        "executions/s inserted by submit_many (batches of 1,000), one PostgreSQL",
        "docs/performance.md > PostgreSQL: "
        ".venv/bin/python bench/store_throughput.py --db postgresql://…",
    ),
    "pg_claim_complete": Figure(
        13_560,
        "executions/s claimed and completed at batch 256, one PostgreSQL",
        "docs/performance.md > PostgreSQL: "
        ".venv/bin/python bench/store_throughput.py --db postgresql://…",
    ),
    "worker": Figure(
        10_497,
        "jobs/s of one `fencepost worker` process at its defaults, no-op handler (W1)",
        "docs/performance.md > At the defaults: make bench-peers",
    ),
    "materializer": Figure(
        4_022,
        "schedules/s materialized by one process (1,000,000 hourly schedules in 248.6 s; "
        "SQLite, the only store this was measured on)",
        "docs/performance.md > Schedules: .venv/bin/python bench/schedules_scale.py",
    ),
    "bytes_per_execution": Figure(
        860,
        "bytes per finished execution in PostgreSQL with its payload, audit rows and "
        "indexes (5,000,000 = 4.3 GB)",
        "docs/performance.md > PostgreSQL: the history of bench/drain_conditions.py --db …",
    ),
}


@dataclass(frozen=True)
class Capacities:
    """Per-node rates: one PostgreSQL, one worker process, one materializer."""

    pg_submit: float = MEASURED["pg_submit"].value
    pg_claim_complete: float = MEASURED["pg_claim_complete"].value
    worker: float = MEASURED["worker"].value
    materializer: float = MEASURED["materializer"].value
    #: A database this many times the measured one (an estimate: 1 is what was measured).
    pg_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("pg_submit", "pg_claim_complete", "worker", "materializer", "pg_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class Topology:
    """How many clusters, logical shards and processes carry the load."""

    name: str
    clusters: int = 1
    #: Fixed logical shards dealt over the clusters (1: no sharding).
    shards: int = 1
    #: Worker processes per cluster; None: as many as the busiest cluster's peak needs.
    workers: int | None = None
    concurrency: int = 8
    #: Seconds a handler runs (0: a no-op, the measured figure's handler).
    handler_seconds: float = 0.0
    #: Materializer (or submitter) processes per cluster; None: as many as the peak needs.
    materializers: int | None = None
    #: Shard-ownership lease length; owners renew every third of it.
    shard_ttl: float = 30.0

    def __post_init__(self) -> None:
        if self.clusters < 1 or self.shards < 1:
            raise ValueError("clusters and shards must be >= 1")
        if self.materializers is not None and self.materializers < 1:
            raise ValueError("materializers must be >= 1")
        if self.shards < self.clusters:
            raise ValueError(f"{self.shards} shards cannot cover {self.clusters} clusters")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.concurrency < 1 or self.handler_seconds < 0 or self.shard_ttl <= 0:
            raise ValueError("concurrency >= 1, handler_seconds >= 0, shard_ttl > 0")

    def shares(self) -> list[tuple[float, int]]:
        """``(share of the load, clusters with that share)``, busiest first."""
        low, extra = divmod(self.shards, self.clusters)
        classes = [((low + 1) / self.shards, extra), (low / self.shards, self.clusters - extra)]
        return [(share, n) for share, n in classes if n > 0]

    def worker_rate(self, capacities: Capacities) -> float:
        """Jobs/s one worker process sustains: the measured rate, or its handlers' limit."""
        if self.handler_seconds == 0:
            return capacities.worker
        return min(capacities.worker, self.concurrency / self.handler_seconds)


@dataclass(frozen=True)
class Workload:
    """What falls due: ``rate`` per second on average, with a peak at each period's start."""

    rate: float
    #: The rate during the peak, as a multiple of ``rate``.
    peak: float = 1.0
    peak_seconds: float = 10.0
    period: float = 3600.0
    #: Seconds before its due time that an execution is inserted.
    lookahead: float = 60.0

    def __post_init__(self) -> None:
        if self.rate < 0 or self.peak < 1 or self.peak_seconds <= 0 or self.lookahead < 0:
            raise ValueError("rate >= 0, peak >= 1, peak_seconds > 0, lookahead >= 0")
        if self.peak_seconds > self.period:
            raise ValueError("peak_seconds must fit in the period")
        if self.peak * self.peak_seconds > self.period:
            raise ValueError(
                f"a {self.peak}x peak of {self.peak_seconds} s holds more than the "
                f"period's {self.period} s of load"
            )

    @property
    def peak_rate(self) -> float:
        """Due executions per second during the peak."""
        return self.rate * self.peak

    def rate_at(self, t: float) -> float:
        """Due executions per second at time ``t`` (the period's total is ``rate x period``)."""
        if self.peak == 1:
            return self.rate
        if t % self.period < self.peak_seconds:
            return self.peak_rate
        rest = self.rate * (self.period - self.peak * self.peak_seconds)
        return rest / (self.period - self.peak_seconds)


@dataclass(frozen=True)
class Result:
    """What one run of one topology under one workload showed."""

    topology: Topology
    workload: Workload
    workers: int  #: worker processes per cluster
    materializers: int  #: materializer (or submitter) processes per cluster
    #: Capacity of each stage for the system, executions/s (the database: claims alone).
    capacity: dict[str, float]
    #: How busy each stage was at its busiest second, 0..1, in the busiest cluster.
    busy: dict[str, float]
    bottleneck: str
    offered_peak: float  #: due executions per second at the peak, whole system
    claimed_peak: float  #: the most claims in one second, whole system
    due: float  #: executions that fell due during the run
    claimed: float
    within_slo: float  #: share of the due claimed within SLO_SECONDS (0..1)
    p50: float
    p99: float
    max_lateness: float
    backlog_end: float  #: due and not yet claimed when the run ended, whole system

    @property
    def slo_met(self) -> bool:
        """99% claimed within 10 s."""
        return self.within_slo >= SLO_SHARE


def _quantile(lateness: list[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile of (lateness, count) pairs."""
    total = sum(n for _, n in lateness)
    if total == 0:
        return 0.0
    seen = 0.0
    for late, n in sorted(lateness):
        seen += n
        if seen >= q * total - 1e-9:
            return late
    return max(late for late, _ in lateness)


@dataclass
class _ClusterRun:
    """One cluster's queues and counters during a run."""

    lateness: list[tuple[float, float]]
    claims_per_second: dict[int, float]
    busy: dict[str, float]
    due: float = 0.0
    claimed: float = 0.0
    backlog: float = 0.0


def _run_cluster(
    capacities: Capacities,
    topology: Topology,
    workload: Workload,
    share: float,
    workers: int,
    materializers: int,
    seconds: float,
    dt: float,
) -> _ClusterRun:
    """Step one cluster carrying ``share`` of the load for ``seconds``."""
    worker_capacity = workers * topology.worker_rate(capacities)
    insert_capacity = materializers * capacities.materializer
    shards_here = math.ceil(share * topology.shards - 1e-9)
    # Owners renew each shard's lease every third of its ttl; a renewal is a fenced
    # update, costed here like one claim+complete (an estimate: not measured).
    renewals = shards_here / (topology.shard_ttl / 3) if topology.shards > 1 else 0.0
    renewal_cost = renewals / capacities.pg_claim_complete
    # Queues of [due step, count], in due order (due times are step numbers, so that
    # comparing them is exact).
    to_insert: deque[list[float]] = deque()
    inserted: deque[list[float]] = deque()  # inserted, not yet due
    claimable: deque[list[float]] = deque()  # due and inserted, claim order
    run = _ClusterRun(
        lateness=[],
        claims_per_second={},
        busy={"database": 0.0, "workers": 0.0, "materializers": 0.0},
    )
    steps = round(seconds / dt)
    per_second = max(1, round(1 / dt))
    lead = round(workload.lookahead / dt)
    # Start `lookahead` early so that the first due executions were inserted ahead.
    for step in range(-lead, steps):
        # Inserts go on for what falls due after the run ends: that work costs the
        # database during the run like any other.
        due_step = step + lead
        count = workload.rate_at(due_step * dt) * share * dt
        if count > 0:
            to_insert.append([due_step, count])
        # What each stage asks of the database this step.
        want_insert = min(sum_counts(to_insert, limit=insert_capacity * dt), insert_capacity * dt)
        while inserted and inserted[0][0] <= step:
            claimable.append(inserted.popleft())
        want_claim = min(sum_counts(claimable, limit=worker_capacity * dt), worker_capacity * dt)
        budget = max(0.0, dt * capacities.pg_scale - renewal_cost * dt)
        insert_cost, claim_cost = fair_share(
            want_insert / capacities.pg_submit, want_claim / capacities.pg_claim_complete, budget
        )
        n_insert = insert_cost * capacities.pg_submit
        n_claim = claim_cost * capacities.pg_claim_complete
        for due, n in take(to_insert, n_insert):
            (inserted if due > step else claimable).append([due, n])
        for due, n in take(claimable, n_claim):
            # Claimed by the end of this step: lateness has the resolution dt.
            run.lateness.append(((step + 1 - due) * dt, n))
            run.claimed += n
        if step >= 0:
            second = step // per_second
            run.claims_per_second[second] = run.claims_per_second.get(second, 0.0) + n_claim
        # Busy at every step, the lookahead before the first due one included: that is
        # when the first peak is inserted.
        db_busy = (insert_cost + claim_cost + renewal_cost * dt) / (dt * capacities.pg_scale)
        run.busy["database"] = max(run.busy["database"], db_busy)
        run.busy["workers"] = max(run.busy["workers"], n_claim / (worker_capacity * dt))
        run.busy["materializers"] = max(
            run.busy["materializers"], n_insert / (insert_capacity * dt)
        )
    # Whatever is due and unclaimed at the end counts with the lateness it has so far.
    for queue in (claimable, inserted, to_insert):
        for due, n in queue:
            if due < steps:
                run.lateness.append(((steps - due) * dt, n))
                run.backlog += n
    run.due = run.claimed + run.backlog
    return run


def fair_share(a: float, b: float, budget: float) -> tuple[float, float]:
    """Split ``budget`` between two demands max-min fairly: each gets what it asks for up
    to half, and what one leaves the other may use (as a database shares its time among
    busy clients: the materializers' and the workers' statements)."""
    if a + b <= budget:
        return a, b
    half = budget / 2
    if a <= half:
        return a, budget - a
    if b <= half:
        return budget - b, b
    return half, half


def sum_counts(queue: Iterable[list[float]], *, limit: float) -> float:
    """The counts in ``queue``, summed only as far as ``limit`` (enough to know the min)."""
    total = 0.0
    for _, n in queue:
        total += n
        if total >= limit:
            break
    return total


def take(queue: deque[list[float]], amount: float) -> list[tuple[float, float]]:
    """Remove ``amount`` from the front of ``queue`` (oldest first): the (due, n) taken."""
    taken: list[tuple[float, float]] = []
    while amount > 1e-12 and queue:
        due, n = queue[0]
        if n <= amount:
            queue.popleft()
            taken.append((due, n))
            amount -= n
        else:
            queue[0][1] = n - amount
            taken.append((due, amount))
            amount = 0.0
    return taken


def workers_needed(capacities: Capacities, topology: Topology, workload: Workload) -> int:
    """Worker processes the busiest cluster needs to keep up with its peak."""
    busiest = topology.shares()[0][0]
    return max(1, math.ceil(workload.peak_rate * busiest / topology.worker_rate(capacities)))


def materializers_needed(capacities: Capacities, topology: Topology, workload: Workload) -> int:
    """Materializers (or submitters) the busiest cluster needs to insert its peak in time."""
    busiest = topology.shares()[0][0]
    return max(1, math.ceil(workload.peak_rate * busiest / capacities.materializer))


def simulate(
    capacities: Capacities,
    topology: Topology,
    workload: Workload,
    *,
    seconds: float | None = None,
    dt: float = 0.1,
) -> Result:
    """Run ``workload`` on ``topology`` for ``seconds`` (default: one period)."""
    seconds = workload.period if seconds is None else seconds
    if seconds <= 0 or dt <= 0:
        raise ValueError("seconds and dt must be > 0")
    workers = topology.workers or workers_needed(capacities, topology, workload)
    materializers = topology.materializers or materializers_needed(capacities, topology, workload)
    runs = [
        (
            n,
            _run_cluster(
                capacities, topology, workload, share, workers, materializers, seconds, dt
            ),
        )
        for share, n in topology.shares()
    ]
    busiest = runs[0][1]
    lateness = [(late, n * k) for k, run in runs for late, n in run.lateness]
    claims: dict[int, float] = {}
    for k, run in runs:
        for second, n in run.claims_per_second.items():
            claims[second] = claims.get(second, 0.0) + n * k
    due = sum(run.due * k for k, run in runs)
    within = sum(n for late, n in lateness if late <= SLO_SECONDS)
    c = topology.clusters
    capacity = {
        "database": c * capacities.pg_claim_complete * capacities.pg_scale,
        "workers": c * workers * topology.worker_rate(capacities),
        "materializers": c * materializers * capacities.materializer,
    }
    busy = dict(busiest.busy)
    bottleneck = max(busy, key=lambda stage: busy[stage])
    return Result(
        topology=topology,
        workload=workload,
        workers=workers,
        materializers=materializers,
        capacity=capacity,
        busy=busy,
        bottleneck=bottleneck if busy[bottleneck] >= 0.999 else "none",
        offered_peak=workload.peak_rate,
        claimed_peak=max(claims.values(), default=0.0),
        due=due,
        claimed=sum(run.claimed * k for k, run in runs),
        within_slo=within / due if due else 1.0,
        p50=_quantile(lateness, 0.50),
        p99=_quantile(lateness, 0.99),
        max_lateness=max((late for late, _ in lateness), default=0.0),
        backlog_end=sum(run.backlog * k for k, run in runs),
    )


def lifecycle_rate(capacities: Capacities) -> float:
    """Executions/s one database can insert, claim and complete, if the costs add."""
    per_execution = 1 / capacities.pg_submit + 1 / capacities.pg_claim_complete
    return capacities.pg_scale / per_execution


def clusters_needed(
    capacities: Capacities, workload: Workload, *, shards: int = 1024, busy: float = 1.0
) -> int:
    """The fewest clusters whose busiest database, at most ``busy`` occupied, inserts and
    claims the peak (both at the peak rate: inserts follow the due profile a lookahead
    ahead)."""
    if not 0 < busy <= 1:
        raise ValueError("busy must be in (0, 1]")
    for clusters in range(1, shards + 1):
        share = math.ceil(shards / clusters) / shards
        cost = (
            workload.peak_rate
            * share
            * (1 / capacities.pg_submit + 1 / capacities.pg_claim_complete)
        )
        if cost <= capacities.pg_scale * busy:
            return clusters
    raise ValueError("no number of clusters up to the number of shards carries this load")


def wheel_entry_bytes() -> int:
    """Bytes one timing-wheel entry takes in CPython: (due, id) and its list slot."""
    due = 1.7e9 + 0.5
    ident = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"  # a UUIDv7 as text
    entry = (due, ident)
    return sys.getsizeof(entry) + sys.getsizeof(due) + sys.getsizeof(ident) + 8


# -- the tables of the scale model ----------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def _seconds(x: float) -> str:
    return f"{x:,.2f} s" if x < 100 else f"{x:,.0f} s"


def _row(result: Result, label: str) -> str:
    r = result
    busy = " / ".join(f"{100 * r.busy[s]:.0f}%" for s in ("database", "workers", "materializers"))
    return (
        f"| {label} | {r.topology.name} | {_fmt(r.offered_peak)} | {_fmt(r.claimed_peak)} | "
        f"{_fmt(r.capacity['database'])} | {r.workers} / {r.materializers} | {busy} | "
        f"{r.bottleneck} | "
        f"{100 * r.within_slo:.1f}% | {_seconds(r.p99)} | {'met' if r.slo_met else '**missed**'} |"
    )


HEADER = (
    "| load | topology | due/s at peak | claims/s reached | database claim capacity | "
    "workers / materializers per cluster | busy: database / workers / materializers | "
    "bottleneck | "
    "claimed ≤ 10 s | p99 lateness | SLO |\n|---|---|---:|---:|---:|---:|---|---|---:|---:|---|"
)


def print_inputs(capacities: Capacities) -> None:
    print("## Inputs (measured; docs/performance.md)\n")
    print("| input | value | what | measured by |\n|---|---:|---|---|")
    for name, figure in MEASURED.items():
        value = getattr(capacities, name, figure.value)
        print(f"| `{name}` | {_fmt(value)} | {figure.what} | {figure.source} |")
    print(
        f"| `pg_scale` | {capacities.pg_scale:g} | database speed relative to the measured one "
        "| an estimate (1: as measured) |"
    )
    print(
        f"\nDerived (an estimate: costs assumed to add): one database inserts, claims and "
        f"completes {_fmt(lifecycle_rate(capacities))} executions/s.\n"
    )


def print_calibration(capacities: Capacities) -> None:
    """The model's lateness against bursts measured in the same run as its rates."""
    print("## Calibration: a burst, predicted from a throughput measured beside it\n")
    print("| burst (measured) | drain rate given to the model | predicted p50 / p99 |", end="")
    print(" measured p50 / p99 |")
    print("|---|---:|---:|---:|")
    cases = [
        (
            "W2: 10,000 due at once, one worker, PostgreSQL (make bench-peers)",
            10_000,
            10_497,
            "558 / 1,007 ms",
        ),
        (
            "W2: 10,000 due at once, one worker, SQLite (make bench-peers)",
            10_000,
            13_744,
            "506 / 964 ms",
        ),
    ]
    for label, n, rate, measured in cases:
        # All due in the first 10 ms: a burst, as the bench makes it.
        burst = Workload(rate=n / 60, peak=6000, peak_seconds=0.01, period=60, lookahead=1)
        model = Capacities(pg_submit=1e9, pg_claim_complete=1e9, worker=rate, materializer=1e9)
        r = simulate(model, Topology("one worker", workers=1), burst, seconds=30, dt=0.005)
        print(
            f"| {label} | {_fmt(rate)} jobs/s (W1, same run) | "
            f"{1000 * r.p50:,.0f} / {1000 * r.p99:,.0f} ms | {measured} |"
        )
    print()


def scenarios(capacities: Capacities, handler_ms: float) -> None:
    """The sweep: one PostgreSQL, shards on it, then several clusters."""
    handler = handler_ms / 1000
    hourly = 1_000_000 / 3600
    loads = [
        ("1M hourly, 10x peak", Workload(rate=hourly, peak=10, peak_seconds=60)),
        ("1M hourly, 100x peak", Workload(rate=hourly, peak=100, peak_seconds=10)),
        ("10,000/s steady", Workload(rate=10_000)),
        ("27,778/s steady", Workload(rate=27_778)),
        ("100,000/s steady", Workload(rate=100_000)),
    ]
    print(
        f"## Sweep: where each stage saturates (handler {handler_ms:g} ms; "
        "processes sized to the peak)\n"
    )
    print(
        "Steady loads run 600 s; hourly ones one hour. The last topology of each load is "
        "the fewest clusters that carry it (`clusters_needed`).\n"
    )
    print(HEADER)
    for label, workload in loads:
        seconds = 600.0 if workload.peak == 1 else None
        enough = clusters_needed(capacities, workload)
        topologies = [
            Topology("1 PG", handler_seconds=handler),
            Topology("1 PG, 1,024 shards", shards=1024, handler_seconds=handler),
            *(
                Topology(f"{c} PG, 1,024 shards", clusters=c, shards=1024, handler_seconds=handler)
                for c in sorted({2, 4, enough} - {1})
                if c <= enough
            ),
        ]
        for topology in topologies:
            print(_row(simulate(capacities, topology, workload, seconds=seconds), label))
    print()
    print("## Fixed fleets: the workers or the materializers saturate first\n")
    print(HEADER)
    fixed = Workload(rate=hourly, peak=10, peak_seconds=60)
    for topology in (
        Topology("1 PG, 2 workers, 100 ms handlers", workers=2, handler_seconds=0.1),
        Topology(
            "1 PG, 4 workers, 100 ms handlers, concurrency 64",
            workers=4,
            concurrency=64,
            handler_seconds=0.1,
        ),
        Topology("1 PG, 2 workers, no-op handlers", workers=2),
    ):
        print(_row(simulate(capacities, topology, fixed), "1M hourly, 10x peak"))
    spike = Workload(rate=hourly, peak=100, peak_seconds=10)
    for topology in (
        Topology(
            "4 PG, 1,024 shards, 1 materializer each", clusters=4, shards=1024, materializers=1
        ),
        Topology(
            "4 PG, 1,024 shards, 1 materializer each, lookahead 5 s",
            clusters=4,
            shards=1024,
            materializers=1,
        ),
    ):
        load = spike if "lookahead" not in topology.name else replace(spike, lookahead=5)
        print(_row(simulate(capacities, topology, load), "1M hourly, 100x peak"))
    print()


def print_sharded(capacities: Capacities) -> None:
    """100,000 due/s and 500 million future executions: clusters, storage, wheel memory."""
    workload = Workload(rate=100_000)
    clusters = clusters_needed(capacities, workload)
    comfortable = clusters_needed(capacities, workload, busy=0.7)
    future = 500_000_000
    per_byte = MEASURED["bytes_per_execution"].value
    entry = wheel_entry_bytes()
    print("## 100,000 due/s and 500 million future executions (the sharded workload)\n")
    print("| figure | value | from |\n|---|---:|---|")
    print(
        f"| clusters whose busiest one fits (1,024 shards) | {clusters} | "
        "insert + claim cost per cluster <= 1 database |"
    )
    print(
        f"| the same with each database at most 70% busy | {comfortable} | "
        "headroom for a failover's catch-up (an estimate of what is enough) |"
    )
    print(
        f"| workers per cluster, no-op handlers | "
        f"{workers_needed(capacities, Topology('x', clusters, 1024), workload)} | "
        "`worker` rate |"
    )
    print(f"| future executions per cluster | {_fmt(future / clusters)} | 500 M / clusters |")
    print(
        f"| storage of the future executions, whole system | "
        f"{future * per_byte / 1e9:,.0f} GB | `bytes_per_execution` (an estimate: the "
        "figure is for finished rows) |"
    )
    for window in (10, 60):
        entries = workload.rate * window
        print(
            f"| timing wheel of the next {window} s, whole system | "
            f"{_fmt(entries)} entries, {entries * entry / 1e9:,.2f} GB | "
            f"{entry} bytes an entry in CPython (measured by this script) |"
        )
    print()


#: What the script can print, in order (``--only``).
PARTS = ("inputs", "calibration", "sweep", "sharded")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-submit", type=float, default=MEASURED["pg_submit"].value)
    parser.add_argument(
        "--pg-claim-complete", type=float, default=MEASURED["pg_claim_complete"].value
    )
    parser.add_argument("--worker", type=float, default=MEASURED["worker"].value)
    parser.add_argument("--materializer", type=float, default=MEASURED["materializer"].value)
    parser.add_argument(
        "--pg-scale",
        type=float,
        default=1.0,
        help="database speed relative to the measured one (an estimate)",
    )
    parser.add_argument(
        "--handler-ms",
        type=float,
        default=0.0,
        help="handler duration in the sweep (default: no-op, as measured)",
    )
    parser.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"comma-separated parts to print (default: all of {', '.join(PARTS)})",
    )
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        parser.error(
            f"--only: unknown part(s) {', '.join(unknown) or '(none)'}; "
            f"one or more of {', '.join(PARTS)}"
        )
    try:
        capacities = Capacities(
            pg_submit=args.pg_submit,
            pg_claim_complete=args.pg_claim_complete,
            worker=args.worker,
            materializer=args.materializer,
            pg_scale=args.pg_scale,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if "inputs" in parts:
        print_inputs(capacities)
    if "calibration" in parts:
        print_calibration(capacities)
    if "sweep" in parts:
        scenarios(capacities, args.handler_ms)
    if "sharded" in parts:
        print_sharded(capacities)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One ``fencepost worker`` process on PostgreSQL under a fixed offered load.

Run by hand::

    .venv/bin/python bench/offered_load.py [--db postgresql://postgres@127.0.0.1:5432/test]
        [--phase light|peak|overload|all] [--seconds S] [--backlog 20000]
        [--concurrency 32] [--worker-args "--prefetch 0"] [--profile DIR]

The worker is what a user starts from the README, ``fencepost worker MODULE:app --db
URL``, plus ``--concurrency 32`` (and ``--worker-args``, for comparisons). Its job,
``bench/load_app.py``, sleeps 1 ms and returns the time its handler started. A
producer in this process submits at a fixed rate and puts the submit time in each
job's inputs (``{"t": time.time()}``), so claim latency = handler start - submit
time. Each phase uses a private schema (dropped afterwards) and a fresh worker.

* ``light``: 200 jobs/s, one ``submit`` every 5 ms, for 20 s (or ``--seconds``):
  claim latency p50 / p95 / p99 (target p50 < 10 ms).
* ``peak``: ``--backlog`` jobs queued before the worker starts; the drain rate
  (jobs / (last handler start - first handler start)) is the sustainable peak.
* ``overload``: 1.2 x peak for ``--seconds`` (default 60), then 0.5 x peak until the
  backlog is gone (the phase is capped at 3 minutes), submitted with ``submit_many``
  every 5 ms. A per-second timeline of offered, completed (handler starts in that
  second, from the results) and backlog (submitted - started, exact, from the
  data; also the store's queued and leased counts, sampled live with ``COUNT(*)``).
  Summary: the lowest completions/s while the backlog grows (after 2 s of warm-up)
  and the mean completions/s at half load while a backlog remains, as fractions of
  the peak (targets: >= 95%, and ~100%).

Every phase also checks that each submitted id ended SUCCEEDED and that its handler
started exactly once (every start is appended to a file by the job itself).

The producer, the worker and PostgreSQL share this machine's cores, so the producer's
cost is part of what the worker competes with; the report says how many cores.
``--profile DIR`` records the worker with py-spy (raw, ``--nonblocking``) during
the overload phase's high load. The CPU each process used (from ``/proc``) is shown
for the peak drain and the high load: worker, producer, all postgres processes, and
anything else on the machine.

The worker inherits ``PYTHONPATH`` (with ``bench/`` put first), so ``PYTHONPATH=DIR/src``
measures another checkout of fencepost (e.g. ``git archive HEAD src | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import bisect
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import fencepost
from fencepost import Store

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import pg_common as pg  # noqa: E402
from children import child_env  # noqa: E402

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
PY_SPY = str(Path(sys.executable).with_name("py-spy"))
DEFAULT_DB = "postgresql://postgres@127.0.0.1:5432/test"
JOB = "sleep1"
LIGHT_RATE = 200.0
LIGHT_SECONDS = 20.0
OVERLOAD_SECONDS = 60.0
HIGH, LOW = 1.2, 0.5
PHASE_CAP = 180.0
TICK = 0.005
WARM_UP = 2
TARGET_P50 = 0.010
TARGET_FLOOR = 0.95
DRAINED = 0.2
BUSY_ELSEWHERE = 0.25  # cores used by other processes past which a run is flagged


TICKS = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int | str) -> float:
    """CPU seconds (user + system) of one process, or 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def _postgres_cpu() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    total += _proc_cpu(entry.name)
            except OSError:
                pass
    return total


@dataclass(frozen=True)
class Cpu:
    """CPU seconds used: the worker, this process (producer), all postgres, the machine."""

    wall: float
    worker: float
    producer: float
    postgres: float
    busy: float

    @classmethod
    def now(cls, worker_pid: int) -> Cpu:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        return cls(
            time.time(),
            _proc_cpu(worker_pid),
            time.process_time(),
            _postgres_cpu(),
            (sum(values[:8]) - idle) / TICKS,
        )

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(
            self.wall - other.wall,
            self.worker - other.worker,
            self.producer - other.producer,
            self.postgres - other.postgres,
            self.busy - other.busy,
        )

    def describe(self) -> str:
        w = self.wall or float("nan")
        rest = self.busy - self.worker - self.producer - self.postgres
        return (
            f"worker {self.worker / w:.2f}, producer (this process) {self.producer / w:.2f},"
            f" postgres (all) {self.postgres / w:.2f}, anything else {max(rest, 0) / w:.2f};"
            f" machine busy {self.busy / w:.2f} of {os.cpu_count()}"
            + (
                f" — **other work took {rest / w:.2f} cores: figures are not comparable**"
                if rest / w > BUSY_ELSEWHERE
                else ""
            )
        )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Worker:
    """A running ``fencepost worker`` and the file its handlers append their starts to."""

    proc: subprocess.Popen[bytes]
    argv: list[str]
    starts: Path
    log: Path


@contextmanager
def schema(server: pg.Server, label: str) -> Iterator[tuple[str, str]]:
    name = server.new_schema(label)
    try:
        yield name, server.url(name)
    finally:
        server.drop(name)


def worker_argv(url: str, concurrency: int, extra: str) -> list[str]:
    return [
        FENCEPOST,
        "worker",
        "load_app:app",
        "--db",
        url,
        "--concurrency",
        str(concurrency),
        *shlex.split(extra),
    ]


@contextmanager
def worker(url: str, concurrency: int, extra: str, tmp: Path) -> Iterator[Worker]:
    """A running worker (default log level, stderr to a file); SIGTERM and wait on exit."""
    argv = worker_argv(url, concurrency, extra)
    starts, log = tmp / "starts.txt", tmp / "worker.log"
    starts.unlink(missing_ok=True)
    with log.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            env=child_env(FENCEPOST_LOAD_STARTS=str(starts)),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        yield Worker(proc, argv, starts, log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_registered(store: Store, w: Worker) -> None:
    deadline = time.monotonic() + 30
    while not store.nodes():
        if w.proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start:\n{w.log.read_text()[-2000:]}")
        time.sleep(0.05)
    time.sleep(0.5)


def counts(conn: pg.psycopg.Connection) -> tuple[int, int]:
    """(queued: SCHEDULED + RETRY_WAIT, leased: RUNNING) in the store, now."""
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE state IN ('SCHEDULED', 'RETRY_WAIT')),"
        " count(*) FILTER (WHERE state = 'RUNNING') FROM executions"
        " WHERE state IN ('SCHEDULED', 'RETRY_WAIT', 'RUNNING')"
    ).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def wait_done(server: pg.Server, name: str, w: Worker, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    with server.connect(name) as conn:
        while counts(conn) != (0, 0):
            if w.proc.poll() is not None:
                raise SystemExit(f"the worker exited:\n{w.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise SystemExit("the worker did not finish in time")
            time.sleep(0.1)


class Sampler(threading.Thread):
    """COUNT(*) of queued and leased executions at every whole second after ``t0``."""

    def __init__(self, server: pg.Server, name: str, t0: float) -> None:
        super().__init__(daemon=True)
        self.server, self.name, self.t0 = server, name, t0
        self.samples: dict[int, tuple[int, int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        with self.server.connect(self.name) as conn:
            second = 0
            while not self.stop.is_set():
                second += 1
                delay = self.t0 + second - time.time()
                if delay > 0 and self.stop.wait(delay):
                    return
                self.samples[second] = counts(conn)

    def latest(self) -> tuple[int, int] | None:
        return self.samples[max(self.samples)] if self.samples else None


@dataclass
class Submitted:
    ids: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # the call's start (in the inputs)
    returned: list[float] = field(default_factory=list)  # the call's return
    calls: list[float] = field(default_factory=list)  # each call's duration

    def add(self, executions: list[fencepost.Execution], t: float) -> None:
        back = time.time()
        self.ids.extend(e.id for e in executions)
        self.times.extend([t] * len(executions))
        self.returned.extend([back] * len(executions))
        self.calls.append(back - t)


def produce_single(store: Store, rate: float, seconds: float, out: Submitted) -> None:
    """One ``submit`` per 1/rate s, paced against the start (a late one is sent at once)."""
    interval = 1.0 / rate
    start = time.time()
    i = 0
    while True:
        due = start + i * interval
        if due >= start + seconds:
            return
        now = time.time()
        if due > now:
            time.sleep(due - now)
        t = time.time()
        out.add([store.submit(JOB, inputs={"t": t})], t)
        i += 1


def produce_batches(
    store: Store, rate: float, seconds: float, out: Submitted, *, until=None, cap: float = 0
) -> None:
    """Every TICK, ``submit_many`` of whatever the rate owes since the start (at most 1,000).

    With ``until``, keep going past ``seconds`` until ``until()`` is true (or ``cap``).
    """
    start = time.time()
    sent = 0
    tick = 0
    while True:
        now = time.time()
        elapsed = now - start
        if elapsed >= seconds and (until is None or until() or elapsed >= cap):
            return
        owed = min(int(rate * elapsed) - sent, pg.SUBMIT_BATCH)  # behind: batches of 1,000
        if owed > 0:
            t = time.time()
            out.add(store.submit_many([{"job": JOB, "inputs": {"t": t}}] * owed), t)
            sent += owed
        tick += 1
        delay = start + tick * TICK - time.time()
        if delay > 0:
            time.sleep(delay)


@dataclass
class Outcome:
    """What the store and the start log say about every submitted id."""

    starts: dict[str, list[float]]  # handler starts per id, from the start log
    result: dict[str, float]  # stored result (last handler start) of SUCCEEDED ids
    lost: int  # submitted, not SUCCEEDED
    twice: int  # handler started more than once
    never: int  # no handler start logged
    strangers: int  # in the store but never submitted
    states: Counter[str]

    def check(self) -> str:
        ok = self.lost == 0 and self.twice == 0 and self.never == 0 and self.strangers == 0
        verdict = "none lost, none ran twice" if ok else "**PROBLEM**"
        return (
            f"{verdict}: {self.lost:,} not SUCCEEDED, {self.twice:,} started more than once,"
            f" {self.never:,} with no start logged, {self.strangers:,} unknown ids"
            f" (states: {', '.join(f'{s} {n:,}' for s, n in sorted(self.states.items()))})"
        )


def outcome(server: pg.Server, name: str, w: Worker, sub: Submitted) -> Outcome:
    with server.connect(name) as conn:
        rows = conn.execute(
            "SELECT e.id, e.state, d.result FROM executions e"
            " JOIN execution_data d ON d.execution_id = e.id"
        ).fetchall()
    starts: dict[str, list[float]] = {}
    for line in w.starts.read_text().splitlines():
        eid, at = line.split()
        starts.setdefault(eid, []).append(float(at))
    submitted = set(sub.ids)
    states: Counter[str] = Counter()
    result: dict[str, float] = {}
    for eid, state, res in rows:
        states[state] += 1
        if state == "SUCCEEDED":
            result[eid] = float(res)
    return Outcome(
        starts=starts,
        result=result,
        lost=sum(1 for i in submitted if i not in result),
        twice=sum(1 for i in submitted if len(starts.get(i, ())) > 1),
        never=sum(1 for i in submitted if i not in starts),
        strangers=sum(1 for eid, _, _ in rows if eid not in submitted),
        states=states,
    )


def latency(out: Outcome, ids: list[str], times: list[float]) -> list[float]:
    """Stored result (the handler's start) - ``times``, for every SUCCEEDED id."""
    return [out.result[i] - t for i, t in zip(ids, times, strict=True) if i in out.result]


def ms(x: float) -> str:
    return f"{x * 1000:,.1f}"


# -- phases ---------------------------------------------------------------------------


def light(server: pg.Server, args: argparse.Namespace, tmp: Path) -> None:
    seconds = args.seconds or LIGHT_SECONDS
    print(f"\n## light: {LIGHT_RATE:.0f} jobs/s offered for {seconds:g} s\n")
    print(
        f"One `submit` every {1000 / LIGHT_RATE:g} ms, paced against the start"
        " (a late one is sent at once).\n"
    )
    with (
        schema(server, "light") as (name, url),
        fencepost.connect(url) as store,
        worker(url, args.concurrency, args.worker_args, tmp) as w,
    ):
        wait_registered(store, w)
        sub = Submitted()
        t0 = time.time()
        produce_single(store, LIGHT_RATE, seconds, sub)
        offered = len(sub.ids) / (time.time() - t0)
        wait_done(server, name, w)
        out = outcome(server, name, w, sub)
    latencies = latency(out, sub.ids, sub.times)
    after = latency(out, sub.ids, sub.returned)
    p50, p95, p99 = (percentile(latencies, q) for q in (0.5, 0.95, 0.99))
    calls = sub.calls
    print("| measure | figure | target |")
    print("|---|---:|---|")
    print(f"| jobs submitted / rate achieved | {len(sub.ids):,} / {offered:,.1f} jobs/s | |")
    print(
        f"| **claim latency** (handler start - submit call) p50 / p95 / p99 / max, ms |"
        f" **{ms(p50)}** / {ms(p95)} / {ms(p99)} / {ms(max(latencies))} |"
        f" p50 < {TARGET_P50 * 1000:.0f} ms — {'met' if p50 < TARGET_P50 else '**missed**'} |"
    )
    print(
        f"| of which the `submit` call itself: p50 / p95 / p99 / max, ms |"
        f" {ms(percentile(calls, 0.5))} / {ms(percentile(calls, 0.95))} /"
        f" {ms(percentile(calls, 0.99))} / {ms(max(calls))} | |"
    )
    print(
        f"| handler start - `submit` returned: p50 / p95 / p99, ms |"
        f" {ms(percentile(after, 0.5))} / {ms(percentile(after, 0.95))} /"
        f" {ms(percentile(after, 0.99))} | |"
    )
    print(f"| lost / ran twice | {out.check()} | none |")


def peak(server: pg.Server, args: argparse.Namespace, tmp: Path) -> float:
    n = args.backlog
    print(f"\n## peak: drain of {n:,} jobs queued before the worker starts\n")
    with schema(server, "peak") as (name, url), fencepost.connect(url) as store:
        sub = Submitted()
        for startat in range(0, n, 1000):
            t = time.time()
            sub.add(
                store.submit_many([{"job": JOB, "inputs": {"t": t}}] * min(1000, n - startat)), t
            )
        with worker(url, args.concurrency, args.worker_args, tmp) as w:
            cpu_start = Cpu.now(w.proc.pid)
            wait_done(server, name, w)
            cpu = Cpu.now(w.proc.pid) - cpu_start
            out = outcome(server, name, w, sub)
        with server.connect(name) as conn:
            span = conn.execute(
                "SELECT extract(epoch FROM max(at) FILTER (WHERE event = 'COMPLETED')"
                " - min(at) FILTER (WHERE event = 'CLAIMED')) FROM transitions"
            ).fetchone()
    firsts = sorted(s[0] for s in out.starts.values())
    rate = (len(firsts) - 1) / (firsts[-1] - firsts[0])
    store_rate = n / float(span[0]) if span and span[0] else float("nan")
    t0 = firsts[0]
    per_second = Counter(int(s - t0) for s in firsts)
    full = [per_second[i] for i in range(int(firsts[-1] - t0))]  # whole seconds only
    print("| measure | figure |")
    print("|---|---:|")
    print(f"| **drain rate** (n-1) / (last - first handler start) | **{rate:,.0f} jobs/s** |")
    print(f"| by the store: n / (last COMPLETED - first CLAIMED) | {store_rate:,.0f} jobs/s |")
    if full:
        print(
            f"| handler starts per whole second: median / min / max | "
            f"{statistics.median(full):,.0f} / {min(full):,} / {max(full):,} |"
        )
    print(f"| CPU from the worker's start to the drain's end, in cores | {cpu.describe()} |")
    print(f"| lost / ran twice | {out.check()} |")
    print(f"\nPer-second starts during the drain: {', '.join(f'{c:,}' for c in full)}")
    return rate


def overload(server: pg.Server, args: argparse.Namespace, tmp: Path, peak_rate: float) -> None:
    seconds = args.seconds or OVERLOAD_SECONDS
    high, low = HIGH * peak_rate, LOW * peak_rate
    small = max(DRAINED * low, 2 * args.concurrency)  # a backlog this small is just latency
    print(
        f"\n## overload: {high:,.0f} jobs/s ({HIGH:g} x peak {peak_rate:,.0f}) for {seconds:g} s,"
        f" then {low:,.0f} jobs/s ({LOW:g} x peak) until the backlog is gone\n"
    )
    print(
        f"`submit_many` of whatever the rate owes every {TICK * 1000:g} ms; the phase is capped"
        f" at {PHASE_CAP:g} s. Backlog = submitted - handlers started (exact, from the data);"
        f" it counts as drained once it is at most {small:,.0f} jobs ({DRAINED:g} s of the low"
        " rate's arrivals, or twice the concurrency), which is what a steady half load keeps in"
        " flight. The store's queued (SCHEDULED + RETRY_WAIT) and leased (RUNNING: running,"
        " buffered by --prefetch, or finished and not yet reported) counts are sampled live.\n"
    )
    with (
        schema(server, "over") as (name, url),
        fencepost.connect(url) as store,
        worker(url, args.concurrency, args.worker_args, tmp) as w,
    ):
        wait_registered(store, w)
        spy = None
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            spy_file = Path(args.profile) / "overload-worker.raw"
            spy = subprocess.Popen(
                [PY_SPY, "record", "--nonblocking", "-f", "raw", "-o", str(spy_file),
                 "--pid", str(w.proc.pid), "--duration", str(int(seconds))],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        sub = Submitted()
        t0 = time.time()
        cpu_start = Cpu.now(w.proc.pid)
        sampler = Sampler(server, name, t0)
        sampler.start()
        produce_batches(store, high, seconds, sub)
        low_start = time.time()
        cpu_high = Cpu.now(w.proc.pid) - cpu_start
        calm: list[float] = []

        def drained() -> bool:
            # The store's queue small in the latest sample, then 3 more seconds at low load.
            latest = sampler.latest()
            if time.time() - low_start < 3 or latest is None or latest[0] > small:
                return False
            if not calm:
                calm.append(time.time())
            return time.time() - calm[0] >= 3

        produce_batches(store, low, 0, sub, until=drained, cap=PHASE_CAP - seconds)
        end = time.time()
        sampler.stop.set()
        sampler.join()
        wait_done(server, name, w)
        if spy is not None:
            spy.wait(120)
        out = outcome(server, name, w, sub)

    starts = sorted(out.result.values())
    submits = sorted(sub.times)
    horizon = int(end - t0) + 1
    offered = Counter(int(t - t0) for t in submits)
    completed = Counter(int(s - t0) for s in starts if s >= t0)
    high_seconds = int(low_start - t0)

    def backlog(at: float) -> int:  # submitted by `at` minus started by `at`
        return bisect.bisect_right(submits, at) - bisect.bisect_right(starts, at)

    # The drain: from the drop to half load until the backlog is first this small (10 ms steps).
    drain_end = low_start
    while drain_end < end and backlog(drain_end) > small:
        drain_end += 0.01
    print("| s | offered /s | completed /s | backlog (end of s) | store: queued / leased | |")
    print("|---:|---:|---:|---:|---:|---|")
    for i in range(horizon):
        queued, leased = sampler.samples.get(i + 1, (-1, -1))
        note = "high" if i < high_seconds else ("low, draining" if t0 + i < drain_end else "low")
        sample = f"{queued:,} / {leased:,}" if queued >= 0 else "-"
        row = [str(i), f"{offered[i]:,}", f"{completed[i]:,}", f"{backlog(t0 + i + 1):,}"]
        print(f"| {' | '.join(row)} | {sample} | {note} |")
    growing = [completed[i] for i in range(WARM_UP, high_seconds)]
    # Whole seconds inside the drain (the second holding the drop is partly high load).
    draining = [completed[i] for i in range(high_seconds + 1, int(drain_end - t0))]
    drain_seconds = drain_end - low_start
    drain_rate = (
        (bisect.bisect_right(starts, drain_end) - bisect.bisect_right(starts, low_start))
        / drain_seconds
        if drain_seconds > 0
        else float("nan")
    )
    latencies = latency(out, sub.ids, sub.times)
    in_high = bisect.bisect_left(submits, low_start)
    rate_high = in_high / (low_start - t0)
    rate_low = (len(submits) - in_high) / (end - low_start)
    print()
    print("| measure | figure | target |")
    print("|---|---:|---|")
    print(
        f"| offered: high / low, achieved | {rate_high:,.0f} / {rate_low:,.0f} jobs/s"
        f" ({len(sub.calls):,} `submit_many` calls, p50 {ms(percentile(sub.calls, 0.5))} ms,"
        f" p99 {ms(percentile(sub.calls, 0.99))} ms) | {high:,.0f} / {low:,.0f} |"
    )
    if growing:
        floor = min(growing)
        print(
            f"| completions/s while the backlog grows (s {WARM_UP}-{high_seconds - 1}):"
            " min / median"
            f" | {floor:,} / {statistics.median(growing):,.0f} = **{floor / peak_rate:.0%}** /"
            f" {statistics.median(growing) / peak_rate:.0%} of peak | min ≥ {TARGET_FLOOR:.0%} — "
            f"{'met' if floor >= TARGET_FLOOR * peak_rate else '**missed**'} |"
        )
    print(
        f"| backlog at the drop to half load / largest | {backlog(low_start):,} /"
        f" {max(backlog(t0 + i + 1) for i in range(horizon)):,} jobs | |"
    )
    if backlog(low_start) <= small:
        print(
            f"| drain at half load | nothing to drain: the backlog at the drop was ≤ {small:,.0f}"
            " (the worker kept up with the high load) | |"
        )
    elif drain_end >= end:
        print(
            f"| drain at half load | **not drained** within the phase ({end - low_start:.0f} s) | |"
        )
    else:
        lowest = f", min {min(draining):,}/s in a whole second" if draining else ""
        print(
            f"| **drain rate** at half load: starts / time until backlog ≤ {small:,.0f}"
            f" | {drain_rate:,.0f} jobs/s over {drain_seconds:.1f} s"
            f" = **{drain_rate / peak_rate:.0%}** of peak{lowest} | ≈ 100% — "
            f"{'met' if drain_rate >= TARGET_FLOOR * peak_rate else '**missed**'} |"
        )
    print(f"| CPU during the high load, in cores | {cpu_high.describe()} | |")
    print(
        f"| claim latency p50 / p99 / max (all jobs) | {ms(percentile(latencies, 0.5))} /"
        f" {ms(percentile(latencies, 0.99))} / {ms(max(latencies))} ms | |"
    )
    print(f"| lost / ran twice | {out.check()} | none |")
    if args.profile:
        print(f"\npy-spy (raw) of the worker during the high load: `{spy_file}`")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db", default=DEFAULT_DB, help="postgresql://... (a private schema is made)"
    )
    parser.add_argument("--phase", choices=["light", "peak", "overload", "all"], default="all")
    parser.add_argument(
        "--seconds",
        type=float,
        help=f"light and overload durations (default {LIGHT_SECONDS:g} and {OVERLOAD_SECONDS:g} s)",
    )
    parser.add_argument(
        "--backlog", type=int, default=20_000, help="jobs queued for the peak phase"
    )
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--worker-args", default="", help='extra `fencepost worker` flags, e.g. "--prefetch 0"'
    )
    parser.add_argument(
        "--peak", type=float, help="overload alone: the peak jobs/s (default: measure it)"
    )
    parser.add_argument(
        "--profile", help="directory for a py-spy record of the worker during overload"
    )
    args = parser.parse_args()
    if not pg.is_postgres(args.db):
        raise SystemExit("--db: a postgresql:// URL")
    server = pg.Server(args.db, "load")
    shown = worker_argv("<private schema>", args.concurrency, args.worker_args)
    shown[0] = "fencepost"
    print("# fencepost under a fixed offered load, one worker process, PostgreSQL\n")
    print(f"    {shlex.join(['.venv/bin/python', 'bench/offered_load.py', *sys.argv[1:]])}\n")
    print("| setting | value |")
    print("|---|---|")
    print(f"| worker | `{shlex.join(shown)}` (one process, default log level) |")
    print(f"| job | `{JOB}` (bench/load_app.py): sleeps 1 ms, returns its start time |")
    print('| producer | this process: `submit` / `submit_many`, inputs `{"t": submit time}` |')
    print(
        f"| offered | light {LIGHT_RATE:.0f}/s; peak: {args.backlog:,} queued; overload"
        f" {HIGH:g} x then {LOW:g} x peak |"
    )
    print(
        f"| host | {platform.python_implementation()} {platform.python_version()},"
        f" {os.cpu_count()} cores (shared by producer, worker and PostgreSQL), fencepost"
        f" {getattr(fencepost, '__version__', '?')} from `{Path(fencepost.__file__).parent}` |"
    )
    for line in server.describe():
        print(f"| server | {line.strip()} |")
    sys.stdout.flush()
    with server.session(), tempfile.TemporaryDirectory(prefix="fencepost-load-") as tmp:
        if args.phase in ("light", "all"):
            light(server, args, Path(tmp))
            sys.stdout.flush()
        peak_rate = args.peak
        if args.phase in ("peak", "all") or (args.phase == "overload" and peak_rate is None):
            peak_rate = peak(server, args, Path(tmp))
            sys.stdout.flush()
        if args.phase in ("overload", "all"):
            assert peak_rate is not None
            overload(server, args, Path(tmp), peak_rate)


if __name__ == "__main__":
    main()

"""fencepost beside PgQueuer (PostgreSQL) and Huey (SQLite), each at its own defaults.

Run::

    make bench-peers

which creates the peers' virtualenvs (bench/peers/.venvs/NAME, from the pinned
bench/peers/requirements-NAME.txt) when missing or stale, then runs, with the defaults::

    .venv/bin/python bench/peers/run.py [--systems KEY,...] [--repeat 3] [--n 20000]
        [--burst 10000] [--quick] [--pg-dsn postgresql://postgres@127.0.0.1:5432/postgres]
        [--baseline REV]

Systems (``--systems`` keys), defaults first, tuned after, floors last:

* ``fencepost-pg``: ``fencepost worker fencepost_app:app --db postgresql://...``, the
  README's quick start with no other flags (concurrency 8);
* ``pgqueuer``: ``pgq run pgqueuer_app:main`` after ``pgq install`` (batch size 10);
* ``fencepost-sqlite``: ``fencepost worker fencepost_app:app --db sqlite:///PATH``;
* ``huey``: ``huey_consumer huey_app.huey``, a ``SqliteHuey`` (one worker thread);
* ``fencepost-pg-tuned``: the same as ``fencepost-pg`` with ``--concurrency 64``;
* ``pgqueuer-batch100``: ``pgq run pgqueuer_app:main --batch-size 100``;
* ``floor-pg``, ``floor-sqlite``: a raw fenced claim + complete loop, batch 256, no
  framework (bench/peers/floors.py); W1 only.

``--baseline REV`` adds, after each chosen fencepost system, the same system run on
git revision ``REV`` (checked out in a temporary worktree and put first on the
processes' ``PYTHONPATH``; the harness, the app and the peers stay the same), so a
change to fencepost is measured before and after in one interleaved run, with the
ratios of the medians printed.

Every system runs in one worker process, in a fresh database per run (a PostgreSQL
database created on ``--pg-dsn`` and dropped, or a new SQLite file), each through its
own public API from its own virtualenv. The runs interleave: every system's run 1, then
every system's run 2, ...; figures are medians of ``--repeat`` runs.

The handler is the same no-op everywhere (bench/peers/peers_common.py): it appends
``<job id> <time.time() at its start>`` to a per-run file. Each job carries a unique
integer id, so a run that loses or repeats a job says so, in the table and below it.

* **W1**: ``--n`` jobs due now are enqueued (untimed, each system's bulk path, batches
  of 1,000) with no worker running; then one worker starts, and throughput =
  n / (last handler start - first handler start). The worker is stopped (SIGTERM, then
  SIGKILL after 20 s) once every job has started, or after a timeout or a stall.
* **W2**: the worker starts and idles 2 s; then ``--burst`` jobs are enqueued, all due
  at T = the enqueue's start + 10 s; lateness = handler start - T, p50 / p99 / max.
* **RSS**: the worker process tree's peak resident memory, sampled every 50 ms
  (VmRSS of the worker and all its descendants, summed), the larger of W1's and W2's.

Progress goes to stderr; the report (a markdown table, ratios, the machine and every
peer's version) to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import floors
import psycopg
from peers_common import DB_ENV, STARTS_ENV

import fencepost

PEERS = Path(__file__).resolve().parent
VENVS = PEERS / ".venvs"
PROJECT_BIN = Path(sys.executable).parent  # .venv/bin (not resolved: it is a venv)
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"

LEAD = 10.0  #: W2: the burst is due this long after its enqueue starts
IDLE = 2.0  #: W2: the worker idles this long before the burst is enqueued
SAMPLE_EVERY = 0.05  #: RSS sampling period, seconds
POLL_EVERY = 0.05  #: how often the starts file is looked at
STOP_TIMEOUT = 20.0  #: SIGTERM, then SIGKILL after this long
STALL = 60.0  #: give up on a run when no job started for this long
TIMEOUT = 900.0  #: give up on a run after this long in any case


@dataclass(frozen=True)
class System:
    key: str
    label: str
    backend: str  #: "pg" or "sqlite"
    kind: str  #: "fencepost", "pgqueuer", "huey" or "floor"
    extra: tuple[str, ...] = ()  #: flags added to the worker's command line
    #: fencepost's source tree to run instead of the installed one (``--baseline``)
    src: Path | None = None

    @property
    def python(self) -> Path:
        if self.kind in ("pgqueuer", "huey"):
            return VENVS / self.kind / "bin" / "python"
        return Path(sys.executable)

    def worker_argv(self, url: str) -> list[str]:
        if self.kind == "fencepost":
            return [str(PROJECT_BIN / "fencepost"), "worker", "fencepost_app:app", "--db", url]
        if self.kind == "pgqueuer":
            return [str(VENVS / "pgqueuer" / "bin" / "pgq"), "run", "pgqueuer_app:main"]
        if self.kind == "huey":
            return [str(VENVS / "huey" / "bin" / "huey_consumer"), "huey_app.huey"]
        raise AssertionError(self.kind)


SYSTEMS = [
    System("fencepost-pg", "fencepost PostgreSQL, defaults", "pg", "fencepost"),
    System("pgqueuer", "PgQueuer PostgreSQL, defaults (batch 10)", "pg", "pgqueuer"),
    System("fencepost-sqlite", "fencepost SQLite, defaults", "sqlite", "fencepost"),
    System("huey", "Huey SQLite, defaults (1 worker thread)", "sqlite", "huey"),
    System(
        "fencepost-pg-tuned",
        "fencepost PostgreSQL, tuned (--concurrency 64)",
        "pg",
        "fencepost",
        extra=("--concurrency", "64"),
    ),
    System(
        "pgqueuer-batch100",
        "PgQueuer PostgreSQL, tuned (--batch-size 100)",
        "pg",
        "pgqueuer",
        extra=("--batch-size", "100"),
    ),
    System("floor-pg", "raw floor PostgreSQL (claim+complete, batch 256)", "pg", "floor"),
    System("floor-sqlite", "raw floor SQLite (claim+complete, batch 256)", "sqlite", "floor"),
]
BY_KEY = {s.key: s for s in SYSTEMS}


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- databases -------------------------------------------------------------------------

_names = count(1)


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def libpq_env(url: str) -> dict[str, str]:
    """The libpq variables that name ``url``'s database (what PgQueuer's quick start reads)."""
    parts = urlsplit(url)
    env = {
        "PGHOST": parts.hostname or "127.0.0.1",
        "PGPORT": str(parts.port or 5432),
        "PGDATABASE": parts.path.lstrip("/"),
    }
    if parts.username:
        env["PGUSER"] = unquote(parts.username)
    if parts.password:
        env["PGPASSWORD"] = unquote(parts.password)
    return env


@dataclass
class Backend:
    url: str  #: fencepost's URL (and the floor's conninfo on PostgreSQL)
    env: dict[str, str]  #: what the apps and workers are given
    sqlite_path: Path | None = None


@contextmanager
def backend(system: System, dsn: str, tmp: Path) -> Iterator[Backend]:
    """A fresh, empty database for one run, dropped (or deleted with ``tmp``) afterwards."""
    if system.backend == "sqlite":
        path = tmp / "bench.db"
        url = f"sqlite:///{path}"
        yield Backend(url, {DB_ENV: str(path) if system.kind == "huey" else url}, path)
        return
    name = f"fpbench_peers_{os.getpid()}_{next(_names)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    url = with_database(dsn, name)
    try:
        yield Backend(url, {DB_ENV: url, **libpq_env(url)})
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def child_env(extra: dict[str, str], src: Path | None = None) -> dict[str, str]:
    """The environment of an app, enqueue or worker process; ``src`` goes before .venv's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "VIRTUAL_ENV"))}
    env.update(extra)
    env["PYTHONPATH"] = os.pathsep.join([str(PEERS)] + ([str(src)] if src else []))
    return env


def install_schema(system: System, db: Backend, tmp: Path) -> None:
    """Each system's own installer: fencepost's migrations at connect, ``pgq install``."""
    if system.kind == "fencepost" and system.src is not None:
        subprocess.run(
            [str(system.python), "-c", f"import fencepost; fencepost.connect({db.url!r}).close()"],
            env=child_env(db.env, system.src),
            cwd=tmp,
            check=True,
            capture_output=True,
        )
    elif system.kind == "fencepost":
        fencepost.connect(db.url).close()
    elif system.kind == "pgqueuer":
        pgq = VENVS / "pgqueuer" / "bin" / "pgq"
        subprocess.run(
            [str(pgq), "install"],
            env=child_env(db.env),
            cwd=tmp,
            check=True,
            capture_output=True,
        )


class RunFailed(Exception):
    """A run that could not be carried out (it is reported, and the benchmark goes on)."""


def enqueue(
    system: System,
    db: Backend,
    tmp: Path,
    n: int,
    lead: float | None,
    outcome: Outcome,
    workload: str,
) -> dict[str, Any]:
    """Enqueue jobs 0..n-1 in the system's own interpreter; its answer (see enqueue.py).

    An error the system raised is noted in ``outcome`` (the jobs it acknowledged
    before it are the run's jobs from then on).
    """
    argv = [str(system.python), str(PEERS / "enqueue.py"), system.kind, "0", str(n)]
    if lead is not None:
        argv += ["--lead", str(lead)]
    env = child_env(db.env, system.src)
    done = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        raise RunFailed(f"{workload}: the enqueue crashed: {done.stderr.strip()[-600:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if answer["seconds"] is not None:
        outcome.enqueue_s.append(float(answer["seconds"]))
    if answer["error"]:
        outcome.enqueue_errors += 1
        outcome.notes.append(
            f"{workload}: the enqueue FAILED after {answer['enqueued']:,} of {n:,} jobs were "
            f"acknowledged: {answer['error']}"
        )
    return answer


# -- the worker process ----------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(root: int) -> int:
    """VmRSS of ``root`` and all its descendants, summed."""
    tree = _children()
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(tree.get(pid, ()))
        total += _rss_kb(pid)
    return total


class StartsFile:
    """The handlers' per-run file: counted as it grows, parsed at the end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = 0
        self._offset = 0
        path.touch()

    def poll(self) -> int:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        self.lines += data.count(b"\n")
        return self.lines

    def read(self) -> list[tuple[int, float]]:
        starts = []
        for line in self.path.read_text().splitlines():
            job, at = line.split()
            starts.append((int(job), float(at)))
        return starts


@dataclass
class WorkerRun:
    proc: subprocess.Popen[bytes]
    peak_rss_kb: int = 0
    notes: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        return self.proc.poll() is None


@contextmanager
def worker(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> Iterator[WorkerRun]:
    """One worker process (its own session), its tree's RSS sampled; stopped on exit."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    run = WorkerRun(proc)
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(SAMPLE_EVERY):
            run.peak_rss_kb = max(run.peak_rss_kb, tree_rss_kb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield run
        if proc.poll() is not None:
            run.notes.append(f"the worker exited by itself (code {proc.returncode})")
    finally:
        run.peak_rss_kb = max(run.peak_rss_kb, tree_rss_kb(proc.pid))
        sampling.set()
        sampler.join()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                run.notes.append(f"the worker ignored SIGTERM for {STOP_TIMEOUT:.0f} s: SIGKILL")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_for(starts: StartsFile, n: int, alive: Callable[[], bool], since: float) -> str | None:
    """Wait until ``n`` lines are in the file; a reason when that did not happen."""
    last_lines, last_change = 0, time.monotonic()
    while True:
        lines = starts.poll()
        now = time.monotonic()
        if lines >= n:
            return None
        if lines != last_lines:
            last_lines, last_change = lines, now
        if not alive():
            return "the worker died"
        if now - max(last_change, since) > STALL:
            return f"stalled: nothing started for {STALL:.0f} s"
        if now - since > TIMEOUT:
            return f"timed out after {TIMEOUT:.0f} s"
        time.sleep(POLL_EVERY)


# -- one run of one system ---------------------------------------------------------------


@dataclass
class Outcome:
    """One run of one system: W1 rate, W2 latenesses, peak RSS, lost and duplicated jobs."""

    rate: float | None = None
    lateness: list[float] = field(default_factory=list)
    rss_kb: int = 0
    enqueue_s: list[float] = field(default_factory=list)  #: W1's and W2's enqueue times
    enqueue_errors: int = 0  #: enqueues that the system refused part of (it raised)
    lost: int = 0
    dup: int = 0
    notes: list[str] = field(default_factory=list)
    failed: bool = False  #: the run could not be carried out (see notes)
    past_t: bool = False  #: W2's enqueue was still going at T (its lateness includes that)


def check(
    starts: list[tuple[int, float]], n: int, asked: int, outcome: Outcome, workload: str
) -> None:
    """Count jobs 0..n-1 (those acknowledged) that never started, and repeated starts.

    Ids the system refused (n..asked-1: its enqueue raised) that ran all the same are
    noted, not counted; any other id is counted as a duplicate.
    """
    seen: dict[int, int] = {}
    for job, _ in starts:
        seen[job] = seen.get(job, 0) + 1
    lost = sum(1 for i in range(n) if i not in seen)
    refused_ran = sum(1 for j in seen if n <= j < asked)
    dup = sum(c - 1 for c in seen.values()) + sum(1 for j in seen if not 0 <= j < asked)
    outcome.lost += lost
    outcome.dup += dup
    if lost or dup:
        outcome.notes.append(f"{workload}: {lost} of {n:,} jobs LOST, {dup} DUPLICATED")
    if refused_ran:
        outcome.notes.append(f"{workload}: {refused_ran} jobs ran though their enqueue raised")


def first_starts(starts: list[tuple[int, float]]) -> dict[int, float]:
    first: dict[int, float] = {}
    for job, at in starts:
        if job not in first or at < first[job]:
            first[job] = at
    return first


def run_w1(system: System, dsn: str, n: int, outcome: Outcome, logs: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="fpbench-peers-") as tmpdir:
        tmp = Path(tmpdir)
        with backend(system, dsn, tmp) as db:
            install_schema(system, db, tmp)
            stored = int(enqueue(system, db, tmp, n, None, outcome, "W1")["enqueued"])
            starts = StartsFile(tmp / "starts.txt")
            env = child_env({**db.env, STARTS_ENV: str(starts.path)}, system.src)
            argv = system.worker_argv(db.url) + list(system.extra)
            with worker(argv, env, tmp, tmp / "worker.log") as proc:
                reason = wait_for(starts, stored, proc.alive, time.monotonic())
            outcome.rss_kb = max(outcome.rss_kb, proc.peak_rss_kb)
            outcome.notes += [f"W1: {note}" for note in proc.notes]
            if reason:
                outcome.notes.append(f"W1: {reason}; {log_tail(tmp / 'worker.log')}")
            keep(tmp / "worker.log", logs, f"{system.key}-W1")
            found = starts.read()
            check(found, stored, n, outcome, "W1")
            times = [at for _, at in found]
            if len(times) >= 2 and max(times) > min(times):
                outcome.rate = stored / (max(times) - min(times))


def run_w2(
    system: System, dsn: str, burst: int, lead: float, outcome: Outcome, logs: Path | None
) -> None:
    with tempfile.TemporaryDirectory(prefix="fpbench-peers-") as tmpdir:
        tmp = Path(tmpdir)
        with backend(system, dsn, tmp) as db:
            install_schema(system, db, tmp)
            starts = StartsFile(tmp / "starts.txt")
            env = child_env({**db.env, STARTS_ENV: str(starts.path)}, system.src)
            argv = system.worker_argv(db.url) + list(system.extra)
            with worker(argv, env, tmp, tmp / "worker.log") as proc:
                time.sleep(IDLE)
                answer = enqueue(system, db, tmp, burst, lead, outcome, "W2")
                stored = int(answer["enqueued"])
                if answer["at"] is None:
                    raise RunFailed("W2: the enqueue failed before it began")
                at = float(answer["at"])
                if time.time() > at:
                    outcome.past_t = True
                    outcome.notes.append(
                        f"W2: enqueueing {stored:,} took {answer['seconds']:.1f} s, past T"
                    )
                reason = wait_for(starts, stored, proc.alive, time.monotonic())
            outcome.rss_kb = max(outcome.rss_kb, proc.peak_rss_kb)
            outcome.notes += [f"W2: {note}" for note in proc.notes]
            if reason:
                outcome.notes.append(f"W2: {reason}; {log_tail(tmp / 'worker.log')}")
            keep(tmp / "worker.log", logs, f"{system.key}-W2")
            found = starts.read()
            check(found, stored, burst, outcome, "W2")
            outcome.lateness = sorted(t - at for t in first_starts(found).values())


def run_floor(system: System, dsn: str, n: int, outcome: Outcome) -> None:
    with tempfile.TemporaryDirectory(prefix="fpbench-peers-") as tmpdir:
        tmp = Path(tmpdir)
        with backend(system, dsn, tmp) as db:
            if system.backend == "pg":
                done, seconds, lost, dup = floors.postgres(db.url, n)
            else:
                assert db.sqlite_path is not None
                done, seconds, lost, dup = floors.sqlite(db.sqlite_path, n)
    outcome.rate = done / seconds
    outcome.lost, outcome.dup = lost, dup
    if lost or dup:
        outcome.notes.append(f"W1: {lost} of {n} jobs LOST, {dup} DUPLICATED")


def keep(log: Path, logs: Path | None, name: str) -> None:
    """Copy a worker's log into ``--logs DIR`` (as NAME-1.log, NAME-2.log, ...)."""
    if logs is None or not log.exists():
        return
    logs.mkdir(parents=True, exist_ok=True)
    n = 1
    while (logs / f"{name}-{n}.log").exists():
        n += 1
    shutil.copyfile(log, logs / f"{name}-{n}.log")


def log_tail(log: Path, lines: int = 5) -> str:
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return "no worker log"
    return "worker log ends: " + " | ".join(tail) if tail else "the worker logged nothing"


def run_once(system: System, args: argparse.Namespace) -> Outcome:
    """W1 and W2 (W1 only for a floor); a run that fails is noted, and the rest go on."""
    outcome = Outcome()
    try:
        if system.kind == "floor":
            run_floor(system, args.pg_dsn, args.n, outcome)
        else:
            run_w1(system, args.pg_dsn, args.n, outcome, args.logs)
            run_w2(system, args.pg_dsn, args.burst, args.lead, outcome, args.logs)
    except (RunFailed, OSError, subprocess.SubprocessError, psycopg.Error, sqlite3.Error) as exc:
        outcome.failed = True
        outcome.notes.append(f"the run FAILED: {exc}")
    return outcome


# -- the report ----------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Summary:
    system: System
    runs: list[Outcome]

    @property
    def rates(self) -> list[float]:
        return [r.rate for r in self.runs if r.rate is not None]

    @property
    def rate(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    def lateness(self, q: float | None) -> float | None:
        """The median over runs of one statistic of W2's lateness (None: max)."""
        values = [
            (max(r.lateness) if q is None else percentile(r.lateness, q))
            for r in self.runs
            if r.lateness
        ]
        return statistics.median(values) if values else None

    @property
    def rss_mb(self) -> float | None:
        values = [r.rss_kb / 1024 for r in self.runs if r.rss_kb]
        return statistics.median(values) if values else None

    @property
    def lost(self) -> int:
        return sum(r.lost for r in self.runs)

    @property
    def dup(self) -> int:
        return sum(r.dup for r in self.runs)


def fmt_rate(summary: Summary) -> str:
    if summary.rate is None:
        return "—"
    runs = summary.rates
    spread = f" ({min(runs):,.0f}–{max(runs):,.0f})" if len(runs) > 1 else ""
    return f"{summary.rate:,.0f}{spread}"


def fmt_lateness(summary: Summary) -> str:
    if summary.system.kind == "floor":
        return "—"
    stats = [summary.lateness(0.50), summary.lateness(0.99), summary.lateness(None)]
    if any(s is None for s in stats):
        return "—"
    text = " / ".join(f"{s * 1000:,.0f}" for s in stats if s is not None) + " ms"
    past = sum(1 for r in summary.runs if r.past_t)
    return text + (f" (enqueue past T in {past} run{'s' if past > 1 else ''})" if past else "")


def fmt_lost(summary: Summary) -> str:
    text = f"{summary.lost} / {summary.dup}"
    if summary.lost or summary.dup:
        text = f"**{text}**"
    failed = sum(r.enqueue_errors for r in summary.runs)
    broken = sum(1 for r in summary.runs if r.failed)
    if failed:
        text += f" (enqueue raised ×{failed})"
    if broken:
        text += f" (**{broken} run{'s' if broken > 1 else ''} failed**)"
    return text


def ratio(name: str, a: float | None, b: float | None, meaning: str) -> str | None:
    if a is None or b is None or b == 0:
        return None
    return f"- {name}: {a / b:.2f}× ({meaning})"


def share(label: str, a: float | None, floor: float | None, backend: str) -> str | None:
    if a is None or floor is None or floor == 0:
        return None
    return f"- {label}: W1 at {100 * a / floor:.1f}% of the {backend} floor"


def peer_version(kind: str, packages: list[str]) -> str:
    python = VENVS / kind / "bin" / "python"
    code = (
        "import importlib.metadata as m, sys; print(' '.join(m.version(p) for p in sys.argv[1:]))"
    )
    done = subprocess.run(
        [str(python), "-c", code, *packages], capture_output=True, text=True, check=True
    )
    return ", ".join(f"{p} {v}" for p, v in zip(packages, done.stdout.split(), strict=True))


def source_state() -> str:
    """The commit fencepost's editable install runs, and whether src/ differs from it."""
    root = PEERS.parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "source: not a git checkout"
    return f"source {head}" + (" with uncommitted changes in src/" if dirty else "")


def machine(dsn: str, chosen: list[System]) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()
            for name in ("synchronous_commit", "fsync", "shared_buffers", "autovacuum")
        }
    pg = row[0] if row else "?"
    shown = " ".join(f"{k}={v[0] if v else '?'}" for k, v in settings.items())
    lines = [
        f"- machine: {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start",
        f"- Python {platform.python_implementation()} {platform.python_version()} "
        f"(every virtualenv), SQLite {sqlite3.sqlite_version}",
        f"- PostgreSQL {pg} at {urlsplit(dsn).hostname}:{urlsplit(dsn).port or 5432} ({shown})",
        f"- fencepost {fencepost.__version__} (.venv, {source_state()}), "
        f"psycopg {psycopg.__version__}",
    ]
    kinds = {s.kind for s in chosen}
    if "pgqueuer" in kinds:
        lines.append("- PgQueuer: " + peer_version("pgqueuer", ["pgqueuer", "asyncpg", "uvloop"]))
    if "huey" in kinds:
        lines.append("- Huey: " + peer_version("huey", ["huey"]))
    return lines


def report(
    args: argparse.Namespace,
    chosen: list[System],
    results: dict[str, list[Outcome]],
    header: list[str],
) -> None:
    summaries = {s.key: Summary(s, results[s.key]) for s in chosen}
    print(
        f"# Peer comparison: one worker process each, no-op handler, median of "
        f"{args.repeat} interleaved runs; W1 = {args.n:,} jobs due now, W2 = {args.burst:,} "
        f"due at T = enqueue start + {args.lead:g} s"
    )
    print()
    print("| system | W1 jobs/s (runs) | W2 lateness p50 / p99 / max | peak RSS | lost / dup |")
    print("|---|---:|---:|---:|---:|")
    for s in chosen:
        summary = summaries[s.key]
        rss = "—" if summary.rss_mb is None else f"{summary.rss_mb:,.0f} MB"
        print(
            f"| {s.label} | {fmt_rate(summary)} | {fmt_lateness(summary)} | {rss} | "
            f"{fmt_lost(summary)} |"
        )
    print()

    def rate(key: str) -> float | None:
        return summaries[key].rate if key in summaries else None

    def p99(key: str) -> float | None:
        return summaries[key].lateness(0.99) if key in summaries else None

    faster = "above 1: fencepost's default drains faster"
    lines = [
        ratio(
            "fencepost-PG W1 / PgQueuer-defaults W1", rate("fencepost-pg"), rate("pgqueuer"), faster
        ),
        ratio(
            "fencepost-PG W1 / PgQueuer-batch100 W1",
            rate("fencepost-pg"),
            rate("pgqueuer-batch100"),
            faster,
        ),
        ratio(
            "fencepost-PG W2 p99 / PgQueuer W2 p99",
            p99("fencepost-pg"),
            p99("pgqueuer"),
            "below 1: fencepost's default is less late",
        ),
        ratio("fencepost-SQLite W1 / Huey W1", rate("fencepost-sqlite"), rate("huey"), faster),
    ]
    for s in chosen:
        if s.src is not None:
            head = s.key.removesuffix("@base")
            lines.append(
                ratio(
                    f"{head} W1 / the same at the baseline",
                    rate(head),
                    rate(s.key),
                    "above 1: faster than the baseline",
                )
            )
            lines.append(
                ratio(
                    f"{head} W2 p99 / the same at the baseline",
                    p99(head),
                    p99(s.key),
                    "below 1: less late than the baseline",
                )
            )
    for s in chosen:
        if s.kind != "floor":
            floor = "floor-pg" if s.backend == "pg" else "floor-sqlite"
            backend = "PostgreSQL" if s.backend == "pg" else "SQLite"
            lines.append(share(s.label, rate(s.key), rate(floor), backend))
    shown = [line for line in lines if line is not None]
    if shown:
        print("Ratios of the medians:")
        print()
        print("\n".join(shown))
        print()
    problems = [
        f"- {s.key}, run {i}: {note}"
        for s in chosen
        for i, r in enumerate(results[s.key], 1)
        for note in r.notes
    ]
    print("Problems:" if problems else "No job was lost or duplicated in any run.")
    if problems:
        print()
        print("\n".join(problems))
    print()
    print("\n".join(header))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--systems", help=f"comma list of: {', '.join(BY_KEY)} (default all)")
    parser.add_argument("--repeat", type=int, help="runs of each system (default 3; 1 --quick)")
    parser.add_argument("--n", type=int, help="W1 jobs (default 20,000; 2,000 --quick)")
    parser.add_argument("--burst", type=int, help="W2 jobs (default 10,000; 1,000 --quick)")
    parser.add_argument("--lead", type=float, help="W2: seconds to T (default 10; 5 --quick)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--pg-dsn", default=DEFAULT_DSN, help=f"default {DEFAULT_DSN}")
    parser.add_argument("--logs", type=Path, help="keep every worker's log in this directory")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run each chosen fencepost system on git revision REV, interleaved "
        "(before/after in one run)",
    )
    args = parser.parse_args()
    quick = args.quick
    args.repeat = args.repeat or (1 if quick else 3)
    args.n = args.n or (2_000 if quick else 20_000)
    args.burst = args.burst or (1_000 if quick else 10_000)
    args.lead = args.lead or (5.0 if quick else LEAD)
    keys = args.systems.split(",") if args.systems else list(BY_KEY)
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        parser.error(f"--systems: unknown {', '.join(unknown)}; known: {', '.join(BY_KEY)}")
    chosen = [s for s in SYSTEMS if s.key in keys]
    with baseline_tree(args.baseline) as base_src:
        if base_src is not None:
            chosen = with_baseline(chosen, args.baseline, base_src)
        run_all(args, chosen)


@contextmanager
def baseline_tree(rev: str | None) -> Iterator[Path | None]:
    """``rev``'s source, checked out in a temporary git worktree (None: no baseline)."""
    if rev is None:
        yield None
        return
    root = PEERS.parents[1]
    with tempfile.TemporaryDirectory(prefix="fpbench-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", "-q", str(tree), rev],
            check=True,
        )
        try:
            yield tree / "src"
        finally:
            subprocess.run(
                ["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=False
            )


def with_baseline(chosen: list[System], rev: str, src: Path) -> list[System]:
    """Each fencepost system followed by the same system on ``rev``'s source."""
    out: list[System] = []
    for s in chosen:
        out.append(s)
        if s.kind == "fencepost":
            label = f"{s.label} [baseline {rev}]"
            out.append(replace(s, key=f"{s.key}@base", label=label, src=src))
    return out


def run_all(args: argparse.Namespace, chosen: list[System]) -> None:
    """Every chosen system, ``args.repeat`` times, interleaved; then the report."""
    for kind in sorted({s.kind for s in chosen} & {"pgqueuer", "huey"}):
        if not (VENVS / kind / ".installed").exists():
            raise SystemExit(f"{VENVS / kind} is missing: run `make bench-peers` once")
    header = machine(args.pg_dsn, chosen)
    results: dict[str, list[Outcome]] = {s.key: [] for s in chosen}
    for i in range(1, args.repeat + 1):
        for s in chosen:
            started = time.monotonic()
            outcome = run_once(s, args)
            results[s.key].append(outcome)
            late = (
                ""
                if not outcome.lateness
                else f", W2 p99 {percentile(outcome.lateness, 0.99) * 1000:,.0f} ms"
            )
            rate = "—" if outcome.rate is None else f"{outcome.rate:,.0f}"
            progress(
                f"run {i}/{args.repeat} {s.key}: W1 {rate} jobs/s{late}, "
                f"RSS {outcome.rss_kb / 1024:,.0f} MB, lost {outcome.lost}, dup {outcome.dup}, "
                f"enqueue {' + '.join(f'{s:.1f}' for s in outcome.enqueue_s) or '-'} s "
                f"({time.monotonic() - started:.0f} s)"
            )
    report(args, chosen, results, header)


if __name__ == "__main__":
    main()

"""1,000,000 hourly schedules on PostgreSQL: one hour materialized, and a top-of-minute burst.

Run by hand (the seed's scale; about 10 minutes on two cores)::

    .venv/bin/python bench/million_schedules.py [--db postgresql://...] [--n 1000000]
        [--burst 100000] [--timed 5000] [--materializers 2] [--workers 2]
        [--worker-args "--concurrency 64"] [--only hour|burst]

``--db`` defaults to ``$FENCEPOST_TEST_POSTGRES_DSN``. Each part works in a schema
of its own (``fpbench_<pid>_…``, made by fencepost's migrations), dropped at the end.
Every process is a real ``fencepost`` command at the README's defaults: the
materializers are ``fencepost serve --db URL --port P`` (no app: the service's
materializer and reaper, no embedded workers), the workers ``fencepost worker
noop_app:app --db URL`` (no flags unless ``--worker-args`` adds them, and then the
table says so).

* **Creating schedules**: the first ``--timed`` schedules go through
  ``add_schedule`` one by one on one connection — there is no bulk path, so this
  is the rate a client gets; the rest are copied from one of them in one SQL
  statement (each with its own id and minute), as add_schedule would have written
  them.
* **One hour**: ``--n`` schedules ``M * * * *``, their minutes spread over 40 of the
  hour's 60 (the 20 after T's are left out: see below), all last planned at T, a
  whole minute one hour before the coming one, as after an hour with no
  materializer. Two materializer processes start; each schedule's one slot of the
  hour after T falls inside their window (now + the 60 s lookahead), and none has a
  second slot in it for the next 19 minutes — which is why those minutes are
  empty. The default misfire policy (``coalesce``) runs the one missed slot of
  each schedule. Measured: process start to the last execution stored (the store's
  ``created_at``), and checked: exactly ``--n`` executions, one per schedule, every
  slot in (T, T+1h], none SKIPPED.
* **Burst**: ``--n`` schedules again in a fresh schema, ``--burst`` of them at the
  minute F and the rest spread over the other 59, each planned as a live
  materializer leaves it (watermark = now, next due one lookahead before its next
  slot). The two materializers store the burst one minute ahead of F, as they do
  at the top of every hour, and keep storing the others as they fall due; two
  worker processes claim and run everything (a no-op job). Claim lateness of the
  burst = its CLAIMED transition's time - F: p50 / p99 / max; drain rate = burst /
  (last COMPLETED - F).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fencepost
import pg_common as pg  # bench/ is the script's directory, so first on sys.path
from children import child_env

FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
TARGET_HOUR = 120.0  # seconds, two materializers
TARGET_P99 = 10.0  # seconds, two workers
LOOKAHEAD = 60  # MaterializerOptions.lookahead, the default every materializer runs with
GAP = 20  # minutes after T that no schedule uses (the one-hour part's time budget)

COLUMNS = (
    "id, job, job_version, inputs, cron, every, timezone, dst_gap, dst_fold, misfire, "
    "misfire_grace, max_catch_up, overlap, start_at, end_at, max_attempts, priority, paused, "
    "watermark, next_due, materializer, lease_until, request_hash, created_at, updated_at, queue"
)

# Copies the template schedule into rows first..last: id s<7 digits>, minute from the
# minutes array (row g gets minutes[g % len + 1]), watermark as given (None: the copy's
# start), and next_due one lookahead before the row's next slot after the watermark
# (when next_due is None), else next_due.
COPY_SQL = f"""
WITH c AS (SELECT coalesce(%(watermark)s::timestamptz, clock_timestamp()) AS at),
rows AS (
    SELECT g, (%(minutes)s::int[])[g %% cardinality(%(minutes)s::int[]) + 1] AS minute
    FROM generate_series(%(first)s::int, %(last)s::int) AS g
),
slots AS (
    SELECT g, minute, c.at,
           date_trunc('hour', c.at) + minute * interval '1 minute'
           + CASE WHEN date_trunc('hour', c.at) + minute * interval '1 minute' <= c.at
                  THEN interval '1 hour' ELSE interval '0' END AS next_slot
    FROM rows CROSS JOIN c
)
INSERT INTO schedules ({COLUMNS})
SELECT 's' || lpad(slots.g::text, 7, '0'), t.job, t.job_version, t.inputs,
       slots.minute || ' * * * *', t.every, t.timezone, t.dst_gap, t.dst_fold, t.misfire,
       t.misfire_grace, t.max_catch_up, t.overlap, t.start_at, t.end_at, t.max_attempts,
       t.priority, t.paused, slots.at,
       coalesce(%(next_due)s::timestamptz,
                greatest(slots.at, slots.next_slot - %(lookahead)s * interval '1 second')),
       NULL, NULL, t.request_hash, t.created_at, t.updated_at, t.queue
FROM slots CROSS JOIN schedules AS t WHERE t.id = %(template)s
"""


def progress(message: str) -> None:
    pg.progress(f"{datetime.now(UTC):%H:%M:%S} {message}")


def load() -> str:
    """The machine's load averages (1, 5, 15 min), as ``uptime`` prints them."""
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def minute_floor(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


class Bench:
    """One PostgreSQL server, the schemas made on it and the processes started against them."""

    def __init__(self, server: pg.Server, worker_args: list[str]) -> None:
        self.server = server
        self.worker_args = worker_args

    def url(self, schema: str) -> str:
        """The URL a user would write: the schema and nothing else (default pool)."""
        separator = "&" if "?" in self.server.conninfo else "?"
        return f"{self.server.conninfo}{separator}schema={schema}"

    def create(
        self,
        schema: str,
        count: int,
        minutes: list[int],
        *,
        timed: int,
        watermark: datetime | None,
        next_due: datetime | None,
    ) -> dict[str, float]:
        """``count`` schedules of ``noop``: ``timed`` through add_schedule, the rest copied."""
        timed = max(1, min(timed, count))
        report: dict[str, float] = {}
        with fencepost.connect(self.url(schema)) as store:
            started = time.perf_counter()
            for g in range(timed):
                store.add_schedule(
                    "noop", cron=f"{minutes[g % len(minutes)]} * * * *", id=f"s{g:07d}"
                )
            report["add_seconds"] = time.perf_counter() - started
            report["added"] = timed
        with self.server.connect(schema) as conn:
            if watermark is not None or next_due is not None:
                conn.execute(
                    "UPDATE schedules SET watermark = coalesce(%s, watermark), "
                    "next_due = coalesce(%s, next_due)",
                    (watermark, next_due),
                )
            started = time.perf_counter()
            conn.execute(
                COPY_SQL,
                {
                    "watermark": watermark,
                    "next_due": next_due,
                    "minutes": minutes,
                    "first": timed,
                    "last": count - 1,
                    "lookahead": LOOKAHEAD,
                    "template": "s0000000",
                },
            )
            report["copy_seconds"] = time.perf_counter() - started
            # autovacuum may be off (it is on this machine): analyze as it would have.
            conn.execute("VACUUM ANALYZE schedules")
        return report

    @contextmanager
    def materializers(self, schema: str, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
        """``count`` running ``fencepost serve`` processes (no app: materializer and reaper)."""
        procs = [
            subprocess.Popen(
                [
                    FENCEPOST,
                    "serve",
                    "--db",
                    self.url(schema),
                    "--port",
                    str(free_port()),
                    "--log-level",
                    "WARNING",
                ],
            )
            for _ in range(count)
        ]
        try:
            yield procs
        finally:
            stop(procs)

    @contextmanager
    def workers(self, schema: str, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
        """``count`` running ``fencepost worker noop_app:app`` processes."""
        procs = [
            subprocess.Popen(
                [
                    FENCEPOST,
                    "worker",
                    "noop_app:app",
                    "--db",
                    self.url(schema),
                    *self.worker_args,
                    "--log-level",
                    "WARNING",
                ],
                env=child_env(),
            )
            for _ in range(count)
        ]
        try:
            yield procs
        finally:
            stop(procs)

    # -- one hour ------------------------------------------------------------------------

    def one_hour(self, count: int, processes: int, timed: int) -> dict[str, Any]:
        schema = self.server.new_schema("hour")
        try:
            now = datetime.now(UTC)
            # T + 1h is the first whole minute at or after now - 60 s + a margin, so that
            # the window (T, now + lookahead] holds T + 1h when the materializers start.
            t = minute_floor(now + timedelta(seconds=LOOKAHEAD - 5)) - timedelta(hours=1)
            if t + timedelta(hours=1) > now + timedelta(seconds=LOOKAHEAD):
                t -= timedelta(minutes=1)
            minutes = [(t.minute + GAP + 1 + k) % 60 for k in range(60 - GAP)]
            progress(f"hour: creating {count:,} schedules, last planned at {t:%H:%M}")
            report: dict[str, Any] = self.create(
                schema, count, minutes, timed=timed, watermark=t, next_due=t
            )
            deadline = t + timedelta(hours=1, minutes=GAP) - timedelta(seconds=LOOKAHEAD)
            report["load_before"] = load()
            progress(f"hour: {processes} materializers start (load {report['load_before']})")
            started_wall = datetime.now(UTC)
            with self.server.connect(schema) as conn, self.materializers(schema, processes) as ps:
                while True:
                    time.sleep(1.0)
                    (due,) = conn.execute(
                        "SELECT count(*) FROM schedules WHERE next_due <= %s", (t,)
                    ).fetchone() or (0,)
                    if due == 0:
                        break
                    if datetime.now(UTC) > deadline:
                        raise SystemExit(f"hour: {due:,} schedules left when the window closed")
                    if any(p.poll() is not None for p in ps):
                        raise SystemExit("hour: a materializer exited")
                report["load_after"] = load()
                report["cpu"] = [cpu_seconds(p.pid) for p in ps]
            with self.server.connect(schema) as conn:
                row = conn.execute(
                    "SELECT count(*), count(DISTINCT schedule_id), min(due_at), max(due_at), "
                    "count(*) FILTER (WHERE state <> 'SCHEDULED'), min(created_at), "
                    "max(created_at) FROM executions"
                ).fetchone()
                assert row is not None
            stored, distinct, first_due, last_due, not_scheduled, first_at, last_at = row
            if stored != count or distinct != count:
                raise SystemExit(
                    f"hour: {stored:,} executions of {distinct:,} schedules, not {count:,}"
                )
            if first_due <= t or last_due > t + timedelta(hours=1) or not_scheduled:
                raise SystemExit(
                    f"hour: slots {first_due} .. {last_due} outside ({t}, {t + timedelta(hours=1)}]"
                    f" or {not_scheduled} not SCHEDULED"
                )
            report["stored"] = stored
            report["seconds"] = (last_at - started_wall).total_seconds()
            report["span"] = (last_at - first_at).total_seconds()
            return report
        finally:
            self.server.drop(schema)

    # -- burst ---------------------------------------------------------------------------

    def burst(self, count: int, burst: int, processes: int, workers: int) -> dict[str, Any]:
        schema = self.server.new_schema("burst")
        try:
            # F must leave time to copy the schedules and start every process before
            # the materializers store the burst, one lookahead ahead of F.
            lead = 45 + count / 25_000
            fire = minute_floor(datetime.now(UTC) + timedelta(seconds=LOOKAHEAD + lead)) + (
                timedelta(minutes=1)
            )
            others = [m for m in range(60) if m != fire.minute]
            progress(f"burst: creating {count:,} schedules, {burst:,} firing at {fire:%H:%M}")
            # Burst rows first (ids below s<burst>), then the others spread over the hour.
            report: dict[str, Any] = self.create(
                schema, burst, [fire.minute], timed=1, watermark=None, next_due=None
            )
            if count > burst:
                with self.server.connect(schema) as conn:
                    conn.execute(
                        COPY_SQL,
                        {"watermark": None, "next_due": None, "minutes": others, "first": burst,
                         "last": count - 1, "lookahead": LOOKAHEAD, "template": "s0000000"},
                    )  # fmt: skip
                    conn.execute("VACUUM ANALYZE schedules")
            with self.materializers(schema, processes) as ms, self.workers(schema, workers) as ws:
                if datetime.now(UTC) > fire - timedelta(seconds=LOOKAHEAD + 5):
                    raise SystemExit("burst: setting up took too long; the burst minute is near")
                report["load_before"] = load()
                progress(f"burst: processes up (load {report['load_before']}); waiting for F")
                with self.server.connect(schema) as conn:
                    while True:
                        time.sleep(1.0)
                        (done,) = conn.execute(
                            "SELECT count(*) FROM executions "
                            "WHERE due_at = %s AND state = 'SUCCEEDED'",
                            (fire,),
                        ).fetchone() or (0,)
                        if done >= burst:
                            break
                        if datetime.now(UTC) > fire + timedelta(minutes=10):
                            raise SystemExit(f"burst: {done:,} of {burst:,} done after 10 min")
                        if any(p.poll() is not None for p in ms + ws):
                            raise SystemExit("burst: a process exited")
                report["load_after"] = load()
                report["cpu_materializers"] = [cpu_seconds(p.pid) for p in ms]
                report["cpu_workers"] = [cpu_seconds(p.pid) for p in ws]
            with self.server.connect(schema) as conn:
                row = conn.execute(
                    """
                    SELECT percentile_disc(ARRAY[0.5, 0.99, 1.0]) WITHIN GROUP (ORDER BY late),
                           count(*), count(DISTINCT execution_id)
                    FROM (SELECT t.execution_id, extract(epoch FROM t.at - e.due_at) AS late
                          FROM transitions AS t JOIN executions AS e ON e.id = t.execution_id
                          WHERE t.event = 'CLAIMED' AND e.due_at = %(fire)s) AS c
                    """,
                    {"fire": fire},
                ).fetchone()
                assert row is not None
                report["lateness"] = [float(x) for x in row[0]]
                report["claims"], report["claimed"] = row[1], row[2]
                row = conn.execute(
                    """
                    SELECT min(e.created_at), max(e.created_at), max(t.at)
                    FROM executions AS e
                    JOIN transitions AS t ON t.execution_id = e.id AND t.event = 'COMPLETED'
                    WHERE e.due_at = %(fire)s
                    """,
                    {"fire": fire},
                ).fetchone()
                assert row is not None
                first_stored, last_stored, last_done = row
                report["stored_from"] = (first_stored - fire).total_seconds()
                report["stored_until"] = (last_stored - fire).total_seconds()
                report["drained"] = (last_done - fire).total_seconds()
                (others_done,) = conn.execute(
                    "SELECT count(*) FROM executions WHERE due_at <> %s AND state = 'SUCCEEDED'",
                    (fire,),
                ).fetchone() or (0,)
                report["others_done"] = others_done
            if report["claimed"] != burst:
                raise SystemExit(f"burst: {report['claimed']:,} of {burst:,} claimed")
            return report
        finally:
            self.server.drop(schema)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def verdict(goal: bool) -> str:
    return "met" if goal else "**missed**"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=os.environ.get("FENCEPOST_TEST_POSTGRES_DSN"))
    parser.add_argument("--n", type=int, default=1_000_000, help="hourly schedules")
    parser.add_argument("--burst", type=int, default=100_000, help="of them firing at one minute")
    parser.add_argument("--timed", type=int, default=5_000, help="added through add_schedule")
    parser.add_argument("--materializers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-args", default="", help="flags for each worker (tuned runs)")
    parser.add_argument("--only", choices=("hour", "burst"))
    args = parser.parse_args()
    if not args.db or not pg.is_postgres(args.db):
        raise SystemExit("--db postgresql://... (or $FENCEPOST_TEST_POSTGRES_DSN) is required")
    extra = shlex.split(args.worker_args)
    server = pg.Server(args.db, "mil")
    bench = Bench(server, extra)
    command = " ".join(["bench/million_schedules.py", *sys.argv[1:]])
    with server.session():
        hour = (
            None if args.only == "burst" else bench.one_hour(args.n, args.materializers, args.timed)
        )
        burst = (
            None
            if args.only == "hour"
            else bench.burst(args.n, args.burst, args.materializers, args.workers)
        )
    settings = " ".join(extra) if extra else "defaults (no flags)"
    print(f"# {command}")
    print(*server.describe(), sep="\n")
    print(
        f"# {os.cpu_count()} cores; {args.materializers} `fencepost serve` materializers, "
        f"{args.workers} `fencepost worker` processes at {settings}"
    )
    print()
    print("| measure | figure | target | load (1/5/15 min) before → after |")
    print("|---|---:|---|---|")
    if hour is not None:
        rate = hour["added"] / hour["add_seconds"]
        print(
            f"| add_schedule, one by one (first {hour['added']:,}) | {rate:,.0f} schedules/s "
            f"(the rest copied in SQL: {hour['copy_seconds']:,.1f} s) | | |"
        )
        cpu = " + ".join(f"{c:,.0f}" for c in hour["cpu"])
        print(
            f"| materialize one hour of {args.n:,} hourly schedules ({hour['stored']:,} "
            f"executions, one per schedule): process start → last stored | "
            f"{hour['seconds']:,.1f} s ({args.n / hour['seconds']:,.0f} /s; first → last "
            f"{hour['span']:,.1f} s; materializer CPU {cpu} s) | ≤ {TARGET_HOUR:.0f} s — "
            f"{verdict(hour['seconds'] <= TARGET_HOUR)} | {hour['load_before']} → "
            f"{hour['load_after']} |"
        )
    if burst is not None:
        p50, p99, worst = burst["lateness"]
        print(
            f"| {args.burst:,} of {args.n:,} due at one instant F: the burst stored from "
            f"F{burst['stored_from']:+.1f} to F{burst['stored_until']:+.1f} s | | before F | |"
        )
        wcpu = " + ".join(f"{c:,.0f}" for c in burst["cpu_workers"])
        print(
            f"| the same: claim lateness p50 / p99 / max | {p50:,.2f} / {p99:,.2f} / "
            f"{worst:,.2f} s | p99 ≤ {TARGET_P99:.0f} s — {verdict(p99 <= TARGET_P99)} | "
            f"{burst['load_before']} → {burst['load_after']} |"
        )
        print(
            f"| the same: drained (last completed - F) | {burst['drained']:,.1f} s "
            f"({args.burst / burst['drained']:,.0f} jobs/s; worker CPU {wcpu} s; "
            f"{burst['others_done']:,} other executions run meanwhile) | | |"
        )


if __name__ == "__main__":
    main()

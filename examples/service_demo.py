"""The service demo: ``fencepost serve`` with the example jobs and an every-minute schedule.

``make demo`` runs this. It starts ``fencepost serve --definitions examples/definitions``
on ``http://127.0.0.1:8080/`` over ``.demo/fencepost.db``, then, through the Python
client (:class:`fencepost.client.Client`), as any other program would:

* adds the schedule ``demo-every-minute`` (cron ``* * * * *``, job ``greet``), which
  a second run finds already there and keeps;
* submits one execution of each example job: ``greet`` (a command), ``add`` (a
  Python function) and ``healthz`` (an HTTP GET of this very service);
* prints the dashboard URL, waits for the three submissions and for the schedule's
  first run of this session to succeed, prints their results,
* and keeps serving until Ctrl-C, which stops the service gracefully.

The service's own log goes to ``service.log`` next to the database file (``.demo/``
by default). Anything that goes wrong ends the demo with a message, that log's
tail and a non-zero exit status.

For tests and CI: ``--every SECONDS`` uses an interval schedule instead of the cron
one, ``--exit-after-success`` stops once the schedule has run twice successfully,
``--port`` and ``--db`` place the service elsewhere. ``healthz`` is submitted only on
port 8080, the address its definition GETs.

``examples/lease_timeline.py`` is the other example: the store alone, on a manual
clock, showing why a worker that lost its lease cannot overwrite a result.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from fencepost import FencepostError, IdempotencyConflict, State
from fencepost.client import Client
from fencepost.domain.models import Execution, Schedule

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = ROOT / "examples" / "definitions"
DEMO_DIR = ROOT / ".demo"
FENCEPOST = str(Path(sys.executable).with_name("fencepost"))
HOST = "127.0.0.1"
#: The port ``healthz.json`` GETs: the demo serves there by default so that job succeeds.
HEALTHZ_PORT = 8080
READY_TIMEOUT = 20.0
SUBMISSIONS_TIMEOUT = 60.0
#: How long a service may take to drain after SIGINT (it is started with ``--grace 5``).
STOP_TIMEOUT = 30.0
POLL = 0.5


class DemoFailed(Exception):
    """Something the demo needs did not happen; the message says what."""


class _Terminated(Exception):
    """SIGTERM reached the demo: stop the service as Ctrl-C would."""


@dataclass(frozen=True)
class DemoSchedule:
    """The schedule the demo adds: its id, its rule and its period in seconds."""

    id: str
    rule: dict[str, Any]
    period: float

    @property
    def described(self) -> str:
        return f"cron {self.rule['cron']!r}" if "cron" in self.rule else f"every {self.period:g} s"


def demo_schedule(every: int | None) -> DemoSchedule:
    """The cron schedule, or with ``every`` an interval one (ids differ, so both may coexist)."""
    if every is None:
        return DemoSchedule("demo-every-minute", {"cron": "* * * * *"}, 60.0)
    return DemoSchedule(
        f"demo-every-{every}-seconds", {"every": every, "timezone": "UTC"}, float(every)
    )


# -- the service process -----------------------------------------------------------------


def sqlite_path(db: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL (None for other stores)."""
    parts = urlsplit(db)
    return Path(unquote(parts.path)[1:]) if parts.scheme == "sqlite" else None


def port_in_use(port: int) -> bool:
    """True when something already listens on HOST:port (or the port cannot be bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # The same option uvicorn sets, so a port left in TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


class ServiceProcess:
    """``fencepost serve`` as a child process, its output in ``log``."""

    def __init__(self, db: str, port: int, log: Path) -> None:
        self.url = f"http://{HOST}:{port}/"
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    FENCEPOST,
                    "serve",
                    "--definitions",
                    str(DEFINITIONS),
                    "--db",
                    db,
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    "--workers",
                    "1",
                    "--grace",
                    "5",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own process group: Ctrl-C reaches only the demo, which then sends
                # one SIGINT (a second would make the service skip its drain).
                process_group=0,
            )

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Poll ``/readyz`` until it answers 200; raise if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=2.0) as http:
            while True:
                self.check_alive()
                try:
                    if http.get("/readyz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise DemoFailed(f"the service was not ready within {timeout:g} s")
                time.sleep(0.1)

    def check_alive(self) -> None:
        code = self.proc.poll()
        if code is None:
            return
        if "address already in use" in tail(self.log).lower():
            raise DemoFailed(f"the service could not listen on {self.url}: the port is taken")
        raise DemoFailed(f"the service exited with status {code}")

    def stop(self) -> int:
        """SIGINT (a graceful stop) and wait; the exit status.

        Another Ctrl-C meanwhile is passed on (the service then stops its handlers
        at once); a service that outlasts its waits, or a third Ctrl-C, is killed.
        """
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self._wait()
                except (KeyboardInterrupt, _Terminated):
                    say("interrupted again: the service stops its running jobs at once")
                    self.proc.send_signal(signal.SIGINT)
                    self._wait()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def _wait(self) -> None:
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            say(f"the service did not stop within {STOP_TIMEOUT:g} s; killing it")


# -- what the demo does through the client -----------------------------------------------


def say(text: str = "") -> None:
    print(text, flush=True)


def banner(url: str) -> None:
    line = "=" * 64
    say(line)
    say(f"  Dashboard:  {url}")
    say(f"  API docs:   {url}docs    metrics: {url}metrics")
    say(line)


def add_schedule(client: Client, schedule: DemoSchedule) -> Schedule:
    """Add the demo schedule, or find the one an earlier run added; resume it if paused."""
    try:
        added = client.add_schedule(
            "greet",
            inputs={"who": f"the {schedule.id} schedule"},
            id=schedule.id,
            **schedule.rule,
        )
    except IdempotencyConflict as exc:
        raise DemoFailed(
            f"schedule {schedule.id} exists with other arguments ({exc}); delete it from "
            "the dashboard, or remove the database, and run the demo again"
        ) from None
    if added.paused:
        say(f"schedule {schedule.id} was paused (from the dashboard?): resuming it")
        added = client.resume_schedule(schedule.id)
    return added


def submit_examples(client: Client, port: int) -> dict[str, Execution]:
    """One execution of each example job, by label."""
    submitted = {
        "greet (command job)": client.submit("greet", {"who": "make demo"}),
        "add (Python job)": client.submit("add", {"x": 2, "y": 3}),
    }
    if port == HEALTHZ_PORT:
        submitted["healthz (HTTP job)"] = client.submit("healthz")
    else:
        say(
            f"not submitting healthz: its definition GETs http://{HOST}:{HEALTHZ_PORT}/healthz "
            f"and this service listens on port {port}"
        )
    for label, execution in submitted.items():
        say(f"submitted {label}: {execution.id}")
    return submitted


def wait_succeeded(
    client: Client, service: ServiceProcess, submitted: dict[str, Execution]
) -> None:
    """Print each submission's result once it succeeds; raise if one ends otherwise."""
    pending = dict(submitted)
    deadline = time.monotonic() + SUBMISSIONS_TIMEOUT
    while pending:
        service.check_alive()
        for label, execution in list(pending.items()):
            now = client.get(execution.id)
            if now.state is State.SUCCEEDED:
                say(f"  {label} succeeded: {show(now.result)}")
                del pending[label]
            elif now.state.is_terminal:
                raise DemoFailed(f"{label} ended {now.state}: {now.error}")
        if pending and time.monotonic() > deadline:
            late = ", ".join(f"{label} ({client.get(e.id).state})" for label, e in pending.items())
            raise DemoFailed(f"not done within {SUBMISSIONS_TIMEOUT:g} s: {late}")
        time.sleep(POLL)


class RunWatcher:
    """Reports each run of one schedule once, when it has finished.

    Runs are read in id (creation) order from the oldest one still unfinished,
    so a demo left running for days does not re-read every run on each poll.
    """

    def __init__(self, client: Client, schedule_id: str) -> None:
        self.client = client
        self.schedule_id = schedule_id
        #: Every run with an id up to this one has finished and been reported.
        self.after: str | None = None
        self.reported: set[str] = set()

    def finished(self) -> list[Execution]:
        """The runs that have finished since the last call, by slot."""
        new = []
        contiguous = True
        for execution in self._runs_after(self.after):
            if not execution.state.is_terminal:
                contiguous = False
                continue
            if execution.id not in self.reported:
                self.reported.add(execution.id)
                new.append(execution)
            if contiguous:
                self.after = execution.id
        if self.after is not None:
            after = self.after
            self.reported = {i for i in self.reported if i > after}
        return sorted(new, key=lambda e: e.slot or "")

    def _runs_after(self, after: str | None) -> Iterator[Execution]:
        while True:
            page = self.client.query(schedule=self.schedule_id, limit=500, after=after)
            yield from page.items
            if page.next_cursor is None:
                return
            after = page.next_cursor


def wait_scheduled_runs(
    client: Client,
    service: ServiceProcess,
    schedule: DemoSchedule,
    runs: RunWatcher,
    since: datetime,
    count: int,
) -> None:
    """Wait until ``count`` runs of the schedule due from ``since`` on have succeeded.

    One of them ending otherwise fails the demo. Runs due earlier, left over from a
    previous session (materialized ahead, or overdue while the service was down),
    may run now too: they are summed up, not counted.
    """
    timeout = count * schedule.period + 10
    fire = client.preview(schedule.id, 1)
    next_at = f", next due at {fire[0].astimezone():%H:%M:%S}" if fire else ""
    say(
        f"waiting up to {timeout:g} s for {count} run(s) of schedule {schedule.id} "
        f"({schedule.described}{next_at}) to succeed ..."
    )
    succeeded = 0
    deadline = time.monotonic() + timeout
    while succeeded < count:
        service.check_alive()
        leftovers: Counter[str] = Counter()
        for execution in runs.finished():
            if execution.slot is None or datetime.fromisoformat(execution.slot) < since:
                leftovers[execution.state] += 1
            elif execution.state is not State.SUCCEEDED:
                raise DemoFailed(
                    f"schedule run {execution.id} (slot {execution.slot}) ended "
                    f"{execution.state}: {execution.error}"
                )
            else:
                succeeded += 1
                say(f"  schedule run for slot {execution.slot} succeeded: {show(execution.result)}")
        if leftovers:
            states = ", ".join(f"{n} {state}" for state, n in sorted(leftovers.items()))
            say(f"  runs left over from before this session (due earlier) finished: {states}")
        if succeeded < count and time.monotonic() > deadline:
            raise DemoFailed(
                f"{succeeded} of {count} run(s) of schedule {schedule.id} succeeded "
                f"within {timeout:g} s"
            )
        time.sleep(POLL)


def keep_serving(service: ServiceProcess, schedule: DemoSchedule, runs: RunWatcher) -> None:
    """Serve until Ctrl-C (KeyboardInterrupt), printing each new run of the schedule."""
    say(f"serving until Ctrl-C; schedule {schedule.id} keeps running ({schedule.described})")
    while True:
        service.check_alive()
        for execution in runs.finished():
            say(f"  schedule run for slot {execution.slot}: {execution.state}")
        time.sleep(2.0)


def tail(log: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of ``log`` ("" if it cannot be read)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def show(result: Any) -> str:
    """A result for one line of output."""
    return result.strip() if isinstance(result, str) else repr(result)


# -- main --------------------------------------------------------------------------------


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


@contextmanager
def service_running(db: str, port: int, log: Path) -> Iterator[ServiceProcess]:
    """The service, ready; stopped with SIGINT however the block ends."""
    service = ServiceProcess(db, port, log)
    try:
        service.wait_ready()
        yield service
    finally:
        say("stopping the service ...")
        code = service.stop()
        say(f"the service stopped (exit status {code})")


def run(args: argparse.Namespace) -> int:
    schedule = demo_schedule(args.every)
    database = sqlite_path(args.db)
    log_dir = database.parent if database is not None else DEMO_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "service.log"
    if port_in_use(args.port):
        say(
            f"demo failed: port {args.port} on {HOST} is already in use. Stop whatever "
            f"listens there (an earlier `make demo`?) and try again"
            + (", or pass --port" if args.port != HEALTHZ_PORT else "")
        )
        return 1
    say(f"starting fencepost serve on {args.db} (log: {log})")
    try:
        with service_running(args.db, args.port, log) as service, Client(service.url) as client:
            since = datetime.now(UTC)
            added = add_schedule(client, schedule)
            say(f"schedule {added.id}: job greet, {schedule.described}")
            runs = RunWatcher(client, schedule.id)
            runs.finished()  # runs of earlier sessions are not this one's to report
            submitted = submit_examples(client, args.port)
            banner(service.url)
            wait_succeeded(client, service, submitted)
            wait_scheduled_runs(
                client, service, schedule, runs, since, 2 if args.exit_after_success else 1
            )
            if args.exit_after_success:
                say("the demo succeeded")
                return 0
            banner(service.url)
            with suppress(KeyboardInterrupt, _Terminated):
                keep_serving(service, schedule, runs)
        return 0
    except (KeyboardInterrupt, _Terminated):
        say("interrupted")
        return 130
    except (DemoFailed, FencepostError) as exc:
        say(f"demo failed: {exc}")
        say(f"--- the last lines of {log} ---")
        say(tail(log))
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db",
        default=f"sqlite:///{DEMO_DIR / 'fencepost.db'}",
        help="store URL (default: .demo/fencepost.db in the repository)",
    )
    parser.add_argument("--port", type=int, default=HEALTHZ_PORT, help="default 8080")
    parser.add_argument(
        "--every",
        type=int,
        metavar="SECONDS",
        help="an interval schedule every SECONDS instead of the every-minute cron one",
    )
    parser.add_argument(
        "--exit-after-success",
        action="store_true",
        help="stop once the schedule has run successfully twice (for tests and CI)",
    )
    args = parser.parse_args(argv)
    if args.every is not None and args.every < 1:
        parser.error(f"--every: must be >= 1 second, got {args.every}")
    if not 0 < args.port < 65536:
        parser.error(f"--port: must be 1-65535, got {args.port}")
    signal.signal(signal.SIGTERM, _terminate)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

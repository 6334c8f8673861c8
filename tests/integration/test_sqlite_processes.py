"""Real OS processes sharing one SQLite file: exactly-once completion under fenced leases.

Four worker processes (``_sqlite_worker.py``) claim and complete 5,000 executions.
Some batches stall past their lease so that the executions are taken over and the
stalled completion must be refused. Afterwards the store's audit trail and the
workers' own logs must show that every execution SUCCEEDED through exactly one
accepted completion, made by the holder of its latest lease while that lease was
live, and that no execution was ever held by two live leases at once.

Each worker first runs a drill on a few executions that only it claims, which makes
sure, whatever the timing, that a completion is refused both when its lease merely
expired and when the same worker already holds a newer, live lease of the execution
(where only the epoch tells the two leases apart).

Overlap is judged on the store's own times, without tolerance: the CLAIMED
transition's ``at`` is the claim's now, and the lease's ``lease_until`` is that same
now plus the ttl. On SQLite the store's now is this machine's wall clock, so a wall
clock stepped backwards mid-run (NTP) would defeat the store and this test alike.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import Event, State, Transition
from fencepost.domain.machine import stale_reason

EXECUTIONS = 5_000
WORKERS = 4
MAX_ATTEMPTS = 50  # takeovers count as attempts; never let them dead-letter an execution
DEADLINE = 90.0  # seconds the workers get before they are killed and the test fails
DRILL_SIZE = 8  # executions per worker that only that worker claims (see _sqlite_worker.py)
WORKER = Path(__file__).with_name("_sqlite_worker.py")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_processes_complete_each_execution_exactly_once_under_fenced_leases(
    tmp_path: Path,
) -> None:
    url = "sqlite:///" + str(tmp_path / "fencepost.db")  # tmp_path is absolute: sqlite:////...
    # Each worker drills on DRILL_SIZE executions of its own job; all share the rest.
    jobs = [f"drill-worker-{n}" for n in range(WORKERS) for _ in range(DRILL_SIZE)]
    jobs += ["work"] * (EXECUTIONS - len(jobs))
    with fencepost.connect(url) as store:
        ids = [
            e.id
            for e in store.submit_many(
                {"job": job, "inputs": {"n": n}, "max_attempts": MAX_ATTEMPTS}
                for n, job in enumerate(jobs)
            )
        ]
    assert len(set(ids)) == EXECUTIONS

    seed = random.randrange(2**32)
    logs = _run_workers(tmp_path, seed)
    where = f"(worker seed base {seed}; logs in {tmp_path})"

    leases: dict[tuple[str, int], dict[str, Any]] = {}
    accepted: dict[str, list[dict[str, Any]]] = defaultdict(list)
    refused: Counter[tuple[str, int, str]] = Counter()
    for record in logs:
        key = (record["id"], record["epoch"])
        if record["kind"] == "lease":
            assert key not in leases, f"two leases of {key} were handed out {where}"
            leases[key] = record
        elif record["accepted"]:
            accepted[record["id"]].append(record)
        else:
            refused[(record["id"], record["epoch"], record["owner"])] += 1

    with fencepost.connect(url) as store:
        executions = {e.id: e for e in _all_executions(store)}
        audit = {id_: store.transitions(id_) for id_ in ids}

    assert executions.keys() == set(ids), where
    not_succeeded = [e for e in executions.values() if e.state != State.SUCCEEDED]
    assert not not_succeeded, f"{len(not_succeeded)} not SUCCEEDED, e.g. {not_succeeded[0]} {where}"

    claimed: set[tuple[str, int, str]] = set()
    stale: Counter[tuple[str, int, str]] = Counter()
    kinds_of_refusal: Counter[str] = Counter()
    for id_ in ids:
        trail = audit[id_]
        claims = [t for t in trail if t.event == Event.CLAIMED]
        completions = [t for t in trail if t.event == Event.COMPLETED]
        refusals = [t for t in trail if t.event == Event.STALE_REFUSED]
        claimed.update((id_, t.epoch, t.actor or "") for t in claims)
        stale.update((id_, t.epoch, t.actor or "") for t in refusals)
        context = f"execution {id_} {where}\naudit: {_show(trail)}"

        # The audit holds nothing but the claims, one completion and refused calls.
        assert [t.event for t in trail].count(Event.SUBMITTED) == 1, context
        assert len(trail) == 1 + len(claims) + len(completions) + len(refusals), context

        # Epochs: one per claim, strictly increasing in claim order (1, 2, 3, ...).
        assert [t.epoch for t in claims] == list(range(1, len(claims) + 1)), context
        until = {}
        for t in claims:
            lease = leases.get((id_, t.epoch))
            assert lease is not None, f"epoch {t.epoch} was claimed but never logged; {context}"
            assert lease["owner"] == t.actor, context
            until[t.epoch] = datetime.fromisoformat(lease["lease_until"])
            # The lease handed out ends exactly at the claim's now plus the ttl asked for.
            assert until[t.epoch] == t.at + timedelta(seconds=lease["ttl"]), context
            # The worker read the wall clock just before claiming, so that is a lower
            # bound of the store's now. The store keeps whole microseconds and a float
            # timestamp near 1.7e9 is good to about 0.24 us, hence the 2 us of slack (in
            # the only direction that is sound); this just ties the log to the audit.
            assert t.at.timestamp() >= lease["claim_start"] - 2e-6, context

        # No two live leases at once: a claim takes over only once the previous lease
        # has ended by the store's clock (a lease is live while now < lease_until).
        for previous, following in itertools.pairwise(claims):
            assert following.at >= until[previous.epoch], (
                f"epoch {following.epoch} was claimed at {following.at} while epoch "
                f"{previous.epoch} was live until {until[previous.epoch]}; {context}"
            )

        # Exactly one accepted completion, by the latest lease, while it was live.
        assert len(completions) == 1, context
        done = completions[0]
        mine = accepted[id_]
        assert len(mine) == 1, f"{len(mine)} accepted completions {mine}; {context}"
        assert (done.epoch, done.actor) == (mine[0]["epoch"], mine[0]["owner"]), context
        assert done.epoch == claims[-1].epoch, (
            f"a completion at epoch {done.epoch} was accepted after epoch "
            f"{claims[-1].epoch} was claimed; {context}"
        )
        assert claims[-1].at <= done.at < until[done.epoch], (
            f"completion accepted at {done.at}, outside its lease "
            f"[{claims[-1].at}, {until[done.epoch]}); {context}"
        )
        assert executions[id_].result == {"owner": done.actor, "epoch": done.epoch}, context
        assert executions[id_].epoch == claims[-1].epoch, context

        # A refusal is only ever for a lease that had ended when it was refused.
        for t in refusals:
            assert t.reason == stale_reason("complete"), context
            assert t.at >= until[t.epoch], (
                f"a completion at epoch {t.epoch} was refused at {t.at} while its lease "
                f"was live until {until[t.epoch]}; {context}"
            )
            kinds_of_refusal[_kind_of_refusal(t, trail, until)] += 1

    # The workers' logs and the audit describe the same claims and refusals.
    assert claimed == {(id_, e, r["owner"]) for (id_, e), r in leases.items()}, where
    assert stale == refused, where
    # Stalls happened, and their completions were refused in each way a fence must
    # refuse one: the lease merely expired (only `lease_until > now` refuses it); another
    # process took the execution over; this same process holds a newer, live lease
    # (only the epoch tells them apart). The workers' drills guarantee the first and last.
    assert kinds_of_refusal["expired"] > 0, f"{kinds_of_refusal} {where}"
    assert kinds_of_refusal["taken over by another process"] > 0, f"{kinds_of_refusal} {where}"
    assert kinds_of_refusal["same owner holds a newer live lease"] > 0, (
        f"{kinds_of_refusal} {where}"
    )


def _run_workers(tmp_path: Path, seed: int) -> list[dict[str, Any]]:
    """Run the worker processes to the end; return their log records."""
    db = str(tmp_path / "fencepost.db")
    procs = []
    try:
        for n in range(WORKERS):
            out = (tmp_path / f"worker-{n}.out").open("w")
            with out:
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            str(WORKER),
                            db,
                            str(tmp_path / f"worker-{n}.jsonl"),
                            f"worker-{n}",
                            str(seed + n),
                            str(DRILL_SIZE),
                        ],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
        end = time.monotonic() + DEADLINE
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"workers did not finish within {DEADLINE} s (seed base {seed})")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for n, proc in enumerate(procs):
        output = (tmp_path / f"worker-{n}.out").read_text()
        assert proc.returncode == 0, f"worker-{n} exited {proc.returncode}:\n{output}"
        assert not output, f"worker-{n} wrote output:\n{output}"
    records = []
    for n in range(WORKERS):
        with (tmp_path / f"worker-{n}.jsonl").open() as log:
            records.extend(json.loads(line) for line in log)
    return records


def _all_executions(store: fencepost.Store) -> Iterator[fencepost.Execution]:
    cursor = None
    while True:
        page = store.query(limit=1000, after=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _kind_of_refusal(
    refusal: Transition, trail: list[Transition], until: dict[int, datetime]
) -> str:
    """Why the fence refused ``refusal``, judged from the row as it stood then."""
    before = [t for t in trail if t.seq < refusal.seq]
    latest = next(t for t in reversed(before) if t.event == Event.CLAIMED)
    completed = any(t.event == Event.COMPLETED for t in before)
    if latest.epoch == refusal.epoch:
        return "completed twice" if completed else "expired"
    if latest.actor != refusal.actor:
        return "taken over by another process"
    if completed or refusal.at >= until[latest.epoch]:
        return "same owner re-claimed, since completed or expired"
    return "same owner holds a newer live lease"


def _show(trail: list[Transition]) -> str:
    return "; ".join(f"#{t.seq} {t.event} e{t.epoch} {t.actor} {t.at.isoformat()}" for t in trail)

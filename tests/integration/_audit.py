"""Checks shared by the multi-process tests: exactly-once completion, judged from the audit.

The workers of these tests complete every lease with the result
``{"owner": OWNER, "epoch": EPOCH}`` and never heartbeat, fail or reap, so an
execution's audit trail holds nothing but its submission, its claims, one accepted
completion and the refused ones. :func:`check_exactly_once` judges that trail on the
store's own times, without tolerance: the CLAIMED transition's ``at`` is the claim's
now, and its lease ended at that now plus the owner's ttl (a lease is live while
``now < lease_until``). :func:`check_worker_logs` then ties the workers' own logs
(written by ``_worker.py``) to the audit, for runs where every call got its answer.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import fencepost
from fencepost import Event, Execution, State, Transition
from fencepost.domain.machine import stale_reason

#: How :func:`check_exactly_once` names the reasons the fence refused a completion.
EXPIRED = "expired"
TAKEN_OVER = "taken over by another process"
SAME_OWNER_NEWER_LEASE = "same owner holds a newer live lease"
SAME_OWNER_ENDED = "same owner re-claimed, since completed or expired"
COMPLETED_TWICE = "completed twice"


def check_exactly_once(
    executions: Mapping[str, Execution],
    audit: Mapping[str, Sequence[Transition]],
    ttl: Mapping[str, float],
    *,
    where: str,
) -> Counter[str]:
    """Assert that every execution SUCCEEDED through exactly one accepted completion.

    ``audit`` holds every execution's trail, oldest first; ``ttl`` maps each owner to
    the lease duration (seconds) it claimed with. Checked for each execution: epochs
    go 1, 2, 3, ... in claim order; no claim took it while an earlier lease was live;
    exactly one completion was accepted, by the latest lease, while it was live, and
    its result is that lease's; a completion was refused only once its lease had ended
    or the execution had already been completed. Returns how many refusals of each
    kind happened (``EXPIRED``, ``TAKEN_OVER``, ...), for callers that need each fence
    predicate to have been exercised.
    """
    not_succeeded = [e for e in executions.values() if e.state != State.SUCCEEDED]
    assert not not_succeeded, f"{len(not_succeeded)} not SUCCEEDED, e.g. {not_succeeded[0]} {where}"
    assert audit.keys() == executions.keys(), f"audit and executions differ {where}"
    kinds: Counter[str] = Counter()
    for id_, trail in audit.items():
        claims = [t for t in trail if t.event == Event.CLAIMED]
        completions = [t for t in trail if t.event == Event.COMPLETED]
        refusals = [t for t in trail if t.event == Event.STALE_REFUSED]
        context = f"execution {id_} {where}\naudit: {show(trail)}"

        # The audit holds nothing but the claims, one completion and refused calls.
        assert [t.event for t in trail].count(Event.SUBMITTED) == 1, context
        assert len(trail) == 1 + len(claims) + len(completions) + len(refusals), context

        # Epochs: one per claim, strictly increasing in claim order (1, 2, 3, ...).
        assert [t.epoch for t in claims] == list(range(1, len(claims) + 1)), context
        assert all(t.actor in ttl for t in claims), f"a claim by an unknown owner; {context}"
        until = {t.epoch: t.at + timedelta(seconds=ttl[t.actor or ""]) for t in claims}

        # No two live leases at once: a claim takes over only once the previous lease
        # has ended by the store's clock.
        for previous, following in itertools.pairwise(claims):
            assert following.at >= until[previous.epoch], (
                f"epoch {following.epoch} was claimed at {following.at} while epoch "
                f"{previous.epoch} was live until {until[previous.epoch]}; {context}"
            )

        # Exactly one accepted completion, by the latest lease, while it was live.
        assert len(completions) == 1, f"{len(completions)} accepted completions; {context}"
        done = completions[0]
        assert done.epoch == claims[-1].epoch, (
            f"a completion at epoch {done.epoch} was accepted after epoch "
            f"{claims[-1].epoch} was claimed; {context}"
        )
        assert done.actor == claims[-1].actor, context
        assert claims[-1].at <= done.at < until[done.epoch], (
            f"completion accepted at {done.at}, outside its lease "
            f"[{claims[-1].at}, {until[done.epoch]}); {context}"
        )
        execution = executions[id_]
        assert execution.result == {"owner": done.actor, "epoch": done.epoch}, context
        assert execution.epoch == claims[-1].epoch, context

        # A refusal is only ever for a lease that had ended when it was refused, or
        # for an execution that was already finished.
        for t in refusals:
            assert t.reason == stale_reason("complete"), context
            finished = done.seq < t.seq
            assert finished or t.at >= until[t.epoch], (
                f"a completion at epoch {t.epoch} was refused at {t.at} while its lease "
                f"was live until {until[t.epoch]}; {context}"
            )
            kinds[kind_of_refusal(t, trail, until)] += 1
    return kinds


def check_worker_logs(
    records: Iterable[Mapping[str, Any]],
    audit: Mapping[str, Sequence[Transition]],
    *,
    where: str,
    wall_clock_is_store_clock: bool,
) -> None:
    """Assert that the workers' logs and the audit tell the same story.

    Every lease a worker logged is a CLAIMED transition of the same owner and epoch
    (and the other way round), ending at the claim's now plus the ttl it asked for;
    each accepted completion it logged is the audit's COMPLETED one, and its refused
    completions are exactly the audit's STALE_REFUSED records. With
    ``wall_clock_is_store_clock`` (SQLite, or PostgreSQL on this machine) a claim's
    now is also no earlier than the worker's wall time just before it called.
    """
    leases: dict[tuple[str, int], Mapping[str, Any]] = {}
    accepted: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    refused: Counter[tuple[str, int, str]] = Counter()
    for record in records:
        key = (record["id"], record["epoch"])
        if record["kind"] == "lease":
            assert key not in leases, f"two leases of {key} were handed out {where}"
            leases[key] = record
        elif record["accepted"]:
            accepted[record["id"]].append(record)
        else:
            refused[(record["id"], record["epoch"], record["owner"])] += 1

    claimed: set[tuple[str, int, str]] = set()
    stale: Counter[tuple[str, int, str]] = Counter()
    for id_, trail in audit.items():
        context = f"execution {id_} {where}\naudit: {show(trail)}"
        for t in trail:
            if t.event == Event.CLAIMED:
                claimed.add((id_, t.epoch, t.actor or ""))
                lease = leases.get((id_, t.epoch))
                assert lease is not None, f"epoch {t.epoch} was claimed but never logged; {context}"
                assert lease["owner"] == t.actor, context
                # The lease handed out ends exactly at the claim's now plus the ttl.
                lease_until = datetime.fromisoformat(lease["lease_until"])
                assert lease_until == t.at + timedelta(seconds=lease["ttl"]), context
                if wall_clock_is_store_clock:
                    # The worker read the wall clock just before claiming: a lower bound
                    # of the store's now. The store keeps whole microseconds and a float
                    # timestamp near 1.7e9 is good to about 0.24 us, hence 2 us of slack
                    # (in the only direction that is sound).
                    assert t.at.timestamp() >= lease["claim_start"] - 2e-6, context
            elif t.event == Event.STALE_REFUSED:
                stale[(id_, t.epoch, t.actor or "")] += 1
            elif t.event == Event.COMPLETED:
                mine = accepted[id_]
                assert len(mine) == 1, f"{len(mine)} accepted completions {mine}; {context}"
                assert (t.epoch, t.actor) == (mine[0]["epoch"], mine[0]["owner"]), context
    assert claimed == {(id_, e, r["owner"]) for (id_, e), r in leases.items()}, where
    assert stale == refused, where


def kind_of_refusal(
    refusal: Transition, trail: Sequence[Transition], until: Mapping[int, datetime]
) -> str:
    """Why the fence refused ``refusal``, judged from the row as it stood then."""
    before = [t for t in trail if t.seq < refusal.seq]
    latest = next(t for t in reversed(before) if t.event == Event.CLAIMED)
    completed = any(t.event == Event.COMPLETED for t in before)
    if latest.epoch == refusal.epoch:
        return COMPLETED_TWICE if completed else EXPIRED
    if latest.actor != refusal.actor:
        return TAKEN_OVER
    if completed or refusal.at >= until[latest.epoch]:
        return SAME_OWNER_ENDED
    return SAME_OWNER_NEWER_LEASE


def refused_completion(store: fencepost.Store, execution_id: str) -> Transition | None:
    """The first completion of ``execution_id`` the store refused as stale, if any."""
    return next(
        (
            t
            for t in store.transitions(execution_id)
            if t.event is Event.STALE_REFUSED and "complete" in (t.reason or "")
        ),
        None,
    )


def show(trail: Iterable[Transition]) -> str:
    return "; ".join(f"#{t.seq} {t.event} e{t.epoch} {t.actor} {t.at.isoformat()}" for t in trail)


def all_executions(store: fencepost.Store) -> Iterator[Execution]:
    cursor = None
    while True:
        page = store.query(limit=10_000, after=cursor)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def run_processes(
    commands: Sequence[Sequence[str]], out_dir: Path, *, deadline: float, what: str
) -> None:
    """Run ``commands`` side by side; fail unless all exit 0, silently, within ``deadline`` s.

    Each process's stdout and stderr go to ``out_dir/process-N.out``, shown on failure.
    """
    procs = []
    try:
        for n, command in enumerate(commands):
            with (out_dir / f"process-{n}.out").open("w") as out:
                procs.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT))
        end = time.monotonic() + deadline
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"workers did not finish within {deadline} s ({what})")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for n, proc in enumerate(procs):
        output = (out_dir / f"process-{n}.out").read_text()
        assert proc.returncode == 0, f"process {n} exited {proc.returncode} ({what}):\n{output}"
        assert not output, f"process {n} wrote output ({what}):\n{output}"


def read_jsonl(paths: Iterable[Path]) -> list[dict[str, Any]]:
    records = []
    for path in paths:
        with path.open() as log:
            records.extend(json.loads(line) for line in log)
    return records

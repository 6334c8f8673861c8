"""The lease timeline: why a worker that lost its lease cannot overwrite the result.

Two executions, job:10 (due t=10) and job:20 (due t=20), leases of 5 s, and a
ManualClock so that every step happens at an exact instant. Worker A claims
job:10, stalls past its lease, and comes back after worker B took over.

Run it with ``python examples/lease_timeline.py [path.db]``. :func:`record` plays it and
returns what happened; the documentation draws its lease-timeline picture from that.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import fencepost
from fencepost import Attempt, Execution, Lease, StaleLease, Transition
from fencepost.testing import MANUAL_EPOCH, ManualClock

TTL = 5


@dataclass(frozen=True, kw_only=True)
class Step:
    """One call of the timeline, at ``t``, and what the store answered."""

    t: float
    worker: str
    text: str
    #: The leases a claim was granted (empty: it got nothing).
    leases: tuple[Lease, ...] = ()
    #: The execution a completion was accepted for.
    completed: Execution | None = None
    #: The refusal of a call made with a lease that no longer held.
    refused: StaleLease | None = None

    @property
    def verdict(self) -> str:
        """What the store answered, in a few words."""
        if self.refused is not None:
            return f"StaleLease: {self.refused}"
        if self.completed is not None:
            return f"accepted: {self.completed.state}, result {self.completed.result!r}"
        if not self.leases:
            return "nothing"
        return ", ".join(
            f"lease on {lease.execution_id[-6:]} epoch {lease.epoch} until "
            f"t={clock_t(lease.lease_until):g}"
            for lease in self.leases
        )


@dataclass(frozen=True, kw_only=True)
class Timeline:
    """What happened: the two executions, each step, and job:10's audit trail and attempts."""

    job10: Execution
    job20: Execution
    steps: tuple[Step, ...]
    #: job:10's and job:20's results once the completions are over (before t=19).
    results: tuple[Any, Any]
    transitions: tuple[Transition, ...]
    attempts: tuple[Attempt, ...]


def record(db_path: Path) -> Timeline:
    """Play the timeline on a SQLite store at ``db_path`` and return what happened."""
    clock = ManualClock(0)
    steps: list[Step] = []

    def step(t: float, worker: str, text: str, action: Callable[[], Any]) -> Step:
        clock.set(t)
        try:
            outcome = action()
        except StaleLease as exc:
            done = Step(t=t, worker=worker, text=text, refused=exc)
        else:
            if isinstance(outcome, list):
                done = Step(t=t, worker=worker, text=text, leases=tuple(outcome))
            else:
                done = Step(t=t, worker=worker, text=text, completed=outcome)
        steps.append(done)
        return done

    with fencepost.connect(f"sqlite:///{db_path}", clock=clock) as store:
        job10 = store.submit("job", execute_at=at(10), idempotency_key="job:10")
        job20 = store.submit("job", execute_at=at(20), idempotency_key="job:20")

        step(9, "worker-a", "worker-a claims", lambda: store.claim("worker-a", ttl=TTL))
        (lease_a,) = step(
            10, "worker-a", "worker-a claims", lambda: store.claim("worker-a", ttl=TTL)
        ).leases
        step(
            14,
            "worker-b",
            "worker-b claims (a's lease is live)",
            lambda: store.claim("worker-b", ttl=TTL),
        )
        (lease_b,) = step(
            15,
            "worker-b",
            "worker-b claims (a's lease expired)",
            lambda: store.claim("worker-b", ttl=TTL),
        ).leases
        step(
            16,
            "worker-a",
            "worker-a completes with epoch 1",
            lambda: store.complete(lease_a, "stale output"),
        )
        step(
            16,
            "worker-b",
            "worker-b completes with epoch 2",
            lambda: store.complete(lease_b, "output"),
        )
        step(16, "worker-b", "worker-b completes again", lambda: store.complete(lease_b, "output"))
        results = (store.get(job10.id).result, store.get(job20.id).result)
        step(
            19,
            "worker-c",
            "worker-c claims (job:20 not due)",
            lambda: store.claim("worker-c", ttl=TTL),
        )
        step(20, "worker-c", "worker-c claims", lambda: store.claim("worker-c", ttl=TTL))
        return Timeline(
            job10=job10,
            job20=job20,
            steps=tuple(steps),
            results=results,
            transitions=tuple(store.transitions(job10.id)),
            attempts=tuple(store.attempts(job10.id)),
        )


def main(db_path: Path) -> None:
    timeline = record(db_path)
    print(f"store: {db_path}")
    print(f"job:10 = {timeline.job10.id} (due t=10)\njob:20 = {timeline.job20.id} (due t=20)\n")
    for step in timeline.steps:
        if step.t == 19:  # the completions are over: what they left
            results = timeline.results
            print(f"\nresults: job:10 = {results[0]!r}, job:20 = {results[1]!r}\n")
        print(f"t={step.t:>4g}  {step.text:<44} -> {step.verdict}")

    print("\naudit trail of job:10:")
    for t in timeline.transitions:
        frm = t.from_state or "-"
        print(
            f"  t={clock_t(t.at):>4g}  {t.event:<14} {frm:>10} -> {t.to_state:<10}"
            f" epoch={t.epoch} actor={t.actor or '-'}{'  (' + t.reason + ')' if t.reason else ''}"
        )
    print("attempts of job:10:")
    for a in timeline.attempts:
        print(f"  #{a.attempt} epoch={a.epoch} {a.owner:<9} {a.outcome}")


def at(t: float) -> datetime:
    """The instant "t" of the timeline."""
    return MANUAL_EPOCH + timedelta(seconds=t)


def clock_t(instant: datetime) -> float:
    """The "t" of an instant."""
    return (instant - MANUAL_EPOCH).total_seconds()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "timeline.db")

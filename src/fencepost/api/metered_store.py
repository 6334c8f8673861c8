"""What this process counts for ``/metrics``: a store decorator and its instruments.

:class:`MeteredStore` wraps a :class:`~fencepost.store.base.Store` and counts the
leasing work passing through it: claim lateness, attempts by outcome, stale calls
refused, lease expiries reaped, misfires and occurrences materialized. The service
hands its embedded workers, materializer and reaper the same wrapped store, so these
count everything the process did; Prometheus sums them across processes.
:class:`Instruments` are the counters and the histogram it feeds, registered in the
application's own registry by :func:`fencepost.api.metrics.create_metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from prometheus_client import CollectorRegistry, Counter, Histogram

from fencepost.domain.defaults import DEFAULT_TTL
from fencepost.domain.durations import as_duration
from fencepost.domain.errors import ResultInvalid, StaleLease
from fencepost.domain.models import JSON, Execution, Lease, Occurrence, Schedule
from fencepost.domain.states import ATTEMPT_OUTCOMES, State
from fencepost.store.base import Store

#: Upper bounds of the claim lateness histogram, in seconds: from a busy worker's
#: poll interval up to ten minutes, with 10 s (the claim SLO) as one of them.
LATENESS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

#: The fenced verbs whose refusals ``fencepost_stale_refused_total`` counts.
FENCED_VERBS = (
    "complete",
    "complete_many",
    "fail",
    "heartbeat",
    "heartbeat_many",
    "release",
    "snooze",
    "abort",
)
#: ``fencepost_occurrences_total`` outcomes.
OCCURRENCE_OUTCOMES = ("scheduled", "skipped")

# How fencepost.timing.planning words the reason of a slot skipped for a misfire
# (other skips say "paused" or "overlap: ...").
_MISFIRE_REASON = "misfire"


@dataclass(frozen=True, kw_only=True, slots=True)
class Instruments:
    """The counters and the histogram :class:`MeteredStore` feeds."""

    claim_lateness: Histogram
    attempts: Counter
    stale_refused: Counter
    lease_expiries: Counter
    misfires: Counter
    occurrences: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Instruments:
        """Every instrument, registered in ``registry``, labelled series at zero."""
        instruments = cls(
            claim_lateness=Histogram(
                "fencepost_claim_lateness_seconds",
                "How long after its due time each execution was claimed by this process "
                "(a takeover: since the execution fell due).",
                buckets=LATENESS_BUCKETS,
                registry=registry,
            ),
            attempts=Counter(
                "fencepost_attempts",
                "Attempts whose end this process reported, by outcome (lease expiries "
                "are counted in fencepost_lease_expiries_total).",
                ["outcome"],
                registry=registry,
            ),
            stale_refused=Counter(
                "fencepost_stale_refused",
                "Calls this process made with a lease that no longer held, refused by the "
                "store, by verb.",
                ["verb"],
                registry=registry,
            ),
            lease_expiries=Counter(
                "fencepost_lease_expiries",
                "Expired leases this process's reaper timed out.",
                registry=registry,
            ),
            misfires=Counter(
                "fencepost_misfires",
                "Schedule occurrences this process's materializer stored SKIPPED for a misfire.",
                registry=registry,
            ),
            occurrences=Counter(
                "fencepost_occurrences",
                "Schedule occurrences this process's materializer stored, by outcome.",
                ["outcome"],
                registry=registry,
            ),
        )
        for outcome in ATTEMPT_OUTCOMES:  # each exposed from the start, at zero
            instruments.attempts.labels(outcome=outcome)
        for verb in FENCED_VERBS:
            instruments.stale_refused.labels(verb=verb)
        for outcome in OCCURRENCE_OUTCOMES:
            instruments.occurrences.labels(outcome=outcome)
        return instruments


class MeteredStore:
    """A :class:`Store` that counts the leasing work passing through it.

    Every attribute is the wrapped store's; only the verbs below are overridden,
    and each calls the wrapped verb with the caller's arguments, counts what came
    back, and returns it (or re-raises) unchanged. The wrapped store's own verbs
    call each other directly (``heartbeat`` calls its ``heartbeat_many``), so
    nothing is counted twice. Type it as a store with ``cast(Store, metered)``;
    ``isinstance(metered, Store)`` holds.
    """

    def __init__(self, store: Store, instruments: Instruments) -> None:
        self.wrapped = store
        self.instruments = instruments

    def __getattr__(self, name: str) -> Any:
        # Called only for names the wrapper lacks. "wrapped" itself is missing only
        # before __init__ ran (copy, pickle), where forwarding would recurse forever.
        if name == "wrapped":
            raise AttributeError(name)
        return getattr(self.wrapped, name)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.wrapped.close()

    # -- leasing -----------------------------------------------------------------------

    def claim(self, owner: str, **options: Any) -> list[Lease]:
        """:meth:`Store.claim`, observing each lease's lateness."""
        leases = self.wrapped.claim(owner, **options)
        if leases:
            # The claim instant by the store's clock (the database server's on
            # PostgreSQL), not this process's: every lease of a claim was given
            # lease_until = now + ttl.
            ttl = as_duration(options.get("ttl", DEFAULT_TTL), field="ttl")
            for lease in leases:
                late = (lease.lease_until - ttl - lease.due_at).total_seconds()
                self.instruments.claim_lateness.observe(max(0.0, late))
        return leases

    def heartbeat(self, lease: Lease, **options: Any) -> Lease:
        """:meth:`Store.heartbeat`, counting a refusal."""
        try:
            renewed: Lease = self.wrapped.heartbeat(lease, **options)
        except StaleLease:
            self._refused("heartbeat")
            raise
        return renewed

    def heartbeat_many(
        self, beats: Sequence[tuple[Lease, JSON]], **options: Any
    ) -> list[Lease | StaleLease]:
        """:meth:`Store.heartbeat_many`, counting refusals."""
        renewed = self.wrapped.heartbeat_many(beats, **options)
        self._refused("heartbeat_many", sum(isinstance(r, StaleLease) for r in renewed))
        return renewed

    def complete(self, lease: Lease, result: JSON = None) -> Execution:
        """:meth:`Store.complete`, counting the attempt or the refusal."""
        try:
            done = self.wrapped.complete(lease, result)
        except StaleLease:
            self._refused("complete")
            raise
        except ResultInvalid:
            self._ended("result_invalid")
            raise
        self._ended("succeeded")
        return done

    def complete_many(self, results: Sequence[tuple[Lease, JSON]]) -> list[StaleLease | None]:
        """:meth:`Store.complete_many`, counting attempts and refusals."""
        # An accepted completion is SUCCEEDED or FAILED (result_invalid), and the
        # verdict does not say which; the prepared outcome does. So this takes the
        # two steps Store.complete_many takes, keeping each result encoded once.
        outcomes = [self.wrapped._outcome(lease, result) for lease, result in results]
        verdicts = self.wrapped._complete(outcomes)
        for outcome, verdict in zip(outcomes, verdicts, strict=True):
            if verdict is not None:
                self._refused("complete_many")
            else:
                self._ended("succeeded" if outcome.invalid is None else "result_invalid")
        return verdicts

    def fail(self, lease: Lease, error: str, **options: Any) -> Execution:
        """:meth:`Store.fail`, counting the attempt (failed or timed out) or the refusal.

        Whether it was retryable does not change how the attempt ended (FAILED);
        it only decides what became of the execution.
        """
        outcome = "timed_out" if options.get("timed_out") else "failed"
        return self._ending("fail", outcome, lambda: self.wrapped.fail(lease, error, **options))

    def release(self, lease: Lease, **options: Any) -> Execution:
        """:meth:`Store.release`, counting the attempt or the refusal."""
        return self._ending("release", "released", lambda: self.wrapped.release(lease, **options))

    def snooze(self, lease: Lease, seconds: Any, **options: Any) -> Execution:
        """:meth:`Store.snooze`, counting the attempt (snoozed; failed when past the
        bound) or the refusal."""
        try:
            snoozed = self.wrapped.snooze(lease, seconds, **options)
        except StaleLease:
            self._refused("snooze")
            raise
        self._ended("snoozed" if snoozed.state is State.SCHEDULED else "failed")
        return snoozed

    def abort(self, lease: Lease, **options: Any) -> Execution:
        """:meth:`Store.abort`, counting the attempt (cancelled) or the refusal."""
        return self._ending("abort", "cancelled", lambda: self.wrapped.abort(lease, **options))

    def reap_expired(self, **options: Any) -> int:
        """:meth:`Store.reap_expired`, counting the leases it timed out."""
        reaped = self.wrapped.reap_expired(**options)
        self.instruments.lease_expiries.inc(reaped)
        return reaped

    # -- schedules -----------------------------------------------------------------------

    def materialize(
        self, batch: Sequence[tuple[Schedule, Sequence[Occurrence], datetime, datetime]]
    ) -> list[list[Execution] | StaleLease]:
        """:meth:`Store.materialize`, counting stored occurrences and misfires.

        Only items the store accepted count, each slot once. An occurrence counts
        as skipped when its execution is SKIPPED (insert-if-absent may find an
        existing one in another state), and as a misfire when it was also planned
        as skipped for a misfire.
        """
        items = list(batch)
        answers = self.wrapped.materialize(items)
        for (_, occurrences, *_), answer in zip(items, answers, strict=True):
            if isinstance(answer, StaleLease):
                continue
            counted: set[str] = set()
            for occurrence, execution in zip(occurrences, answer, strict=True):
                if execution.id in counted:
                    continue
                counted.add(execution.id)
                skipped = execution.state is State.SKIPPED
                self.instruments.occurrences.labels(
                    outcome="skipped" if skipped else "scheduled"
                ).inc()
                reason = occurrence.skipped or ""
                if skipped and reason.startswith(_MISFIRE_REASON):
                    self.instruments.misfires.inc()
        return answers

    def _ending(self, verb: str, outcome: str, report: Callable[[], Execution]) -> Execution:
        """Run ``report``, a fenced ``verb`` that ends the attempt as ``outcome``, and count it.

        A refusal (:class:`StaleLease`) is counted as refused and raised again.
        """
        try:
            ended = report()
        except StaleLease:
            self._refused(verb)
            raise
        self._ended(outcome)
        return ended

    def _ended(self, outcome: str) -> None:
        self.instruments.attempts.labels(outcome=outcome).inc()

    def _refused(self, verb: str, count: int = 1) -> None:
        if count:
            self.instruments.stale_refused.labels(verb=verb).inc(count)


# Virtual subclass: code that takes "an open Store" by isinstance (fencepost.App)
# takes the wrapper too. Typing still needs cast(Store, ...): mypy ignores this.
Store.register(MeteredStore)


def meter_store(registry: CollectorRegistry, source: Any) -> Any:
    """``source`` wrapped to count the service's process counters on ``registry``.

    What ``fencepost worker --metrics-port`` and ``App.run_worker(metrics_port=)`` give
    :meth:`Worker.serve_metrics <fencepost.worker.runtime.Worker.serve_metrics>`. Only a
    store is wrapped: a remote worker's calls are counted by the service it calls.
    """
    if not isinstance(source, Store):
        return source
    return MeteredStore(source, Instruments.create(registry))

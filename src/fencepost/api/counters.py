"""What this process counts for ``/metrics``: its instruments and the store observer
that feeds them.

:class:`ProcessCounters` observes a :class:`~fencepost.store.base.Store` (see
:mod:`fencepost.store.observers`) and counts the leasing work the store did in this
process: claim lateness, attempts by outcome, stale calls refused, lease expiries
reaped, misfires and occurrences materialized. The service's embedded workers,
materializer and reaper work on the same store, so these count everything the process
did; Prometheus sums them across processes. :class:`Instruments` are the counters and
the histogram it feeds, registered in the application's own registry by
:func:`fencepost.api.metrics.create_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from fencepost.domain.states import ATTEMPT_OUTCOMES
from fencepost.store.base import Store
from fencepost.store.observers import (
    AttemptsEnded,
    LeasesClaimed,
    LeasesExpired,
    OccurrencesStored,
    StaleRefused,
    StoreEvent,
)

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


@dataclass(frozen=True, kw_only=True, slots=True)
class Instruments:
    """The counters and the histogram :class:`ProcessCounters` feeds."""

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


class ProcessCounters:
    """An observer of a store (:mod:`fencepost.store.observers`) that feeds
    :class:`Instruments`: the claim lateness of each lease, attempts by outcome, stale
    calls refused by verb, lease expiries reaped, occurrences stored and misfires."""

    def __init__(self, instruments: Instruments) -> None:
        self.instruments = instruments

    def __call__(self, event: StoreEvent) -> None:
        instruments = self.instruments
        if isinstance(event, LeasesClaimed):
            # The claim instant by the store's clock (the database server's on
            # PostgreSQL), not this process's: every lease of a claim was given
            # lease_until = now + ttl.
            for lease in event.leases:
                late = (lease.lease_until - event.ttl - lease.due_at).total_seconds()
                instruments.claim_lateness.observe(max(0.0, late))
        elif isinstance(event, AttemptsEnded):
            instruments.attempts.labels(outcome=event.outcome).inc(event.count)
        elif isinstance(event, StaleRefused):
            instruments.stale_refused.labels(verb=event.verb).inc(event.count)
        elif isinstance(event, LeasesExpired):
            instruments.lease_expiries.inc(event.count)
        elif isinstance(event, OccurrencesStored):
            instruments.occurrences.labels(outcome="scheduled").inc(event.scheduled)
            instruments.occurrences.labels(outcome="skipped").inc(event.skipped)
            instruments.misfires.inc(event.misfires)


def count_on(store: Store, registry: CollectorRegistry) -> ProcessCounters:
    """Count ``store``'s leasing work on ``registry`` from now on; the observer that
    counts (its ``instruments``; ``store.observers.remove`` it to stop)."""
    counters = ProcessCounters(Instruments.create(registry))
    store.observers.add(counters)
    return counters


def meter_store(registry: CollectorRegistry, source: Any) -> Any:
    """Count the service's process counters of ``source`` on ``registry``; ``source``.

    What ``fencepost worker --metrics-port`` and ``App.run_worker(metrics_port=)`` give
    :meth:`Worker.serve_metrics <fencepost.worker.runtime.Worker.serve_metrics>`. Only a
    store is counted: a remote worker's calls are counted by the service it calls.
    """
    if isinstance(source, Store):
        count_on(source, registry)
    return source

"""What a store tells those who watch it: the events of the leasing work it did.

A store emits one :data:`StoreEvent` after each verb of the worker and the scheduler
that changed something: leases claimed, attempts ended (by outcome), calls refused
with a stale lease (by verb), expired leases timed out, schedule occurrences stored.
The observers are given at connect (``fencepost.connect(url, observers=[...])``) or
added later (``store.observers.add(observer)``); metrics (``/metrics``, a worker's
``--metrics-port``) are one observer, and anyone may add another (a log, a trace, a
test). An observer is any callable taking the event; it runs on the verb's thread,
after the verb's transaction, and what it raises is logged, never raised into the
verb. A store with no observer builds no event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from fencepost.domain.errors import StaleLease
from fencepost.domain.models import Execution, Lease
from fencepost.domain.states import State
from fencepost.timing.planning import MISFIRE_REASON

if TYPE_CHECKING:
    from fencepost.store.values import Materialization, Outcome

_log = logging.getLogger("fencepost.store")


@dataclass(frozen=True, slots=True)
class LeasesClaimed:
    """A claim leased ``leases`` for ``ttl`` each (so each was claimed at
    ``lease_until - ttl`` by the store's clock)."""

    leases: Sequence[Lease]
    ttl: timedelta


@dataclass(frozen=True, slots=True)
class AttemptsEnded:
    """``count`` attempts ended as ``outcome``, reported by their holder: one of
    ``succeeded``, ``failed``, ``timed_out``, ``result_invalid``, ``released``,
    ``snoozed``, ``cancelled`` (:data:`~fencepost.domain.states.ATTEMPT_OUTCOMES`).
    Leases that expired are :class:`LeasesExpired`."""

    outcome: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class StaleRefused:
    """``count`` calls of ``verb`` came with a lease that no longer held: refused."""

    verb: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class LeasesExpired:
    """``count`` expired leases were timed out by ``reap_expired``."""

    count: int


@dataclass(frozen=True, slots=True)
class OccurrencesStored:
    """``materialize`` stored schedule occurrences: ``scheduled`` to run, ``skipped``
    (SKIPPED executions), ``misfires`` of them skipped for a misfire. Each slot counts
    once, and only for the schedules whose lease still held."""

    scheduled: int
    skipped: int
    misfires: int


StoreEvent = LeasesClaimed | AttemptsEnded | StaleRefused | LeasesExpired | OccurrencesStored
#: Anything that takes a store's events.
Observer = Callable[[StoreEvent], None]


class Observers:
    """The observers of one store (see the module doc): true when there is one, and
    iterable."""

    def __init__(self, observers: Iterable[Observer] = ()) -> None:
        self._observers: tuple[Observer, ...] = tuple(observers)
        self._lock = threading.Lock()

    def add(self, observer: Observer) -> None:
        """Give ``observer`` every event from now on."""
        with self._lock:
            self._observers = (*self._observers, observer)

    def remove(self, observer: Observer) -> None:
        """Stop giving ``observer`` events (ValueError if it was not added)."""
        with self._lock:
            observers = list(self._observers)
            observers.remove(observer)
            self._observers = tuple(observers)

    def __bool__(self) -> bool:
        return bool(self._observers)

    def __iter__(self) -> Iterator[Observer]:
        return iter(self._observers)

    def emit(self, event: StoreEvent) -> None:
        """Give ``event`` to each observer; an observer's error is logged and skipped."""
        for observer in self._observers:
            try:
                observer(event)
            except Exception:
                _log.exception("an observer of the store failed on %r", event)


# -- what each verb tells ------------------------------------------------------------


def tell_ended(
    observers: Observers,
    verb: str,
    ending: str | Callable[[Execution], str],
    end: Callable[[], Execution],
) -> Execution:
    """``end()``, a fenced ``verb`` that ends an attempt as ``ending`` (or as
    ``ending(execution)`` says), telling ``observers`` of the attempt or the refusal."""
    if not observers:
        return end()
    try:
        execution = end()
    except StaleLease:
        observers.emit(StaleRefused(verb))
        raise
    observers.emit(AttemptsEnded(ending if isinstance(ending, str) else ending(execution)))
    return execution


def tell_renewals(observers: Observers, verb: str, renewals: Sequence[object]) -> None:
    """Tell ``observers`` of the heartbeats ``verb`` had refused among ``renewals``."""
    refused = sum(isinstance(renewal, StaleLease) for renewal in renewals)
    if refused and observers:
        observers.emit(StaleRefused(verb, refused))


def tell_completions(
    observers: Observers, outcomes: Sequence[Outcome], verdicts: Sequence[StaleLease | None]
) -> None:
    """Tell ``observers`` what ``complete_many`` did: refusals, results, invalid results."""
    if not observers:
        return
    accepted = [o for o, verdict in zip(outcomes, verdicts, strict=True) if verdict is None]
    invalid = sum(o.invalid is not None for o in accepted)
    for event in (
        StaleRefused("complete_many", len(outcomes) - len(accepted)),
        AttemptsEnded("succeeded", len(accepted) - invalid),
        AttemptsEnded("result_invalid", invalid),
    ):
        if event.count:
            observers.emit(event)


def _stored(
    items: Sequence[Materialization], answers: Sequence[list[Execution] | StaleLease]
) -> OccurrencesStored:
    """What ``materialize`` stored of ``items``: each slot once, only for the schedules
    whose lease held; a SKIPPED execution as skipped (insert-if-absent may find one in
    another state), and as a misfire when it was planned skipped for one."""
    scheduled = skipped = misfires = 0
    for item, answer in zip(items, answers, strict=True):
        if isinstance(answer, StaleLease):
            continue
        counted: set[str] = set()
        for occurrence, execution in zip(item.occurrences, answer, strict=True):
            if execution.id in counted:
                continue
            counted.add(execution.id)
            if execution.state is State.SKIPPED:
                skipped += 1
                misfires += (occurrence.skipped or "").startswith(MISFIRE_REASON)
            else:
                scheduled += 1
    return OccurrencesStored(scheduled=scheduled, skipped=skipped, misfires=misfires)


def tell_stored(
    observers: Observers,
    items: Sequence[Materialization],
    answers: Sequence[list[Execution] | StaleLease],
) -> None:
    """Tell ``observers`` what ``materialize`` stored of ``items``."""
    if answers and observers:
        observers.emit(_stored(items, answers))

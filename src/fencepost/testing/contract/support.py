"""What every section of the contract suite shares: the fixtures, the timeline, the checks.

* :class:`ContractFixtures` — the ``clock``, ``store`` and ``make`` fixtures each section's
  tests take, built on the one ``store_factory`` fixture the user provides;
* :func:`at` — an instant on the ManualClock timeline; ``US``, one microsecond, for
  "just before" a boundary;
* :func:`assert_audit_valid` — the audit trail of an execution walks the state machine;
* scenario set-ups: :func:`expired_lease` (a lease at its expiry), :func:`taken_over`
  (and claimed again by someone else);
* checks: :func:`refused_unchanged` (a refused call leaves the row as it was),
  :func:`names_the_field` (a ValidationError names the argument);
* inputs: :data:`NOT_AN_OBJECT` (refused) and :data:`OBJECT_INPUTS` (stored), with
  :func:`not_an_object`, the refusal's message;
* small readers: :func:`pages_of` (follow the cursor), :func:`executions` (every row, paged),
  ``fields_of`` and its kin (a frozen value's fields as a dict, to forge a changed copy),
  ``keys_in_distinct_buckets``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from fencepost.domain.buckets import bucket_for
from fencepost.domain.errors import FencepostError, StaleLease, ValidationError
from fencepost.domain.machine import is_edge
from fencepost.domain.models import Command, Execution, Lease, Schedule
from fencepost.domain.states import Event, State
from fencepost.store.base import Store
from fencepost.testing.clock import MANUAL_EPOCH, ManualClock
from fencepost.testing.factory import ExecutionFactory

#: ``(clock, **connect_options) -> Store``: a fresh, empty store reading time from ``clock``
#: (None: the system clock). The one fixture a backend provides, named ``store_factory``.
StoreFactory = Callable[..., Store]

#: One microsecond: the stores' resolution.
US = timedelta(microseconds=1)

#: Inputs that are JSON but not an object: a handler takes its inputs as keywords, so
#: every verb that takes inputs refuses these, naming ``inputs``.
NOT_AN_OBJECT: list[Any] = [[1, 2], [], ("a",), "not-an-object", "", "{}", 0, -1.5, 10**30, True]
#: Inputs every such verb accepts, with what it stores: None means ``{}``.
OBJECT_INPUTS: list[tuple[Any, Any]] = [
    (None, {}),
    ({}, {}),
    (
        {"a": {"b": [1, {"c": None}], "d": ""}, "é": 2.5},
        {"a": {"b": [1, {"c": None}], "d": ""}, "é": 2.5},
    ),
]


def not_an_object(inputs: Any) -> str:
    """The message that refuses ``inputs`` that are not an object."""
    return (
        f"must be a JSON object (a mapping of input names to values), got {type(inputs).__name__}"
    )


def at(seconds: float) -> datetime:
    """The instant "t = seconds" on a ManualClock timeline."""
    return MANUAL_EPOCH + timedelta(seconds=seconds)


def assert_audit_valid(store: Store, execution_id: str) -> None:
    """Every audit record is an edge of the state machine, in order, with epochs never falling."""
    trail = store.transitions(execution_id)
    assert trail, "every execution has at least its SUBMITTED transition"
    assert trail[0].event is Event.SUBMITTED
    assert [t.seq for t in trail] == sorted(t.seq for t in trail)
    state: State | None = None
    epoch = 0
    for t in trail:
        assert is_edge(t.event, t.from_state, t.to_state), t
        if t.event is Event.STALE_REFUSED:
            assert t.from_state == state, t
            continue
        assert t.from_state == state, f"audit gap before {t}"
        assert t.epoch >= epoch, t
        state, epoch = t.to_state, t.epoch
    assert store.get(execution_id).state == state


class ContractFixtures:
    """The fixtures every section of the suite runs on, from the user's ``store_factory``.

    Each section (``LeasingContract``, ``SchedulesContract``, …) inherits them, so a backend
    may subclass one section alone while it is being written, or all of them through
    :class:`~fencepost.testing.contract.StoreContract`.
    """

    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock(0)

    @pytest.fixture
    def store(self, store_factory: StoreFactory, clock: ManualClock) -> Iterator[Store]:
        store = store_factory(clock, rng=random.Random(1234))
        yield store
        store.close()

    @pytest.fixture
    def make(self, store: Store) -> ExecutionFactory:
        return ExecutionFactory(store)


def timezone_plus(hours: int) -> Any:
    """A fixed UTC offset of ``hours``."""
    return timezone(timedelta(hours=hours))


def fields_of(value: Lease | Command | Schedule) -> dict[str, Any]:
    """Every field of a lease, command or schedule, by name (to compare two field by
    field, or one with a few fields changed)."""
    return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}


def keys_in_distinct_buckets(count: int, num_buckets: int) -> list[str]:
    """``count`` bucket keys that land in ``count`` different buckets."""
    keys: dict[int, str] = {}
    for n in range(10 * num_buckets):
        keys.setdefault(bucket_for(f"tenant-{n}", num_buckets), f"tenant-{n}")
        if len(keys) == count:
            return list(keys.values())
    raise AssertionError(f"fewer than {count} buckets")


def expired_lease(
    store: Store, clock: ManualClock, owner: str = "w", **submit: Any
) -> tuple[Execution, Lease]:
    """A "job" submitted (with ``submit``'s arguments) and claimed by ``owner`` for 5 s.

    The clock then stands at t=5, the instant the lease expires: the lease is stale,
    and the execution may be taken over.
    """
    e = store.submit("job", **submit)
    (lease,) = store.claim(owner, ttl=5)
    clock.set(5)
    return e, lease


def taken_over(
    store: Store, clock: ManualClock, first: str, second: str, *, ttl: float = 5, **submit: Any
) -> tuple[Execution, Lease, Lease]:
    """An :func:`expired_lease` of ``first`` that ``second`` claims again at t=5 for ``ttl``.

    Returns the execution, the lost lease and the one that replaced it (epoch 2).
    """
    e, lost = expired_lease(store, clock, first, **submit)
    (holder,) = store.claim(second, ttl=ttl)
    return e, lost, holder


@contextmanager
def refused_unchanged(
    store: Store, execution_id: str, error: type[FencepostError] = StaleLease
) -> Iterator[pytest.ExceptionInfo[FencepostError]]:
    """The block raises ``error`` and leaves the execution exactly as it found it."""
    before = store.get(execution_id)
    with pytest.raises(error) as caught:
        yield caught
    assert store.get(execution_id) == before


@contextmanager
def names_the_field(field: str) -> Iterator[None]:
    """The block raises a :class:`ValidationError` naming ``field``, in its message too."""
    with pytest.raises(ValidationError) as caught:
        yield
    assert caught.value.field == field
    assert field in str(caught.value)


def pages_of(read: Callable[[str | None], Any]) -> list[list[Any]]:
    """The items of every page ``read(cursor)`` returns, from no cursor to the last page."""
    pages: list[list[Any]] = []
    cursor = None
    while True:
        page = read(cursor)
        pages.append(list(page.items))
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def executions(store: Store) -> list[Execution]:
    """Every execution in the store, in id order."""
    pages = pages_of(lambda cursor: store.query(limit=1000, after=cursor))
    return [execution for page in pages for execution in page]

"""The contract of finding the executions an operator needs to see: ``query`` by attempt
outcome and by due time.

``outcome`` keeps the executions any of whose attempts ended with it, exactly as
:meth:`~fencepost.store.base.Store.attempts` derives them from the audit trail (a
lease reaped or taken over ended TIMED_OUT); it combines with every other filter
and with keyset pages in both orders. ``due_after <= due_at < due_before`` holds at
its boundaries and at the ends of the calendar. Bad values are refused naming the
argument, and a refused query leaves the store answering.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from fencepost.domain.errors import ValidationError
from fencepost.domain.models import Occurrence
from fencepost.domain.states import WAITING_STATES, AttemptOutcome, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    US,
    ContractFixtures,
    at,
    pages_of,
    timezone_plus,
)


def _histories(store: Store, clock: ManualClock) -> dict[str, str]:
    """One execution per attempt history, by name (its job); the clock ends at t=5.

    ``timed-out``: its worker stopped it for running too long (TIMED_OUT), retry
    waiting; ``reaped``: its lease expired and the reaper ended it (TIMED_OUT);
    ``taken-over``: its lease expired, another worker took it over (TIMED_OUT) and
    completed (SUCCEEDED); ``failed-then-ok``: FAILED, then SUCCEEDED; ``released``:
    ABANDONED; ``snoozed``: SNOOZED; ``aborted``: CANCELLED; ``succeeded``:
    SUCCEEDED; ``waiting``: never claimed.
    """
    names = [
        "timed-out",
        "reaped",
        "taken-over",
        "failed-then-ok",
        "released",
        "snoozed",
        "aborted",
        "succeeded",
        "waiting",
    ]
    made = {n: store.submit(n, max_attempts=3).id for n in names}

    def claim(name: str, ttl: float = 30, owner: str = "w") -> Any:
        (lease,) = store.claim(owner, ttl=ttl, ids=[made[name]])
        return lease

    store.fail(claim("timed-out"), "ran past 10s", timed_out=True, retry_in=600)
    reaped = claim("reaped", ttl=5)
    lost = claim("taken-over", ttl=5)
    store.fail(claim("failed-then-ok"), "boom", retry_in=1)
    store.release(claim("released"))
    store.snooze(claim("snoozed"), 600)
    store.abort(claim("aborted"))
    store.complete(claim("succeeded"), "ok")
    clock.set(5)  # the leases of reaped and taken-over ran out
    store.complete(claim("taken-over", owner="w2"), "ok")
    assert store.reap_expired() == 1, "only reaped's lease was still expired"
    store.complete(claim("failed-then-ok"), "ok")
    assert (lost.execution_id, reaped.execution_id) == (made["taken-over"], made["reaped"])
    return made


def _ended_with(store: Store, outcome: AttemptOutcome, ids: list[str]) -> list[str]:
    """The ids (in id order) any of whose attempts ended with ``outcome``, by ``attempts``."""
    return sorted(i for i in ids if any(a.outcome is outcome for a in store.attempts(i)))


#: Outcomes the store refuses, naming ``outcome``.
HOSTILE_OUTCOMES: list[Any] = [
    "",
    " ",
    "\x00",
    "TIMED_OUT\x00",
    "\ud800",
    "nope",
    "timed out",
    "TIMED-OUT",
    "x" * 10_000,
    "ſucceeded",  # upper() of the long s is S: only ASCII names an outcome
    5,
    True,
    ["TIMED_OUT"],
    AttemptOutcome,
]

#: Due bounds the store refuses, naming the argument.
HOSTILE_INSTANTS: list[Any] = [
    "2026-01-01T00:00:00Z",  # text: the store takes datetimes
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "not a date",
    datetime(2026, 1, 1),  # naive
    date(2026, 1, 1),
    datetime(1, 1, 1, tzinfo=timezone_plus(5)),  # before datetime.min once in UTC
    datetime(9999, 12, 31, 23, 0, tzinfo=timezone_plus(-5)),  # after datetime.max in UTC
    0,
    1.5,
    float("nan"),
]


class FindingContract(ContractFixtures):
    """Query executions by attempt outcome and by due time."""

    def test_query_by_outcome_is_what_attempts_say(self, store: Store, clock: ManualClock) -> None:
        made = _histories(store, clock)
        every = sorted(made.values())

        def ids(outcome: Any, **filters: Any) -> list[str]:
            return [e.id for e in store.query(outcome=outcome, **filters).items]

        expected = {
            AttemptOutcome.TIMED_OUT: ["timed-out", "reaped", "taken-over"],
            AttemptOutcome.FAILED: ["failed-then-ok"],
            AttemptOutcome.SUCCEEDED: ["taken-over", "failed-then-ok", "succeeded"],
            AttemptOutcome.ABANDONED: ["released"],
            AttemptOutcome.SNOOZED: ["snoozed"],
            AttemptOutcome.CANCELLED: ["aborted"],
        }
        assert set(expected) == set(AttemptOutcome)
        for outcome, names in expected.items():
            wanted = sorted(made[n] for n in names)
            assert _ended_with(store, outcome, every) == wanted, outcome
            assert ids(outcome) == wanted, outcome
            assert ids(outcome.value.lower()) == wanted, "any case names an outcome"
            assert ids(outcome.value.title()) == wanted
        assert made["waiting"] not in {e.id for e in store.query(outcome="SUCCEEDED").items}

    def test_outcome_combines_with_the_other_filters(
        self, store: Store, clock: ManualClock
    ) -> None:
        made = _histories(store, clock)
        timed_out = sorted(made[n] for n in ("timed-out", "reaped", "taken-over"))

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(outcome="timed_out", **filters).items]

        assert ids(state=WAITING_STATES) == sorted([made["timed-out"], made["reaped"]])
        assert ids(state=State.SUCCEEDED) == [made["taken-over"]]
        assert ids(job="reaped") == [made["reaped"]]
        assert ids(job="succeeded") == []
        assert ids(queue="default") == timed_out
        assert ids(queue="other") == []
        assert ids(schedule="none") == []
        # timed-out is due again at t=600 (its retry); reaped keeps its due time, t=0.
        assert ids(due_after=at(1)) == [made["timed-out"]]
        assert ids(due_before=at(1)) == sorted([made["reaped"], made["taken-over"]])
        assert ids(newest_first=True) == timed_out[::-1]

    @pytest.mark.parametrize("newest_first", [False, True], ids=["oldest-first", "newest-first"])
    def test_outcome_pages_by_keyset(
        self, store: Store, clock: ManualClock, newest_first: bool
    ) -> None:
        # Timed-out executions among others that did not time out, interleaved by id,
        # so a page of the filter is not a page of the table.
        timed_out = []
        for n in range(7):
            ok = store.submit("j", max_attempts=3)
            store.complete(store.claim("w", ids=[ok.id])[0], "ok")
            slow = store.submit("j", max_attempts=3)
            store.fail(store.claim("w", ids=[slow.id])[0], f"slow {n}", timed_out=True)
            timed_out.append(slow.id)
        pages = pages_of(
            lambda cursor: store.query(
                outcome=AttemptOutcome.TIMED_OUT, limit=3, after=cursor, newest_first=newest_first
            )
        )
        assert [len(p) for p in pages] == [3, 3, 1]
        order = sorted(timed_out, reverse=newest_first)
        assert [e.id for page in pages for e in page] == order
        exact = store.query(outcome="TIMED_OUT", limit=7, newest_first=newest_first)
        assert ([e.id for e in exact.items], exact.next_cursor) == (order, None)

    def test_outcome_within_one_schedule(self, store: Store, clock: ManualClock) -> None:
        store.add_schedule("j", every=60, id="s")
        clock.set(3600)
        store.add_occurrences("s", [Occurrence(slot=at(60 * i), due_at=at(60 * i)) for i in (1, 2)])
        first, second = (e.id for e in store.query(schedule="s").items)
        other = store.submit("j", max_attempts=3)
        for made in (second, other.id):
            store.fail(store.claim("w", ids=[made])[0], "slow", timed_out=True)
        assert [e.id for e in store.query(schedule="s", outcome="timed_out").items] == [second]
        page = store.query(schedule="s", outcome="timed_out", newest_first=True)
        assert [e.id for e in page.items] == [second]
        assert store.query(schedule="s", outcome="failed").items == []
        assert first != second

    def test_due_bounds_at_their_edges(self, store: Store, clock: ManualClock) -> None:
        a = store.submit("j", execute_at=at(100))
        b = store.submit("j", execute_at=at(200))

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(**filters).items]

        assert ids(due_after=at(100)) == [a.id, b.id], "due_after is inclusive"
        assert ids(due_after=at(100) + US) == [b.id]
        assert ids(due_before=at(200)) == [a.id], "due_before is exclusive"
        assert ids(due_before=at(200) + US) == [a.id, b.id]
        assert ids(due_after=at(150), due_before=at(150)) == []
        assert ids(due_after=at(200), due_before=at(100)) == [], "an empty range is no error"
        # The same instant in another offset is the same bound.
        assert ids(due_before=at(200).astimezone(timezone_plus(-7))) == [a.id]
        earliest = datetime.min.replace(tzinfo=UTC)
        latest = datetime.max.replace(tzinfo=UTC)
        assert ids(due_after=earliest, due_before=latest) == [a.id, b.id]
        assert ids(due_before=earliest) == []
        assert ids(due_after=latest) == []

    def test_overdue_is_waiting_and_due_before_now_less_the_grace(
        self, store: Store, clock: ManualClock
    ) -> None:
        """What ``fencepost ps --overdue 10`` asks: waiting, due more than 10 s ago."""
        late = store.submit("j", execute_at=at(0), max_attempts=3)
        edge = store.submit("j", execute_at=at(5))
        store.submit("j", execute_at=at(20))
        running = store.submit("j", execute_at=at(0))
        store.claim("w", ids=[running.id], ttl=600)
        retrying = store.submit("j", execute_at=at(0), max_attempts=3)
        store.fail(store.claim("w", ids=[retrying.id])[0], "boom", retry_in=1)
        clock.set(15)
        overdue = store.query(state=WAITING_STATES, due_before=clock.now() - timedelta(seconds=10))
        # edge is due exactly 10 s ago: not more than 10 s.
        assert [e.id for e in overdue.items] == [late.id, retrying.id]
        assert edge.id not in {e.id for e in overdue.items}

    @pytest.mark.parametrize("outcome", HOSTILE_OUTCOMES, ids=repr)
    def test_a_bad_outcome_names_the_field(self, store: Store, outcome: Any) -> None:
        store.submit("j")
        with pytest.raises(ValidationError) as caught:
            store.query(outcome=outcome)
        assert caught.value.field == "outcome"
        assert len(str(caught.value)) < 400, "the message never echoes a huge value"
        str(caught.value).encode()  # and is text any output can carry
        assert len(store.query().items) == 1, "the store still answers"

    @pytest.mark.parametrize("field", ["due_after", "due_before"])
    @pytest.mark.parametrize("value", HOSTILE_INSTANTS, ids=repr)
    def test_a_bad_due_bound_names_the_field(self, store: Store, field: str, value: Any) -> None:
        store.submit("j")
        with pytest.raises(ValidationError) as caught:
            store.query(**{field: value}, outcome="timed_out")
        assert caught.value.field == field
        assert len(store.query().items) == 1, "the store still answers"

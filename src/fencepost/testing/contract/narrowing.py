"""The contract of the console's filters and counts: ``query`` and ``count_by_state`` by
limit key, owner, creation time, finish time and error text.

``limit_key`` keeps one limit key's executions; ``owner`` the RUNNING executions whose
lease that owner holds (a finished or taken-over execution is no longer its own);
``created_after <= created_at < created_before``; ``finished_after <= finish time <
finished_before`` for finished executions only (SUCCEEDED, FAILED, CANCELLED,
SKIPPED), where a finished execution's ``updated_at`` is its finish time and stays so
until a replay unfinishes it; ``error`` a piece of the latest recorded error, ASCII
letters in any case and every other character (``%``, ``_`` and ``\\`` too) as
written. Every filter combines with the others and with keyset pages in both orders.
``count_by_state`` counts exactly what ``query`` lists, every state a key. Bad values
are refused naming the argument; text no store can hold matches nothing.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from fencepost.domain.errors import InvalidTransition, NotRunning, StaleLease, ValidationError
from fencepost.domain.models import Lease, Page
from fencepost.domain.states import CommandKind, State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import US, ContractFixtures, at, pages_of, timezone_plus

#: Error texts the scene records, by name: what the error filter must match literally.
ERRORS = {
    "percent": "disk 100% full",
    "underscore": "KeyError: 'user_id'",
    "backslash": "path C:\\temp\\x not found",
    "mixed-case": "TimeoutError: Ran Past 30s",
    "accented": "Échec: réseau indisponible",
}


def _scene(store: Store, clock: ManualClock) -> dict[str, str]:
    """Executions by name (their job), made on the clock from t=0 to t=50.

    ``waiting`` (t=0, key k1), ``keyed`` (t=1, key k1, RUNNING under w1), ``running``
    (RUNNING under w2), ``done`` (SUCCEEDED at t=10), ``dead`` (FAILED at t=20 with
    ``percent``), ``cancelled`` (CANCELLED at t=30, key k2), ``retrying`` (RETRY_WAIT
    with ``underscore``, then ``backslash``: its latest), ``timed-out`` (RETRY_WAIT
    with ``mixed-case``), ``accented`` (FAILED at t=40 with it), ``late`` (SUCCEEDED
    at t=50, created at t=45).
    """
    made: dict[str, str] = {}

    def submit(name: str, **options: Any) -> str:
        made[name] = store.submit(name, max_attempts=options.pop("max_attempts", 3), **options).id
        return made[name]

    def claim(name: str, owner: str = "w") -> Lease:
        (lease,) = store.claim(owner, ids=[made[name]], ttl=3600)
        return lease

    submit("waiting", limit_key="k1")
    clock.set(1)
    submit("keyed", limit_key="k1")
    claim("keyed", "w1")
    submit("running")
    claim("running", "w2")
    for name in ("done", "dead", "retrying", "timed-out", "accented"):
        submit(name, max_attempts=1 if name in ("dead", "accented") else 3)
    made["cancelled"] = store.submit("cancelled", limit_key="k2").id
    clock.set(10)
    store.complete(claim("done"), "ok")
    clock.set(20)
    store.fail(claim("dead"), ERRORS["percent"])
    clock.set(30)
    store.request(made["cancelled"], CommandKind.CANCEL, actor="op")
    store.fail(claim("retrying"), ERRORS["underscore"], retry_in=1)
    clock.set(31)
    store.fail(claim("retrying"), ERRORS["backslash"], retry_in=3600)
    store.fail(claim("timed-out"), ERRORS["mixed-case"], timed_out=True, retry_in=3600)
    clock.set(40)
    store.fail(claim("accented"), ERRORS["accented"])
    clock.set(45)
    submit("late")
    clock.set(50)
    store.complete(claim("late"), "ok")
    return made


def _ids(store: Store, **filters: Any) -> list[str]:
    return [e.id for e in store.query(limit=1000, **filters).items]


def _named(made: dict[str, str], *names: str) -> list[str]:
    return sorted(made[n] for n in names)


class NarrowingContract(ContractFixtures):
    """Query and count executions by limit key, owner, creation and finish time, error."""

    def test_each_filter_keeps_exactly_its_executions(
        self, store: Store, clock: ManualClock
    ) -> None:
        made = _scene(store, clock)

        def n(*names: str) -> list[str]:
            return _named(made, *names)

        assert store.get(made["done"]).updated_at == at(10), "a finish is its updated_at"

        assert _ids(store, limit_key="k1") == n("waiting", "keyed")
        assert _ids(store, limit_key="k2") == n("cancelled")
        assert _ids(store, limit_key="k") == [], "a limit key is matched exactly"
        assert _ids(store, owner="w1") == n("keyed")
        assert _ids(store, owner="w2") == n("running")
        assert _ids(store, owner="w") == [], "w's leases all ended: none is RUNNING"
        assert _ids(store, owner="W1") == [], "an owner is matched exactly"

        assert _ids(store, created_after=at(1)) == sorted(set(made.values()) - {made["waiting"]})
        assert _ids(store, created_before=at(1)) == n("waiting"), "created_before is exclusive"
        assert _ids(store, created_after=at(1) + US, created_before=at(46)) == n("late")
        assert _ids(store, created_after=at(45), created_before=at(45) + US) == n("late")

        assert _ids(store, finished_after=at(10)) == n(
            "done", "dead", "cancelled", "accented", "late"
        )
        assert _ids(store, finished_after=at(10) + US) == n("dead", "cancelled", "accented", "late")
        assert _ids(store, finished_before=at(30)) == n("done", "dead"), "exclusive; finished"
        assert _ids(store, finished_after=at(20), finished_before=at(40) + US) == n(
            "dead", "cancelled", "accented"
        )
        assert _ids(store, finished_after=at(51)) == []
        assert _ids(store, finished_before=at(0)) == []

        assert _ids(store, error="100%") == n("dead")
        assert _ids(store, error="%") == n("dead"), "% is a percent sign, not a wildcard"
        assert _ids(store, error="_") == [], "the latest error counts: user_id was replaced"
        assert _ids(store, error="C:\\temp\\") == n("retrying"), "a backslash is literal"
        assert _ids(store, error="\\") == n("retrying")
        assert _ids(store, error="ran past 30S") == n("timed-out"), "ASCII letters: any case"
        assert _ids(store, error="TIMEOUTERROR") == n("timed-out")
        assert _ids(store, error="Échec") == n("accented")
        assert _ids(store, error="réseau") == n("accented")
        assert _ids(store, error="éCHEC") == [], "other letters match as written"
        assert _ids(store, error="error") == n("timed-out")
        assert _ids(store, error="user_id") == []
        assert _ids(store, error="d%k") == [], "% never spans characters"
        assert _ids(store, error="dis_") == [], "_ never stands for a character"

    def test_filters_combine_and_count_what_they_list(
        self, store: Store, clock: ManualClock
    ) -> None:
        made = _scene(store, clock)

        def n(*names: str) -> list[str]:
            return _named(made, *names)

        combinations: list[dict[str, Any]] = [
            {},
            {"limit_key": "k1", "state": State.RUNNING},
            {"limit_key": "k1", "owner": "w1"},
            {"limit_key": "k2", "finished_after": at(30)},
            {"owner": "w2", "state": [State.SCHEDULED, State.RETRY_WAIT]},
            {"owner": "w2", "job": "running", "created_before": at(2)},
            {"error": "error", "state": State.RETRY_WAIT},
            {"error": "s", "finished_before": at(45)},
            {"error": "R", "job": "timed-out", "outcome": "timed_out"},
            {"finished_after": at(0), "state": [State.SUCCEEDED, State.CANCELLED]},
            {"finished_after": at(0), "job": "late", "queue": "default"},
            {"finished_before": at(50), "queue": "default", "created_after": at(1)},
            {"created_after": at(1), "state": [State.FAILED, State.RUNNING, State.SCHEDULED]},
            {"state": [State.SCHEDULED, State.FAILED], "job": "dead"},
            {"job": "late", "queue": "default"},
            {"due_after": at(3000), "error": "o"},
        ]
        expected = [
            sorted(made.values()),
            n("keyed"),
            n("keyed"),
            n("cancelled"),
            [],
            n("running"),
            n("timed-out"),
            n("dead", "accented"),
            n("timed-out"),
            n("done", "cancelled", "late"),
            n("late"),
            n("done", "dead", "cancelled", "accented"),
            n("keyed", "running", "dead", "accented"),
            n("dead"),
            n("late"),
            n("retrying", "timed-out"),
        ]
        for filters, wanted in zip(combinations, expected, strict=True):
            page = store.query(limit=1000, **filters)
            assert [e.id for e in page.items] == wanted, filters
            counts = store.count_by_state(**filters)
            assert list(counts) == list(State), "every state, in order"
            assert counts == {s: Counter(e.state for e in page.items)[s] for s in State}, filters

    @pytest.mark.parametrize("newest_first", [False, True], ids=["oldest-first", "newest-first"])
    def test_pages_keep_every_filter(
        self, store: Store, clock: ManualClock, newest_first: bool
    ) -> None:
        # Interleaved by id: matching and not, in several states, so that a page of a
        # filter is neither a page of the table nor of one state.
        kept: dict[str, list[str]] = {"key": [], "error": [], "finished": [], "states": []}
        for i in range(5):
            clock.set(i * 10)
            store.submit("noise", limit_key="other")
            kept["key"].append(store.submit("k", limit_key="tenant").id)
            failed = store.submit("f", max_attempts=1)
            store.fail(store.claim("w", ids=[failed.id])[0], f"Boom {i}")
            kept["error"].append(failed.id)
            kept["finished"].append(failed.id)
            kept["states"].append(failed.id)
            done = store.submit("d")
            clock.set(i * 10 + 5)
            store.complete(store.claim("w", ids=[done.id])[0], "ok")
            kept["finished"].append(done.id)
            running = store.submit("r")
            store.claim("w", ids=[running.id], ttl=3600)
            kept["states"].append(running.id)
        filters: dict[str, dict[str, Any]] = {
            "key": {"limit_key": "tenant"},
            "error": {"error": "boom"},
            "finished": {"finished_after": at(0)},
            "states": {"state": [State.FAILED, State.RUNNING]},
        }
        for name, given in filters.items():

            def page(cursor: str | None, given: dict[str, Any] = given) -> Page:
                return store.query(limit=2, after=cursor, newest_first=newest_first, **given)

            pages = pages_of(page)
            order = sorted(kept[name], reverse=newest_first)
            assert [e.id for page in pages for e in page] == order, name
            assert all(len(page) <= 2 for page in pages)
            assert sum(store.count_by_state(**given).values()) == len(order)

    def test_a_finish_time_stays_until_a_replay(self, store: Store, clock: ManualClock) -> None:
        """Nothing moves a finished execution's updated_at (its finish time) but a replay,
        which unfinishes it: refused writes and commands leave it."""
        dead = store.submit("j", max_attempts=1)
        lease = store.claim("w", ids=[dead.id], ttl=60)[0]
        clock.set(10)
        store.fail(lease, "boom")
        done = store.submit("j")
        done_lease = store.claim("w", ids=[done.id], ttl=60)[0]
        store.complete(done_lease, "ok")
        clock.set(20)
        for refused in (
            lambda: store.complete(done_lease, "again"),
            lambda: store.heartbeat(done_lease),
            lambda: store.fail(lease, "late"),
            lambda: store.request(done.id, CommandKind.CANCEL, actor="op"),
        ):
            with pytest.raises((StaleLease, InvalidTransition, NotRunning)):
                refused()
        store.reap_expired()
        clock.set(100)
        store.reap_expired()
        assert _ids(store, finished_after=at(10), finished_before=at(10) + US) == sorted(
            [dead.id, done.id]
        )
        store.replay(dead.id, actor="op")
        assert _ids(store, finished_after=at(0)) == [done.id], "a replayed one is not finished"
        assert store.count_by_state(finished_after=at(0))[State.SUCCEEDED] == 1

    def test_an_owner_loses_what_it_no_longer_holds(self, store: Store, clock: ManualClock) -> None:
        made = store.submit("j", max_attempts=3)
        store.claim("w1", ids=[made.id], ttl=5)
        assert _ids(store, owner="w1") == [made.id]
        clock.set(5)  # expired, not yet taken over: still w1's until someone takes it
        assert _ids(store, owner="w1") == [made.id]
        lease = store.claim("w2", ids=[made.id], ttl=60)[0]
        assert (_ids(store, owner="w1"), _ids(store, owner="w2")) == ([], [made.id])
        store.complete(lease, "ok")
        assert _ids(store, owner="w2") == []
        assert store.count_by_state(owner="w2") == dict.fromkeys(State, 0)

    def test_bounds_are_instants_in_any_offset(self, store: Store, clock: ManualClock) -> None:
        first = store.submit("j")
        clock.set(10)
        second = store.submit("j")
        store.complete(store.claim("w", ids=[second.id])[0], "ok")
        plus_seven = at(10).astimezone(timezone_plus(7))
        assert _ids(store, created_after=plus_seven) == [second.id]
        assert _ids(store, created_before=plus_seven) == [first.id]
        assert _ids(store, finished_after=plus_seven) == [second.id]
        earliest = datetime.min.replace(tzinfo=UTC)
        latest = datetime.max.replace(tzinfo=UTC)
        for name in ("created", "finished"):
            assert len(_ids(store, **{f"{name}_after": earliest, f"{name}_before": latest})) == (
                2 if name == "created" else 1
            )
            assert _ids(store, **{f"{name}_after": latest}) == []
            assert _ids(store, **{f"{name}_before": earliest}) == []
        # Ids are read from a slack around a creation bound; created_at decides.
        assert _ids(store, created_after=at(10) - US) == [second.id]
        assert _ids(store, created_before=at(0) + US) == [first.id]
        assert store.count_by_state(created_after=at(10) - US)[State.SUCCEEDED] == 1

    def test_bad_values_are_refused_naming_the_argument(self, store: Store) -> None:
        store.submit("j", limit_key="k")
        refused: list[tuple[str, Any]] = [
            *((name, value) for name in ("limit_key", "owner") for value in HOSTILE_NAMES),
            *(
                (name, value)
                for name in ("created_after", "created_before", "finished_after", "finished_before")
                for value in HOSTILE_INSTANTS
            ),
            *(("error", value) for value in HOSTILE_ERRORS),
        ]
        for name, value in refused:
            for verb in (store.query, store.count_by_state):
                with pytest.raises(ValidationError) as caught:
                    verb(**{name: value})
                assert caught.value.field == name, (name, value)
                assert len(str(caught.value)) < 400, "the message never echoes a huge value"
                str(caught.value).encode()
        assert len(store.query().items) == 1, "the store still answers"

    def test_text_no_store_holds_matches_nothing(self, store: Store) -> None:
        made = store.submit("j", limit_key="k")
        store.fail(store.claim("w", ids=[made.id])[0], "boom", retry_in=60)
        for name in ("limit_key", "owner", "error"):
            for value in UNSTORABLE + SQLISH:
                given: dict[str, Any] = {name: value}
                assert store.query(**given).items == [], given
                assert store.count_by_state(**given) == dict.fromkeys(State, 0)
        assert _ids(store, error="x" * 200) == []
        assert _ids(store, error="OOM") == [made.id]
        assert _ids(store, limit_key="k" * 10_000) == []
        assert store.count_by_state(limit_key="k")[State.RETRY_WAIT] == 1


#: Names (a limit key, an owner) the store refuses, naming the argument.
HOSTILE_NAMES: list[Any] = [5, 1.5, True, b"k", ["k"], {"k": 1}, object()]
#: Creation and finish bounds the store refuses, naming the argument.
HOSTILE_INSTANTS: list[Any] = [
    "2026-01-01T00:00:00Z",
    datetime(2026, 1, 1),  # naive
    datetime(1, 1, 1, tzinfo=timezone_plus(5)),  # before datetime.min once in UTC
    datetime(9999, 12, 31, 23, 0, tzinfo=timezone_plus(-5)),  # after datetime.max in UTC
    0,
    -1,
    10**30,
    float("nan"),
    [at(0)],
]
#: Error filters the store refuses: not text, empty, longer than 200 characters.
HOSTILE_ERRORS: list[Any] = ["", "x" * 201, "é" * 10_000, 5, None.__class__, ["boom"], b"boom"]
#: Text no store can hold: a filter holding it matches nothing.
UNSTORABLE = ["\x00", "bo\x00om", "\ud800", "boom\udfff"]
#: Text that means something to SQL or LIKE: matched as written (here: nothing).
SQLISH = ["' OR 1=1 --", "%", "_", "%%", "k%", "\\", "'; DROP TABLE executions; --", "*"]

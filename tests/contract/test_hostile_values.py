"""Hostile values at the store's boundary, on every backend (memory, SQLite, PostgreSQL).

The rule (``fencepost.store.base``): every verb either does what it says or raises
:class:`ValidationError` naming the field, and writes nothing; whatever it accepts
can afterwards be read (``get``, ``query``, ``transitions``, ``attempts``), claimed,
completed or failed, and served over HTTP (the app and the Python client) without
a 5xx. So here, for every call:

* the only exception allowed is ``ValidationError`` (plus ``StaleLease`` where a
  fence is meant to refuse, ``IdempotencyConflict`` where a key or id is reused,
  and ``ResultInvalid`` from ``complete``). ``StoreRefused`` is a ValidationError
  too, but it means the *database* refused a value the store's own checks let
  through: that fails the test, as a ``TypeError``, ``UnicodeEncodeError`` or a
  driver error would.
* the oracles of :mod:`tests.hostile` say beforehand whether a value must pass;
  a refusal must name one of the fields the oracle found bad, and an acceptance
  must round-trip.

What "round-trip" means for JSON: the value as JSON sees it (:func:`hostile.as_json`:
tuples become lists, non-string keys become their JSON text, so ``{1: "a"}``
reads back as ``{"1": "a"}``), compared by :func:`hostile.json_equal`: same types
and values, ``-0.0`` keeping its sign, except on PostgreSQL, whose ``jsonb`` keeps
numbers as ``numeric`` (``1e16`` reads back as ``10**16``, ``-0.0`` as ``0.0``): there a
float equals a number that is that float. Whatever the store reads back is what HTTP
and the Python client must show exactly (``Client.get(id) == store.get(id)``).

The tests, from random to exact:

* property tests (Hypothesis) per verb family: submit, submit_many, the lease verbs
  (claim, heartbeat with a real and with a forged lease, complete, fail, release,
  abort, request, claim_commands), add_schedule and update_schedule, names and
  filters; and a mix of calls after which every row must read, claim, complete
  or fail, and serve over HTTP and the Python client;
* every fixed hostile string in every name field, and every fixed bad or odd
  payload in every JSON field (deterministic: random draws could miss one);
* the depth limit exactly (``MAX_DEPTH - 1``, ``MAX_DEPTH``, ``MAX_DEPTH + 1``) for
  inputs, results, progress and schedule inputs, in the store and over HTTP;
* raw HTTP bodies whose JSON escapes decode to what Python could not pass directly.

The fixed cases near the end are the bugs this suite found when it was written
(actors, lookups and filters that reached the driver unchecked, mixed-type keys
under an idempotency key, time zone names that are directories, integers and
durations too large to format or convert, schedule ids the API cannot address);
each now has its refusal pinned.

Runtime is bounded: a few dozen derandomized examples per property test, one store
per test function shared by its examples (a PostgreSQL store is a new schema: too
slow per example), except the mix, which needs a fresh store to replay a failure.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, assume, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from fencepost.api import create_app
from fencepost.client import Client
from fencepost.domain import payloads
from fencepost.domain.checks import MAX_ERROR_CHARS
from fencepost.domain.errors import (
    IdempotencyConflict,
    NotFound,
    ResultInvalid,
    StaleLease,
    StoreRefused,
    ValidationError,
)
from fencepost.domain.machine import attempts_from_transitions
from fencepost.domain.models import Execution, Lease, Occurrence
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.testing.contract import assert_audit_valid
from tests import hostile
from tests.api.support import TestClient, assert_problem
from tests.hostile import MAX_DEPTH

T = TypeVar("T")

#: Few examples, fixed seeds: the whole module runs in about two minutes on three backends.
HOSTILE = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[
        # Deep and long values are the point, and a database round trip is slow.
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
FEWER = settings(HOSTILE, max_examples=15)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(0)


@pytest.fixture
def store(store_factory: Callable[..., Store], clock: ManualClock) -> Store:
    return store_factory(clock)


@pytest.fixture
def numeric(backend: str) -> bool:
    """Whether numbers read back as jsonb's ``numeric`` (see the module doc)."""
    return backend == "postgres"


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    with TestClient(create_app(store)) as c:
        yield c


@pytest.fixture
def remote(client: TestClient) -> Iterator[Client]:
    with Client("http://testserver", http=client) as c:
        yield c


def attempt(call: Callable[[], T]) -> T | ValidationError:
    """The call's result, or the ValidationError it raised; anything else fails the test."""
    try:
        return call()
    except StoreRefused as exc:
        pytest.fail(f"the database refused what the store's checks let through: {exc!r}")
    except ValidationError as exc:
        return exc


def census(store: Store) -> tuple[list[str], list[str]]:
    """Every execution id and schedule id the store holds."""
    executions = store.query(limit=10_000)
    schedules = store.schedules(limit=10_000)
    assert executions.next_cursor is None
    assert schedules.next_cursor is None
    return [e.id for e in executions.items], [s.id for s in schedules.items]


def refused(outcome: object, bad: set[str], *, prefix: str = "") -> None:
    """``outcome`` is a ValidationError naming one of the ``bad`` fields, or a member of one.

    A member: an integer past the digits limit is named where it is (``inputs.v.1``).
    """
    assert isinstance(outcome, ValidationError), f"accepted; expected a refusal of {bad}"
    named = {prefix + f for f in bad}
    field = outcome.field
    assert field in named or any(
        field.startswith((f + ".", f + "[")) and outcome.message == payloads.TOO_MANY_DIGITS
        for f in named
    ), (field, bad, outcome.message)
    note(f"refused {outcome.field.removeprefix(prefix)}")


def accepted(outcome: T | ValidationError) -> T:
    assert not isinstance(outcome, ValidationError), f"refused: {outcome!r}"
    note("accepted")
    return outcome


def note(what: str) -> None:
    """Count outcomes for ``--hypothesis-show-statistics`` (both sides must be reached)."""
    if currently_in_test_context():
        event(what)


# -- drawing arguments with their oracle ----------------------------------------------------


#: A field of a verb: (good values, hostile values, the oracle: must this value pass?).
Field = tuple[st.SearchStrategy[Any], st.SearchStrategy[Any], Callable[[Any], bool]]


def _name(max_len: int = hostile.MAX_NAME, *, optional: bool = False) -> Field:
    return (
        hostile.good_names(),
        hostile.hostile_names(allow_none=optional),
        lambda v: (optional and v is None) or hostile.name_ok(v, max_len),
    )


def _int(low: int, high: int) -> Field:
    return (
        hostile.good_ints(low, high),
        hostile.hostile_ints(),
        lambda v: hostile.int_ok(v, low, high),
    )


def _duration(*, allow_zero: bool) -> Field:
    return (
        hostile.good_durations(allow_zero=allow_zero),
        hostile.hostile_durations(),
        lambda v: hostile.duration_ok(v, allow_zero=allow_zero),
    )


_INPUTS: Field = (hostile.accepted_inputs(), hostile.hostile_inputs(), hostile.inputs_ok)
_PRIORITY = _int(-(2**31), 2**31 - 1)
_COUNT = _int(1, 2**31 - 1)

SUBMIT_FIELDS: dict[str, Field] = {
    "job": _name(),
    "inputs": _INPUTS,
    "idempotency_key": _name(hostile.MAX_KEY, optional=True),
    "bucket_key": _name(hostile.MAX_KEY, optional=True),
    "priority": _PRIORITY,
    "max_attempts": _COUNT,
    "delay": _duration(allow_zero=True),
    "timeout": _duration(allow_zero=False),
}


@st.composite
def arguments(
    draw: st.DrawFn, fields: dict[str, Field], required: tuple[str, ...] = ()
) -> tuple[dict[str, Any], set[str]]:
    """Some of ``fields`` (``required`` always), a few of them hostile; and the bad ones.

    Mostly good values, so that acceptance is tested as often as refusal: none, one
    or two fields are drawn from the hostile side, and even those may turn out fine.
    """
    optional = sorted(set(fields) - set(required))
    present = [*required, *draw(st.lists(st.sampled_from(optional), unique=True, max_size=4))]
    count = draw(st.sampled_from([0, 0, 1, 1, 1, 2]))
    aimed = set(draw(st.permutations(present))[:count])
    args: dict[str, Any] = {}
    bad: set[str] = set()
    for name in present:
        good, hostile_values, ok = fields[name]
        args[name] = draw(hostile_values if name in aimed else good, label=name)
        if not ok(args[name]):
            bad.add(name)
    return args, bad


def submit_requests() -> st.SearchStrategy[tuple[dict[str, Any], set[str]]]:
    """Keyword arguments of ``submit`` (job included) and the fields the rule refuses."""
    return arguments(SUBMIT_FIELDS, required=("job",))


def check_stored(store: Store, execution: Execution, args: dict[str, Any], numeric: bool) -> None:
    """The execution reads back with what was submitted, and every read verb serves it."""
    got = store.get(execution.id)
    inputs = args.get("inputs")
    assert hostile.json_equal(
        got.inputs, hostile.as_json({} if inputs is None else inputs), numeric=numeric
    )
    assert got.job == args["job"]
    assert got.idempotency_key == args.get("idempotency_key")
    assert got.bucket_key == args.get("bucket_key")
    assert got.priority == args.get("priority", 0)
    assert got.max_attempts == args.get("max_attempts", 3)
    assert execution.id in [e.id for e in store.query(job=args["job"], limit=10_000).items]
    if got.idempotency_key is not None:
        found = store.find(got.idempotency_key)
        assert found is not None
        assert found.id == execution.id
    assert_audit_valid(store, execution.id)
    store.attempts(execution.id)


# -- submit, submit_many ----------------------------------------------------------------------


class Keys:
    """Idempotency keys (or schedule ids) stored so far: reusing one may conflict, by design."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def reused(self, *keys: object) -> bool:
        return any(isinstance(k, str) and k in self.used for k in keys)

    def add(self, *keys: object) -> None:
        self.used.update(k for k in keys if isinstance(k, str))


def test_submit_refuses_or_round_trips(store: Store, numeric: bool) -> None:
    keys = Keys()

    @HOSTILE
    @given(request=submit_requests())
    def check(request: tuple[dict[str, Any], set[str]]) -> None:
        args, bad = request
        key = args.get("idempotency_key")
        before = census(store)
        try:
            outcome = attempt(lambda: store.submit(**args))
        except IdempotencyConflict:
            assert keys.reused(key)
            assert not bad
            assert census(store) == before
            return
        if bad:
            refused(outcome, bad)
            assert census(store) == before, "a refused submit wrote something"
            if isinstance(key, str) and hostile.name_ok(key, hostile.MAX_KEY):
                assert keys.reused(key) or store.find(key) is None
            return
        execution = accepted(outcome)
        keys.add(key)
        check_stored(store, execution, args, numeric)

    check()


def test_submit_many_refuses_the_batch_or_stores_it(store: Store, numeric: bool) -> None:
    keys = Keys()

    @HOSTILE
    @given(batch=st.lists(submit_requests(), min_size=1, max_size=3))
    def check(batch: list[tuple[dict[str, Any], set[str]]]) -> None:
        requests = [args for args, _ in batch]
        batch_keys = [args.get("idempotency_key") for args in requests]
        before = census(store)
        try:
            outcome = attempt(lambda: store.submit_many(requests))
        except IdempotencyConflict:
            repeated = len({k for k in batch_keys if k is not None}) < sum(
                k is not None for k in batch_keys
            )
            assert keys.reused(*batch_keys) or repeated
            assert census(store) == before
            return
        first_bad = next((i for i, (_, bad) in enumerate(batch) if bad), None)
        if first_bad is not None:
            # Items are checked in order: the first bad one names the refusal.
            refused(outcome, batch[first_bad][1], prefix=f"[{first_bad}].")
            assert census(store) == before, "a refused batch wrote something"
            return
        executions = accepted(outcome)
        assert len(executions) == len(requests)
        keys.add(*batch_keys)
        for execution, args in zip(executions, requests, strict=True):
            check_stored(store, execution, args, numeric)

    check()


# -- the lease verbs ------------------------------------------------------------------------------


def test_lease_verbs_refuse_or_record(store: Store, numeric: bool) -> None:
    """claim, heartbeat, complete, fail, release, abort, request and claim_commands."""
    jobs = itertools.count()

    @HOSTILE
    @given(
        owner=st.one_of(hostile.good_names(), hostile.hostile_names()),
        action=st.sampled_from(sorted(LEASE_ACTIONS)),
        data=st.data(),
    )
    def check(owner: Any, action: str, data: st.DataObject) -> None:
        execution = store.submit(f"lease-{next(jobs)}")
        claimed = attempt(lambda: store.claim(owner, ids=[execution.id]))
        if not hostile.name_ok(owner):
            refused(claimed, {"owner"})
            assert store.get(execution.id).state is State.SCHEDULED
            owner = "worker"
            claimed = store.claim(owner, ids=[execution.id])
        [lease] = accepted(claimed)
        assert lease.owner == owner
        assert store.get(execution.id).lease_owner == owner
        LEASE_ACTIONS[action](Held(store, lease, data, numeric))
        if store.get(execution.id).state is State.RUNNING:
            store.release(lease)
        assert_audit_valid(store, execution.id)
        store.attempts(execution.id)

    check()


class Held:
    """A live lease, with what a lease action needs: the store, draws, the equality."""

    def __init__(self, store: Store, lease: Lease, data: st.DataObject, numeric: bool) -> None:
        self.store, self.lease, self.data, self.numeric = store, lease, data, numeric
        self.id = lease.execution_id
        self.running = store.get(self.id)

    def unchanged(self) -> None:
        assert self.store.get(self.id) == self.running, "a refused call wrote something"


def _heartbeat(held: Held) -> None:
    progress = held.data.draw(hostile.hostile_json(), label="progress")
    outcome = attempt(lambda: held.store.heartbeat(held.lease, progress=progress))
    if progress is not None and not hostile.json_ok(progress):
        refused(outcome, {"progress"})
        held.unchanged()
        return
    accepted(outcome)
    if progress is not None:
        got = held.store.get(held.id).progress
        assert hostile.json_equal(got, hostile.as_json(progress), numeric=held.numeric)


def _forged_fence(held: Held) -> None:
    """A lease rebuilt by hand (as the HTTP API does) with a hostile owner."""
    store, lease = held.store, held.lease
    owner = held.data.draw(hostile.hostile_names(), label="fence owner")
    verb = held.data.draw(st.sampled_from(["heartbeat", "complete", "fail", "release", "abort"]))
    forged = replace(lease, owner=owner)
    calls: dict[str, Callable[[], object]] = {
        "heartbeat": lambda: store.heartbeat(forged),
        "complete": lambda: store.complete(forged, {"by": "forger"}),
        "fail": lambda: store.fail(forged, "forged"),
        "release": lambda: store.release(forged),
        "abort": lambda: store.abort(forged),
    }
    try:
        outcome = attempt(calls[verb])
    except StaleLease:
        # Refused and audited (STALE_REFUSED, actor = that owner): the audit must hold it.
        assert hostile.storable_text(owner), "an unstorable owner reached the fence"
    else:
        if owner == lease.owner:
            return  # no forgery after all
        refused(outcome, {"owner"})
    after = store.get(held.id)
    assert (after.state, after.epoch, after.lease_owner) == (
        State.RUNNING,
        held.running.epoch,
        lease.owner,
    )


def _complete(held: Held) -> None:
    result = held.data.draw(hostile.hostile_json(), label="result")
    outcome = attempt(lambda: held.store.complete(held.lease, result))
    done = held.store.get(held.id)
    if hostile.json_ok(result):
        accepted(outcome)
        assert done.state is State.SUCCEEDED
        assert hostile.json_equal(done.result, hostile.as_json(result), numeric=held.numeric)
        return
    # Not refused but recorded: the execution fails for good.
    assert isinstance(outcome, ResultInvalid), outcome
    assert done.state is State.FAILED
    assert done.result is None
    assert done.error is not None
    assert done.error.startswith("result_invalid")


def _fail(held: Held) -> None:
    error = held.data.draw(
        st.one_of(hostile.hostile_text(), st.sampled_from(hostile.NOT_STRINGS)), label="error"
    )
    outcome = attempt(lambda: held.store.fail(held.lease, error, retryable=False))
    if not hostile.text_ok(error):
        refused(outcome, {"error"})
        held.unchanged()
        return
    accepted(outcome)
    failed = held.store.get(held.id)
    assert (failed.state, failed.error) == (State.FAILED, error[:MAX_ERROR_CHARS])


def _release_or_abort(held: Held, verb: str) -> None:
    reason = held.data.draw(hostile.hostile_names(), label="reason")
    call = held.store.release if verb == "release" else held.store.abort
    outcome = attempt(lambda: call(held.lease, reason=reason))
    if not hostile.name_ok(reason, MAX_ERROR_CHARS):
        refused(outcome, {"reason"})
        held.unchanged()
        return
    after = accepted(outcome)
    assert after.state is (State.SCHEDULED if verb == "release" else State.CANCELLED)
    assert held.store.transitions(held.id)[-1].reason == reason


def _request_and_claim_commands(held: Held) -> None:
    store = held.store
    actor = held.data.draw(hostile.hostile_names(), label="actor")
    requested = attempt(lambda: store.request(held.id, "cancel", actor=actor))
    if not hostile.name_ok(actor):
        refused(requested, {"actor"})
        assert store.commands(held.id) == []
        return
    assert accepted(requested).requested_by == actor
    owner = held.data.draw(st.one_of(hostile.good_names(), hostile.hostile_names()), label="owner")
    claimed = attempt(lambda: store.claim_commands(owner, [held.id]))
    if hostile.name_ok(owner):
        [command] = accepted(claimed)
        assert (command.owner, command.requested_by) == (owner, actor)
    else:
        refused(claimed, {"owner"})
    assert [c.requested_by for c in store.commands(held.id)] == [actor]


LEASE_ACTIONS: dict[str, Callable[[Held], None]] = {
    "heartbeat": _heartbeat,
    "fence": _forged_fence,
    "complete": _complete,
    "fail": _fail,
    "release": lambda held: _release_or_abort(held, "release"),
    "abort": lambda held: _release_or_abort(held, "abort"),
    "request": _request_and_claim_commands,
}


# -- schedules ------------------------------------------------------------------------------------

#: (cron, ok).
CRONS: list[tuple[Any, bool]] = [
    ("* * * * *", True),
    ("0 0 * * *", True),
    ("*/5 * * * * *", True),  # six fields: seconds first
    ("", False),
    (" ", False),
    ("\x00", False),
    ("* * * * *\x00", False),
    ("\ud800", False),
    ("* * * *", False),
    ("61 * * * *", False),
    ("a b c d e", False),
    ("*" * 5000, False),
    (5, False),
    (b"* * * * *", False),
    ("0 0 30 2 *", False),  # never fires
]
#: (timezone, ok). "America" (a tzdata directory) and names over 255 characters have
#: their own test (test_time_zone_names_that_are_not_files).
TIMEZONES: list[tuple[Any, bool]] = [
    ("UTC", True),
    ("Europe/Paris", True),
    ("America/New_York", True),
    ("Etc/GMT+5", True),
    ("", False),
    (" ", False),
    ("\x00", False),
    ("Europe/\x00", False),
    ("\ud800", False),
    ("Not/AZone", False),
    ("../../etc/passwd", False),
    ("/etc/localtime", False),
    ("localtime", False),  # the host's own zone: materializers on two hosts would disagree
    ("posixrules", False),
    ("right/UTC", False),
    ("posix/Europe/Paris", False),
    ("EST5EDT", True),
    ("x" * 255, False),
    (None, False),
    (1, False),
]


SCHEDULE_FIELDS: dict[str, Field] = {
    "job": _name(),
    "id": _name(hostile.MAX_NAME),
    "inputs": _INPUTS,
    "priority": _PRIORITY,
    "max_attempts": _COUNT,
    "max_catch_up": _COUNT,
    "misfire_grace": _duration(allow_zero=True),
}
_GOOD_CRONS = [c for c, ok in CRONS if ok]
_GOOD_ZONES = [z for z, ok in TIMEZONES if ok]


@st.composite
def schedule_requests(draw: st.DrawFn) -> tuple[dict[str, Any], set[str]]:
    """add_schedule's arguments and the fields the rule refuses."""
    args, bad = draw(arguments(SCHEDULE_FIELDS, required=("job",)))
    aim = draw(st.sampled_from([None, None, "rule", "timezone"]))
    if draw(st.booleans()):
        rows = CRONS if aim == "rule" else [(c, True) for c in _GOOD_CRONS]
        args["cron"], cron_ok = draw(st.sampled_from(rows))
        zones = TIMEZONES if aim == "timezone" else [(z, True) for z in _GOOD_ZONES]
        args["timezone"], zone_ok = draw(st.sampled_from(zones))
        bad.update(name for name, ok in (("cron", cron_ok), ("timezone", zone_ok)) if not ok)
    else:
        good, hostile_values, ok = _duration(allow_zero=False)
        args["every"] = draw(hostile_values if aim == "rule" else good)
        if not ok(args["every"]):
            bad.add("every")
        if aim == "timezone":  # an interval runs on UTC: any other zone is refused
            args["timezone"] = draw(st.sampled_from([z for z, _ in TIMEZONES]))
            if args["timezone"] != "UTC":
                bad.add("timezone")
    return args, bad


UPDATE_FIELDS: dict[str, Field] = {
    **{name: field for name, field in SCHEDULE_FIELDS.items() if name != "id"},
    "every": _duration(allow_zero=False),
}


@st.composite
def schedule_changes(draw: st.DrawFn) -> tuple[str, Any, bool]:
    """One change for update_schedule: (field, value, whether the rule accepts it)."""
    field = draw(st.sampled_from(sorted(UPDATE_FIELDS)))
    good, hostile_values, ok = UPDATE_FIELDS[field]
    # None is left out: for an update it means "no change" (for inputs, not {}). Not
    # with .filter: a filtered draw that retries describes its strategy, and the repr
    # of an integer past 4300 digits (hostile.UNENCODABLE_INTS) raises ValueError.
    value = draw(st.one_of(good, hostile_values))
    assume(value is not None)
    return field, value, ok(value)


def test_add_and_update_schedule_refuse_or_round_trip(store: Store, numeric: bool) -> None:
    ids = Keys()

    @HOSTILE
    @given(request=schedule_requests(), change=schedule_changes())
    def check(request: tuple[dict[str, Any], set[str]], change: tuple[str, Any, bool]) -> None:
        args, bad = request
        before = census(store)
        try:
            outcome = attempt(lambda: store.add_schedule(**args))
        except IdempotencyConflict:
            assert ids.reused(args.get("id"))
            assert not bad
            assert census(store) == before
            return
        if bad:
            refused(outcome, bad)
            assert census(store) == before, "a refused add_schedule wrote something"
            return
        schedule = accepted(outcome)
        if ids.reused(args.get("id")):
            return  # the existing schedule, as it was first added (and maybe updated since)
        ids.add(schedule.id)
        got = store.get_schedule(schedule.id)
        inputs = args.get("inputs")
        assert hostile.json_equal(
            got.inputs, hostile.as_json({} if inputs is None else inputs), numeric=numeric
        )
        assert (got.job, got.id) == (args["job"], args.get("id", schedule.id))
        assert schedule.id in [s.id for s in store.schedules(job=args["job"], limit=10_000).items]
        check_update(store, schedule.id, change, numeric)

    check()


def check_update(
    store: Store, schedule_id: str, change: tuple[str, Any, bool], numeric: bool
) -> None:
    field, value, ok = change
    before = store.get_schedule(schedule_id)
    changes = {field: value}
    if field == "every":
        changes["cron"] = None
    outcome = attempt(lambda: store.update_schedule(schedule_id, **changes))
    if not ok:
        refused(outcome, {field})
        assert store.get_schedule(schedule_id) == before, "a refused update changed the schedule"
        return
    accepted(outcome)
    got = store.get_schedule(schedule_id)
    if field == "inputs":
        assert hostile.json_equal(got.inputs, hostile.as_json(value), numeric=numeric)
    elif field in ("job", "priority", "max_attempts", "max_catch_up"):
        assert getattr(got, field) == value


# -- names and filters ---------------------------------------------------------------------------


def test_names_and_lookups_refuse_or_answer(store: Store) -> None:
    """register_node, find, schedules(job=), claim(jobs=, ids=), claim_commands(ids)."""

    @HOSTILE
    @given(value=st.one_of(hostile.good_names(), hostile.hostile_names()))
    def check(value: Any) -> None:
        node = attempt(lambda: store.register_node(value))
        if hostile.name_ok(value):
            assert accepted(node).id == value
            assert value in [n.id for n in store.nodes()]
        else:
            refused(node, {"node_id"})
        kind = attempt(lambda: store.register_node("node", kind=value))
        if hostile.name_ok(value):
            assert accepted(kind).kind == value
        else:
            refused(kind, {"kind"})
        as_filter = hostile.name_ok(value, 1024)
        for field, call in [
            ("idempotency_key", lambda: store.find(value)),
            ("jobs", lambda: store.claim("w", jobs=[value])),
            ("ids", lambda: store.claim("w", ids=[value])),
            ("execution_ids", lambda: store.claim_commands("w", [value])),
        ]:
            outcome = attempt(call)
            if as_filter:
                assert accepted(outcome) in (None, []), (field, outcome)
            else:
                refused(outcome, {field})
        listed = attempt(lambda: store.schedules(job=value))
        if hostile.name_ok(value):
            assert accepted(listed).items == []
        else:
            refused(listed, {"job"})

    check()


def test_query_filters_answer_any_text(store: Store) -> None:
    """query(job=, schedule=, after=) with any storable text (NUL included): a page.

    Lone surrogates and non-strings have their own cases (test_query_filters).
    """
    store.submit("job")
    text = st.one_of(hostile.hostile_text(), hostile.good_names()).filter(
        lambda s: hostile.storable_text(s.replace("\x00", ""))
    )

    @FEWER
    @given(value=text)
    def check(value: str) -> None:
        for field in ("job", "schedule", "after"):
            filters: dict[str, Any] = {field: value}
            outcome = attempt(lambda: store.query(**filters))  # noqa: B023
            if isinstance(outcome, ValidationError):
                refused(outcome, {field})
            elif field == "job":
                assert [e.job for e in outcome.items] == (["job"] if value == "job" else [])
            elif field == "schedule":
                assert outcome.items == []

    check()


# -- a mix of accepted and refused calls, then everything serves ----------------------------------


@st.composite
def operations(draw: st.DrawFn) -> tuple[str, Any]:
    kind = draw(st.sampled_from(["submit", "submit", "submit_many", "schedule"]))
    if kind == "submit":
        return kind, draw(submit_requests())[0]
    if kind == "submit_many":
        return kind, [args for args, _ in draw(st.lists(submit_requests(), max_size=3))]
    return kind, draw(schedule_requests())[0]


def apply(store: Store, kind: str, args: Any) -> None:
    calls: dict[str, Callable[[], object]] = {
        "submit": lambda: store.submit(**args),
        "submit_many": lambda: store.submit_many(args),
        "schedule": lambda: store.add_schedule(**args),
    }
    # A key or schedule id drawn twice may conflict: refused by design, writes nothing.
    with contextlib.suppress(IdempotencyConflict):
        attempt(calls[kind])


def test_whatever_was_accepted_reads_claims_completes_and_serves(
    store_factory: Callable[..., Store], numeric: bool
) -> None:
    """After any mix of calls: every layer reads every row; every due one runs to the end.

    A fresh store per example (unlike the tests above): what an example leaves behind
    must not change what the next one sees, or Hypothesis could not replay a failure.
    """

    @FEWER
    @given(ops=st.lists(operations(), min_size=1, max_size=5), data=st.data())
    def check(ops: list[tuple[str, Any]], data: st.DataObject) -> None:
        clock = ManualClock(0)
        store = store_factory(clock)
        with (
            TestClient(create_app(store)) as client,
            Client("http://testserver", http=client) as remote,
        ):
            for kind, args in ops:
                apply(store, kind, args)
            serves(store, client, remote)
            for execution_id in census(store)[0]:
                assert_audit_valid(store, execution_id)
            # Good delays are at most five minutes; a hostile one may be years, and waits.
            now = clock.advance(301)
            run_everything_over_http(store, client, data, numeric)
            for execution_id in census(store)[0]:
                execution = store.get(execution_id)
                if execution.due_at > now:
                    assert execution.state is State.SCHEDULED
                else:
                    assert execution.state in (State.SUCCEEDED, State.FAILED), execution
            serves(store, client, remote)
        store.close()

    check()


def serves(store: Store, client: TestClient, remote: Client) -> None:
    """Every row reads through the store, the HTTP API (2xx, JSON) and the Python client.

    The client's reads are GET /executions/{id}, .../transitions and .../attempts: each
    must answer 2xx with JSON that decodes to exactly what the store reads.
    """
    execution_ids, schedule_ids = census(store)
    assert set(http_pages(client, "/executions")) == set(execution_ids)
    assert set(http_pages(client, "/schedules")) == set(schedule_ids)
    for execution_id in execution_ids:
        trail = store.transitions(execution_id)
        assert remote.get(execution_id) == store.get(execution_id)
        assert remote.transitions(execution_id) == trail
        assert remote.attempts(execution_id) == attempts_from_transitions(trail)
    for schedule_id in filter(hostile.addressable, schedule_ids):
        assert remote.get_schedule(schedule_id) == store.get_schedule(schedule_id)


def http_pages(client: TestClient, path: str) -> list[str]:
    """Every id a paginated list endpoint serves, each page a 200 with valid JSON."""
    ids: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": 100} if cursor is None else {"limit": 100, "cursor": cursor}
        response = client.get(path, params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        ids.extend(item["id"] for item in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


def run_everything_over_http(
    store: Store, client: TestClient, data: st.DataObject, numeric: bool
) -> None:
    """Claim every due execution through the worker protocol; complete or fail each."""
    while True:
        response = client.post("/claims", json={"owner": "http-worker", "limit": 50})
        assert response.status_code == 200, response.text
        leases = response.json()["leases"]
        if not leases:
            return
        for lease in leases:
            stored = store.get(lease["execution_id"])
            # What the store reads back is what the worker is given, exactly.
            assert hostile.json_equal(lease["inputs"], hostile.as_json(stored.inputs))
            fence = {"owner": lease["owner"], "epoch": lease["epoch"]}
            path = f"/executions/{lease['execution_id']}"
            if data.draw(st.booleans(), label="complete"):
                result = data.draw(hostile.accepted_json(), label="result")
                done = client.post(f"{path}/complete", json={**fence, "result": result})
                assert done.status_code == 200, done.text
                got = store.get(lease["execution_id"])
                assert got.state is State.SUCCEEDED
                assert hostile.json_equal(got.result, hostile.as_json(result), numeric=numeric)
            else:
                error = data.draw(
                    hostile.hostile_text().filter(hostile.text_ok).map(lambda s: s[:1000]),
                    label="error",
                )
                failed = client.post(
                    f"{path}/fail", json={**fence, "error": error, "retryable": False}
                )
                assert failed.status_code == 200, failed.text
                assert store.get(lease["execution_id"]).error == error


# -- the depth limit, exactly -------------------------------------------------------------------

DEPTHS = [
    pytest.param(MAX_DEPTH - 1, True, id="limit-1"),
    pytest.param(MAX_DEPTH, True, id="limit"),
    pytest.param(MAX_DEPTH + 1, False, id="limit+1"),
]
AT_THE_LIMIT = pytest.mark.parametrize(("depth", "ok"), DEPTHS)


def test_the_limit_is_sixty_four() -> None:
    """The boundary tests below are about this number; the oracle agrees with it."""
    assert payloads.MAX_DEPTH == MAX_DEPTH == 64
    assert hostile.json_ok(hostile.deep_list(64))
    assert not hostile.json_ok(hostile.deep_list(65))
    assert not hostile.json_ok(hostile.deep_dict(65))
    assert hostile.json_ok({"a": [1]})


@AT_THE_LIMIT
def test_inputs_at_the_depth_limit(store: Store, numeric: bool, depth: int, ok: bool) -> None:
    for kind, nest in hostile.NESTINGS.items():
        inputs = {"v": nest(depth - 1)}  # an object, as inputs are, ``depth`` deep in all
        calls: list[tuple[Callable[[], list[Execution]], str]] = [
            (lambda: [store.submit(kind, inputs=inputs)], "inputs"),  # noqa: B023
            (
                lambda: store.submit_many([{"job": "plain"}, {"job": kind, "inputs": inputs}]),  # noqa: B023
                "[1].inputs",
            ),
        ]
        for call, field in calls:
            before = census(store)
            outcome = attempt(call)
            if not ok:
                refused(outcome, {field})
                assert census(store) == before, "a refused submit wrote something"
                continue
            for execution in accepted(outcome):
                got = store.get(execution.id).inputs
                if execution.job == kind:
                    assert hostile.json_equal(got, hostile.as_json(inputs), numeric=numeric)
                [lease] = store.claim("w", ids=[execution.id])
                assert lease.inputs == got, "a claim must deliver what get reads"


@AT_THE_LIMIT
def test_result_at_the_depth_limit(store: Store, numeric: bool, depth: int, ok: bool) -> None:
    for nest in hostile.NESTINGS.values():
        result = nest(depth)
        execution = store.submit("deep")
        [lease] = store.claim("w")
        if ok:
            store.complete(lease, result)
            done = store.get(execution.id)
            assert done.state is State.SUCCEEDED
            assert hostile.json_equal(done.result, hostile.as_json(result), numeric=numeric)
            continue
        # An over-deep result is recorded, not just refused: the execution fails for good.
        with pytest.raises(ResultInvalid) as raised:
            store.complete(lease, result)
        assert raised.value.field == "result"
        assert raised.value.execution_id == execution.id
        failed = store.get(execution.id)
        assert (failed.state, failed.result) == (State.FAILED, None)
        assert failed.error is not None
        assert failed.error.startswith("result_invalid")
        assert f"more than {MAX_DEPTH} levels" in failed.error


@AT_THE_LIMIT
def test_progress_at_the_depth_limit(store: Store, numeric: bool, depth: int, ok: bool) -> None:
    for nest in hostile.NESTINGS.values():
        progress = nest(depth)
        execution = store.submit("deep")
        [lease] = store.claim("w")
        for call in (
            lambda: store.heartbeat(lease, progress=progress),  # noqa: B023
            lambda: store.heartbeat_many([(lease, {"first": 1}), (lease, progress)]),  # noqa: B023
        ):
            before = store.get(execution.id)
            outcome = attempt(call)
            if ok:
                accepted(outcome)
                got = store.get(execution.id).progress
                assert hostile.json_equal(got, hostile.as_json(progress), numeric=numeric)
            else:
                refused(outcome, {"progress"})
                assert store.get(execution.id) == before, "a refused heartbeat wrote something"


@AT_THE_LIMIT
def test_schedule_inputs_at_the_depth_limit(
    store: Store, numeric: bool, depth: int, ok: bool
) -> None:
    for kind, nest in hostile.NESTINGS.items():
        inputs = {"v": nest(depth - 1)}  # an object, as inputs are, ``depth`` deep in all
        deep, plain = f"deep-{kind}", f"plain-{kind}"
        outcome = attempt(lambda: store.add_schedule("deep", every=60, inputs=inputs, id=deep))  # noqa: B023
        original = store.add_schedule("plain", every=60, id=plain)
        updated = attempt(lambda: store.update_schedule(plain, inputs=inputs))  # noqa: B023
        if not ok:
            refused(outcome, {"inputs"})
            refused(updated, {"inputs"})
            assert deep not in census(store)[1]
            assert store.get_schedule(plain) == original
            continue
        for schedule_id in (deep, plain):
            got = store.get_schedule(schedule_id).inputs
            assert hostile.json_equal(got, hostile.as_json(inputs), numeric=numeric)
        # A materialized occurrence carries the inputs to a worker.
        slot = store.clock.now()
        [occurrence] = store.add_occurrences(deep, [Occurrence(slot=slot, due_at=slot)])
        [lease] = store.claim("w", ids=[occurrence.id])
        assert hostile.json_equal(lease.inputs, hostile.as_json(inputs), numeric=numeric)


def test_over_http_64_deep_inputs_are_stored_and_65_are_a_problem(
    client: TestClient, store: Store, numeric: bool
) -> None:
    inputs = {"v": hostile.deep_mixed(MAX_DEPTH)}  # an object 65 deep
    too_deep = client.post("/executions", json={"job": "deep", "inputs": inputs})
    assert_problem(too_deep, 422, "validation", field="inputs")
    assert census(store) == ([], [])

    inputs = hostile.deep_mixed(MAX_DEPTH)
    assert isinstance(inputs, dict), "inputs are an object"
    created = client.post("/executions", json={"job": "deep", "inputs": inputs})
    assert created.status_code == 201, created.text
    assert created.json()["inputs"] == hostile.as_json(inputs)
    execution_id = created.json()["id"]
    read = client.get(f"/executions/{execution_id}")
    assert read.status_code == 200, read.text
    assert hostile.json_equal(read.json()["inputs"], hostile.as_json(inputs), numeric=numeric)

    [lease] = client.post("/claims", json={"owner": "w"}).json()["leases"]
    assert lease["inputs"] == read.json()["inputs"]
    fence = {"owner": "w", "epoch": lease["epoch"]}
    path = f"/executions/{execution_id}"
    beat = client.post(f"{path}/heartbeat", json={**fence, "progress": hostile.deep_list(65)})
    assert_problem(beat, 422, "validation", field="progress")
    beat = client.post(f"{path}/heartbeat", json={**fence, "progress": hostile.deep_list(64)})
    assert beat.status_code == 200, beat.text
    done = client.post(f"{path}/complete", json={**fence, "result": hostile.deep_dict(65)})
    assert_problem(done, 422, "validation", field="result")
    failed = client.get(path).json()
    assert failed["state"] == "FAILED"
    assert failed["error"].startswith("result_invalid")


# -- every fixed hostile value in every field (deterministic, exhaustive) -------------------

#: The strings every name and text field is given, whatever Hypothesis draws besides.
FIXED_STRINGS: list[Any] = [
    *hostile.FIXED_STRINGS,
    *("x" * n for n in (200, 201, 255, 256, 1024, 1025, MAX_ERROR_CHARS, MAX_ERROR_CHARS + 1)),
    "\U0001f600" * 200,  # 200 characters, 800 bytes
    "\U0001f600" * 201,
    *hostile.NOT_STRINGS,
]


def _running(store: Store) -> Lease:
    store.submit("running")
    [lease] = store.claim("w", jobs=["running"])
    return lease


def _submitted(store: Store, **args: Any) -> Execution:
    return store.submit("job", **args)


#: field -> (call with the value, read back what was stored, the oracle).
NameField = tuple[
    Callable[[Store, Any], Any], Callable[[Store, Any], Any] | None, Callable[[Any], bool]
]
NAME_FIELDS: dict[str, NameField] = {
    "submit.job": (
        lambda s, v: s.submit(v),
        lambda s, e: s.get(e.id).job,
        hostile.name_ok,
    ),
    "submit.idempotency_key": (
        lambda s, v: _submitted(s, idempotency_key=v),
        lambda s, e: s.get(e.id).idempotency_key,
        lambda v: v is None or hostile.name_ok(v, hostile.MAX_KEY),
    ),
    "submit.bucket_key": (
        lambda s, v: _submitted(s, bucket_key=v),
        lambda s, e: s.get(e.id).bucket_key,
        lambda v: v is None or hostile.name_ok(v, hostile.MAX_KEY),
    ),
    "submit_many.job": (
        lambda s, v: s.submit_many([{"job": "job"}, {"job": v}])[1],
        lambda s, e: s.get(e.id).job,
        hostile.name_ok,
    ),
    "claim.owner": (
        lambda s, v: (_submitted(s), s.claim(v))[1][0],
        lambda s, lease: s.get(lease.execution_id).lease_owner,
        hostile.name_ok,
    ),
    "claim.jobs": (lambda s, v: s.claim("w", jobs=[v]), None, lambda v: hostile.name_ok(v, 1024)),
    "claim.ids": (lambda s, v: s.claim("w", ids=[v]), None, lambda v: hostile.name_ok(v, 1024)),
    "claim_commands.owner": (
        lambda s, v: s.claim_commands(v, ["x"]),
        None,
        hostile.name_ok,
    ),
    "claim_commands.execution_ids": (
        lambda s, v: s.claim_commands("w", [v]),
        None,
        lambda v: hostile.name_ok(v, 1024),
    ),
    "register_node.node_id": (
        lambda s, v: s.register_node(v),
        lambda s, node: next(n.id for n in s.nodes() if n.id == node.id),
        lambda v: v is None or hostile.name_ok(v),  # None: host:pid
    ),
    "register_node.kind": (
        lambda s, v: s.register_node("node", kind=v),
        lambda s, node: next(n.kind for n in s.nodes() if n.id == "node"),
        hostile.name_ok,
    ),
    "request.actor": (
        lambda s, v: s.request(_running(s).execution_id, "cancel", actor=v),
        lambda s, command: s.commands(command.execution_id)[-1].requested_by,
        hostile.name_ok,
    ),
    "release.reason": (
        lambda s, v: s.release(_running(s), reason=v),
        lambda s, e: s.transitions(e.id)[-1].reason,
        lambda v: hostile.name_ok(v, MAX_ERROR_CHARS),
    ),
    "abort.reason": (
        lambda s, v: s.abort(_running(s), reason=v),
        lambda s, e: s.transitions(e.id)[-1].reason,
        lambda v: hostile.name_ok(v, MAX_ERROR_CHARS),
    ),
    "fail.error": (
        lambda s, v: s.fail(_running(s), v, retryable=False),
        lambda s, e: s.get(e.id).error,
        hostile.text_ok,
    ),
    "reschedule.actor": (
        lambda s, v: s.reschedule(_submitted(s).id, s.clock.now(), actor=v),
        lambda s, e: s.transitions(e.id)[-1].actor,
        hostile.name_ok,
    ),
    "reschedule.reason": (
        lambda s, v: s.reschedule(_submitted(s).id, s.clock.now(), reason=v),
        lambda s, e: s.transitions(e.id)[-1].reason,
        lambda v: hostile.name_ok(v, MAX_ERROR_CHARS),
    ),
    "find.idempotency_key": (lambda s, v: s.find(v), None, lambda v: hostile.name_ok(v, 1024)),
    "schedules.job": (
        lambda s, v: s.schedules(job=v).items,
        None,
        lambda v: v is None or hostile.name_ok(v),  # None: no filter
    ),
    "add_schedule.id": (
        lambda s, v: s.add_schedule("job", every=60, id=v),
        lambda s, schedule: s.get_schedule(schedule.id).id,
        lambda v: v is None or hostile.schedule_id_ok(v),  # None: a new UUIDv7
    ),
    "add_schedule.job": (
        lambda s, v: s.add_schedule(v, every=60),
        lambda s, schedule: s.get_schedule(schedule.id).job,
        hostile.name_ok,
    ),
    "update_schedule.job": (
        lambda s, v: s.update_schedule(s.add_schedule("job", every=60).id, job=v),
        lambda s, schedule: s.get_schedule(schedule.id).job,
        hostile.name_ok,
    ),
}


@pytest.mark.parametrize("field", sorted(NAME_FIELDS))
def test_every_hostile_string_in_every_name_field(
    store: Store, client: TestClient, field: str
) -> None:
    """Each fixed hostile string: refused naming the field, or stored as given (errors cut)."""
    call, read, ok = NAME_FIELDS[field]
    name = field.split(".")[1]
    for value in FIXED_STRINGS:
        outcome = attempt(lambda: call(store, value))  # noqa: B023
        if not ok(value):
            refused(outcome, {name, f"[1].{name}", name.removesuffix("s")})
            continue
        stored = accepted(outcome)
        if read is not None and value is not None:
            expected = value[:MAX_ERROR_CHARS] if name == "error" else value
            assert read(store, stored) == expected, (field, value)
    serves(store, client, Client("http://testserver", http=client))


#: JSON values that must be refused wherever a payload goes, each also inside containers.
BAD_PAYLOADS: list[Any] = [
    wrap(leaf)
    for leaf in hostile.BAD_LEAVES
    for wrap in (lambda v: v, lambda v: [1, v], lambda v: {"a": {"b": v}})
] + [hostile.deep_list(MAX_DEPTH + 1), hostile.deep_dict(MAX_DEPTH + 8), "x" * 300_000]
#: JSON values that must pass and round-trip wherever a payload goes.
ODD_PAYLOADS: list[Any] = [
    *hostile.EDGE_INTS,
    *hostile.EDGE_FLOATS,
    *hostile.ODD_BUT_STORABLE,
    "\\u0000",
    "",
    None,
    True,
    [],
    {},
    (1, (2, 3)),
    {1: "int key", 2: "two"},
    {2.5: "float key"},
    {True: "bool key"},
    {None: "null key"},
    {"": "empty key", " ": "blank key", "\U0001f600": "astral key"},
    hostile.deep_mixed(MAX_DEPTH),
    "x" * 200_000,  # under the 256 KiB limit
]

#: Every way inputs reach the store: a call with the inputs given (and the field its
#: refusal names, ``inputs`` or ``[0].inputs``), and what it stored as inputs.
INPUTS_CALLS: dict[str, tuple[Callable[[Store, Any], Any], Callable[[Store, Any], Any]]] = {
    "inputs": (lambda s, v: s.submit("job", inputs=v), lambda s, e: s.get(e.id).inputs),
    "[0].inputs": (
        lambda s, v: s.submit_many([{"job": "job", "inputs": v}])[0],
        lambda s, e: s.get(e.id).inputs,
    ),
    "schedule inputs": (
        lambda s, v: s.add_schedule("job", every=60, inputs=v),
        lambda s, schedule: s.get_schedule(schedule.id).inputs,
    ),
    "update_schedule inputs": (
        lambda s, v: s.update_schedule(s.add_schedule("job", every=60).id, inputs=v),
        lambda s, schedule: s.get_schedule(schedule.id).inputs,
    ),
}


def _as_inputs(
    call: Callable[[Store, Any], Any], read: Callable[[Store, Any], Any]
) -> tuple[Callable[[Store, Any], Any], Callable[[Store, Any], Any]]:
    """``call`` and ``read`` with a payload as inputs: in an object unless it is one.

    Inputs must be an object, so any other payload is the value of the key ``"v"``
    (:func:`hostile.in_object`; no object payload here has that key); None is
    passed as it is (it means ``{}``, which is what ``read`` then gives back).
    """

    def wrapped_call(store: Store, value: Any) -> Any:
        return call(store, None if value is None else hostile.in_object(value))

    def unwrapped_read(store: Store, stored: Any) -> Any:
        inputs = read(store, stored)
        return inputs.get("v", inputs)

    return wrapped_call, unwrapped_read


JSON_FIELDS: dict[str, tuple[Callable[[Store, Any], Any], Callable[[Store, Any], Any]]] = {
    **{field: _as_inputs(*calls) for field, calls in INPUTS_CALLS.items()},
    "progress": (
        lambda s, v: s.heartbeat(_running(s), progress=v),
        lambda s, lease: s.get(lease.execution_id).progress,
    ),
    "result": (
        lambda s, v: s.complete(_running(s), v),
        lambda s, e: s.get(e.id).result,
    ),
}


@pytest.mark.parametrize("field", sorted(JSON_FIELDS))
def test_every_bad_payload_in_every_json_field(store: Store, field: str) -> None:
    call, _ = JSON_FIELDS[field]
    for payload in BAD_PAYLOADS:
        before = census(store)
        outcome = attempt(lambda: call(store, payload))  # noqa: B023
        if field == "result":
            # Recorded: the execution (claimed for this call) fails for good.
            assert isinstance(outcome, ResultInvalid), (outcome, payload)
            failed = store.get(outcome.execution_id)
            assert failed.state is State.FAILED
            assert failed.error is not None
            assert failed.error.startswith("result_invalid")
            continue
        refused(outcome, {field.split()[-1]})
        if field in ("inputs", "[0].inputs", "schedule inputs"):
            assert census(store) == before, f"a refused payload wrote something: {payload!r}"


@pytest.mark.parametrize("field", sorted(JSON_FIELDS))
def test_every_odd_payload_in_every_json_field(
    store: Store, client: TestClient, numeric: bool, field: str
) -> None:
    call, read = JSON_FIELDS[field]
    for payload in ODD_PAYLOADS:
        stored = accepted(attempt(lambda: call(store, payload)))  # noqa: B023
        expected = hostile.as_json(payload)
        if payload is None and field != "progress":
            expected = None if field == "result" else {}
        got = read(store, stored)
        if payload is None and field == "progress":
            continue  # None leaves the progress as it was
        assert hostile.json_equal(got, expected, numeric=numeric), (field, payload)
    serves(store, client, Client("http://testserver", http=client))


def test_error_texts_are_cut_not_refused(store: Store, client: TestClient) -> None:
    """fail(error=...) keeps 8192 characters, counted in characters, astral ones included."""
    for error in ["x" * MAX_ERROR_CHARS, "x" * (MAX_ERROR_CHARS + 1), "\U0001f600" * 10_000, ""]:
        failed = store.fail(_running(store), error, retryable=False)
        assert store.get(failed.id).error == error[:MAX_ERROR_CHARS]
        [attempt_] = store.attempts(failed.id)
        assert attempt_.error == error[:MAX_ERROR_CHARS]
        assert client.get(f"/executions/{failed.id}/attempts").status_code == 200


# -- hostile request bodies over HTTP ----------------------------------------------------------

#: Raw JSON bodies: escapes decode to what Python could not be handed directly.
RAW_SUBMITS: list[tuple[str, str, int, str | None]] = [
    ("job-lone-surrogate", r'{"job":"\ud800"}', 422, "job"),
    ("job-nul", r'{"job":"j\u0000"}', 422, "job"),
    ("job-blank", r'{"job":"   "}', 422, "job"),
    ("job-201", '{"job":"' + "x" * 201 + '"}', 422, "job"),
    ("inputs-lone-surrogate", r'{"job":"j","inputs":{"v":"\udfff"}}', 422, "inputs"),
    ("key-lone-surrogate", r'{"job":"j","inputs":{"\ud800":1}}', 422, "inputs"),
    ("inputs-nul", r'{"job":"j","inputs":{"v":["\u0000"]}}', 422, "inputs"),
    ("inputs-nan", r'{"job":"j","inputs":{"v":NaN}}', 422, "inputs"),
    ("inputs-infinity", r'{"job":"j","inputs":{"v":-Infinity}}', 422, "inputs"),
    ("inputs-overflowing-float", r'{"job":"j","inputs":{"v":1e400}}', 422, "inputs"),
    ("bucket-key", r'{"job":"j","bucket_key":"\ud800"}', 422, "bucket_key"),
    ("priority-int32", r'{"job":"j","priority":2147483648}', 422, "priority"),
    ("priority-inf", r'{"job":"j","priority":1e400}', 422, "priority"),
    ("delay-1e308", r'{"job":"j","delay_seconds":1e308}', 422, "delay_seconds"),
    ("timeout-zero", r'{"job":"j","timeout_seconds":0}', 422, "timeout_seconds"),
    ("timeout-negative", r'{"job":"j","timeout_seconds":-5}', 422, "timeout_seconds"),
    ("timeout-string", r'{"job":"j","timeout_seconds":"5"}', 422, "timeout_seconds"),
    ("timeout-bool", r'{"job":"j","timeout_seconds":true}', 422, "timeout_seconds"),
    ("timeout-object", r'{"job":"j","timeout_seconds":{"s":5}}', 422, "timeout_seconds"),
    ("timeout-nan", r'{"job":"j","timeout_seconds":NaN}', 422, "timeout_seconds"),
    ("timeout-infinity", r'{"job":"j","timeout_seconds":Infinity}', 422, "timeout_seconds"),
    ("timeout-1e308", r'{"job":"j","timeout_seconds":1e308}', 422, "timeout_seconds"),
    (
        "timeout-int-past-float",
        '{"job":"j","timeout_seconds":' + "9" * 400 + "}",
        422,
        "timeout_seconds",
    ),
    ("timeout-below-a-microsecond", r'{"job":"j","timeout_seconds":1e-9}', 422, "timeout_seconds"),
    ("timeout-fraction", r'{"job":"j","timeout_seconds":0.25}', 201, None),
    ("timeout-a-century", r'{"job":"j","timeout_seconds":3153600000}', 201, None),
    ("escaped-pair", r'{"job":"j","inputs":{"v":"\ud83d\ude00"}}', 201, None),
    ("job-escaped-pair", r'{"job":"\ud83d\ude00"}', 201, None),
    ("escaped-backslash-u0000", r'{"job":"j","inputs":{"v":"\\u0000"}}', 201, None),
    ("negative-zero", r'{"job":"j","inputs":{"v":-0.0}}', 201, None),
    ("int-4300-digits", '{"job":"j","inputs":{"v":' + "9" * 4300 + "}}", 201, None),
    # Inputs are an object (or null, which means {}): valid JSON of another type is not.
    ("inputs-array", r'{"job":"j","inputs":[1,2]}', 422, "inputs"),
    ("inputs-empty-array", r'{"job":"j","inputs":[]}', 422, "inputs"),
    ("inputs-string", r'{"job":"j","inputs":"not-an-object"}', 422, "inputs"),
    ("inputs-number", r'{"job":"j","inputs":-1.5}', 422, "inputs"),
    ("inputs-true", r'{"job":"j","inputs":true}', 422, "inputs"),
    ("inputs-null", r'{"job":"j","inputs":null}', 201, None),
    ("inputs-empty-object", r'{"job":"j","inputs":{}}', 201, None),
]


def test_hostile_submit_bodies_are_422_or_stored(client: TestClient, store: Store) -> None:
    for case, body, status, field in RAW_SUBMITS:
        before = census(store)
        response = client.post(
            "/executions", content=body.encode(), headers={"content-type": "application/json"}
        )
        if status == 422:
            assert_problem(response, 422, "validation", field=field)
            assert census(store) == before, case
            continue
        assert response.status_code == 201, (case, response.text)
        execution_id = response.json()["id"]
        assert response.json()["job"] == json.loads(body)["job"], case
        assert client.get(f"/executions/{execution_id}").status_code == 200
        [lease] = client.post("/claims", json={"owner": "w"}).json()["leases"]
        assert lease["execution_id"] == execution_id
        assert hostile.json_equal(lease["inputs"], store.get(execution_id).inputs), case
        timeout = store.get(execution_id).timeout
        sent = json.loads(body).get("timeout_seconds")
        assert lease["timeout_seconds"] == (None if timeout is None else timeout.total_seconds())
        assert timeout == (None if sent is None else timedelta(seconds=sent)), case
    assert client.get("/executions").status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("job=%00", id="nul"),
        pytest.param("job=%ED%A0%80", id="utf8-of-a-surrogate"),
        pytest.param("job=%FF", id="not-utf8"),
        pytest.param("schedule=%00", id="schedule-nul"),
        pytest.param("cursor=%00", id="cursor-nul"),
        pytest.param("job=" + "x" * 5000, id="long"),
    ],
)
def test_hostile_list_filters_over_http_are_never_5xx(client: TestClient, query: str) -> None:
    # Not a 5xx, whatever the backend; a percent-encoded lone surrogate arrives as U+FFFD.
    response = client.get(f"/executions?{query}")
    assert response.status_code in (200, 422), response.text


# -- the bugs this suite found, each refusal pinned ------------------------------------------


@pytest.mark.parametrize(
    "actor", ["\x00", "\ud800", "", 5], ids=["nul", "surrogate", "blank", "int"]
)
@pytest.mark.parametrize("verb", ["cancel", "replay"])
def test_cancel_and_replay_actor(store: Store, client: TestClient, verb: str, actor: Any) -> None:
    execution = store.submit("job")
    if verb == "replay":
        [lease] = store.claim("w")
        store.fail(lease, "dead", retryable=False)
    before = store.get(execution.id)
    call = store.cancel if verb == "cancel" else store.replay
    refused(attempt(lambda: call(execution.id, actor=actor)), {"actor"})
    assert store.get(execution.id) == before
    assert client.get(f"/executions/{execution.id}/transitions").status_code == 200


#: (verb, value): each must answer NotFound, None, an empty page or a refusal.
_LOOKUPS: list[tuple[str, str]] = [
    ("get", "\ud800"),
    ("transitions", "\ud800"),
    ("commands", "\ud800"),
    ("request", "\ud800"),
    ("get_schedule", "\ud800"),
    ("delete_schedule", "\ud800"),
    ("update_schedule", "\ud800"),
    ("add_occurrences", "\ud800"),
    ("schedules_after", "\ud800"),
    ("query_after", "\ud800"),
    ("deregister_node", "\ud800"),
    ("deregister_node", "\x00"),
    ("get", "\x00"),
    ("get_schedule", "\x00"),
    ("update_schedule", "\x00"),
]


def _lookup(store: Store, verb: str, value: str) -> object:
    calls: dict[str, Callable[[], object]] = {
        "get": lambda: store.get(value),
        "transitions": lambda: store.transitions(value),
        "commands": lambda: store.commands(value),
        "request": lambda: store.request(value, "cancel"),
        "get_schedule": lambda: store.get_schedule(value),
        "delete_schedule": lambda: store.delete_schedule(value),
        "update_schedule": lambda: store.update_schedule(value, priority=1),
        "add_occurrences": lambda: store.add_occurrences(value, []),
        "schedules_after": lambda: store.schedules(after=value),
        "query_after": lambda: store.query(after=value),
        "deregister_node": lambda: store.deregister_node(value),
    }
    try:
        return attempt(calls[verb])
    except NotFound as exc:
        return exc


@pytest.mark.parametrize(
    ("verb", "value"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]!a}") for case in _LOOKUPS],
)
def test_lookups_by_unstorable_ids(store: Store, verb: str, value: str) -> None:
    """An id no store can hold names nothing: NotFound, None, an empty page or a refusal."""
    store.submit("job")
    _lookup(store, verb, value)


#: (filter, value): query() answers a page or refuses naming the filter, on every backend
#: (once, each of these raised UnicodeEncodeError, TypeError or even StoreUnavailable).
_QUERY_FILTERS: list[tuple[str, Any]] = [
    ("job", "\ud800"),
    ("schedule", "\ud800"),
    ("after", "\ud800"),
    ("job", ["job"]),
    ("job", b"job"),
    ("schedule", 0),
    ("after", 0),
    ("after", b"x"),
]


@pytest.mark.parametrize(
    ("field", "value"),
    [pytest.param(*case, id=f"{case[0]}-{case[1]!a}") for case in _QUERY_FILTERS],
)
def test_query_filters(store: Store, field: str, value: Any) -> None:
    """query() checks job, schedule and after as schedules(job=) checks its filter."""
    store.submit("job")
    outcome = attempt(lambda: store.query(**{field: value}))
    if isinstance(outcome, ValidationError):
        refused(outcome, {field})
    elif field != "after":
        assert outcome.items == []


@pytest.mark.parametrize("owner", ["\x00", "\ud800", " "], ids=["nul", "surrogate", "blank"])
def test_acquire_schedules_owner(store: Store, owner: str) -> None:
    store.add_schedule("job", every=60, id="s")
    refused(attempt(lambda: store.acquire_schedules(owner)), {"owner"})


@pytest.mark.parametrize(
    "inputs", [{1: "a", "b": 2}, {None: 1, "a": 2}, {"x": {2.5: 1, "y": 0}}], ids=str
)
def test_mixed_key_types_with_an_idempotency_key(store: Store, inputs: Any) -> None:
    outcome = attempt(lambda: store.submit("job", inputs=inputs, idempotency_key="k"))
    if not isinstance(outcome, ValidationError):
        assert store.get(outcome.id).inputs == hostile.as_json(inputs)


@pytest.mark.parametrize(
    "timezone", ["America", "Europe", "x" * 256], ids=["America", "Europe", "256"]
)
def test_time_zone_names_that_are_not_files(
    store: Store, client: TestClient, timezone: str
) -> None:
    refused(
        attempt(lambda: store.add_schedule("job", cron="* * * * *", timezone=timezone)),
        {"timezone"},
    )
    response = client.post(
        "/schedules", json={"job": "job", "cron": "* * * * *", "timezone": timezone}
    )
    assert_problem(response, 422, "validation", field="timezone")


@pytest.mark.parametrize(
    "field", ["priority", "max_attempts", "job_version", "max_catch_up", "limit"]
)
def test_integers_past_the_str_limit(store: Store, field: str) -> None:
    huge = hostile.UNENCODABLE_INTS[0]
    calls: dict[str, Callable[[], object]] = {
        "priority": lambda: store.submit("job", priority=huge),
        "max_attempts": lambda: store.submit("job", max_attempts=huge),
        "job_version": lambda: store.submit("job", version=huge),
        "max_catch_up": lambda: store.add_schedule("job", every=60, max_catch_up=huge),
        "limit": lambda: store.claim("w", limit=huge),
    }
    refused(attempt(calls[field]), {field})


@pytest.mark.parametrize("schedule_id", ["a/b", "../../etc/passwd", ".", ".."])
def test_schedule_ids_the_api_cannot_address_are_refused(
    store: Store, remote: Client, schedule_id: str
) -> None:
    """The API addresses a schedule by its id as one path segment; others are refused."""
    refused(attempt(lambda: store.add_schedule("job", every=60, id=schedule_id)), {"id"})
    assert store.schedules().items == []
    with pytest.raises(ValidationError) as caught:
        remote.add_schedule("job", every=60, id=schedule_id)
    assert caught.value.field == "id"
    assert store.add_schedule("job", every=60, id="a.b").id == "a.b"  # dots inside are fine
    assert remote.get_schedule("a.b").id == "a.b"


@pytest.mark.parametrize("field", ["delay", "timeout", "ttl", "every", "misfire_grace"])
def test_durations_too_large_for_a_float(store: Store, field: str) -> None:
    seconds = hostile.OVERFLOWING_SECONDS[0]
    calls: dict[str, Callable[[], object]] = {
        "delay": lambda: store.submit("job", delay=seconds),
        "timeout": lambda: store.submit("job", timeout=seconds),
        "ttl": lambda: store.claim("w", ttl=seconds),
        "every": lambda: store.add_schedule("job", every=seconds),
        "misfire_grace": lambda: store.add_schedule("job", every=60, misfire_grace=seconds),
    }
    refused(attempt(calls[field]), {field})


def test_lease_ttls_refuse_like_every_duration(store: Store) -> None:
    """claim, heartbeat, claim_commands and register_node take a ttl: refused as a timeout is."""
    store.submit("job")
    [lease] = store.claim("w")
    for value in hostile.EDGE_DURATIONS:
        ok = hostile.duration_ok(value, allow_zero=False)
        for call in [
            lambda: store.claim("w", ttl=value),  # noqa: B023
            lambda: store.heartbeat(lease, ttl=value),  # noqa: B023
            lambda: store.claim_commands("w", [lease.execution_id], ttl=value),  # noqa: B023
            lambda: store.register_node("n", ttl=value),  # noqa: B023
        ]:
            outcome = attempt(call)
            if ok:
                accepted(outcome)
            else:
                refused(outcome, {"ttl"})


# -- issue 32: the digits limit, decoder-deep bodies and zones that are no IANA name -----------

#: The most digits an integer may have (stated, not imported: see hostile.MAX_DEPTH's note).
MAX_INT_DIGITS = 4300
TOO_MANY_DIGITS = f"is an integer of more than {MAX_INT_DIGITS} digits (the most allowed)"
TOO_DEEP = f"is nested more than {MAX_DEPTH} levels deep"


@pytest.mark.parametrize(
    ("inputs", "field"),
    [
        pytest.param({"n": 10**MAX_INT_DIGITS}, "inputs.n", id="top"),
        pytest.param({"n": [1, {"m": -(10**5000)}]}, "inputs.n.1.m", id="nested-negative"),
        pytest.param({"a b": 10**MAX_INT_DIGITS}, 'inputs["a b"]', id="odd-key"),
    ],
)
def test_an_integer_past_the_digits_limit_is_named_where_it_is(
    store: Store, inputs: dict[str, Any], field: str
) -> None:
    before = census(store)
    outcome = attempt(lambda: store.submit("job", inputs=inputs))
    assert isinstance(outcome, ValidationError)
    assert (outcome.field, outcome.message) == (field, TOO_MANY_DIGITS)
    schedule = attempt(lambda: store.add_schedule("job", every=60, inputs=inputs))
    assert isinstance(schedule, ValidationError)
    assert (schedule.field, schedule.message) == (field, TOO_MANY_DIGITS)
    assert census(store) == before


def test_the_digits_limit_holds_in_a_process_that_raised_its_own(store: Store) -> None:
    """The rule is fencepost's, not the interpreter's: what one process could write,
    every other (and pydantic's parser, at 4300 whatever Python says) must read."""
    import sys

    saved = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # no limit: str() of a 5,000-digit int works here
    try:
        before = census(store)
        outcome = attempt(lambda: store.submit("job", inputs={"n": 10**5000}))
        assert isinstance(outcome, ValidationError)
        assert (outcome.field, outcome.message) == ("inputs.n", TOO_MANY_DIGITS)
        assert census(store) == before
        # Digits inside a string are text, not an integer.
        text = "9" * 5000
        assert store.get(store.submit("job", inputs={"s": text}).id).inputs == {"s": text}
    finally:
        sys.set_int_max_str_digits(saved)


#: Bodies json.loads gives up on (a RecursionError, a digits ValueError): (body, field, detail).
UNDECODABLE_BODIES: list[tuple[str, str, str, str]] = [
    (
        "deep-10000",
        '{"job":"j","inputs":{"a":' + "[" * 10_000 + "]" * 10_000 + "}}",
        "inputs",
        TOO_DEEP,
    ),
    ("deep-3000-root", "[" * 3000 + "]" * 3000, "body", TOO_DEEP),
    ("digits-5000", '{"job":"j","inputs":{"n":' + "1" * 5000 + "}}", "inputs.n", TOO_MANY_DIGITS),
    (
        "digits-4301-negative-in-list",
        '{"job":"j","inputs":{"n":[0,-' + "1" * 4301 + "]}}",
        "inputs.n.1",
        TOO_MANY_DIGITS,
    ),
    ("digits-priority", '{"job":"j","priority":' + "1" * 5000 + "}", "priority", TOO_MANY_DIGITS),
]


@pytest.mark.parametrize(
    ("body", "field", "detail"),
    [pytest.param(*case[1:], id=case[0]) for case in UNDECODABLE_BODIES],
)
def test_a_body_the_decoder_gives_up_on_is_a_422_naming_the_field(
    store: Store, body: str, field: str, detail: str
) -> None:
    with TestClient(create_app(store, max_body_bytes=1_048_576)) as client:
        before = census(store)
        response = client.post(
            "/executions", content=body.encode(), headers={"content-type": "application/json"}
        )
        assert_problem(response, 422, "validation", field=field)
        assert response.json()["detail"] == f"{field}: {detail}"
        assert "decoded" not in response.text
        # The same in a batch: the member is named from the body's top.
        batch = '{"executions":[{"job":"j"},' + body + "]}"
        response = client.post(
            "/executions/batch",
            content=batch.encode(),
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 422, response.text
        assert response.json()["field"].startswith("executions")
        assert census(store) == before


def test_a_body_that_is_not_utf8_is_still_said_to_be_undecodable(client: TestClient) -> None:
    response = client.post(
        "/executions", content=b'{"job":"\xff"}', headers={"content-type": "application/json"}
    )
    assert_problem(response, 422, "validation", field="body")
    assert response.json()["detail"] == "body: cannot be decoded (send UTF-8 JSON)"


#: Zone names that are no IANA name, or the host's own: each refused on every path.
NOT_IANA = ["localtime", "Local", "/etc/localtime", "posixrules", "right/UTC", "posix/UTC"]


@pytest.mark.parametrize("timezone", NOT_IANA)
def test_zones_that_are_no_iana_name_are_refused_on_every_path(
    store: Store, client: TestClient, timezone: str
) -> None:
    import fencepost

    before = census(store)
    refused(
        attempt(lambda: store.add_schedule("job", cron="0 9 * * *", timezone=timezone)),
        {"timezone"},
    )
    app = fencepost.App(store=store)

    @app.job("job")
    def job() -> None:
        """Never runs: only its schedule is tried."""

    with pytest.raises(ValidationError) as caught:
        app.schedule("job", cron="0 9 * * *", timezone=timezone)
    assert caught.value.field == "timezone"
    response = client.post(
        "/schedules", json={"job": "job", "cron": "0 9 * * *", "timezone": timezone}
    )
    assert_problem(response, 422, "validation", field="timezone")
    assert timezone in response.json()["detail"]
    assert census(store) == before


@pytest.mark.parametrize("timezone", ["UTC", "EST5EDT", "Etc/GMT+5", "US/Eastern", "Factory"])
def test_names_of_the_iana_database_are_accepted(store: Store, timezone: str) -> None:
    schedule = store.add_schedule("job", cron="0 9 * * *", timezone=timezone)
    assert store.get_schedule(schedule.id).timezone == timezone

"""AsyncStore's reading, operator, command and schedule verbs answer as the sync Store's.

Real SQLite files and the real PostgreSQL (a schema per test). Each test opens the
sync store and an AsyncStore on the same URL, makes the same call on both, and
compares what they return (the same rows: equal values) and what they raise (the
same error class, the same field). On PostgreSQL the AsyncStore runs the sync
store's plans on its own pool of psycopg ``AsyncConnection``s; on SQLite it runs
the sync verbs in its thread (test_transactional_submit.py tests its submits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

import fencepost
from fencepost import (
    IdempotencyConflict,
    InvalidTransition,
    NotFound,
    NotRunning,
    ValidationError,
)
from fencepost.domain.models import Occurrence, Schedule
from fencepost.domain.states import CommandKind
from fencepost.store.asyncstore import AsyncStore
from fencepost.store.base import Store
from tests import postgres

T = TypeVar("T")

#: A well-formed id that names no execution or schedule.
MISSING = "0190a8f0-0000-7000-8000-000000000000"


@dataclass
class Pair:
    """The sync store and the URL an AsyncStore opens on the same database."""

    sync: Store
    url: str


@pytest.fixture(params=["sqlite", "postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    schema = None
    if request.param == "postgres":
        postgres.require_postgres()
        schema = postgres.new_schema()
        url = postgres.store_url(schema) + "&pool_min=1&pool_max=2"
    else:
        url = f"sqlite:///{tmp_path / 'store.db'}"
    sync = fencepost.connect(url)
    try:
        yield Pair(sync, url)
    finally:
        sync.close()
        if schema is not None:
            postgres.drop_schema(schema)


def in_async_store(url: str, body: Callable[[AsyncStore], Awaitable[None]]) -> None:
    """Run ``body`` with an AsyncStore on ``url``, closed after."""

    async def main() -> None:
        async with fencepost.connect_async(url) as astore:
            assert isinstance(astore, AsyncStore)
            await body(astore)

    asyncio.run(main())


async def same_error(
    kind: type[Exception], astore: AsyncStore, sync: Store, verb: str, *args: Any, **kwargs: Any
) -> tuple[Exception, Exception]:
    """``verb(*args, **kwargs)`` raises ``kind`` on both stores: the same class, the
    same message. Returns (the AsyncStore's error, the sync store's)."""
    with pytest.raises(kind) as async_error:
        await getattr(astore, verb)(*args, **kwargs)
    with pytest.raises(kind) as sync_error:
        getattr(sync, verb)(*args, **kwargs)
    assert type(async_error.value) is type(sync_error.value)
    assert str(async_error.value) == str(sync_error.value)
    return async_error.value, sync_error.value


async def same_field(astore: AsyncStore, sync: Store, verb: str, *args: Any, **kwargs: Any) -> str:
    """``verb`` raises ValidationError naming the same field on both stores; returns it."""
    a, s = await same_error(ValidationError, astore, sync, verb, *args, **kwargs)
    assert isinstance(a, ValidationError)
    assert isinstance(s, ValidationError)
    assert a.field == s.field
    return a.field


# -- reading --------------------------------------------------------------------------


def test_reads_answer_as_the_sync_store(pair: Pair) -> None:
    sync = pair.sync
    soon = datetime.now(UTC) + timedelta(hours=1)
    made = [
        sync.submit("a", {"i": 1}, queue="q1", priority=2),
        sync.submit("a", {"i": 2}, execute_at=soon, idempotency_key="key-2"),
        sync.submit("b", {"i": 3}, bucket_key="tenant"),
    ]
    # A finished one, with a trail of several transitions and an attempt.
    lease = sync.claim("w", limit=1, ids=[made[2].id])[0]
    sync.complete(lease, {"ok": True})
    running = sync.claim("w", limit=1, ids=[made[0].id])[0]
    sync.request(running.execution_id, "cancel", actor="me")

    async def body(astore: AsyncStore) -> None:
        for e in made:
            assert await astore.get(e.id) == sync.get(e.id)
            assert await astore.transitions(e.id) == sync.transitions(e.id)
            assert await astore.attempts(e.id) == sync.attempts(e.id)
            assert await astore.commands(e.id) == sync.commands(e.id)
        assert len(await astore.commands(made[0].id)) == 1
        assert len(await astore.transitions(made[2].id)) >= 3
        assert await astore.find("key-2") == sync.find("key-2") == sync.get(made[1].id)
        assert await astore.find("no such key") is None

        queries: list[dict[str, Any]] = [
            {},
            {"job": "a"},
            {"state": "SCHEDULED"},
            {"state": ["SUCCEEDED", "RUNNING"]},
            {"queue": "q1"},
            {"limit": 1},
            {"limit": 2, "newest_first": True},
            {"due_after": soon - timedelta(minutes=1)},
            {"due_before": soon - timedelta(minutes=1)},
            {"buckets": []},
            {"bucket": made[2].bucket},
            {"job": "\ud800"},  # no stored name: empty, without a round trip
            {"after": made[0].id},
            {"after": "not-an-id"},
            {"after": "a\x00b"},  # a bound, not a name
        ]
        for filters in queries:
            page = await astore.query(**filters)
            assert page == sync.query(**filters), filters
        first = await astore.query(limit=1)
        assert first.next_cursor is not None
        second = await astore.query(limit=1, after=first.next_cursor)
        assert second == sync.query(limit=1, after=first.next_cursor)
        assert [e.id for e in (await astore.query()).items] == [e.id for e in made]

        for bad in (MISSING, "not-an-id", "", "\ud800", "x" * 5000):
            for verb in ("get", "transitions", "attempts", "commands"):
                await same_error(NotFound, astore, sync, verb, bad)
        refusals: list[dict[str, Any]] = [
            {"limit": 0},
            {"limit": 10**9},
            {"limit": "1"},
            {"bucket": -1},
            {"bucket": 1, "buckets": [1]},
            {"buckets": [10**6]},
            {"job": 3},
            {"after": 7},
            {"after": "\ud800"},
            {"state": "NOPE"},
            {"due_after": datetime(2030, 1, 1)},  # naive
        ]
        for filters in refusals:
            await same_field(astore, sync, "query", **filters)
        for key in ("", "k\x00", 5, "x" * 2000):
            await same_field(astore, sync, "find", key)

    in_async_store(pair.url, body)


def test_reads_see_the_async_stores_own_writes_at_once(pair: Pair) -> None:
    """An AsyncStore's submit is visible to its own next read (its pool, its thread)."""

    async def body(astore: AsyncStore) -> None:
        e = await astore.submit("job", {"n": 1})
        assert await astore.get(e.id) == e == pair.sync.get(e.id)
        assert [x.id for x in (await astore.query(job="job")).items] == [e.id]
        gathered = await asyncio.gather(*(astore.get(e.id) for _ in range(20)))
        assert gathered == [e] * 20

    in_async_store(pair.url, body)


# -- operator verbs and commands ------------------------------------------------------

#: What two executions changed the same way share (not the ids, times, buckets).
_PER_ROW = {
    "id",
    "execution_id",
    "seq",
    "due_at",
    "planned_at",
    "created_at",
    "updated_at",
    "requested_at",
    "done_at",
    "at",
    "bucket",
    "lease_until",
}


def alike(a: Any, b: Any) -> dict[str, Any]:
    """``a``'s fields but its own ids and times, asserted equal to ``b``'s."""
    mine = {k: v for k, v in asdict(a).items() if k not in _PER_ROW}
    theirs = {k: v for k, v in asdict(b).items() if k not in _PER_ROW}
    assert mine == theirs
    return mine


def trail(store: Store, execution_id: str) -> list[tuple[Any, ...]]:
    """An execution's audit trail without its ids and times."""
    return [
        (t.event, t.from_state, t.to_state, t.epoch, t.actor, t.reason)
        for t in store.transitions(execution_id)
    ]


def failed(sync: Store, job: str) -> str:
    """The id of a new execution of ``job``, dead-lettered (FAILED)."""
    e = sync.submit(job, {"n": 1}, max_attempts=1)
    lease = sync.claim("w", limit=1, ids=[e.id])[0]
    sync.fail(lease, "boom", retryable=False)
    assert sync.get(e.id).state == "FAILED"
    return e.id


def running(sync: Store, job: str) -> str:
    """The id of a new execution of ``job``, claimed by the worker "w" (RUNNING)."""
    e = sync.submit(job)
    sync.claim("w", limit=1, ids=[e.id])
    return e.id


def test_operator_verbs_answer_as_the_sync_store(pair: Pair) -> None:
    sync = pair.sync
    later = datetime.now(UTC) + timedelta(days=1)
    waiting = [sync.submit("c", {"n": 1}, execute_at=later) for _ in range(6)]
    dead = [failed(sync, "d") for _ in range(2)]
    done = sync.submit("s")
    sync.complete(sync.claim("w", limit=1, ids=[done.id])[0], None)

    async def body(astore: AsyncStore) -> None:
        mine = await astore.cancel(waiting[0].id, actor="ops")
        theirs = sync.cancel(waiting[1].id, actor="ops")
        assert alike(mine, theirs)["state"] == "CANCELLED"
        assert mine == sync.get(waiting[0].id)
        assert trail(sync, waiting[0].id) == trail(sync, waiting[1].id)

        mine = await astore.replay(dead[0], actor="ops")
        theirs = sync.replay(dead[1], actor="ops")
        assert alike(mine, theirs)["state"] == "SCHEDULED"
        assert mine == sync.get(dead[0])
        assert trail(sync, dead[0]) == trail(sync, dead[1])

        to = later + timedelta(hours=1)
        mine = await astore.reschedule(waiting[2].id, to, actor="ops", reason="later")
        theirs = sync.reschedule(waiting[3].id, to, actor="ops", reason="later")
        alike(mine, theirs)
        assert mine.due_at == theirs.due_at == to
        assert mine == sync.get(waiting[2].id)
        assert trail(sync, waiting[2].id) == trail(sync, waiting[3].id)

        # The state machine's refusals, and nothing written.
        before = trail(sync, done.id)
        for verb in ("cancel", "replay"):
            await same_error(InvalidTransition, astore, sync, verb, done.id)
        await same_error(InvalidTransition, astore, sync, "cancel", waiting[0].id)
        await same_error(InvalidTransition, astore, sync, "replay", waiting[4].id)
        await same_error(InvalidTransition, astore, sync, "reschedule", done.id, to)
        assert trail(sync, done.id) == before
        for bad in (MISSING, "not-an-id", "\ud800"):
            for verb in ("cancel", "replay"):
                await same_error(NotFound, astore, sync, verb, bad)
            await same_error(NotFound, astore, sync, "reschedule", bad, to)
        # Arguments are refused before the execution is looked at.
        for actor in ("", "a\x00", 5, "x" * 1000):
            for verb in ("cancel", "replay"):
                await same_field(astore, sync, verb, waiting[4].id, actor=actor)
        await same_field(astore, sync, "reschedule", waiting[4].id, datetime(2030, 1, 1))
        await same_field(astore, sync, "reschedule", waiting[4].id, to, reason="")
        assert sync.get(waiting[4].id) == waiting[4]

    in_async_store(pair.url, body)


def test_command_requests_answer_as_the_sync_store(pair: Pair) -> None:
    sync = pair.sync
    later = datetime.now(UTC) + timedelta(days=1)
    held = [running(sync, "r") for _ in range(4)]
    waiting = [sync.submit("c", execute_at=later) for _ in range(2)]
    done = sync.submit("s")
    sync.complete(sync.claim("w", limit=1, ids=[done.id])[0], None)

    async def body(astore: AsyncStore) -> None:
        # RUNNING: a PENDING command for the worker.
        for kind in ("cancel", "pause"):
            mine = await astore.request(held[0], kind, actor="ops")
            theirs = sync.request(held[1], kind, actor="ops")
            assert alike(mine, theirs)["state"] == "PENDING"
        assert await astore.commands(held[0]) == sync.commands(held[0])
        assert [c.kind for c in sync.commands(held[0])] == ["cancel", "pause"]
        # SCHEDULED: a cancel is carried out at once, the command stored DONE.
        mine = await astore.request(waiting[0].id, CommandKind.CANCEL, actor="ops")
        theirs = sync.request(waiting[1].id, CommandKind.CANCEL, actor="ops")
        assert alike(mine, theirs)["state"] == "DONE"
        assert mine.done_at == mine.requested_at
        assert sync.get(waiting[0].id).state == "CANCELLED"
        assert trail(sync, waiting[0].id) == trail(sync, waiting[1].id)
        assert [mine] == sync.commands(waiting[0].id)
        # Refusals: nothing stored.
        await same_error(NotRunning, astore, sync, "request", done.id, "cancel")
        await same_error(NotRunning, astore, sync, "request", waiting[0].id, "pause")
        for bad in (MISSING, "not-an-id", "\ud800"):
            await same_error(NotFound, astore, sync, "request", bad, "cancel")
        await same_field(astore, sync, "request", held[2], "explode")
        await same_field(astore, sync, "request", held[2], "cancel", actor="")
        await same_field(astore, sync, "request", held[2], "cancel", actor=None)
        assert sync.commands(done.id) == []
        assert sync.commands(held[2]) == []

    in_async_store(pair.url, body)


# -- schedules ------------------------------------------------------------------------

#: What two schedules added with the same arguments share (not the id, the times).
_PER_SCHEDULE = {"id", "watermark", "next_due", "created_at", "updated_at"}


def same_schedule(a: Schedule, b: Schedule) -> None:
    """``a`` and ``b`` are alike but for their ids and times."""
    mine = {k: v for k, v in asdict(a).items() if k not in _PER_SCHEDULE}
    theirs = {k: v for k, v in asdict(b).items() if k not in _PER_SCHEDULE}
    assert mine == theirs


def test_schedule_verbs_answer_as_the_sync_store(pair: Pair) -> None:
    sync = pair.sync
    rule: dict[str, Any] = {
        "cron": "*/5 * * * *",
        "timezone": "Europe/Paris",
        "inputs": {"k": "v"},
        "misfire": "skip",
        "overlap": "skip",
        "max_attempts": 4,
        "priority": 2,
        "queue": "nightly",
    }

    async def body(astore: AsyncStore) -> None:
        mine = await astore.add_schedule("rep", id="a1", **rule)
        theirs = sync.add_schedule("rep", id="s1", **rule)
        same_schedule(mine, theirs)
        assert mine == sync.get_schedule("a1")
        assert mine.id == "a1"
        # Idempotent on the same arguments, a conflict on others.
        assert await astore.add_schedule("rep", id="s1", **rule) == theirs
        assert await astore.add_schedule("rep", id="s1", **rule | {"inputs": {"k": "v"}}) == theirs
        other = rule | {"priority": 9}
        await same_error(IdempotencyConflict, astore, sync, "add_schedule", "rep", id="s1", **other)
        generated = await astore.add_schedule("gen", every=timedelta(minutes=1))
        assert generated == sync.get_schedule(generated.id)
        with pytest.warns(DeprecationWarning, match="job_version"):
            pinned = await astore.add_schedule("old", every=60, job_version=3)
        assert pinned.job_version == 3
        refused: list[dict[str, Any]] = [
            {"cron": "not a cron"},
            {"cron": "* * * * *", "every": 60},
            {"every": -1},
            {"every": 60, "timezone": "Europe/Paris"},
            {"cron": "* * * * *", "timezone": "Nowhere/Else"},
            {"cron": "* * * * *", "inputs": [1]},
            {"cron": "* * * * *", "misfire": "sometimes"},
            {"cron": "* * * * *", "max_catch_up": 0},
            {"cron": "* * * * *", "id": "x" * 201},
            {"cron": "* * * * *", "id": "\ud800"},
            {"cron": "* * * * *", "priority": 10**30},
            {"cron": "* * * * *", "queue": ""},
            {"cron": "* * * * *", "start_at": datetime(2030, 1, 1)},
        ]
        for arguments in refused:
            await same_field(astore, sync, "add_schedule", "rep", **arguments)
        await same_field(astore, sync, "add_schedule", "", every=60)
        await same_field(astore, sync, "add_schedule", "j\x00b", every=60)
        with pytest.raises(TypeError):
            await astore.add_schedule("rep", every=60, colour="red")

        # Reading and listing.
        for schedule_id in ("a1", "s1", generated.id):
            assert await astore.get_schedule(schedule_id) == sync.get_schedule(schedule_id)
        for bad in (MISSING, "nope", "", "\ud800", "x" * 5000):
            error = (await same_error(NotFound, astore, sync, "get_schedule", bad))[0]
            assert isinstance(error, NotFound)
            assert error.subject == "schedule"
        soon = datetime.now(UTC) + timedelta(days=1)
        listings: list[dict[str, Any]] = [
            {},
            {"job": "rep"},
            {"paused": False},
            {"paused": True},
            {"limit": 1},
            {"after": "a1"},
            {"after": "a\x00"},
            {"due_before": soon},
            {"job": "nobody"},
        ]
        for filters in listings:
            assert await astore.schedules(**filters) == sync.schedules(**filters), filters
        first = await astore.schedules(limit=2)
        assert first.next_cursor is not None
        assert await astore.schedules(after=first.next_cursor) == sync.schedules(
            after=first.next_cursor
        )
        for filters in (
            {"paused": "yes"},
            {"after": 5},
            {"after": "\ud800"},
            {"limit": 0},
            {"due_before": datetime(2030, 1, 1)},
            {"job": ""},
        ):
            await same_field(astore, sync, "schedules", **filters)

        # Changing: update, pause, resume.
        mine = await astore.update_schedule("a1", every=120, cron=None, priority=5)
        theirs = sync.update_schedule("s1", every=120, cron=None, priority=5)
        same_schedule(mine, theirs)
        assert mine == sync.get_schedule("a1")
        assert mine.every == timedelta(minutes=2)
        assert mine.timezone == "UTC"
        for changes in ({"cron": "bad"}, {"every": 0}, {"priority": "high"}, {"id": "other"}):
            await same_field(astore, sync, "update_schedule", "a1", **changes)
        assert sync.get_schedule("a1") == mine
        await same_error(NotFound, astore, sync, "update_schedule", MISSING, priority=1)
        mine = await astore.pause_schedule("a1")
        theirs = sync.pause_schedule("s1")
        same_schedule(mine, theirs)
        assert mine.paused
        assert await astore.pause_schedule("a1") == mine  # already paused: unchanged
        mine = await astore.resume_schedule("a1")
        theirs = sync.resume_schedule("s1")
        same_schedule(mine, theirs)
        assert not mine.paused
        assert await astore.resume_schedule("a1") == mine
        for verb in ("pause_schedule", "resume_schedule", "delete_schedule"):
            for bad in (MISSING, "\ud800", "x" * 5000):
                await same_error(NotFound, astore, sync, verb, bad)

        # Deleting cancels the executions that have not started, as the sync store's does.
        past = datetime.now(UTC) - timedelta(minutes=1)
        slots = [past, soon, soon + timedelta(minutes=5)]
        occurrences = [Occurrence(slot=t, due_at=t) for t in slots]
        planned = {s: sync.add_occurrences(s, occurrences) for s in ("a1", "s1")}
        started = sync.claim("w", limit=1, ids=[planned["a1"][0].id])
        assert len(started) == 1
        assert await astore.delete_schedule("a1") is None
        sync.delete_schedule("s1")
        for schedule_id in ("a1", "s1"):
            await same_error(NotFound, astore, sync, "get_schedule", schedule_id)
        states = [sync.get(e.id).state for e in planned["a1"]]
        assert states == ["RUNNING", "CANCELLED", "CANCELLED"]
        assert [sync.get(e.id).state for e in planned["s1"]] == ["CANCELLED"] * 3
        assert trail(sync, planned["a1"][1].id) == trail(sync, planned["s1"][1].id)
        assert trail(sync, planned["a1"][1].id)[-1][4] == "schedule deleted"

    in_async_store(pair.url, body)


# -- waiting --------------------------------------------------------------------------


def test_wait_answers_as_the_sync_store(pair: Pair) -> None:
    sync = pair.sync
    later = datetime.now(UTC) + timedelta(days=1)
    finished = sync.submit("w")
    sync.complete(sync.claim("w", limit=1, ids=[finished.id])[0], {"r": 1})
    pending = sync.submit("w", execute_at=later)
    runs = [sync.submit("w", {"n": n}) for n in range(3)]

    async def body(astore: AsyncStore) -> None:
        # Already terminal: at once, as the sync store's.
        assert await astore.wait(finished.id) == sync.wait(finished.id)
        assert await astore.wait(finished.id, timeout=0) == sync.get(finished.id)

        async def finish_later() -> None:
            await asyncio.sleep(0.3)

            def finish() -> None:
                leases = sync.claim("other", limit=3, ids=[e.id for e in runs])
                assert len(leases) == 3
                sync.complete(leases[0], {"done": 0})
                sync.fail(leases[1], "no", retryable=False)
                sync.complete(leases[2], None)

            await asyncio.to_thread(finish)

        waited, _ = await asyncio.gather(
            asyncio.gather(*(astore.wait(e.id, timeout=30) for e in runs)), finish_later()
        )
        assert [e.state for e in waited] == ["SUCCEEDED", "FAILED", "SUCCEEDED"]
        assert waited == [sync.wait(e.id, timeout=0) for e in runs]
        assert waited[0].result == {"done": 0}

        # Not finished in time: the builtin TimeoutError, from both.
        for timeout in (0, 0.2, timedelta(milliseconds=200)):
            await same_error(TimeoutError, astore, sync, "wait", pending.id, timeout=timeout)
        for bad in (MISSING, "not-an-id", "", "\ud800"):
            await same_error(NotFound, astore, sync, "wait", bad, timeout=1)
        for timeout in (-1, float("nan"), float("inf"), "soon", timedelta(seconds=-1)):
            await same_field(astore, sync, "wait", pending.id, timeout=timeout)
        assert sync.get(pending.id).state == "SCHEDULED"

    in_async_store(pair.url, body)

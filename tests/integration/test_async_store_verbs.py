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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

import fencepost
from fencepost import NotFound, ValidationError
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

"""AsyncStore's flow-control verbs answer as the sync Store's.

Real SQLite files and the real PostgreSQL (a schema per test), as in
test_async_store_verbs.py: the sync store and an AsyncStore on the same URL make the
same calls, and return the same rows or raise the same errors naming the same field.
On PostgreSQL the AsyncStore runs the sync store's plans (store/sqlflow.py) on its own
pool; on SQLite it runs the sync verbs in its thread.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from fencepost import NotFound
from fencepost.domain.limits import Limit, parse_rate
from fencepost.store.asyncstore import AsyncStore
from tests.integration.test_async_store_verbs import (
    Pair,
    in_async_store,
    pair,  # noqa: F401  (the fixture)
    same_error,
    same_field,
)


def without_times(limits: list[Limit]) -> list[tuple[Any, ...]]:
    """What a limit is, leaving out when it was written."""
    return [
        (lim.scope, lim.rate, lim.burst, lim.concurrency, lim.per_key, lim.paused, lim.updated_by)
        for lim in limits
    ]


def test_flow_verbs_answer_as_the_sync_store(pair: Pair) -> None:  # noqa: F811
    sync = pair.sync
    sync.submit("send", queue="emails")

    async def body(astore: AsyncStore) -> None:
        stored = await astore.set_limit("job:send", rate="100/s", concurrency=3, actor="async")
        assert stored == sync.limits()[0]
        assert (stored.rate, stored.burst, stored.updated_by) == (parse_rate("100/s"), 10, "async")
        per_key = await astore.set_limit("queue:emails", concurrency=2, per_key=True)
        assert per_key.updated_by == "operator"
        assert await astore.limits() == sync.limits() == [stored, per_key]

        paused = await astore.pause_queue("emails", actor="async")
        assert paused == next(lim for lim in sync.limits() if lim.scope == "queue:emails")
        assert (paused.paused, paused.concurrency) == (True, 2)
        assert await astore.paused_queues() == sync.paused_queues() == [paused]
        # Paused: the queue's execution is not claimed, by any claimer.
        assert sync.claim("w", limit=5) == []

        resumed = await astore.resume_queue("emails", actor="async")
        assert resumed is not None
        assert (resumed.paused, resumed.concurrency) == (False, 2)
        assert await astore.paused_queues() == []
        assert await astore.resume_queue("nothing-paused") == Limit(scope="queue:nothing-paused")

        await astore.remove_limit("queue:emails", actor="async")
        assert without_times(sync.limits()) == without_times([stored])
        await astore.remove_limit("job:send")
        assert sync.limits() == []

        changes = await astore.flow_changes(limit=20)
        assert changes == sync.flow_changes(limit=20)
        assert [c.action for c in changes] == ["remove", "remove", "resume", "pause", "set", "set"]
        assert changes[2].actor == "async"
        throttled = await astore.throttled(window=timedelta(hours=1))
        assert throttled == sync.throttled(window=3600)
        assert [t.scope for t in throttled] == ["queue:emails"]  # the resume recorded it

    in_async_store(pair.url, body)
    assert len(sync.claim("w", limit=5)) == 1


def test_a_change_through_the_async_store_holds_for_its_own_claims_at_once(
    pair: Pair,  # noqa: F811
) -> None:
    """The AsyncStore forgets its sync store's cached view of the limits when it changes
    them (PostgreSQL caches it for a second): a claim right after a pause sees it."""

    async def body(astore: AsyncStore) -> None:
        astore.store.submit("send", queue="emails")
        astore.store.limits()  # the view read, and cached where the backend caches it
        assert astore.store.claim("w", limit=5, queues=["other"]) == []
        await astore.pause_queue("emails")
        assert astore.store.claim("w", limit=5) == []
        await astore.resume_queue("emails")
        assert len(astore.store.claim("w", limit=5)) == 1

    in_async_store(pair.url, body)


@pytest.mark.parametrize(
    ("verb", "args", "kwargs", "field"),
    [
        ("set_limit", ("job:x",), {"rate": "0/s"}, "rate"),
        ("set_limit", ("job:x",), {"rate": "5/fortnight"}, "rate"),
        ("set_limit", ("job:x",), {"rate": "x" * 10_000}, "rate"),
        ("set_limit", ("job:x",), {"concurrency": 2**63}, "concurrency"),
        ("set_limit", ("job:x",), {"concurrency": True}, "concurrency"),
        ("set_limit", ("job:x",), {"rate": "5/s", "burst": 0}, "burst"),
        ("set_limit", ("job:x",), {"concurrency": 1, "burst": 5}, "burst"),
        ("set_limit", ("job:x",), {}, "rate"),
        ("set_limit", ("nokind:x",), {"concurrency": 1}, "scope"),
        ("set_limit", ("job:",), {"concurrency": 1}, "scope"),
        ("set_limit", ("job:\x00",), {"concurrency": 1}, "scope"),
        ("set_limit", ("job:\ud800",), {"concurrency": 1}, "scope"),
        ("set_limit", ("job:x",), {"concurrency": 1, "actor": ""}, "actor"),
        ("remove_limit", ("queue:" + "q" * 101,), {}, "scope"),
        ("pause_queue", ("\ud800",), {}, "name"),
        ("pause_queue", ("q" * 10_000,), {}, "name"),
        ("resume_queue", ("\x00",), {}, "name"),
        ("flow_changes", (), {"limit": 0}, "limit"),
        ("throttled", (), {"window": -1}, "window"),
    ],
    ids=[
        "rate-zero",
        "rate-fortnight",
        "rate-10k",
        "concurrency-2**63",
        "concurrency-true",
        "burst-zero",
        "burst-without-rate",
        "nothing",
        "no-kind",
        "job-empty",
        "nul",
        "surrogate",
        "actor-empty",
        "rm-queue-101",
        "pause-surrogate",
        "pause-10k",
        "resume-nul",
        "changes-zero",
        "window-negative",
    ],
)
def test_bad_arguments_are_refused_naming_the_same_field(
    pair: Pair,  # noqa: F811
    verb: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    field: str,
) -> None:
    sync = pair.sync
    sync.set_limit("job:keep", concurrency=1)
    before = sync.limits()

    async def body(astore: AsyncStore) -> None:
        assert await same_field(astore, sync, verb, *args, **kwargs) == field

    in_async_store(pair.url, body)
    assert sync.limits() == before


def test_removing_no_limit_is_not_found_on_both(pair: Pair) -> None:  # noqa: F811
    pair.sync.pause_queue("held")  # a pause is not a limit

    async def body(astore: AsyncStore) -> None:
        for scope in ("job:none", "queue:held"):
            a, _ = await same_error(NotFound, astore, pair.sync, "remove_limit", scope)
            assert str(a) == f"limit {scope} not found"

    in_async_store(pair.url, body)
    assert [lim.scope for lim in pair.sync.paused_queues()] == ["queue:held"]

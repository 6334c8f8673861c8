"""The contract of reading executions: ``get``, ``transitions``, ``attempts``, ``query``.

Unknown ids name themselves; ``query`` filters, pages by keyset (oldest or newest
first) and selects buckets.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from fencepost.domain.errors import NotFound, ValidationError
from fencepost.domain.models import Occurrence
from fencepost.domain.states import State
from fencepost.store.base import Store
from fencepost.testing.clock import ManualClock
from fencepost.testing.contract.support import (
    ContractFixtures,
    at,
    keys_in_distinct_buckets,
    pages_of,
)
from fencepost.testing.factory import ExecutionFactory


class ReadingContract(ContractFixtures):
    """Read executions: by id, and by query with filters and keyset pages."""

    def test_unknown_ids(self, store: Store) -> None:
        for read in (store.get, store.transitions, store.attempts):
            with pytest.raises(NotFound) as caught:
                read("00000000-0000-7000-8000-000000000000")
            assert "00000000-0000-7000-8000-000000000000" in str(caught.value)

    def test_query_filters(self, store: Store, clock: ManualClock, make: ExecutionFactory) -> None:
        a = make.scheduled("a", execute_at=at(100))
        b = make.scheduled("b", execute_at=at(200), bucket_key="tenant")
        running = make.running("c")
        dead = make.dead("d")

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(**filters).items]

        assert ids(job="a") == [a.id]
        assert ids(state="RUNNING") == [running.execution_id]
        assert ids(state=[State.FAILED, "RUNNING"]) == [running.execution_id, dead.id]
        assert ids(bucket=b.bucket, job="b") == [b.id]
        assert ids(due_after=at(100), due_before=at(200)) == [a.id]
        assert ids(due_after=at(101)) == [b.id]
        assert ids(schedule="nope") == []

    def test_query_pages_by_keyset(self, store: Store) -> None:
        made = [e.id for e in store.submit_many([{"job": "j"} for _ in range(25)])]
        pages = pages_of(lambda cursor: store.query(limit=10, after=cursor))
        assert len(pages) == 3
        assert [e.id for page in pages for e in page] == sorted(made)
        exact = store.query(limit=25)
        assert (len(exact.items), exact.next_cursor) == (25, None)

    @pytest.mark.parametrize("schedule", [None, "s"], ids=["all", "one-schedule"])
    def test_query_newest_first(
        self, store: Store, clock: ManualClock, schedule: str | None
    ) -> None:
        if schedule is not None:
            store.add_schedule("j", every=60, id=schedule)
            clock.advance(3600)
            store.add_occurrences(
                schedule, [Occurrence(slot=at(60 * i), due_at=at(60 * i)) for i in range(25)]
            )
            made = [e.id for e in store.query(schedule=schedule, limit=100).items]
        else:
            made = [e.id for e in store.submit_many([{"job": "j"} for _ in range(25)])]
        seen: list[str] = []
        cursor = None
        while True:
            page = store.query(schedule=schedule, limit=10, after=cursor, newest_first=True)
            seen.extend(e.id for e in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert len(made) == 25
        assert seen == sorted(made, reverse=True)

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            pytest.param({"state": "DONE"}, "state", id="unknown-state"),
            pytest.param({"state": ["RUNNING", "nope"]}, "state", id="unknown-in-list"),
            pytest.param({"limit": 0}, "limit", id="zero-limit"),
            pytest.param({"bucket": -1}, "bucket", id="negative-bucket"),
            pytest.param({"due_after": datetime(2026, 1, 1)}, "due_after", id="naive-after"),
        ],
    )
    def test_bad_query_names_the_field(
        self, store: Store, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            store.query(**arguments)
        assert caught.value.field == field

    def test_query_by_buckets(self, store: Store, make: ExecutionFactory) -> None:
        keys = keys_in_distinct_buckets(3, store.config.num_buckets)
        a, b, c = (make.scheduled(f"job-{n}", bucket_key=key) for n, key in enumerate(keys))
        running = make.running("job-r", bucket_key=keys[0])

        def ids(**filters: Any) -> list[str]:
            return [e.id for e in store.query(**filters).items]

        assert ids(buckets=[a.bucket, c.bucket]) == [a.id, c.id, running.execution_id]
        assert ids(buckets={c.bucket, a.bucket}, state="SCHEDULED") == [a.id, c.id]
        assert ids(buckets=(b.bucket,)) == [b.id]
        assert ids(buckets=[]) == [], "no buckets match nothing"
        page = store.query(buckets=[a.bucket, c.bucket], limit=2)
        assert [e.id for e in page.items] == [a.id, c.id]
        assert ids(buckets=[a.bucket, c.bucket], after=page.next_cursor) == [running.execution_id]
        bad: list[dict[str, Any]] = [
            {"buckets": [store.config.num_buckets]},
            {"buckets": [-1]},
            {"buckets": ["1"]},
            {"buckets": "12"},
            {"buckets": 3},
            {"bucket": a.bucket, "buckets": [a.bucket]},
        ]
        for arguments in bad:
            with pytest.raises(ValidationError) as caught:
                store.query(**arguments)
            assert caught.value.field == "buckets", arguments

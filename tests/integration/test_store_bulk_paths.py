"""submit_many's shortcuts, pinned: what it returns is what was stored.

submit_many builds its executions without reading them back (PostgreSQL returns only
the store's now and the keyed ids it inserted; SQLite builds them after the commit),
so each returned execution is compared with the stored one, field by field, for a
batch mixing every argument, on both SQL backends.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import fencepost
from fencepost.domain.models import Execution
from fencepost.domain.slots import slot_builder
from fencepost.domain.states import Event


@pytest.fixture
def url(shared_db: str) -> str:
    return shared_db


def _mixed_batch(later: datetime) -> list[dict[str, Any]]:
    return [
        {"job": "plain"},
        {"job": "inputs", "inputs": {"n": 1, "é": ["x", None]}},
        {"job": "delayed", "delay": 90, "priority": -3},
        {"job": "at", "execute_at": later, "version": 2},
        {"job": "keyed", "idempotency_key": "k1", "timeout": 12.5, "max_attempts": 7},
        {"job": "keyed", "idempotency_key": "k1", "timeout": 12.5, "max_attempts": 7},
        {"job": "tenant", "bucket_key": "tenant-9", "delay": timedelta(milliseconds=1)},
    ]


def test_submit_many_returns_what_it_stored(url: str) -> None:
    later = datetime.now(UTC).replace(microsecond=123456) + timedelta(hours=2)
    with fencepost.connect(url) as store:
        first = store.submit_many(_mixed_batch(later))
        assert first[4] == first[5]  # one key, one execution
        for made in first:
            assert made == store.get(made.id)
            events = [t.event for t in store.transitions(made.id)]
            assert events == [Event.SUBMITTED]
        assert {made.created_at for made in first} == {first[0].created_at}
        assert first[2].due_at == first[0].created_at + timedelta(seconds=90)
        assert first[3].due_at == later
        # A batch of twins only: nothing inserted, the stored ones come back.
        again = store.submit_many(
            [{"job": "keyed", "idempotency_key": "k1", "timeout": 12.5, "max_attempts": 7}] * 2
        )
        assert again == [first[4], first[4]]
        # Unkeyed rows beside a keyed twin in one batch.
        mixed = store.submit_many(
            [
                {"job": "plain"},
                {"job": "keyed", "idempotency_key": "k1", "timeout": 12.5, "max_attempts": 7},
                {"job": "keyed", "idempotency_key": "k2"},
            ]
        )
        assert mixed[1] == first[4]
        for made in mixed:
            assert made == store.get(made.id)


def test_slot_builder_makes_what_the_constructor_makes() -> None:
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": "0190f1e2-0000-7000-8000-000000000001",
        "job": "j",
        "job_version": 3,
        "inputs": {"a": [1]},
        "state": fencepost.State.SCHEDULED,
        "due_at": now,
        "priority": 1,
        "queue": "q",
        "attempt": 0,
        "max_attempts": 3,
        "epoch": 0,
        "lease_owner": None,
        "lease_until": None,
        "timeout": timedelta(seconds=5),
        "idempotency_key": "k",
        "schedule_id": None,
        "slot": None,
        "bucket": 7,
        "bucket_key": None,
        "result": None,
        "error": None,
        "progress": None,
        "created_at": now,
        "updated_at": now,
        "limit_key": "tenant-a",
        "planned_at": now,
    }
    assert [f.name for f in dataclasses.fields(Execution)] == list(values)
    built = slot_builder(Execution)(**values)
    assert type(built) is Execution
    assert built == Execution(**values)
    assert repr(built) == repr(Execution(**values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.job = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        slot_builder(Execution)(**{k: v for k, v in values.items() if k != "job"})

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            raise AssertionError

    with pytest.raises(TypeError, match="does more than assign"):
        slot_builder(Checked)

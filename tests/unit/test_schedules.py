"""The pure schedule functions: slot texts, definitions, and the decisions of the verbs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from fencepost import ValidationError
from fencepost.domain import schedules as plans
from fencepost.domain.models import Occurrence
from fencepost.domain.policies import Misfire, Overlap
from fencepost.domain.schedules import parse_slot, slot_text
from fencepost.timing import specs

T0 = datetime(2026, 1, 1, tzinfo=UTC)
US = timedelta(microseconds=1)
LIMIT = 1024


def spec(**arguments: Any) -> plans.ScheduleSpec:
    return specs.define(arguments.pop("job", "job"), max_payload_bytes=LIMIT, **arguments)


@pytest.mark.parametrize(
    ("instant", "text"),
    [
        pytest.param(datetime(2026, 11, 29, 2, 0, tzinfo=UTC), "2026-11-29T02:00:00Z", id="utc"),
        pytest.param(
            datetime(2026, 11, 29, 3, 0, tzinfo=timezone(timedelta(hours=1))),
            "2026-11-29T02:00:00Z",
            id="offset",
        ),
        pytest.param(
            datetime(2026, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC),
            "2026-01-01T00:00:00.250000Z",
            id="fraction",
        ),
        pytest.param(datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC), "2026-01-01T00:00:00.000001Z"),
        pytest.param(datetime(9999, 1, 1, tzinfo=UTC), "9999-01-01T00:00:00Z", id="far"),
        pytest.param(datetime(5, 1, 1, tzinfo=UTC), "0005-01-01T00:00:00Z", id="four-digit-year"),
    ],
)
def test_slot_text(instant: datetime, text: str) -> None:
    assert slot_text(instant) == text
    assert parse_slot(text) == instant
    assert parse_slot(text).tzinfo is UTC


def test_slot_text_refuses_naive_instants() -> None:
    with pytest.raises(ValidationError) as caught:
        slot_text(datetime(2026, 1, 1))
    assert caught.value.field == "slot"


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T02:00:00",
        "2026-11-29T02:00:00+00:00",
        "2026-11-29T02:00Z",
        "2026-11-29T02:00:00.000000Z",
        "2026-11-29T02:00:00.25Z",
        "2026-11-29 02:00:00Z",
        "soon",
    ],
)
def test_parse_slot_accepts_only_canonical_texts(text: str) -> None:
    with pytest.raises(ValueError, match="not a slot text"):
        parse_slot(text)


def test_occurrence_key() -> None:
    assert plans.occurrence_key("a:b", T0) == "a:b:2026-01-01T00:00:00Z"


def test_definitions_are_normalized_before_fingerprinting() -> None:
    first = spec(cron="0 2 * * *", misfire_grace=60, start_at=T0, inputs={"a": (1, 2)})
    second = spec(
        cron=" 0  2 * * * ",
        misfire_grace=timedelta(minutes=1),
        start_at=datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
        misfire=Misfire.COALESCE,
        overlap="allow",
        inputs={"a": [1, 2]},
    )
    assert first == second
    assert first.fingerprint() == second.fingerprint()
    assert first.inputs == {"a": [1, 2]}, "inputs as a serializing backend gives them back"
    for other in (
        spec(cron="0 2 * * *", misfire_grace=61, start_at=T0, inputs={"a": [1, 2]}),
        spec(cron="0 2 * * *", start_at=T0, inputs={"a": [1, 2]}, paused=True),
        spec(cron="0 2 * * *", start_at=T0 + US, inputs={"a": [1, 2]}),
    ):
        assert other.fingerprint() != first.fingerprint()


def test_new_schedule_watermark() -> None:
    now = T0 + timedelta(hours=1)
    assert plans.new_schedule(spec(every=60), id="s", now=now).watermark == now
    future = plans.new_schedule(spec(every=60, start_at=now + US), id="s", now=now)
    assert future.watermark == now, "one microsecond before start_at"
    assert plans.new_schedule(spec(every=60, start_at=now), id="s", now=now).watermark == now
    later = plans.new_schedule(spec(every=60, start_at=now + timedelta(days=1)), id="s", now=now)
    assert (later.watermark, later.next_due) == (now + timedelta(days=1) - US, now)


def test_amend_validates_the_combination_and_replans() -> None:
    current = replace(
        plans.new_schedule(spec(cron="0 2 * * *", timezone="Europe/Berlin"), id="s", now=T0),
        materializer="m",
        lease_until=T0 + timedelta(seconds=30),
        watermark=T0 + timedelta(hours=5),
    )
    later = T0 + timedelta(minutes=1)
    changed = specs.amend(
        current, {"every": 3600, "cron": None}, now=later, max_payload_bytes=LIMIT
    )
    assert (changed.every, changed.cron, changed.timezone) == (timedelta(hours=1), None, "UTC")
    assert (changed.watermark, changed.next_due, changed.updated_at) == (
        current.watermark,
        later,
        later,
    )
    assert (changed.materializer, changed.lease_until, changed.created_at) == (None, None, T0)
    for changes, field in (
        ({"every": 3600}, "cron"),
        ({"every": 3600, "cron": None, "timezone": "Europe/Berlin"}, "timezone"),
        ({"overlap": "queue"}, "overlap"),
        ({"id": "t"}, "id"),
        ({"when": "now"}, "when"),
    ):
        with pytest.raises(ValidationError) as caught:
            specs.amend(current, changes, now=later, max_payload_bytes=LIMIT)
        assert caught.value.field == field
    kept = specs.amend(current, {"overlap": Overlap.SKIP}, now=later, max_payload_bytes=LIMIT)
    assert (kept.cron, kept.timezone, kept.overlap) == ("0 2 * * *", "Europe/Berlin", Overlap.SKIP)


def test_pause_and_resume_decide_nothing_when_already_there() -> None:
    current = plans.new_schedule(spec(every=60), id="s", now=T0)
    later = T0 + timedelta(seconds=5)
    assert plans.resume(current, now=later) is None
    paused = plans.pause(current, now=later)
    assert paused is not None
    assert (paused.paused, paused.next_due, paused.updated_at) == (True, later, later)
    assert plans.pause(paused, now=later) is None
    resumed = plans.resume(paused, now=later)
    assert resumed is not None
    assert resumed.paused is False


def test_the_materializer_fence() -> None:
    until = T0 + timedelta(seconds=30)
    stored = replace(
        plans.new_schedule(spec(every=60), id="s", now=T0), materializer="m", lease_until=until
    )
    assert plans.holds_lease(stored, stored, until - US)
    assert not plans.holds_lease(stored, stored, until), "expired at lease_until"
    assert not plans.holds_lease(stored, replace(stored, materializer="x"), T0)
    assert not plans.holds_lease(stored, replace(stored, lease_until=until - US), T0)
    unleased = replace(stored, materializer=None, lease_until=None)
    assert not plans.holds_lease(unleased, unleased, T0)
    assert not plans.holds_lease(unleased, stored, T0)


def test_check_occurrence() -> None:
    local = datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    checked = plans.check_occurrence(Occurrence(slot=local, due_at=local), "o")
    assert checked == Occurrence(slot=T0, due_at=T0)
    assert checked.slot.tzinfo is UTC
    for value, field in (
        ("x", "o"),
        (Occurrence(slot=datetime(2026, 1, 1), due_at=T0), "o.slot"),
        (Occurrence(slot=T0, due_at=datetime(2026, 1, 1)), "o.due_at"),
        (Occurrence(slot=T0, due_at=T0, skipped=""), "o.skipped"),
        (Occurrence(slot=T0, due_at=T0, skipped="x" * 8193), "o.skipped"),
    ):
        with pytest.raises(ValidationError) as caught:
            plans.check_occurrence(value, "o")
        assert caught.value.field == field


def test_new_occurrence_execution() -> None:
    schedule = plans.new_schedule(
        spec(every=60, inputs={"x": 1}, max_attempts=4, priority=2, job_version=3), id="s", now=T0
    )
    new = plans.new_occurrence(
        "s", Occurrence(slot=T0, due_at=T0 + US), new_id="id-1", num_buckets=64
    )
    execution = new.to_execution(schedule, T0)
    assert (execution.id, execution.idempotency_key, execution.slot, execution.due_at) == (
        "id-1",
        "s:2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
        T0 + US,
    )
    assert (execution.inputs, execution.max_attempts, execution.priority) == ({"x": 1}, 4, 2)
    assert (execution.job_version, execution.schedule_id, execution.state.value) == (
        3,
        "s",
        "SCHEDULED",
    )


@pytest.mark.parametrize(
    "job", ["a/b", "..", "été", "-", "x" * 200, "j\u200bk", "<script>", "nightly report"]
)
def test_a_derived_schedule_id_is_one_stable_path_segment_whatever_the_job(job: str) -> None:
    from fencepost.domain import schedules as plans

    def derive(**changes: object) -> str:
        arguments: dict[str, object] = {
            "cron": "@daily",
            "inputs": {"k": "\u00e9" * 1000, "n": -(10**18), "deep": [[[[{}]]]]},
        }
        arguments.update(changes)
        return specs.define(job, max_payload_bytes=1 << 20, **arguments).derived_id()

    first = derive()
    assert plans.check_schedule_id(first) == first  # one URL path segment, storable
    assert len(first) <= 97
    assert first.isascii()
    assert derive() == first, "the same definition names the same schedule"
    assert derive(cron="0 0 * * *") == first, "an alias and its expression are one rule"
    assert derive(inputs={"k": "y"}) != first
    assert derive(timezone="Europe/Berlin") != first
    assert derive(max_attempts=9) == first, "options other than the rule and inputs do not count"

"""One constructor for a new execution: a submission and a schedule's occurrence agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fencepost.domain import schedules as plans
from fencepost.domain.models import Execution, Occurrence, scheduled_execution
from fencepost.domain.states import State
from fencepost.domain.submission import prepare
from fencepost.timing import specs

T0 = datetime(2026, 1, 1, tzinfo=UTC)


#: The fields that say an execution was never claimed, and their values then.
NOT_STARTED = {
    "state": State.SCHEDULED,
    "attempt": 0,
    "epoch": 0,
    "lease_owner": None,
    "lease_until": None,
    "result": None,
    "error": None,
    "progress": None,
}


def _not_started(execution: Execution) -> dict[str, object]:
    return {name: getattr(execution, name) for name in NOT_STARTED}


def test_a_submission_becomes_a_scheduled_execution_never_claimed() -> None:
    new = prepare(
        "job",
        new_id="id-1",
        now=T0,
        max_payload_bytes=1024,
        inputs={"x": 1},
        timeout=30,
        bucket_key="tenant",
        priority=4,
        max_attempts=2,
        num_buckets=64,
    )
    execution = new.to_execution()
    assert execution == scheduled_execution(
        new, new, created_at=T0, timeout=new.timeout, bucket_key="tenant"
    )
    assert _not_started(execution) == NOT_STARTED
    assert (execution.job, execution.inputs, execution.priority, execution.max_attempts) == (
        "job",
        {"x": 1},
        4,
        2,
    )
    assert (execution.timeout, execution.bucket_key, execution.schedule_id, execution.slot) == (
        timedelta(seconds=30),
        "tenant",
        None,
        None,
    )
    assert execution.created_at == execution.updated_at == T0


def test_an_occurrence_becomes_a_scheduled_execution_of_its_schedule() -> None:
    spec = specs.define("job", max_payload_bytes=1024, every=60, inputs={"n": [1]}, priority=3)
    schedule = plans.new_schedule(spec, id="s", now=T0)
    new = plans.new_occurrence("s", Occurrence(slot=T0, due_at=T0), new_id="id-2", num_buckets=64)
    execution = new.to_execution(schedule, T0)
    assert _not_started(execution) == NOT_STARTED
    assert (execution.job, execution.inputs, execution.priority, execution.timeout) == (
        "job",
        {"n": [1]},
        3,
        None,
    )
    assert (execution.schedule_id, execution.slot, execution.bucket_key) == (
        "s",
        "2026-01-01T00:00:00Z",
        None,
    )

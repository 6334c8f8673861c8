"""The wire models: one mapping between the API's bodies and the domain types, both ways."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import fencepost
from fencepost.domain.states import CommandKind
from fencepost.store.base import Store
from fencepost.testing import ManualClock
from fencepost.wire import executions, reports, schedules, work
from fencepost.wire.mapping import (
    RequestModel,
    WireModel,
    argument_name,
    attribute_name,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def store() -> Iterator[Store]:
    with fencepost.connect("memory://", clock=ManualClock(T0)) as opened:
        yield opened


def _wire_models() -> list[type[WireModel[Any]]]:
    found, pending = [], list(WireModel.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if "[" not in model.__name__:  # not the parametrized WireModel[D] itself
            found.append(model)
    return sorted(found, key=lambda m: m.__name__)


#: Domain fields a body leaves to the caller of ``to_domain``: the execution an
#: attempt or transition belongs to is in the path; a report's owners are per bucket;
#: a listed job's window is the listing's, and who serves which version of a job is
#: per version (its ``served_by``).
GIVEN_TO_DOMAIN = {
    "Attempt": {"execution_id"},
    "Transition": {"execution_id"},
    "BucketReport": {"owners"},
    "JobSummary": {"at", "window", "latest_nodes"},
    "JobView": {"served_by"},
}


@pytest.mark.parametrize("model", _wire_models(), ids=lambda m: m.__name__)
def test_every_domain_field_is_mirrored_or_named_as_not_on_the_wire(
    model: type[WireModel[Any]],
) -> None:
    """A field added to a domain type must be given a place in its body (or left out on purpose)."""
    domain = model.domain_type
    names = (
        {f.name for f in dataclasses.fields(domain)}
        if dataclasses.is_dataclass(domain)
        else set(domain._fields)
    )
    accounted = (
        set(model.mirrored.values())
        | set(model.not_on_the_wire)
        | GIVEN_TO_DOMAIN.get(model.__name__, set())
    )
    assert names == accounted


def test_the_naming_rule() -> None:
    assert [argument_name(f) for f in ("delay_seconds", "every_seconds", "version", "job")] == [
        "delay",
        "every",
        "version",
        "job",
    ]
    assert attribute_name("version") == "job_version"
    assert attribute_name("timeout_seconds") == "timeout"
    assert argument_name("misfire_grace_seconds") == "misfire_grace"


def _round_trip(body: WireModel[Any], **given: Any) -> Any:
    """The domain object a client reads from ``body`` sent as JSON."""
    return type(body).model_validate_json(body.model_dump_json()).to_domain(**given)


def test_executions_leases_and_their_trail_round_trip(store: Store) -> None:
    execution = store.submit(
        "job", inputs={"n": 1}, version=2, timeout=timedelta(seconds=1.5), bucket_key="k"
    )
    assert _round_trip(executions.Execution.from_domain(execution)) == execution
    [lease] = store.claim("w", ttl=30)
    assert _round_trip(work.Lease.from_domain(lease)) == lease
    running = store.heartbeat(lease, progress={"p": 1})
    assert _round_trip(work.Lease.from_domain(running)) == running
    page = store.query()
    assert _round_trip(executions.Page.from_domain(page)) == page
    for attempt in store.attempts(execution.id):
        body = executions.Attempt.from_domain(attempt)
        assert _round_trip(body, execution_id=execution.id) == attempt
    for transition in store.transitions(execution.id):
        body = executions.Transition.from_domain(transition)
        assert _round_trip(body, execution_id=execution.id) == transition


def test_a_client_reads_the_utc_datetimes_the_store_hands_out(store: Store) -> None:
    execution = store.submit("job")
    read = _round_trip(executions.Execution.from_domain(execution))
    assert read.created_at.tzinfo is UTC
    assert repr(read) == repr(execution)


def test_commands_round_trip_requested_and_claimed(store: Store) -> None:
    execution = store.submit("job")
    store.claim("w")
    requested = store.request(execution.id, CommandKind.PAUSE)
    assert _round_trip(executions.Command.from_domain(requested)) == requested
    [claimed] = store.claim_commands("w", [execution.id])
    assert claimed.owner == "w"
    assert _round_trip(work.ClaimedCommand.from_domain(claimed)) == claimed


def test_schedules_round_trip(store: Store) -> None:
    schedule = store.add_schedule(
        "job", every=90, misfire_grace=timedelta(seconds=5), version=3, id="s"
    )
    fire = T0 + timedelta(minutes=1)
    body = schedules.Schedule.from_domain(schedule, next_fire_at=fire)
    assert body.every_seconds == 90
    assert body.misfire_grace_seconds == 5
    assert (body.version, body.next_fire_at) == (3, fire)
    assert _round_trip(body) == schedule  # the materializer's lease is not on the wire
    page = schedules.SchedulePage(items=[body], next_cursor=None)
    assert _round_trip(page) == store.schedules()


def test_reports_round_trip(store: Store) -> None:
    store.submit("a", bucket_key="k")
    [lease] = store.claim("w")
    store.complete(lease, None)
    store.register_node("n1", buckets=[3, 1, 1])
    store.register_node("n2", buckets=[1])
    [n1, n2] = store.nodes()
    body = reports.Node.from_domain(n1)
    assert body.buckets == [1, 3]  # in bucket order, once each
    assert _round_trip(body) == dataclasses.replace(n1, buckets=(1, 3))
    assert _round_trip(reports.Node.from_domain(n2)) == n2
    stats = store.stats(window=60)
    assert _round_trip(reports.Stats.from_domain(stats)) == stats
    slo = store.slo(window=3600)
    assert _round_trip(reports.Slo.from_domain(slo)) == slo
    report = store.bucket_report(orphaned_after=0)
    body_report = reports.BucketReport.from_domain(report, counts={1: 7})
    assert [b.executions for b in body_report.buckets[:2]] == [0, 7]
    assert _round_trip(body_report) == report


def test_request_bodies_carry_the_verbs_arguments() -> None:
    body = executions.SubmitItem.body(
        {"job": "a", "version": 2, "delay": timedelta(seconds=5), "execute_at": None}
    )
    assert body == {"job": "a", "version": 2, "delay_seconds": 5.0}
    item = executions.SubmitItem.model_validate(body | {"idempotency_key": "k"})
    assert item.arguments() == {
        "job": "a",
        "version": 2,
        "delay": 5.0,
        "idempotency_key": "k",
    }  # no priority given: None, the job's own (from the catalogue), else 0
    assert executions.SubmitItem.api_field("version") == "version"
    # A store's error names the stored field; the API answers with its own name.
    assert executions.SubmitItem.api_field("job_version") == "version"
    assert executions.SubmitItem.api_field("delay") == "delay_seconds"
    assert executions.SubmitItem.api_field("inputs.day") == "inputs.day"


def test_a_patch_sends_and_applies_only_what_it_names_nulls_included() -> None:
    changes = {"end_at": None, "every": timedelta(minutes=1)}
    body = schedules.ScheduleUpdate.body(changes)
    assert body == {"end_at": None, "every_seconds": 60.0}
    assert schedules.ScheduleUpdate.model_validate(body).arguments() == {
        "end_at": None,
        "every": 60.0,
    }
    # A name that is no field of the body is sent as it is, for the service to refuse.
    assert schedules.ScheduleUpdate.body({"colour": "red"}) == {"colour": "red"}


def test_every_request_body_refuses_unknown_fields() -> None:
    pending: list[type[RequestModel]] = [RequestModel]
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        assert model.model_config.get("extra") == "forbid", model

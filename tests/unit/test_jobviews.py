"""The job catalogue as an operator reads it (``fencepost.domain.jobviews``): pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fencepost.domain.catalogue import job_entry
from fencepost.domain.jobviews import input_fields, job_views
from fencepost.domain.nodes import Node
from fencepost.domain.reports import JobCounts
from fencepost.domain.states import State

AT = datetime(2026, 5, 1, tzinfo=UTC)


def node(node_id: str, *jobs: tuple[str, int]) -> Node:
    return Node(
        id=node_id,
        kind="worker",
        buckets=None,
        started_at=AT,
        heartbeat_at=AT,
        expires_at=AT + timedelta(seconds=30),
        jobs=jobs,
    )


def test_views_group_versions_by_job_and_say_who_serves_each() -> None:
    entries = [job_entry("b", 1), job_entry("a", 2), job_entry("a", 1), job_entry("a", 3)]
    nodes = [node("w2", ("a", 1), ("gone", 1)), node("w1", ("a", 3), ("a", 1)), node("idle")]
    counts = JobCounts(
        at=AT,
        window=timedelta(hours=1),
        by_job={"a": dict.fromkeys(State, 0) | {State.FAILED: 2}, "unpublished": {}},
    )
    a, b = job_views(entries, nodes, counts)
    assert [e.version for e in a.versions] == [1, 2, 3], "oldest first, whatever the input order"
    assert a.latest.version == 3
    assert a.served_by == {1: ("w1", "w2"), 3: ("w1",)}, "version 2 served by no one: left out"
    assert a.nodes == ("w1", "w2")
    assert a.counts[State.FAILED] == 2
    assert (a.at, a.window) == (AT, timedelta(hours=1))
    assert b.name == "b"
    assert b.counts == dict.fromkeys(State, 0), "no executions: every state at zero"
    assert list(b.counts) == list(State)
    assert (b.served_by, b.nodes) == ({}, ())
    summary = a.summary()
    assert (summary.latest, summary.versions, summary.nodes) == (a.versions[-1], (1, 2, 3), a.nodes)
    assert summary.counts == a.counts
    assert summary.latest_nodes == ("w1",), "the nodes serving version 3"
    assert b.summary().latest_nodes == ()


def test_no_entries_no_views() -> None:
    assert (
        job_views([], [node("w1", ("a", 1))], JobCounts(at=AT, window=timedelta(1), by_job={}))
        == []
    )


def test_input_fields_are_the_schemas_properties_by_name() -> None:
    schema = {"type": "object", "properties": {"region": {}, "day": {}, "Zone": {}}}
    assert input_fields(schema) == ["Zone", "day", "region"]
    assert input_fields({"type": "object"}) == []
    assert input_fields({"properties": ["not", "an", "object"]}) == []
    assert input_fields({"properties": {}}) == []

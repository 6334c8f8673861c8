"""The service's JSON bodies as domain objects (and back), for the client."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fencepost.domain.models import (
    Attempt,
    Command,
    Execution,
    Lease,
    Page,
    Schedule,
    SchedulePage,
    Transition,
)
from fencepost.domain.nodes import BucketReport, Node
from fencepost.domain.reports import Lateness, SloOffender, SloReport, SloShare, Stats
from fencepost.domain.states import AttemptOutcome, CommandKind, CommandState, Event, State
from fencepost.timing.policies import DstFold, DstGap, Misfire, Overlap


def when(text: str | None) -> datetime | None:
    """An ISO 8601 time from the service (always with an offset), or None."""
    return None if text is None else datetime.fromisoformat(text)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def seconds(value: float | None) -> timedelta | None:
    """A duration in seconds from the service, or None."""
    return None if value is None else timedelta(seconds=value)


def iso(value: datetime | None) -> str | None:
    """A time for a request body: ISO 8601, refused by the service unless it has an offset."""
    return None if value is None else value.isoformat()


def execution(d: dict[str, Any]) -> Execution:
    """An execution body."""
    return Execution(
        id=d["id"],
        job=d["job"],
        job_version=d["version"],
        inputs=d["inputs"],
        state=State(d["state"]),
        due_at=_at(d["due_at"]),
        priority=d["priority"],
        attempt=d["attempt"],
        max_attempts=d["max_attempts"],
        epoch=d["epoch"],
        lease_owner=d["lease_owner"],
        lease_until=when(d["lease_until"]),
        timeout=seconds(d["timeout_seconds"]),
        idempotency_key=d["idempotency_key"],
        schedule_id=d["schedule_id"],
        slot=d["slot"],
        bucket=d["bucket"],
        bucket_key=d["bucket_key"],
        result=d["result"],
        error=d["error"],
        progress=d["progress"],
        created_at=_at(d["created_at"]),
        updated_at=_at(d["updated_at"]),
    )


def page(d: dict[str, Any]) -> Page:
    """A page of executions."""
    return Page(items=[execution(e) for e in d["items"]], next_cursor=d["next_cursor"])


def lease(d: dict[str, Any]) -> Lease:
    """A lease body."""
    return Lease(
        execution_id=d["execution_id"],
        owner=d["owner"],
        epoch=d["epoch"],
        lease_until=_at(d["lease_until"]),
        attempt=d["attempt"],
        max_attempts=d["max_attempts"],
        job=d["job"],
        job_version=d["version"],
        inputs=d["inputs"],
        timeout=seconds(d["timeout_seconds"]),
        schedule_id=d["schedule_id"],
        slot=d["slot"],
        due_at=_at(d["due_at"]),
    )


def attempt(d: dict[str, Any], execution_id: str) -> Attempt:
    """An attempt body."""
    return Attempt(
        execution_id=execution_id,
        attempt=d["attempt"],
        epoch=d["epoch"],
        owner=d["owner"],
        started_at=_at(d["started_at"]),
        ended_at=when(d["ended_at"]),
        outcome=None if d["outcome"] is None else AttemptOutcome(d["outcome"]),
        error=d["error"],
    )


def transition(d: dict[str, Any], execution_id: str) -> Transition:
    """One line of an audit trail."""
    return Transition(
        seq=d["seq"],
        execution_id=execution_id,
        event=Event(d["event"]),
        from_state=None if d["from_state"] is None else State(d["from_state"]),
        to_state=State(d["to_state"]),
        epoch=d["epoch"],
        actor=d["actor"],
        reason=d["reason"],
        at=_at(d["at"]),
    )


def command(d: dict[str, Any]) -> Command:
    """A command body (a requested one carries no claim fields)."""
    return Command(
        id=d["id"],
        execution_id=d["execution_id"],
        kind=CommandKind(d["kind"]),
        state=CommandState(d["state"]),
        requested_by=d["requested_by"],
        requested_at=_at(d["requested_at"]),
        owner=d.get("owner"),
        claim_until=when(d.get("claim_until")),
        epoch=d.get("epoch"),
        done_at=when(d["done_at"]),
    )


def node(d: dict[str, Any]) -> Node:
    """A node body."""
    return Node(
        id=d["id"],
        kind=d["kind"],
        buckets=None if d["buckets"] is None else tuple(d["buckets"]),
        started_at=_at(d["started_at"]),
        heartbeat_at=_at(d["heartbeat_at"]),
        expires_at=_at(d["expires_at"]),
    )


def schedule(d: dict[str, Any]) -> Schedule:
    """A schedule body (the materializer's lease is not part of it)."""
    return Schedule(
        id=d["id"],
        job=d["job"],
        job_version=d["version"],
        inputs=d["inputs"],
        cron=d["cron"],
        every=seconds(d["every_seconds"]),
        timezone=d["timezone"],
        dst_gap=DstGap(d["dst_gap"]),
        dst_fold=DstFold(d["dst_fold"]),
        misfire=Misfire(d["misfire"]),
        misfire_grace=timedelta(seconds=d["misfire_grace_seconds"]),
        max_catch_up=d["max_catch_up"],
        overlap=Overlap(d["overlap"]),
        start_at=when(d["start_at"]),
        end_at=when(d["end_at"]),
        max_attempts=d["max_attempts"],
        priority=d["priority"],
        paused=d["paused"],
        watermark=_at(d["watermark"]),
        next_due=_at(d["next_due"]),
        materializer=None,
        lease_until=None,
        created_at=_at(d["created_at"]),
        updated_at=_at(d["updated_at"]),
    )


def schedule_page(d: dict[str, Any]) -> SchedulePage:
    """A page of schedules."""
    return SchedulePage(items=[schedule(s) for s in d["items"]], next_cursor=d["next_cursor"])


def lateness(d: dict[str, Any]) -> Lateness:
    """A claim-lateness summary (seconds on the wire)."""
    return Lateness(
        count=d["count"],
        p50=seconds(d["p50"]),
        p90=seconds(d["p90"]),
        p99=seconds(d["p99"]),
        max=seconds(d["max"]),
    )


def stats(d: dict[str, Any]) -> Stats:
    """The body of ``GET /stats``."""
    return Stats(
        at=_at(d["at"]),
        window=timedelta(seconds=d["window_seconds"]),
        by_state={State(k): v for k, v in d["by_state"].items()},
        by_job={job: {State(k): v for k, v in c.items()} for job, c in d["by_job"].items()},
        due_backlog=d["due_backlog"],
        claim_lateness=lateness(d["claim_lateness"]),
        stale_refused=d["stale_refused"],
        lease_expiries=d["lease_expiries"],
    )


def slo(d: dict[str, Any]) -> SloReport:
    """The body of ``GET /slo``."""
    return SloReport(
        at=_at(d["at"]),
        window=timedelta(seconds=d["window_seconds"]),
        claim_within=timedelta(seconds=d["claim_within_seconds"]),
        finish_within=timedelta(seconds=d["finish_within_seconds"]),
        claimed=SloShare(**d["claimed"]),
        finished=SloShare(**d["finished"]),
        worst=[
            SloOffender(
                execution_id=o["execution_id"],
                job=o["job"],
                due_at=_at(o["due_at"]),
                claimed_at=when(o["claimed_at"]),
                lateness=timedelta(seconds=o["lateness_seconds"]),
                state=State(o["state"]),
            )
            for o in d["worst"]
        ],
    )


def bucket_report(d: dict[str, Any]) -> BucketReport:
    """The body of ``GET /buckets`` (its per-bucket counts are left out)."""
    owners = {b["bucket"]: b["owners"] for b in d["buckets"] if b["owners"]}
    return BucketReport(
        num_buckets=d["num_buckets"],
        owners=owners,
        duplicated={b: owners[b] for b in d["duplicated"]},
        unowned=d["unowned"],
        floating=d["floating"],
        orphans=[execution(e) for e in d["orphans"]],
    )

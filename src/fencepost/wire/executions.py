"""The bodies of the executions routes: submits, executions, attempts, transitions, commands."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from fencepost.domain import models
from fencepost.domain.states import State
from fencepost.domain.submission import MAX_KEY, PRIORITY_RANGE
from fencepost.wire.fields import (
    MAX_DURATION_SECONDS,
    MIN_SECONDS,
    WHOLE,
    Count,
    Inputs,
    Instant,
    LimitKey,
    Name,
    QueueName,
    name,
)
from fencepost.wire.mapping import RequestModel, WireModel

#: Every answer of ``GET /executions/{id}`` carries the longest ``wait`` (seconds) the
#: service takes for a long-poll; the client's ``wait`` slices its polls by it.
MAX_WAIT_HEADER = "Fencepost-Max-Wait"

#: ``execute_at`` and ``delay_seconds`` (not null) are refused together.
_AT_OR_DELAY: dict[str, Any] = {
    "not": {
        "required": ["execute_at", "delay_seconds"],
        "properties": {"execute_at": {"type": "string"}, "delay_seconds": {"type": "number"}},
    }
}


#: A priority: higher runs first.
_Priority = Annotated[StrictInt, Field(ge=PRIORITY_RANGE[0], le=PRIORITY_RANGE[1]), WHOLE]


class SubmitRequest(RequestModel):
    """The body of ``POST /executions``; unknown fields are refused.

    ``execute_at`` or ``delay_seconds``, not both; neither is now.
    """

    model_config = ConfigDict(json_schema_extra=_AT_OR_DELAY)

    job: Name
    version: Count | None = None
    inputs: Inputs = None
    #: When to run; must carry a UTC offset (naive times are refused, never guessed).
    execute_at: Instant | None = None
    #: Seconds from the store's now; strict, so ``"5"`` and ``true`` are refused.
    delay_seconds: float | None = Field(default=None, ge=0, le=MAX_DURATION_SECONDS, strict=True)
    #: None: the job's own (from the job catalogue), else the store's default.
    max_attempts: Count | None = None
    #: How long one attempt may run, in seconds (at least a microsecond: the store keeps
    #: durations to the microsecond); None: the job's own (from the job catalogue), else none.
    timeout_seconds: float | None = Field(
        default=None, ge=MIN_SECONDS, le=MAX_DURATION_SECONDS, strict=True
    )
    bucket_key: Annotated[str, name(MAX_KEY)] | None = None
    #: None: the job's own (from the job catalogue), else 0.
    priority: _Priority | None = None
    #: The queue it waits in; None: the job's own (from the job catalogue), else "default".
    queue: QueueName | None = None
    #: The key a per-key limit counts it under (a tenant, a host); None: none.
    limit_key: LimitKey | None = None


class SubmitItem(SubmitRequest):
    """One submit of a batch: a ``POST /executions`` body plus its idempotency key."""

    idempotency_key: Annotated[str, name(MAX_KEY)] | None = None


class SubmitBatch(RequestModel):
    """The body of ``POST /executions/batch``."""

    items: list[SubmitItem] = Field(min_length=1, max_length=1000)


class Execution(WireModel[models.Execution]):
    """One execution as the store holds it."""

    readable: ClassVar[tuple[str, ...]] = ("inputs", "result", "progress")

    id: str
    job: str
    version: int | None
    inputs: Any
    state: str
    due_at: datetime
    priority: int
    queue: str
    attempt: int
    max_attempts: int
    epoch: int
    lease_owner: str | None
    lease_until: datetime | None
    timeout_seconds: float | None
    idempotency_key: str | None
    schedule_id: str | None
    slot: str | None
    bucket: int
    bucket_key: str | None
    result: Any
    error: str | None
    progress: Any
    created_at: datetime
    updated_at: datetime
    #: The key a per-key limit counts it under; null: none. (Absent from an older
    #: service's answers: read as null.)
    limit_key: str | None = None
    #: Its planned time, which retries, takeovers and replays never move (the SLO
    #: measures from it). Absent from an older service's answers: read as null.
    planned_at: datetime | None = None


class Page(WireModel[models.Page]):
    """One page of executions; pass ``next_cursor`` as ``cursor`` for the next one."""

    items: list[Execution]
    next_cursor: str | None


class StateCounts(BaseModel):
    """How many executions a filter matches, in each state (every state a key) and in all."""

    counts: dict[str, int] = Field(
        description="executions by state: SCHEDULED, RUNNING, RETRY_WAIT, SUCCEEDED, "
        "FAILED, CANCELLED, SKIPPED (each present, 0 when none)"
    )
    total: int

    @classmethod
    def from_domain(cls, counts: dict[State, int]) -> StateCounts:
        """The answer of ``GET /executions/counts``, from ``Store.count_by_state``'s."""
        return cls(counts={s.value: counts.get(s, 0) for s in State}, total=sum(counts.values()))

    def to_domain(self) -> dict[State, int]:
        """The counts by state, every state a key (one the service did not send: 0)."""
        return {s: self.counts.get(s.value, 0) for s in State}


class SubmitBatchResult(BaseModel):
    """The executions of a batch submit, in request order."""

    items: list[Execution]


class Attempt(WireModel[models.Attempt]):
    """One try by one worker (one lease, one epoch)."""

    attempt: int
    epoch: int
    owner: str
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    error: str | None


class Transition(WireModel[models.Transition]):
    """One line of an execution's audit trail."""

    seq: int
    event: str
    from_state: str | None
    to_state: str
    epoch: int
    actor: str | None
    reason: str | None
    at: datetime


class Command(WireModel[models.Command]):
    """A control request (cancel, pause, resume) addressed to an execution."""

    #: A command as it was requested: no claim yet (see ``ClaimedCommand``).
    not_on_the_wire: ClassVar[dict[str, Any]] = {"owner": None, "claim_until": None, "epoch": None}

    id: str
    execution_id: str
    kind: str
    state: str
    requested_by: str
    requested_at: datetime
    done_at: datetime | None


class Health(BaseModel):
    """The body of ``/healthz`` and ``/readyz``."""

    status: str

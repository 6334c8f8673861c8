"""Request and response bodies. Times are ISO 8601 with an offset (UTC on output)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
)

from fencepost.domain import models
from fencepost.domain.checks import INT32_MAX
from fencepost.domain.submission import MAX_KEY, PRIORITY_RANGE
from fencepost.timing.durations import MAX_DURATION

#: The longest ``delay_seconds`` accepted: the store's longest duration (100 years).
MAX_DELAY_SECONDS = MAX_DURATION.total_seconds()


def _iso_text(value: object) -> object:
    # Pydantic would read a number, or a string of digits, as Unix seconds; the API
    # promises ISO 8601 only.
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 string with a UTC offset")
    try:
        float(value)
    except ValueError:
        return value
    raise ValueError("must be an ISO 8601 string with a UTC offset, not a number")


def _in_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00 is before datetime.min in UTC
        raise ValueError("is out of range once converted to UTC") from None


#: An aware instant given as ISO 8601 text; naive times and numbers are refused.
Instant = Annotated[AwareDatetime, BeforeValidator(_iso_text), AfterValidator(_in_utc)]


class SubmitRequest(BaseModel):
    """The body of ``POST /executions``; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    job: str
    version: StrictInt | None = Field(default=None, ge=1, le=INT32_MAX)
    inputs: Any = None
    #: When to run; must carry a UTC offset (naive times are refused, never guessed).
    execute_at: Instant | None = None
    #: Seconds from the store's now; strict, so ``"5"`` and ``true`` are refused.
    delay_seconds: float | None = Field(default=None, ge=0, le=MAX_DELAY_SECONDS, strict=True)
    #: None: the job's own (with a registry), else the store's default.
    max_attempts: StrictInt | None = Field(default=None, ge=1, le=INT32_MAX)
    bucket_key: str | None = None
    priority: StrictInt = Field(default=0, ge=PRIORITY_RANGE[0], le=PRIORITY_RANGE[1])


class SubmitItem(SubmitRequest):
    """One submit of a batch: a ``POST /executions`` body plus its idempotency key."""

    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY)


class SubmitBatch(BaseModel):
    """The body of ``POST /executions/batch``."""

    model_config = ConfigDict(extra="forbid")

    items: list[SubmitItem] = Field(min_length=1, max_length=1000)


class Execution(BaseModel):
    """One execution as the store holds it."""

    id: str
    job: str
    version: int | None
    inputs: Any
    state: str
    due_at: datetime
    priority: int
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

    @classmethod
    def of(cls, e: models.Execution) -> Execution:
        """The response body of a domain execution."""
        return cls(
            id=e.id,
            job=e.job,
            version=e.job_version,
            inputs=e.inputs,
            state=e.state.value,
            due_at=e.due_at,
            priority=e.priority,
            attempt=e.attempt,
            max_attempts=e.max_attempts,
            epoch=e.epoch,
            lease_owner=e.lease_owner,
            lease_until=e.lease_until,
            timeout_seconds=None if e.timeout is None else e.timeout.total_seconds(),
            idempotency_key=e.idempotency_key,
            schedule_id=e.schedule_id,
            slot=e.slot,
            bucket=e.bucket,
            bucket_key=e.bucket_key,
            result=e.result,
            error=e.error,
            progress=e.progress,
            created_at=e.created_at,
            updated_at=e.updated_at,
        )


class Page(BaseModel):
    """One page of executions; pass ``next_cursor`` as ``cursor`` for the next one."""

    items: list[Execution]
    next_cursor: str | None

    @classmethod
    def of(cls, page: models.Page) -> Page:
        """The response body of a domain page."""
        return cls(items=[Execution.of(e) for e in page.items], next_cursor=page.next_cursor)


class SubmitBatchResult(BaseModel):
    """The executions of a batch submit, in request order."""

    items: list[Execution]


class Attempt(BaseModel):
    """One try by one worker (one lease, one epoch)."""

    attempt: int
    epoch: int
    owner: str
    started_at: datetime
    ended_at: datetime | None
    outcome: str | None
    error: str | None

    @classmethod
    def of(cls, a: models.Attempt) -> Attempt:
        """The response body of a domain attempt."""
        return cls(
            attempt=a.attempt,
            epoch=a.epoch,
            owner=a.owner,
            started_at=a.started_at,
            ended_at=a.ended_at,
            outcome=None if a.outcome is None else a.outcome.value,
            error=a.error,
        )


class Transition(BaseModel):
    """One line of an execution's audit trail."""

    seq: int
    event: str
    from_state: str | None
    to_state: str
    epoch: int
    actor: str | None
    reason: str | None
    at: datetime

    @classmethod
    def of(cls, t: models.Transition) -> Transition:
        """The response body of a domain transition."""
        return cls(
            seq=t.seq,
            event=t.event.value,
            from_state=None if t.from_state is None else t.from_state.value,
            to_state=t.to_state.value,
            epoch=t.epoch,
            actor=t.actor,
            reason=t.reason,
            at=t.at,
        )


class Command(BaseModel):
    """A control request (cancel, pause, resume) addressed to an execution."""

    id: str
    execution_id: str
    kind: str
    state: str
    requested_by: str
    requested_at: datetime
    done_at: datetime | None

    @classmethod
    def of(cls, c: models.Command) -> Command:
        """The response body of a domain command."""
        return cls(
            id=c.id,
            execution_id=c.execution_id,
            kind=c.kind.value,
            state=c.state.value,
            requested_by=c.requested_by,
            requested_at=c.requested_at,
            done_at=c.done_at,
        )


class Health(BaseModel):
    """The body of ``/healthz`` and ``/readyz``."""

    status: str

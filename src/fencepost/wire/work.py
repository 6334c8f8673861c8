"""The worker protocol's request and response bodies (see :mod:`fencepost.api.work`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictBool, StrictInt

from fencepost.domain import models
from fencepost.domain.checks import INT32_MAX, MAX_ERROR_CHARS
from fencepost.domain.machine import MAX_SNOOZE, MAX_SNOOZE_REASON
from fencepost.wire.executions import Command
from fencepost.wire.fields import (
    MAX_DURATION_SECONDS,
    MIN_SECONDS,
    TEXT_PATTERN,
    WHOLE,
    Bucket,
    Count,
    Integer,
    KeysMatch,
    Name,
    Payload,
    QueueName,
    name,
)
from fencepost.wire.mapping import RequestModel, WireModel

#: The store's own cap on one claim or batch.
MAX_BATCH = 1000
#: The longest name a filter may carry (a job of ``jobs``): the store's, longer than any
#: stored name, so a filter never refuses what a store could hold.
MAX_NAME_IN_FILTER = 1024
Owner = Name
#: Epochs count claims from 1, so no lease ever has one past 2**53 - 1 (the largest
#: integer every JSON reader holds exactly; past it, 2**63 - 1 and 2**63 read the same).
#: A larger number names no lease: 422, not 409.
MAX_EPOCH = 2**53 - 1
Epoch = Annotated[StrictInt, Field(ge=1, le=MAX_EPOCH), WHOLE]
Ttl = Annotated[float, Field(ge=MIN_SECONDS, le=86_400, strict=True)]
#: How many a claim may take from one queue.
Room = Annotated[StrictInt, Field(ge=0, le=MAX_BATCH), WHOLE]


class JobVersion(RequestModel):
    """A ``(job, version)`` pair the claimer can run."""

    job: Name
    version: Integer = Field(ge=1, le=INT32_MAX)


class ClaimRequest(RequestModel):
    """The body of ``POST /claims``; see ``Store.claim``."""

    owner: Owner
    limit: Integer = Field(default=1, ge=1, le=MAX_BATCH)
    ttl_seconds: Ttl = 30.0
    jobs: list[Annotated[str, name(MAX_NAME_IN_FILTER)]] | None = None
    versions: list[JobVersion] | None = None
    buckets: list[Bucket] | None = None
    max_per_bucket: Count | None = None
    #: Only these queues: a list of names, or an object of name to N (also at most N
    #: from that queue in this claim; 0 takes none). Absent: every queue.
    queues: list[QueueName] | Annotated[dict[QueueName, Room], KeysMatch()] | None = None


class Lease(WireModel[models.Lease]):
    """Proof that ``owner`` holds the execution at ``epoch`` until ``lease_until``."""

    execution_id: str
    owner: str
    epoch: int
    lease_until: datetime
    attempt: int
    max_attempts: int
    job: str
    version: int | None
    inputs: Any
    timeout_seconds: float | None
    schedule_id: str | None
    slot: str | None
    due_at: datetime
    queue: str
    #: The submitter's W3C trace context (JSON text), so that a remote worker's attempt
    #: continues the submitter's trace as a local one does; None when not traced.
    trace_context: str | None = None


class Leases(BaseModel):
    """The leases one claim took (possibly none)."""

    leases: list[Lease]
    #: Seconds until work this claim held back by a rate limit may start (the store's
    #: ``next_start_in``): a worker may sleep that long (at most a second) rather than
    #: claim again at once. null: nothing held back by a rate (or an older service).
    next_start_in: float | None = None


class LeaseReport(RequestModel):
    """The lease a report is made under."""

    owner: Owner
    epoch: Epoch


class HeartbeatRequest(LeaseReport):
    """Renew a lease to now + ``ttl_seconds``; ``progress`` (JSON) replaces the stored one."""

    ttl_seconds: Ttl = 30.0
    progress: Payload = None


class CompleteRequest(LeaseReport):
    """Report success with a JSON ``result``."""

    result: Payload = None


class FailRequest(LeaseReport):
    """Report a failed attempt; see ``Store.fail``."""

    #: Kept to its first ``MAX_ERROR_CHARS`` characters; longer is cut, not refused.
    error: str = Field(max_length=65_536, pattern=TEXT_PATTERN)
    retryable: StrictBool = True
    retry_in_seconds: float | None = Field(default=None, ge=0, le=MAX_DURATION_SECONDS, strict=True)
    timed_out: StrictBool = False


class ReasonRequest(LeaseReport):
    """Give a lease back (release) or stop to honour a cancel (abort)."""

    reason: Annotated[str, name(MAX_ERROR_CHARS)] | None = None


class SnoozeRequest(LeaseReport):
    """Give a lease back until ``seconds`` from now, the attempt not counted; see
    ``Store.snooze`` (the store's bound of snoozes per execution applies)."""

    seconds: float = Field(ge=MIN_SECONDS, le=MAX_SNOOZE.total_seconds(), strict=True)
    reason: Annotated[str, name(MAX_SNOOZE_REASON)] | None = None


class CompletionItem(CompleteRequest):
    """One completion of a batch."""

    execution_id: str = Field(min_length=1)


class CompletionBatch(RequestModel):
    """The body of ``POST /completions``: applied in one transaction, in order."""

    items: list[CompletionItem] = Field(max_length=MAX_BATCH)


class HeartbeatItem(LeaseReport):
    """One renewal of a batch."""

    execution_id: str = Field(min_length=1)
    progress: Payload = None


class HeartbeatBatch(RequestModel):
    """The body of ``POST /heartbeats``: every lease renewed to now + ``ttl_seconds``."""

    ttl_seconds: Ttl = 30.0
    items: list[HeartbeatItem] = Field(max_length=MAX_BATCH)


class Refusal(BaseModel):
    """Why one item of a batch was refused (the problem its single form would answer)."""

    type: str
    detail: str


class CompletionResults(BaseModel):
    """Per item, in order: null where accepted, else the refusal."""

    results: list[Refusal | None]


class HeartbeatResults(BaseModel):
    """Per item, in order: the renewed lease, or the refusal."""

    results: list[Lease | Refusal]


class CommandClaimRequest(RequestModel):
    """The body of ``POST /commands/claims``; see ``Store.claim_commands``."""

    owner: Owner
    execution_ids: list[Annotated[str, name(MAX_NAME_IN_FILTER)]] = Field(max_length=MAX_BATCH)
    ttl_seconds: Ttl = 10.0
    limit: Integer = Field(default=100, ge=1, le=MAX_BATCH)


class ClaimedCommand(Command):
    """A command as its claimer holds it: the command plus its claim."""

    owner: str | None
    claim_until: datetime | None
    epoch: int | None


class ClaimedCommands(BaseModel):
    """The commands one claim took."""

    commands: list[ClaimedCommand]


class CommandReport(RequestModel):
    """Give back (release) a claimed command."""

    owner: Owner
    execution_id: str = Field(min_length=1)
    #: Not read: a release is fenced by the command's claim alone.
    epoch: Epoch | None = None


class CommandDelivery(CommandReport):
    """Deliver (complete) a claimed command under the execution's lease."""

    #: The epoch of the execution lease the command is delivered under.
    epoch: Epoch


class NodeRegistration(RequestModel):
    """The body of ``PUT /nodes/{node_id}``."""

    kind: Annotated[str, name(100)] = "worker"
    buckets: list[Bucket] | None = None
    ttl_seconds: Ttl = 30.0
    #: The job versions the node serves.
    jobs: list[JobVersion] = Field(default_factory=list, max_length=10_000)


class OccurrenceClaim(RequestModel):
    """The body of ``POST /jobs/{task}/{slot}/claim``."""

    owner: Owner
    ttl_seconds: Ttl = 30.0

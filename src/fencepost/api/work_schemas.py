"""The worker protocol's request and response bodies (see :mod:`fencepost.api.work`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from fencepost.api import schemas
from fencepost.domain import models
from fencepost.domain.checks import INT32_MAX

#: The store's own cap on one claim or batch.
MAX_BATCH = 1000
Owner = Annotated[str, Field(min_length=1, max_length=200)]
#: Epochs are 64-bit in every backend; larger numbers name no lease (and would overflow).
Epoch = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
Ttl = Annotated[float, Field(gt=0, le=86_400, strict=True)]


class Strict(BaseModel):
    """Request bodies refuse unknown fields: a typo must not silently do nothing."""

    model_config = ConfigDict(extra="forbid")


class JobVersion(Strict):
    """A ``(job, version)`` pair the claimer can run."""

    job: str = Field(min_length=1)
    version: StrictInt


class ClaimRequest(Strict):
    """The body of ``POST /claims``; see ``Store.claim``."""

    owner: Owner
    limit: StrictInt = Field(default=1, ge=1, le=MAX_BATCH)
    ttl_seconds: Ttl = 30.0
    jobs: list[str] | None = None
    versions: list[JobVersion] | None = None
    buckets: list[StrictInt] | None = None
    max_per_bucket: StrictInt | None = Field(default=None, ge=1, le=INT32_MAX)


class Lease(BaseModel):
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

    @classmethod
    def of(cls, lease: models.Lease) -> Lease:
        """The wire form of a domain lease."""
        return cls(
            execution_id=lease.execution_id,
            owner=lease.owner,
            epoch=lease.epoch,
            lease_until=lease.lease_until,
            attempt=lease.attempt,
            max_attempts=lease.max_attempts,
            job=lease.job,
            version=lease.job_version,
            inputs=lease.inputs,
            timeout_seconds=None if lease.timeout is None else lease.timeout.total_seconds(),
            schedule_id=lease.schedule_id,
            slot=lease.slot,
            due_at=lease.due_at,
        )


class Leases(BaseModel):
    """The leases one claim took (possibly none)."""

    leases: list[Lease]


class LeaseReport(Strict):
    """The lease a report is made under."""

    owner: Owner
    epoch: Epoch


class HeartbeatRequest(LeaseReport):
    """Renew a lease to now + ``ttl_seconds``; ``progress`` (JSON) replaces the stored one."""

    ttl_seconds: Ttl = 30.0
    progress: Any = None


class CompleteRequest(LeaseReport):
    """Report success with a JSON ``result``."""

    result: Any = None


class FailRequest(LeaseReport):
    """Report a failed attempt; see ``Store.fail``."""

    error: str = Field(max_length=65_536)
    retryable: StrictBool = True
    retry_in_seconds: float | None = Field(default=None, ge=0, strict=True)
    timed_out: StrictBool = False


class ReasonRequest(LeaseReport):
    """Give a lease back (release) or stop to honour a cancel (abort)."""

    reason: str | None = Field(default=None, min_length=1, max_length=8192)


class CompletionItem(CompleteRequest):
    """One completion of a batch."""

    execution_id: str = Field(min_length=1)


class CompletionBatch(Strict):
    """The body of ``POST /completions``: applied in one transaction, in order."""

    items: list[CompletionItem] = Field(max_length=MAX_BATCH)


class HeartbeatItem(LeaseReport):
    """One renewal of a batch."""

    execution_id: str = Field(min_length=1)
    progress: Any = None


class HeartbeatBatch(Strict):
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


class CommandClaimRequest(Strict):
    """The body of ``POST /commands/claims``; see ``Store.claim_commands``."""

    owner: Owner
    execution_ids: list[str] = Field(max_length=MAX_BATCH)
    ttl_seconds: Ttl = 10.0
    limit: StrictInt = Field(default=100, ge=1, le=MAX_BATCH)


class ClaimedCommand(schemas.Command):
    """A command as its claimer holds it: the command plus its claim."""

    owner: str | None
    claim_until: datetime | None
    epoch: int | None

    @classmethod
    def of(cls, c: models.Command) -> ClaimedCommand:
        """The wire form of a domain command, claim included."""
        base = schemas.Command.of(c).model_dump()
        return cls(**base, owner=c.owner, claim_until=c.claim_until, epoch=c.epoch)


class ClaimedCommands(BaseModel):
    """The commands one claim took."""

    commands: list[ClaimedCommand]


class CommandReport(Strict):
    """Deliver (complete) or give back (release) a claimed command."""

    owner: Owner
    execution_id: str = Field(min_length=1)
    #: The epoch of the execution lease the command is delivered under (complete only).
    epoch: Epoch | None = None


class NodeRegistration(Strict):
    """The body of ``PUT /nodes/{node_id}``."""

    kind: str = Field(default="worker", min_length=1, max_length=100)
    buckets: list[StrictInt] | None = None
    ttl_seconds: Ttl = 30.0


class OccurrenceClaim(Strict):
    """The body of ``POST /jobs/{task}/{slot}/claim``."""

    owner: Owner
    ttl_seconds: Ttl = 30.0

"""The bodies of the job catalogue's routes: ``POST /jobs``, ``GET /jobs``, ``GET /jobs/{name}``.

A definition travels as :meth:`fencepost.domain.catalogue.JobEntry.definition` gives
it (durations in seconds); the domain checks it
(:func:`fencepost.domain.catalogue.entry_from_definition`), so a client and the service
refuse the same definitions for the same reasons.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, StrictInt

from fencepost.domain import catalogue
from fencepost.domain.checks import INT32_MAX
from fencepost.domain.errors import ValidationError
from fencepost.domain.limits import Limit, new_limit, scope_of
from fencepost.wire.fields import (
    MAX_DURATION_SECONDS,
    MIN_SECONDS,
    TEXT_PATTERN,
    WHOLE,
    Count,
    Name,
    Payload,
)
from fencepost.wire.flow import LimitRequest
from fencepost.wire.mapping import RequestModel

#: The most definitions one ``POST /jobs`` carries (what the store takes in one call).
MAX_PUBLISH = 1000

_Seconds = Annotated[float, Field(ge=MIN_SECONDS, le=MAX_DURATION_SECONDS, strict=True)]
_Text = Annotated[str, Field(pattern=TEXT_PATTERN)]


class JobDefaults(RequestModel):
    """A job's defaults (each optional; durations in seconds)."""

    max_attempts: Count | None = None
    retry_base_delay: _Seconds | None = None
    retry_max_delay: _Seconds | None = None
    timeout: _Seconds | None = None
    lease_ttl: _Seconds | None = None
    priority: Annotated[StrictInt, Field(ge=-INT32_MAX - 1, le=INT32_MAX), WHOLE] | None = None
    queue: Name | None = None


class JobSource(RequestModel):
    """Where a job is defined."""

    kind: Literal["code", "file"] = "code"
    where: Annotated[_Text, Field(max_length=catalogue.MAX_WHERE)] = ""


class JobDefinition(RequestModel):
    """One job version to publish: its definition, and optionally its digest to check."""

    name: Name
    version: Count
    #: A JSON Schema (draft 2020-12) of the inputs; default: any object.
    input_schema: dict[str, Payload] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Payload] | None = None
    defaults: JobDefaults = Field(default_factory=JobDefaults)
    description: Annotated[_Text, Field(max_length=catalogue.MAX_DESCRIPTION)] = ""
    source: JobSource = Field(default_factory=JobSource)
    #: ``sha256:<hex>`` of the canonical definition; when given, it must match.
    digest: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None

    def to_domain(self) -> catalogue.JobEntry:
        """The entry this definition describes (its digest computed, or checked), its
        schemas checked against the JSON Schema meta-schema."""
        definition = self.model_dump(exclude={"digest"})
        definition["defaults"] = self.defaults.model_dump(exclude_none=True)
        entry = catalogue.entry_from_definition(definition, digest=self.digest)
        return catalogue.check_entry(entry, check_schemas=True)

    @classmethod
    def of(cls, entry: catalogue.JobEntry) -> dict[str, Any]:
        """The JSON body item of ``entry`` (what a client sends)."""
        return {**entry.definition(), "digest": entry.digest}


class DeclaredLimit(LimitRequest):
    """A limit declared with a job (``@app.job(rate_limit=..., concurrency=...)``), as a
    worker that publishes the job declares it; see ``Store.declare_limits``.

    ``job`` names the job (the limit's scope is ``job:NAME``); the rest is a
    ``PUT /limits/{scope}`` body's: a ``rate``, a ``concurrency`` or both, ``burst``
    only with a ``rate``.
    """

    job: Name

    def to_domain(self) -> Limit:
        """The declared limit (a ValidationError names the field)."""
        return new_limit(
            scope_of("job", self.job),
            rate=self.rate,
            burst=self.burst,
            concurrency=self.concurrency,
            per_key=self.per_key,
            source="code",
        )

    @classmethod
    def of(cls, limit: Limit) -> dict[str, Any]:
        """The JSON body item of a declared ``job:NAME`` limit (what a client sends)."""
        if limit.kind != "job":
            raise ValidationError("limits", f"only a job's limit is declared, got {limit.scope!r}")
        item = {
            "job": limit.name,
            "rate": None if limit.rate is None else str(limit.rate),
            "burst": limit.burst,
            "concurrency": limit.concurrency,
            "per_key": limit.per_key,
        }
        return {key: value for key, value in item.items() if value is not None}


class DeclareLimitsRequest(RequestModel):
    """The body of ``POST /jobs/limits``: the limits the jobs a worker publishes declare."""

    limits: list[DeclaredLimit] = Field(min_length=1, max_length=MAX_PUBLISH)


class PublishRequest(RequestModel):
    """The body of ``POST /jobs``: job versions to publish in one transaction."""

    entries: list[JobDefinition] = Field(min_length=1, max_length=MAX_PUBLISH)


class JobEntry(BaseModel):
    """One published job version, and the live nodes that serve it."""

    name: str
    version: int
    digest: str
    published_at: datetime | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    defaults: dict[str, Any]
    description: str
    source: dict[str, str]
    #: Live nodes that declared this version when they registered.
    served_by: list[str] = Field(default_factory=list)

    @classmethod
    def from_domain(cls, entry: catalogue.JobEntry, served_by: list[str] | None = None) -> Self:
        """The body of ``entry``."""
        return cls.model_validate(
            {
                **entry.definition(),
                "digest": entry.digest,
                "published_at": entry.published_at,
                "served_by": served_by or [],
            }
        )

    def to_domain(self) -> catalogue.JobEntry:
        """The entry this body holds (its digest checked against its definition)."""
        definition = self.model_dump(exclude={"digest", "published_at", "served_by"})
        return catalogue.entry_from_definition(
            definition, digest=self.digest, published_at=self.published_at
        )

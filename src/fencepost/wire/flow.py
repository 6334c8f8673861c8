"""The bodies of the flow-control routes: limits, queues, throttled counts, the audit.

A limit's ``rate`` travels as the text an operator writes (``"50/s"``, ``"3000/min"``,
``"100/5min"``); what the service answers is that rate in its shortest spelling
(``"100/300s"`` for ``"100/5min"``), which reads back as the same rate. Times are
ISO 8601 with an offset (UTC on output), durations seconds.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Self

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, WithJsonSchema
from pydantic_core import PydanticCustomError

from fencepost.domain import limits, queueviews
from fencepost.domain.checks import MAX_QUEUE
from fencepost.wire.fields import MAX_NAME, NAME_PATTERN, Count
from fencepost.wire.mapping import RequestModel, WireModel


def _any_case(word: str) -> str:
    return "".join(f"[{c}{c.upper()}]" for c in word)


#: A rate's grammar, as ``parse_rate`` reads it, for the spec: a positive number of
#: starts, ``/``, an optional positive multiple and a period (``s``, ``sec``,
#: ``second``, ``m``, ``min``, ``minute``, ``h``, ``hour``, ``d``, ``day``, each
#: with an optional ``s``, in any case), spaces (U+0020) allowed around the parts.
#: The bounds (at most a million starts a second, at least one in 1,000 days) are
#: the store's, which no pattern states: such a rate is refused naming ``rate``.
RATE_PATTERN = (
    r"^ *(?:[0-9]*[1-9][0-9]*(?:\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)"
    r" */ *(?:[0-9]*[1-9][0-9]*)? *"
    rf"(?:{'|'.join(_any_case(unit) for unit in sorted(limits.PERIODS, key=len, reverse=True))})"
    r"[sS]? *$"
)
#: The longest rate text the store reads.
MAX_RATE_TEXT = 40
_RATE = re.compile(RATE_PATTERN)


def _rate_text(value: str) -> str:
    # The pattern's own refusal would quote the regex; an operator wants the rule.
    if _RATE.match(value) is None:
        raise PydanticCustomError(
            "rate_text",
            'must be a rate like "50/s", "3000/min" or "100/5min" (starts, "/", '
            "a period in s, min, h or d)",
        )
    return value


#: A rate as a body holds it; the spec states :data:`RATE_PATTERN`.
RateText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_RATE_TEXT),
    AfterValidator(_rate_text),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_RATE_TEXT,
            "pattern": RATE_PATTERN,
            "examples": ["50/s", "3000/min", "100/5min"],
        }
    ),
]

_NAME_BODY = NAME_PATTERN.removeprefix("^")
#: A scope in a path, as the spec states it: ``job:NAME`` (a job's name, at most
#: 200 characters) or ``queue:NAME`` (a queue's, at most 100); a name is not blank and
#: holds no U+0000 (nor lone surrogates, which a URL cannot carry in UTF-8).
SCOPE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": f"^job:{_NAME_BODY}", "maxLength": 4 + MAX_NAME},
        {"type": "string", "pattern": f"^queue:{_NAME_BODY}", "maxLength": 6 + MAX_QUEUE},
    ],
}

#: What JSON Schema can say of a limit's fields together: a rate, a concurrency or
#: both; a burst only with a rate (it is the rate's bucket).
_RATE_OR_CONCURRENCY: dict[str, Any] = {
    "allOf": [
        {
            "anyOf": [
                {"required": ["rate"], "properties": {"rate": {"type": "string"}}},
                {"required": ["concurrency"], "properties": {"concurrency": {"type": "integer"}}},
            ]
        },
        {
            "anyOf": [
                {"not": {"required": ["burst"], "properties": {"burst": {"type": "integer"}}}},
                {"required": ["rate"], "properties": {"rate": {"type": "string"}}},
            ]
        },
    ]
}


class LimitRequest(RequestModel):
    """The body of ``PUT /limits/{scope}``: the limit that replaces the scope's.

    A ``rate``, a ``concurrency`` or both; ``burst`` only with a ``rate`` (default:
    a tenth of a second's worth, at least 1). Unknown fields are refused.
    """

    model_config = ConfigDict(json_schema_extra=_RATE_OR_CONCURRENCY)

    #: Starts (claims, retries, takeovers) per period: ``"50/s"``, ``"3000/min"``.
    rate: RateText | None = None
    #: The rate's bucket: how many may start at once after a quiet spell.
    burst: Count | None = None
    #: The most executions of the scope leased at once.
    concurrency: Count | None = None
    #: Each distinct ``limit_key`` gets its own allowance.
    per_key: StrictBool = False


class Limit(WireModel[limits.Limit]):
    """One scope's limit (or a queue's pause), as stored."""

    scope: str
    #: The rate in its shortest spelling (``"50/s"``, ``"100/300s"``); null: no rate.
    rate: str | None
    burst: int | None
    concurrency: int | None
    per_key: bool
    #: A paused queue: nothing in it is claimed until it is resumed.
    paused: bool
    #: ``operator`` (set at run time) or ``code`` (declared with a job).
    source: str
    updated_by: str | None
    updated_at: datetime | None

    @classmethod
    def from_domain(cls, obj: limits.Limit, /, **given: Any) -> Self:
        """The body of a stored limit, its rate as text."""
        rate = None if obj.rate is None else str(obj.rate)
        return super().from_domain(obj, **{"rate": rate, **given})

    def to_domain(self, **given: Any) -> limits.Limit:
        """The limit, its rate read back."""
        rate = None if self.rate is None else limits.parse_rate(self.rate)
        return super().to_domain(**{"rate": rate, **given})


class QueueState(WireModel[queueviews.QueueView]):
    """One queue: paused or not, its limit, and its executions by state."""

    name: str
    paused: bool
    #: Who paused it and when (the latest change to its limit while paused); null
    #: unless paused.
    paused_by: str | None
    paused_at: datetime | None
    #: Its rate and/or concurrency limit (scope ``queue:NAME``); null when it has none.
    limit: Limit | None
    #: Its executions by state, every state listed; null in the answer of a pause or
    #: a resume (read ``GET /queues``).
    counts: dict[str, int] | None

    @classmethod
    def from_domain(cls, obj: queueviews.QueueView, /, **given: Any) -> Self:
        """The body of a queue's view, its limit as a :class:`Limit` body."""
        limit = None if obj.limit is None else Limit.from_domain(obj.limit)
        return super().from_domain(obj, **{"limit": limit, **given})

    def to_domain(self, **given: Any) -> queueviews.QueueView:
        """The queue's view, its limit read back."""
        limit = None if self.limit is None else self.limit.to_domain()
        return super().to_domain(**{"limit": limit, **given})


class ThrottleCount(WireModel[limits.ThrottleCount]):
    """Claims one scope held back in the window, and the seconds they waited in all."""

    scope: str
    count: int
    #: The time they waited past their due times, in all.
    held_seconds: float


class FlowChange(WireModel[limits.FlowChange]):
    """One change to a limit or a queue, as audited."""

    at: datetime
    actor: str
    #: ``set``, ``remove``, ``pause``, ``resume`` or ``declare``.
    action: str
    scope: str
    #: The limit as it was set or removed (``rate=50/s burst=5 concurrency=20``).
    detail: str

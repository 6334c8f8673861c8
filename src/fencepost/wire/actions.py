"""The bodies of ``POST /executions/actions`` and ``GET /deletions``: acting on many.

A request names its executions by ``ids`` or by a ``filter`` (the filters of
``GET /executions``, by the same names, ``state`` a list); the answer is one
batch's :class:`BulkResult`, and the caller repeats with ``next_cursor`` as
``cursor`` until it is null.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt

from fencepost.domain import bulk
from fencepost.domain.checks import MAX_ERROR_FILTER
from fencepost.domain.states import State
from fencepost.wire.executions import Execution
from fencepost.wire.fields import (
    OUTCOME_PATTERN,
    WHOLE,
    Bucket,
    Instant,
)
from fencepost.wire.mapping import RequestModel, WireModel

#: An action's name on the wire.
ActionName = Literal["replay", "cancel", "retry_now", "delete"]

#: An execution id as stores write it: a lower-case UUID's text.
UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
ExecutionId = Annotated[str, Field(min_length=36, max_length=36, pattern=UUID_PATTERN)]

#: A page of deletions' cursor: the number of the last record seen.
DELETION_CURSOR_PATTERN = r"^[0-9]{1,18}$"

#: A batch's size: 1 to :data:`~fencepost.domain.bulk.MAX_BATCH`.
BatchSize = Annotated[StrictInt, Field(ge=1, le=bulk.MAX_BATCH), WHOLE]


class ActionFilter(RequestModel):
    """The executions a bulk action selects: ``GET /executions``'s filters, by name.

    Every filter given must hold (``{}`` selects every execution); unknown names
    are refused. A filter the store does not know is refused naming it
    (``filter.owner``).
    """

    state: list[State] | None = Field(default=None, max_length=len(State))
    job: str | None = None
    schedule: str | None = None
    bucket: Bucket | None = None
    queue: str | None = None
    #: ``due_after <= due_at < due_before``.
    due_after: Instant | None = None
    due_before: Instant | None = None
    #: Executions any of whose attempts ended so (``timed_out`` includes a lost lease).
    outcome: Annotated[str, Field(pattern=OUTCOME_PATTERN)] | None = None
    limit_key: str | None = None
    #: RUNNING executions whose lease this owner holds.
    owner: str | None = None
    created_after: Instant | None = None
    created_before: Instant | None = None
    #: Finish time of executions in a terminal state.
    finished_after: Instant | None = None
    finished_before: Instant | None = None
    #: A case-insensitive part of the latest error text.
    error: Annotated[str, Field(min_length=1, max_length=MAX_ERROR_FILTER)] | None = None


#: Exactly one of ``filter`` (an object) and ``ids`` (a list), as the spec says it.
_FILTER_OR_IDS: dict[str, Any] = {
    "oneOf": [
        {"required": ["filter"], "properties": {"filter": {"type": "object"}}},
        {"required": ["ids"], "properties": {"ids": {"type": "array"}}},
    ]
}


class ActionRequest(RequestModel):
    """The body of ``POST /executions/actions``: exactly one of ``filter`` and ``ids``."""

    model_config = ConfigDict(json_schema_extra=_FILTER_OR_IDS)

    action: ActionName
    filter: ActionFilter | None = None
    ids: list[ExecutionId] | None = Field(default=None, min_length=1, max_length=bulk.MAX_IDS)
    #: Count what the selection holds that the action applies to (and show the first
    #: 20) without changing anything.
    dry_run: StrictBool = False
    limit: BatchSize = bulk.DEFAULT_BATCH
    #: The ``next_cursor`` of the previous batch.
    cursor: ExecutionId | None = None

    def act_arguments(self) -> dict[str, Any]:
        """``Store.act``'s arguments (but the actor, which is the caller's token)."""
        return {
            "action": self.action,
            "ids": self.ids,
            "filter": None if self.filter is None else self.filter.arguments(),
            "dry_run": self.dry_run,
            "limit": self.limit,
            "after": self.cursor,
        }


class BulkResult(WireModel[bulk.BulkResult]):
    """What one batch did; pass ``next_cursor`` as ``cursor`` until it is null."""

    action: str
    dry_run: bool
    #: Dry run: how many of the whole selection the action applies to. Else: how many
    #: this batch looked at (``done`` + ``skipped``).
    matched: int
    done: int
    skipped: int
    next_cursor: str | None
    #: Dry run: the first 20 the action applies to. Else empty.
    preview: list[Execution]


class Deletion(WireModel[bulk.Deletion]):
    """The record a deleted execution leaves."""

    execution_id: str
    job: str
    queue: str
    state: str
    actor: str
    at: datetime


class DeletionPage(WireModel[bulk.DeletionPage]):
    """One page of deletion records, oldest first; pass ``next_cursor`` as ``cursor``."""

    items: list[Deletion]
    next_cursor: str | None

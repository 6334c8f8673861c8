"""The body of ``GET /executions/{id}/timeline``: one execution's life as a picture's data.

It mirrors :class:`fencepost.domain.timeline.Timeline` field by field (the rules that
decide it are that module's); the dashboard draws it (``static/js/timeline.js``).
"""

from __future__ import annotations

from datetime import datetime

from fencepost.domain import timeline
from fencepost.wire.mapping import WireModel


class RefusedWrite(WireModel[timeline.RefusedWrite]):
    """A stale write refused on this lease's epoch: when, which verb, from whom."""

    at: datetime
    verb: str
    owner: str | None


class LeaseSpan(WireModel[timeline.LeaseSpan]):
    """One lease (one epoch) from its claim to its end; ``end`` null while it runs."""

    epoch: int
    attempt: int
    owner: str
    start: datetime
    end: datetime | None
    #: ``succeeded``, ``failed``, ``retrying``, ``timed_out``, ``taken_over``,
    #: ``cancelled``, ``released`` or ``running``.
    ending: str
    #: The running lease's current ``lease_until`` (heartbeats are not audited); else null.
    lease_until: datetime | None
    detail: str | None
    refused: list[RefusedWrite]


class Wait(WireModel[timeline.Wait]):
    """A span spent waiting: ``due``, ``retry_delay``, ``throttled``, ``snoozed``, ``paused``."""

    kind: str
    start: datetime
    end: datetime | None
    detail: str | None


class Mark(WireModel[timeline.Mark]):
    """A moment: ``submitted``, ``replayed``, ``cancel_requested``, ``lease_expired``, ..."""

    at: datetime
    kind: str
    actor: str | None
    detail: str | None


class Timeline(WireModel[timeline.Timeline]):
    """One execution's leases, waits and marks between ``start`` and ``end``."""

    execution_id: str
    state: str
    now: datetime
    start: datetime
    end: datetime
    leases: list[LeaseSpan]
    waits: list[Wait]
    marks: list[Mark]
